//! CronJob schedules as upstream parses them: robfig/cron's standard parser (five fields:
//! minute, hour, day of month, month, day of week; `@` descriptors; an optional `TZ=` or
//! `CRON_TZ=` prefix), with its error messages word for word, since they reach clients in
//! `spec.schedule: Invalid value` causes. Only whether a schedule parses matters here; the
//! times it fires are the controller's business.

use super::timezone::is_known_time_zone;

/// The bounds of one field, and the names it accepts.
struct Bounds {
    min: u64,
    max: u64,
    names: &'static [(&'static str, u64)],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DAYS_OF_MONTH: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DAYS_OF_WEEK: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

/// The fields of the standard parser, in order.
const FIELDS: [&Bounds; 5] = [&MINUTES, &HOURS, &DAYS_OF_MONTH, &MONTHS, &DAYS_OF_WEEK];

/// The named schedules the standard parser accepts.
const DESCRIPTORS: &[&str] = &[
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

/// Go's `fmt` of a `[]string` (`%s`): `[a b]`.
fn go_list(items: &[&str]) -> String {
    format!("[{}]", items.join(" "))
}

/// Go's `strconv.Atoi` error text.
fn atoi(s: &str) -> Result<i64, String> {
    // Go accepts one leading sign and decimal digits only.
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.Atoi: parsing {s:?}: invalid syntax"));
    }
    s.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {s:?}: value out of range"))
}

/// `mustParseInt`: a non-negative integer.
fn must_parse_int(expr: &str) -> Result<u64, String> {
    let n = atoi(expr).map_err(|e| format!("failed to parse int from {expr}: {e}"))?;
    if n < 0 {
        return Err(format!("negative number ({n}) not allowed: {expr}"));
    }
    Ok(n as u64)
}

/// `parseIntOrName`: a name of the field (any case), else an integer.
fn parse_int_or_name(expr: &str, bounds: &Bounds) -> Result<u64, String> {
    let lower = expr.to_lowercase();
    match bounds.names.iter().find(|(name, _)| *name == lower) {
        Some((_, n)) => Ok(*n),
        None => must_parse_int(expr),
    }
}

/// `getRange`: `*`, `?`, `n`, `a-b`, each optionally `/step`.
fn check_range(expr: &str, bounds: &Bounds) -> Result<(), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end) = if matches!(low_and_high[0], "*" | "?") {
        (bounds.min, bounds.max)
    } else {
        let start = parse_int_or_name(low_and_high[0], bounds)?;
        let end = match low_and_high.len() {
            1 => start,
            2 => parse_int_or_name(low_and_high[1], bounds)?,
            _ => return Err(format!("too many hyphens: {expr}")),
        };
        (start, end)
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = must_parse_int(range_and_step[1])?;
            // "N/step" means "N-max/step".
            if single {
                end = bounds.max;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < bounds.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            bounds.min
        ));
    }
    if end > bounds.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            bounds.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

/// `getField`: comma-separated ranges.
fn check_field(field: &str, bounds: &Bounds) -> Result<(), String> {
    field
        .split(',')
        .filter(|r| !r.is_empty())
        .try_for_each(|r| check_range(r, bounds))
}

/// `parseDescriptor`.
fn check_descriptor(descriptor: &str) -> Result<(), String> {
    if DESCRIPTORS.contains(&descriptor) {
        return Ok(());
    }
    if let Some(duration) = descriptor.strip_prefix("@every ") {
        return ironplane_protobuf::parse_go_duration(duration)
            .map(|_| ())
            .map_err(|e| format!("failed to parse duration {descriptor}: {e}"));
    }
    Err(format!("unrecognized descriptor: {descriptor}"))
}

/// Parses `spec` as robfig/cron's `ParseStandard` does; `Err` holds its message.
pub fn parse_standard(spec: &str) -> Result<(), String> {
    if spec.is_empty() {
        return Err("empty spec string".into());
    }
    let mut spec = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        // Upstream slices up to the first space; without one its parser panics, which the
        // caller reports as an invalid format.
        let (Some(space), Some(eq)) = (spec.find(' '), spec.find('=')) else {
            return Err("invalid schedule format".into());
        };
        let zone = spec.get(eq + 1..space).unwrap_or("");
        if !is_known_time_zone(zone) {
            return Err(format!(
                "provided bad location {zone}: unknown time zone {zone}"
            ));
        }
        spec = spec[space..].trim();
    }
    if spec.starts_with('@') {
        return check_descriptor(spec);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != FIELDS.len() {
        return Err(format!(
            "expected exactly {} fields, found {}: {}",
            FIELDS.len(),
            fields.len(),
            go_list(&fields)
        ));
    }
    fields
        .iter()
        .zip(FIELDS)
        .try_for_each(|(field, bounds)| check_field(field, bounds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_schedules_parse() {
        for ok in [
            "*/5 * * * *",
            "0 3 * * *",
            "0 0 1 jan,JUL sun-sat",
            "5-10/2 * ? * MON",
            "@hourly",
            "@every 1h30m",
            "TZ=Europe/Paris 0 3 * * *",
        ] {
            assert_eq!(parse_standard(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn errors_are_robfig_crons() {
        for (bad, msg) in [
            (
                "every minute",
                "expected exactly 5 fields, found 2: [every minute]",
            ),
            ("61 * * * *", "end of range (61) above maximum (59): 61"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            (
                "5-2 * * * *",
                "beginning of range (5) beyond end of range (2): 5-2",
            ),
            (
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("*/1/2 * * * *", "too many slashes: */1/2"),
            (
                "x * * * *",
                "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
            ),
            ("@often", "unrecognized descriptor: @often"),
            (
                "@every soon",
                "failed to parse duration @every soon: time: invalid duration \"soon\"",
            ),
            ("", "empty spec string"),
            (
                "TZ=Mars/Olympus * * * * *",
                "provided bad location Mars/Olympus: unknown time zone Mars/Olympus",
            ),
        ] {
            assert_eq!(parse_standard(bad), Err(msg.to_string()), "{bad}");
        }
    }
}
