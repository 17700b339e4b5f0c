//! The time zone names Go's `time.LoadLocation` knows (the IANA tz database, zones and links,
//! kept as data in `data/timezones/names.txt`), and upstream's `validateTimeZone` for a
//! CronJob's `spec.timeZone`.

use std::collections::HashSet;
use std::sync::LazyLock;

use apimachinery::validation::{FieldError, FieldPath};

static NAMES: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    include_str!("../../../data/timezones/names.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
});

/// Whether `time.LoadLocation(name)` succeeds: "" and "UTC" are UTC, "Local" the server's
/// zone, anything else a name of the database.
pub fn is_known_time_zone(name: &str) -> bool {
    matches!(name, "" | "UTC" | "Local") || NAMES.contains(name)
}

/// One component of a zone name as upstream allows it (`^[A-Za-z\.\-_0-9+]{1,14}$`, not `.`
/// or `..`, not starting with `-`).
fn valid_component(part: &str) -> bool {
    (1..=14).contains(&part.len())
        && part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'))
        && part != "."
        && part != ".."
        && !part.starts_with('-')
}

/// `validateTimeZone`: a set time zone is a non-empty, explicit IANA name.
pub fn validate_time_zone(zone: &str, path: &FieldPath) -> Vec<FieldError> {
    if zone.is_empty() {
        return vec![FieldError::invalid(
            path,
            zone,
            "timeZone must be nil or non-empty string",
        )];
    }
    if !zone.split('/').all(valid_component) {
        return vec![FieldError::invalid(
            path,
            zone,
            format!("unknown time zone {zone}"),
        )];
    }
    let mut errs = Vec::new();
    if zone.eq_ignore_ascii_case("Local") {
        errs.push(FieldError::invalid(
            path,
            zone,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ));
    }
    if !is_known_time_zone(zone) {
        errs.push(FieldError::invalid(
            path,
            zone,
            format!("unknown time zone {zone}"),
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_are_checked_as_upstream() {
        let p = FieldPath::new("spec").child("timeZone");
        assert!(validate_time_zone("Europe/Paris", &p).is_empty());
        assert!(validate_time_zone("US/Eastern", &p).is_empty());
        assert!(validate_time_zone("UTC", &p).is_empty());
        let msgs = |z: &str| -> Vec<String> {
            validate_time_zone(z, &p)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            msgs("Mars/Olympus"),
            ["spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus"]
        );
        assert_eq!(
            msgs("Local"),
            [
                "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
            ]
        );
        assert_eq!(
            msgs("local").len(),
            2,
            "lowercase local is not explicit and not a zone either"
        );
        assert_eq!(
            msgs(""),
            ["spec.timeZone: Invalid value: \"\": timeZone must be nil or non-empty string"]
        );
        assert_eq!(
            msgs("America/../x"),
            ["spec.timeZone: Invalid value: \"America/../x\": unknown time zone America/../x"]
        );
    }
}
