//! Go's ways of writing durations: `k8s.io/apimachinery/pkg/util/duration.HumanDuration`, the
//! ages of tables, shared by the built-in printers and the custom resources' `date` columns; and
//! `time.Duration.String`, for flags' defaults and debug output that print Go durations.

use chrono::TimeDelta;

const SECOND: i64 = 1_000_000_000;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;

/// A succinct duration with about two significant figures ("45s", "5m30s", "3h10m", "2d4h", "3y"),
/// exactly as upstream's `duration.HumanDuration`.
///
/// Up to one second in the future still reads "0s", to tolerate clock skew between machines;
/// anything further ahead is "<invalid>".
pub fn human_duration(d: TimeDelta) -> String {
    // Go's time.Duration is an int64 of nanoseconds and saturates; so do we.
    let nanos = d.num_nanoseconds().unwrap_or(if d < TimeDelta::zero() {
        i64::MIN
    } else {
        i64::MAX
    });
    // Integer division truncates toward zero, as Go's int(d.Seconds()) does.
    let seconds = nanos / SECOND;
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = nanos / MINUTE;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = nanos / HOUR;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// `d` as Go's `time.Duration.String` writes it: `0s`, `750ns`, `1.5µs`, `4.166666ms`, `15s`,
/// `1m30s`, `2h0m0.5s`.
pub fn go_string(d: std::time::Duration) -> String {
    let nanos = d.as_nanos();
    // `whole.fraction` of `v` in units of 10^digits, the fraction without trailing zeros.
    let fraction = |v: u128, digits: u32, unit: &str| {
        let scale = 10u128.pow(digits);
        let (whole, part) = (v / scale, v % scale);
        if part == 0 {
            format!("{whole}{unit}")
        } else {
            let part = format!("{part:0width$}", width = digits as usize);
            format!("{whole}.{}{unit}", part.trim_end_matches('0'))
        }
    };
    match nanos {
        0 => "0s".into(),
        n if n < 1_000 => format!("{n}ns"),
        n if n < 1_000_000 => fraction(n, 3, "µs"),
        n if n < 1_000_000_000 => fraction(n, 6, "ms"),
        n => {
            let secs = n / 1_000_000_000;
            let seconds = fraction(secs % 60 * 1_000_000_000 + n % 1_000_000_000, 9, "s");
            match (secs / 3600, secs % 3600 / 60) {
                (0, 0) => seconds,
                (0, m) => format!("{m}m{seconds}"),
                (h, m) => format!("{h}h{m}m{seconds}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_strings_are_gos() {
        use std::time::Duration;
        for (d, s) in [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(750), "750ns"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (Duration::from_millis(5), "5ms"),
            (Duration::from_nanos(4_166_666), "4.166666ms"),
            (Duration::from_secs(15), "15s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_millis(7_200_500), "2h0m0.5s"),
            (Duration::from_secs(3600), "1h0m0s"),
        ] {
            assert_eq!(go_string(d), s);
        }
    }

    fn secs(s: i64) -> TimeDelta {
        TimeDelta::seconds(s)
    }

    #[test]
    fn human_duration_matches_upstream_table() {
        let cases = [
            (secs(-3), "<invalid>"),
            (secs(-2), "<invalid>"),
            (TimeDelta::milliseconds(-1999), "0s"),
            (secs(-1), "0s"),
            (secs(0), "0s"),
            (secs(59), "59s"),
            (secs(119), "119s"),
            (secs(120), "2m"),
            (secs(121), "2m1s"),
            (secs(9 * 60 + 59), "9m59s"),
            (secs(10 * 60), "10m"),
            (secs(10 * 60 + 59), "10m"),
            (secs(179 * 60), "179m"),
            (secs(180 * 60), "3h"),
            (secs(3 * 3600 + 10 * 60), "3h10m"),
            (secs(7 * 3600 + 59 * 60), "7h59m"),
            (secs(8 * 3600), "8h"),
            (secs(47 * 3600 + 59 * 60), "47h"),
            (secs(48 * 3600), "2d"),
            (secs(50 * 3600), "2d2h"),
            (secs(7 * 86400 + 23 * 3600), "7d23h"),
            (secs(8 * 86400), "8d"),
            (secs(729 * 86400), "729d"),
            (secs(730 * 86400), "2y"),
            (secs(731 * 86400), "2y1d"),
            (secs(8 * 365 * 86400 - 86400), "7y364d"),
            (secs(8 * 365 * 86400), "8y"),
            (TimeDelta::MAX, "292y"),
        ];
        for (d, want) in cases {
            assert_eq!(human_duration(d), want, "{d:?}");
        }
    }
}
