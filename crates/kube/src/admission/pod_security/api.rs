//! Levels, policy versions and the policy a namespace's labels ask for (upstream:
//! pod-security-admission/api): `pod-security.kubernetes.io/<mode>` names a level,
//! `<mode>-version` a version, and a label left out falls back to the configured default.

use std::fmt;

use apimachinery::validation::{FieldError, FieldPath};
use serde_json::{Map, Value};

const LABEL_PREFIX: &str = "pod-security.kubernetes.io/";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    /// Upstream's `ParseLevel`: a bad level reads as restricted, with the error.
    pub fn parse(s: &str) -> Result<Level, String> {
        match s {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            _ => Err("must be one of privileged, baseline, restricted".into()),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }

    /// Strictness, for comparing levels (`CompareLevels`).
    fn strictness(self) -> u8 {
        match self {
            Level::Privileged => 0,
            Level::Baseline => 1,
            Level::Restricted => 2,
        }
    }
}

/// A policy version: `v1.<minor>`, or `latest`, newer than every numbered version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    V1(u64),
    Latest,
}

impl Version {
    /// Upstream's `ParseVersion`: `latest` or `v1.x` (no leading zeros); anything else reads as
    /// latest, with the error.
    pub fn parse(s: &str) -> Result<Version, String> {
        if s == "latest" {
            return Ok(Version::Latest);
        }
        let err = || "must be \"latest\" or \"v1.x\"".to_string();
        let minor = s.strip_prefix("v1.").ok_or_else(err)?;
        let well_formed = !minor.is_empty()
            && minor.bytes().all(|b| b.is_ascii_digit())
            && (minor == "0" || !minor.starts_with('0'));
        if !well_formed {
            return Err(err());
        }
        // Go's Atoi: an int64; larger numbers do not parse.
        let n: i64 = minor.parse().map_err(|_| err())?;
        Ok(Version::V1(n as u64))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::V1(m) => write!(f, "v1.{m}"),
            Version::Latest => f.write_str("latest"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    pub level: Level,
    pub version: Version,
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level.as_str(), self.version)
    }
}

impl LevelVersion {
    /// Both privileged, or the same level and version.
    fn equivalent(&self, other: &LevelVersion) -> bool {
        (self.level == Level::Privileged && other.level == Level::Privileged) || self == other
    }
}

/// The three modes of a namespace's policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub enforce: LevelVersion,
    pub audit: LevelVersion,
    pub warn: LevelVersion,
}

impl Policy {
    pub fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn]
            .iter()
            .all(|m| m.level == Level::Privileged)
    }

    pub fn equivalent(&self, other: &Policy) -> bool {
        self.enforce.equivalent(&other.enforce)
            && self.audit.equivalent(&other.audit)
            && self.warn.equivalent(&other.warn)
    }
}

/// The modes, as their label names and the part of a policy they set.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Enforce,
    Audit,
    Warn,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Enforce, Mode::Audit, Mode::Warn];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Audit => "audit",
            Mode::Warn => "warn",
        }
    }

    pub fn level_label(self) -> String {
        format!("{LABEL_PREFIX}{}", self.name())
    }

    pub fn version_label(self) -> String {
        format!("{LABEL_PREFIX}{}-version", self.name())
    }

    pub fn of(self, p: &mut Policy) -> &mut LevelVersion {
        match self {
            Mode::Enforce => &mut p.enforce,
            Mode::Audit => &mut p.audit,
            Mode::Warn => &mut p.warn,
        }
    }
}

/// Upstream's `PolicyToEvaluate`: the namespace's labels over the defaults. A policy comes back
/// even with errors: a bad enforce level reads as restricted, a bad audit or warn level as
/// privileged (they fail open), a bad version as latest.
pub fn policy_to_evaluate(
    labels: Option<&Map<String, Value>>,
    defaults: Policy,
) -> (Policy, Vec<FieldError>) {
    let mut p = defaults;
    let mut errs = Vec::new();
    let Some(labels) = labels.filter(|l| !l.is_empty()) else {
        return (p, errs);
    };
    let path = FieldPath::new("metadata").child("labels");
    let label = |key: &str| labels.get(key).map(|v| v.as_str().unwrap_or(""));
    let mut explicit_enforce_level = false;
    let (mut has_warn_level, mut has_warn_version) = (false, false);
    for mode in Mode::ALL {
        let key = mode.level_label();
        if let Some(value) = label(&key) {
            let parsed = Level::parse(value);
            let lv = mode.of(&mut p);
            match parsed {
                Ok(l) => {
                    lv.level = l;
                    explicit_enforce_level |= mode == Mode::Enforce;
                }
                Err(e) => {
                    lv.level = if mode == Mode::Enforce {
                        Level::Restricted
                    } else {
                        Level::Privileged
                    };
                    errs.push(FieldError::invalid(&path.key(&key), value, e));
                }
            }
            has_warn_level |= mode == Mode::Warn;
        }
        let key = mode.version_label();
        if let Some(value) = label(&key) {
            let lv = mode.of(&mut p);
            match Version::parse(value) {
                Ok(v) => lv.version = v,
                Err(e) => {
                    lv.version = Version::Latest;
                    errs.push(FieldError::invalid(&path.key(&key), value, e));
                }
            }
            has_warn_version |= mode == Mode::Warn;
        }
    }
    // Warn defaults to an explicitly set, stricter enforce level (and its version).
    if !has_warn_level
        && explicit_enforce_level
        && p.enforce.level.strictness() > p.warn.level.strictness()
    {
        p.warn.level = p.enforce.level;
        if !has_warn_version {
            p.warn.version = p.enforce.version;
        }
    }
    (p, errs)
}

/// `CompareLevels(a, b) < 1`: `a` is no stricter than `b`.
pub fn no_stricter(a: Level, b: Level) -> bool {
    a.strictness() <= b.strictness()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// api/helpers_test.go TestParseVersion.
    #[test]
    fn versions() {
        for (s, want) in [
            ("latest", Version::Latest),
            ("v1.0", Version::V1(0)),
            ("v1.1", Version::V1(1)),
            ("v1.20", Version::V1(20)),
            ("v1.10000", Version::V1(10000)),
        ] {
            assert_eq!(Version::parse(s), Ok(want), "{s}");
        }
        for s in ["foo", "", "v2.0", "v1", "1.1", "v1.01"] {
            assert!(Version::parse(s).is_err(), "{s}");
        }
    }

    fn p(enforce: &str, warn: &str, audit: &str) -> Policy {
        let lv = |s: &str| {
            let (l, v) = s.split_once(':').unwrap();
            LevelVersion {
                level: Level::parse(l).unwrap(),
                version: Version::parse(v).unwrap(),
            }
        };
        Policy {
            enforce: lv(enforce),
            warn: lv(warn),
            audit: lv(audit),
        }
    }

    /// api/helpers_test.go TestPolicyToEvaluate.
    #[test]
    fn labels_over_defaults() {
        const PRIV: &str = "privileged:latest";
        let defaults = p(PRIV, PRIV, PRIV);
        type Case<'a> = (&'a [(&'a str, &'a str)], Policy, bool);
        let cases: &[Case<'_>] = &[
            (
                &[("enforce", "baseline")],
                p("baseline:latest", "baseline:latest", PRIV),
                false,
            ),
            (
                &[("warn", "restricted")],
                p(PRIV, "restricted:latest", PRIV),
                false,
            ),
            (
                &[("audit", "baseline")],
                p(PRIV, PRIV, "baseline:latest"),
                false,
            ),
            (
                &[("enforce", "baseline"), ("warn", "restricted")],
                p("baseline:latest", "restricted:latest", PRIV),
                false,
            ),
            (
                &[("enforce", "baseline"), ("enforce-version", "v1.22")],
                p("baseline:v1.22", "baseline:v1.22", PRIV),
                false,
            ),
            (
                &[
                    ("enforce", "baseline"),
                    ("enforce-version", "v1.22"),
                    ("warn-version", "latest"),
                ],
                p("baseline:v1.22", "baseline:latest", PRIV),
                false,
            ),
            (
                &[("enforce", "baseline"), ("warn-version", "v1.23")],
                p("baseline:latest", "baseline:v1.23", PRIV),
                false,
            ),
            (
                &[
                    ("enforce", "baseline"),
                    ("enforce-version", "v1.20"),
                    ("warn", "restricted"),
                    ("warn-version", "v1.21"),
                    ("audit", "restricted"),
                    ("audit-version", "v1.22"),
                ],
                p("baseline:v1.20", "restricted:v1.21", "restricted:v1.22"),
                false,
            ),
            (
                &[("enforce", "baseline"), ("warn", "privileged")],
                p("baseline:latest", PRIV, PRIV),
                false,
            ),
            (
                &[("enforce", "baseline"), ("warn", "foo")],
                p("baseline:latest", PRIV, PRIV),
                true,
            ),
            (
                &[("enforce", "foo")],
                p("restricted:latest", PRIV, PRIV),
                true,
            ),
        ];
        for (labels, want, fails) in cases {
            let map: Map<String, Value> = labels
                .iter()
                .map(|(k, v)| (format!("{LABEL_PREFIX}{k}"), Value::from(*v)))
                .collect();
            let (got, errs) = policy_to_evaluate(Some(&map), defaults);
            assert_eq!(got, *want, "{labels:?}");
            assert_eq!(!errs.is_empty(), *fails, "{labels:?}");
        }
    }
}
