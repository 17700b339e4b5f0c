//! The text forms Go gives times and durations in JSON: `metav1.Time` (RFC 3339, whole seconds),
//! `metav1.MicroTime` (RFC 3339 with six fractional digits) and `metav1.Duration` (Go's
//! `time.Duration` string, `1h2m3.5s`), with their parsers.
//!
//! Pure functions of seconds and nanoseconds since the Unix epoch in UTC; this module knows
//! nothing of protobuf or JSON values.

/// Unix seconds of Go's zero `time.Time` (0001-01-01T00:00:00Z): `metav1.Time` treats it as unset.
pub(crate) const ZERO_TIME_SECONDS: i64 = -62_135_596_800;

const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// Formats Unix seconds as Go's `time.RFC3339` in UTC, e.g. `2006-01-02T15:04:05Z`.
pub(crate) fn format_rfc3339(seconds: i64) -> String {
    let mut out = String::with_capacity(20);
    write_date_time(seconds, &mut out);
    out.push('Z');
    out
}

/// Formats a time as upstream's `RFC3339Micro` (`2006-01-02T15:04:05.000000Z07:00`) in UTC;
/// the nanoseconds are truncated to microseconds, as Go's formatter does.
pub(crate) fn format_rfc3339_micro(seconds: i64, nanos: u32) -> String {
    let mut out = String::with_capacity(27);
    write_date_time(seconds, &mut out);
    out.push('.');
    push_digits(&mut out, u64::from(nanos / 1000), 6);
    out.push('Z');
    out
}

/// `2006-01-02T15:04:05` of Unix seconds, digit by digit: every stored object's times are
/// written on every write, where `format!` cost a few thousand instructions each.
fn write_date_time(seconds: i64, out: &mut String) {
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400).unsigned_abs();
    let (year, month, day) = civil_from_days(days);
    match u64::try_from(year) {
        Ok(year) if year <= 9999 => push_digits(out, year, 4),
        // Outside Go's four-digit years, the year as it is.
        _ => out.push_str(&year.to_string()),
    }
    out.push('-');
    push_digits(out, month.unsigned_abs(), 2);
    out.push('-');
    push_digits(out, day.unsigned_abs(), 2);
    out.push('T');
    push_digits(out, of_day / 3600, 2);
    out.push(':');
    push_digits(out, of_day % 3600 / 60, 2);
    out.push(':');
    push_digits(out, of_day % 60, 2);
}

/// `value` in `width` decimal digits, zero-padded (`value` has no more digits than that).
fn push_digits(out: &mut String, value: u64, width: u32) {
    let mut divisor = 10u64.pow(width.saturating_sub(1));
    while divisor > 0 {
        out.push(char::from(b'0' + (value / divisor % 10) as u8));
        divisor /= 10;
    }
}

/// Parses the RFC 3339 forms Go's `time.Parse(time.RFC3339, ...)` accepts: a four-digit year,
/// optional fractional seconds, and `Z` or a `±hh:mm` offset. Returns Unix seconds and
/// nanoseconds in UTC.
pub(crate) fn parse_rfc3339(text: &str) -> Result<(i64, u32), String> {
    let invalid = || format!("parsing time {text:?} as \"2006-01-02T15:04:05Z07:00\"");
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Result<i64, String> {
        let digits = bytes.get(range).ok_or_else(invalid)?;
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return Err(invalid());
        }
        digits
            .iter()
            .try_fold(0i64, |acc, d| Ok(acc * 10 + i64::from(d - b'0')))
    };
    let punctuation = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if bytes.len() < 20 || punctuation.iter().any(|&(at, c)| bytes[at] != c) {
        return Err(invalid());
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(format!("{}: day or month out of range", invalid()));
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err(format!("{}: clock out of range", invalid()));
    }
    let mut at = 19;
    let mut nanos = 0u32;
    if matches!(bytes[at], b'.' | b',') {
        at += 1;
        let start = at;
        while at < bytes.len() && bytes[at].is_ascii_digit() {
            at += 1;
        }
        if at == start {
            return Err(invalid());
        }
        // Digits past the ninth are dropped, as Go does.
        for (i, digit) in bytes[start..at].iter().take(9).enumerate() {
            nanos += u32::from(digit - b'0') * 10u32.pow(8 - i as u32);
        }
    }
    let offset = match &bytes[at..] {
        b"Z" => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let hours = number(at + 1..at + 3)?;
            let minutes = number(at + 4..at + 6)?;
            if hours > 23 || minutes > 59 {
                return Err(format!("{}: time zone offset out of range", invalid()));
            }
            let offset = hours * 3600 + minutes * 60;
            if *sign == b'-' { -offset } else { offset }
        }
        _ => return Err(invalid()),
    };
    let days = days_from_civil(year, month, day);
    Ok((
        days * 86_400 + hour * 3600 + minute * 60 + second - offset,
        nanos,
    ))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the "days from civil" algorithm of
/// Howard Hinnant's date library, eras of 400 years starting in March).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Formats nanoseconds as Go's `time.Duration.String()`: `0s`, `1.5µs`, `100ms`, `1m30s`,
/// `1h0m0s`. Below one second the largest unit that keeps an integer part is used; from one
/// second up, hours and minutes lead and the seconds keep up to nine fractional digits.
pub(crate) fn format_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    if nanos < 0 {
        out.push('-');
    }
    let magnitude = nanos.unsigned_abs();
    if magnitude < NANOS_PER_SECOND {
        let (digits, unit) = match magnitude {
            0..1_000 => (0, "ns"),
            1_000..1_000_000 => (3, "µs"),
            _ => (6, "ms"),
        };
        push_decimal(&mut out, magnitude, digits);
        out.push_str(unit);
        return out;
    }
    let seconds = magnitude / NANOS_PER_SECOND;
    let (hours, minutes) = (seconds / 3600, seconds / 60 % 60);
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if seconds >= 60 {
        out.push_str(&format!("{minutes}m"));
    }
    push_decimal(
        &mut out,
        seconds % 60 * NANOS_PER_SECOND + magnitude % NANOS_PER_SECOND,
        9,
    );
    out.push('s');
    out
}

/// Writes `value / 10^digits` with the fraction's trailing zeros (and a bare point) left out.
fn push_decimal(out: &mut String, value: u64, digits: u32) {
    let scale = 10u64.pow(digits);
    out.push_str(&(value / scale).to_string());
    let fraction = value % scale;
    if fraction != 0 {
        let text = format!(".{fraction:0width$}", width = digits as usize);
        out.push_str(text.trim_end_matches('0'));
    }
}

/// Parses Go's duration syntax (`time.ParseDuration`): an optional sign, then one or more
/// decimal numbers each with a unit of `ns`, `us` (or `µs`, `μs`), `ms`, `s`, `m` or `h`; a bare
/// `0` is allowed.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {text:?}");
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let integer_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let mut integer: u64 = 0;
        for digit in rest[..integer_len].bytes() {
            integer = integer
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(digit - b'0')))
                .filter(|v| *v <= 1 << 63)
                .ok_or_else(invalid)?;
        }
        rest = &rest[integer_len..];
        let (mut fraction, mut scale, mut fraction_len) = (0u64, 1f64, 0);
        if let Some(after_point) = rest.strip_prefix('.') {
            rest = after_point;
            fraction_len = rest.bytes().take_while(u8::is_ascii_digit).count();
            let mut overflow = false;
            for digit in rest[..fraction_len].bytes() {
                // Like Go, digits that no longer fit are ignored rather than rejected.
                if overflow {
                    continue;
                }
                match fraction
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(u64::from(digit - b'0')))
                {
                    Some(v) if v <= 1 << 63 => {
                        fraction = v;
                        scale *= 10.0;
                    }
                    _ => overflow = true,
                }
            }
            rest = &rest[fraction_len..];
        }
        if integer_len == 0 && fraction_len == 0 {
            return Err(invalid());
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit: u64 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => NANOS_PER_SECOND,
            "m" => 60 * NANOS_PER_SECOND,
            "h" => 3600 * NANOS_PER_SECOND,
            "" => return Err(format!("time: missing unit in duration {text:?}")),
            other => return Err(format!("time: unknown unit {other:?} in duration {text:?}")),
        };
        rest = &rest[unit_len..];
        let mut value = integer
            .checked_mul(unit)
            .filter(|v| *v <= 1 << 63)
            .ok_or_else(invalid)?;
        if fraction > 0 {
            // Go converts the fraction through float64 too, which keeps nanosecond accuracy for
            // fractions of an hour.
            value = value
                .checked_add((fraction as f64 * (unit as f64 / scale)) as u64)
                .filter(|v| *v <= 1 << 63)
                .ok_or_else(invalid)?;
        }
        total = total
            .checked_add(value)
            .filter(|v| *v <= 1 << 63)
            .ok_or_else(invalid)?;
    }
    match (negative, i64::try_from(total)) {
        (true, _) if total == 1 << 63 => Ok(i64::MIN),
        (true, Ok(v)) => Ok(-v),
        (false, Ok(v)) => Ok(v),
        _ => Err(invalid()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_and_matches_go() {
        assert_eq!(format_rfc3339(1_795_258_160), "2026-11-21T10:49:20Z");
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(ZERO_TIME_SECONDS), "0001-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_rfc3339(-1), "1969-12-31T23:59:59Z");
        // Past four digits the year is written whole, as Go writes it.
        assert_eq!(format_rfc3339(253_402_300_800), "10000-01-01T00:00:00Z");
        assert_eq!(
            parse_rfc3339("2026-11-21T10:49:20Z"),
            Ok((1_795_258_160, 0))
        );
        assert_eq!(
            parse_rfc3339("2026-11-21T11:49:20+01:00"),
            Ok((1_795_258_160, 0))
        );
        assert_eq!(
            parse_rfc3339("2026-11-21T10:49:20.5Z"),
            Ok((1_795_258_160, 500_000_000))
        );
        assert_eq!(
            parse_rfc3339("0001-01-01T00:00:00Z"),
            Ok((ZERO_TIME_SECONDS, 0))
        );
        for bad in [
            "2026-11-21",
            "2026-13-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "x",
            "",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn micro_time_keeps_six_digits() {
        assert_eq!(
            format_rfc3339_micro(1_795_258_160, 123_456_789),
            "2026-11-21T10:49:20.123456Z"
        );
        assert_eq!(
            format_rfc3339_micro(1_795_258_160, 0),
            "2026-11-21T10:49:20.000000Z"
        );
        assert_eq!(
            parse_rfc3339("2026-11-21T10:49:20.123456Z"),
            Ok((1_795_258_160, 123_456_000))
        );
    }

    #[test]
    fn durations_format_like_go() {
        let cases = [
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (100_000_000, "100ms"),
            (1_500_000_000, "1.5s"),
            (90 * NANOS_PER_SECOND as i64, "1m30s"),
            (3600 * NANOS_PER_SECOND as i64, "1h0m0s"),
            (3_600_500_000_000, "1h0m0.5s"),
            (-2_000_000_000, "-2s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ];
        for (nanos, text) in cases {
            assert_eq!(format_duration(nanos), text);
            assert_eq!(parse_duration(text), Ok(nanos), "{text}");
        }
        assert_eq!(parse_duration("1h30m"), Ok(5400 * NANOS_PER_SECOND as i64));
        assert_eq!(parse_duration("0"), Ok(0));
        assert_eq!(parse_duration(".5s"), Ok(500_000_000));
        assert_eq!(parse_duration("1.5h"), Ok(5400 * NANOS_PER_SECOND as i64));
        assert_eq!(parse_duration("3us"), Ok(3000));
        for bad in ["", "1", "s", "1x", "-", "1.s.", "9999999999999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
