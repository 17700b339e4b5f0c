//! The Pod Security Standards' checks (upstream: pod-security-admission/policy), as rows: each
//! check has an id, the level that introduced it and the policy versions at which its rule
//! changed. A family of related checks lives in one module; [`evaluate`] picks the rules a
//! level and version run, in upstream's order (baseline checks, then restricted ones, each
//! sorted by id), skipping the baseline checks a restricted rule replaces.

use std::collections::BTreeSet;

use serde_json::Value;

use super::api::{Level, LevelVersion, Version};

mod host;
mod privilege;
mod profiles;
mod sysctls;
mod users;
mod volumes;

/// What a check finds wrong: the short reason, and the detail that names the offenders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub reason: String,
    pub detail: String,
}

impl Violation {
    fn new(reason: impl Into<String>, detail: impl Into<String>) -> Option<Self> {
        Some(Self {
            reason: reason.into(),
            detail: detail.into(),
        })
    }
}

/// The pod (or pod template) a check looks at: its metadata and its spec, as JSON.
#[derive(Clone, Copy)]
pub struct Pod<'a> {
    pub meta: &'a Value,
    pub spec: &'a Value,
}

impl<'a> Pod<'a> {
    /// Init containers, containers, then ephemeral containers, as upstream visits them.
    fn containers(&self) -> impl Iterator<Item = &'a Value> + use<'a> {
        let spec = self.spec;
        ["initContainers", "containers", "ephemeralContainers"]
            .into_iter()
            .flat_map(move |f| list(spec, &[f]))
    }

    fn pod_context(&self, path: &[&str]) -> Option<&'a Value> {
        let mut full = vec!["securityContext"];
        full.extend_from_slice(path);
        at(self.spec, &full)
    }

    fn annotation(&self, key: &str) -> Option<&'a str> {
        self.meta
            .get("annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
    }

    fn annotations(&self) -> impl Iterator<Item = (&'a str, &'a str)> + use<'a> {
        self.meta
            .get("annotations")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
    }

    /// `spec.os.name` is `windows`: the rules Windows pods cannot follow do not apply.
    fn is_windows(&self) -> bool {
        str_at(self.spec, &["os", "name"]) == Some("windows")
    }

    /// `hostUsers: false`: the pod runs in a user namespace.
    fn in_user_namespace(&self) -> bool {
        at(self.spec, &["hostUsers"]).and_then(Value::as_bool) == Some(false)
    }
}

/// The value at `path`, a JSON null counting as absent (Go's nil pointer).
fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    (!cur.is_null()).then_some(cur)
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path).and_then(Value::as_str)
}

fn bool_at(v: &Value, path: &[&str]) -> Option<bool> {
    at(v, path).and_then(Value::as_bool)
}

fn list<'a>(v: &'a Value, path: &[&str]) -> impl Iterator<Item = &'a Value> + use<'a> {
    at(v, path).and_then(Value::as_array).into_iter().flatten()
}

fn container_name(c: &Value) -> &str {
    str_at(c, &["name"]).unwrap_or("")
}

/// `"a", "b"`, as upstream's `joinQuote` (no escaping).
fn join_quote<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    let quoted: Vec<String> = items
        .into_iter()
        .map(|s| format!("\"{}\"", s.as_ref()))
        .collect();
    quoted.join(", ")
}

fn plural<'s>(singular: &'s str, plural: &'s str, n: usize) -> &'s str {
    if n == 1 { singular } else { plural }
}

/// `container "a"` or `containers "a", "b"`.
fn containers_phrase<S: AsRef<str>>(names: &[S]) -> String {
    format!(
        "{} {}",
        plural("container", "containers", names.len()),
        join_quote(names)
    )
}

/// A sorted set of strings, as upstream's `sets.String.List()`.
type Sorted = BTreeSet<String>;

/// One rule of a check, in force from policy version `v1.<since>` until the next row.
pub struct Rule {
    pub since: u64,
    pub check: fn(&Pod<'_>) -> Option<Violation>,
    /// Baseline checks this restricted rule replaces while it is in force.
    pub overrides: &'static [&'static str],
}

/// A check: its id, the level it belongs to, and its rules in increasing version order.
pub struct Check {
    pub id: &'static str,
    pub level: Level,
    pub rules: &'static [Rule],
}

const fn rule(since: u64, check: fn(&Pod<'_>) -> Option<Violation>) -> Rule {
    Rule {
        since,
        check,
        overrides: &[],
    }
}

/// Every check of v1.36, family by family.
pub fn all() -> impl Iterator<Item = &'static Check> {
    host::CHECKS
        .iter()
        .chain(privilege::CHECKS)
        .chain(profiles::CHECKS)
        .chain(sysctls::CHECKS)
        .chain(users::CHECKS)
        .chain(volumes::CHECKS)
}

/// The newest policy version any of `checks` changes at: `latest` and later versions evaluate
/// as this one.
fn newest_version(checks: &[&Check]) -> u64 {
    checks
        .iter()
        .filter_map(|c| c.rules.last())
        .map(|r| r.since)
        .max()
        .unwrap_or(0)
}

impl Check {
    /// The rule in force at `v1.<minor>`, if the check exists then.
    fn rule_at(&self, minor: u64) -> Option<&Rule> {
        self.rules.iter().rev().find(|r| r.since <= minor)
    }
}

/// The rules of `checks` a level and version run, with their check's id, in upstream's order.
fn rules_in<'c>(checks: &[&'c Check], lv: LevelVersion) -> Vec<(&'static str, &'c Rule)> {
    if lv.level == Level::Privileged {
        return Vec::new();
    }
    let newest = newest_version(checks);
    let minor = match lv.version {
        Version::V1(m) => m.min(newest),
        Version::Latest => newest,
    };
    let in_force = |level: Level| {
        let mut rules: Vec<(&'static str, &'c Rule)> = checks
            .iter()
            .filter(|c| c.level == level)
            .filter_map(|c| c.rule_at(minor).map(|r| (c.id, r)))
            .collect();
        rules.sort_by_key(|(id, _)| *id);
        rules
    };
    let restricted = if lv.level == Level::Restricted {
        in_force(Level::Restricted)
    } else {
        Vec::new()
    };
    let overridden: BTreeSet<&str> = restricted
        .iter()
        .flat_map(|(_, r)| r.overrides.iter().copied())
        .collect();
    in_force(Level::Baseline)
        .into_iter()
        .filter(|(id, _)| !overridden.contains(id))
        .chain(restricted)
        .collect()
}

/// What the pod breaks of the level and version, in upstream's order.
pub fn evaluate(lv: LevelVersion, pod: &Pod<'_>) -> Vec<Violation> {
    let checks: Vec<&Check> = all().collect();
    rules_in(&checks, lv)
        .into_iter()
        .filter_map(|(_, r)| (r.check)(pod))
        .collect()
}

/// The violations as upstream's `ForbiddenReason()`: the reasons, comma-separated.
pub fn reasons(violations: &[Violation]) -> String {
    let r: Vec<&str> = violations.iter().map(|v| v.reason.as_str()).collect();
    r.join(", ")
}

/// The violations as upstream's `ForbiddenDetail()`: `reason (detail), ...`.
pub fn details(violations: &[Violation]) -> String {
    let parts: Vec<String> = violations
        .iter()
        .map(|v| {
            if v.detail.is_empty() {
                v.reason.clone()
            } else {
                format!("{} ({})", v.reason, v.detail)
            }
        })
        .collect();
    parts.join(", ")
}

#[cfg(test)]
mod tests;
