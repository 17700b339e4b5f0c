//! Jobs and CronJobs (batch/v1). This module holds what both kinds share: a Job spec's
//! defaults (`SetDefaults_JobSpec`), its validation (`validateJobSpec`: counts, completion
//! modes, the pod failure and success policies, the pod replacement policy, `managedBy`, the
//! pod template and its restart policy) and the warnings upstream's strategies give for it.
//! The kinds' own rules are in `job` and `cronjob`; CronJob schedules and time zones in `cron`
//! and `timezone`.

mod cron;
mod cronjob;
mod job;
mod timezone;

pub use cronjob::CronJobStrategy;
pub use job::JobStrategy;

use crate::strategies::template_pod_spec;
use std::collections::BTreeSet;

use apimachinery::validation::{
    FieldError, FieldPath, is_dns1123_label, is_dns1123_subdomain, regex_error, validate_label_name,
};
use serde_json::{Value, json};

use super::pod::default_pod_spec;
use super::set_default;
use super::workloads::{nonnegative_if_set, present, text, validate_pod_template};

/// Upstream's limits (pkg/apis/batch/validation).
const MAX_PARALLELISM_FOR_INDEXED_JOB: i64 = 100_000;
const MAX_FAILED_INDEXES_FOR_INDEXED_JOB: i64 = 100_000;
const COMPLETIONS_SOFT_LIMIT: i64 = 100_000;
const PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS: i64 = 10_000;
const MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS: i64 = 10_000;
const MAX_POD_FAILURE_POLICY_RULES: usize = 20;
const MAX_ON_EXIT_CODES_VALUES: usize = 255;
const MAX_ON_POD_CONDITIONS_PATTERNS: usize = 20;
const MAX_MANAGED_BY_LENGTH: usize = 63;
const MAX_SUCCEEDED_INDEXES_LENGTH: usize = 64 * 1024;
const MAX_SUCCESS_POLICY_RULES: usize = 20;
/// `parallelismSoftLimitForUnlimitedCompletions`, for the indexed job warning.
const PARALLELISM_SOFT_LIMIT: i64 = 10_000;

/// The sets upstream lists sorted in its messages.
const POD_FAILURE_ACTIONS: &[&str] = &["Count", "FailIndex", "FailJob", "Ignore"];
const EXIT_CODE_OPERATORS: &[&str] = &["In", "NotIn"];
const CONDITION_STATUSES: &[&str] = &["False", "True", "Unknown"];
const POD_REPLACEMENT_POLICIES: &[&str] = &["Failed", "TerminatingOrFailed"];

/// `SetDefaults_JobSpec`, for Jobs and the job templates of CronJobs.
pub(crate) fn default_job_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    // Upstream leaves completions unset for a work queue (parallelism without completions).
    if present(spec, "completions").is_none() && present(spec, "parallelism").is_none() {
        spec["completions"] = json!(1);
        spec["parallelism"] = json!(1);
    }
    set_default(spec, "parallelism", json!(1));
    // Per-index backoff makes the global limit unbounded by default.
    if present(spec, "backoffLimitPerIndex").is_some() {
        set_default(spec, "backoffLimit", json!(i32::MAX));
    }
    set_default(spec, "backoffLimit", json!(6));
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    let failure_policy = present(spec, "podFailurePolicy").is_some();
    set_default(
        spec,
        "podReplacementPolicy",
        json!(if failure_policy {
            "Failed"
        } else {
            "TerminatingOrFailed"
        }),
    );
    default_condition_patterns(spec);
    if let Some(pod) = template_pod_spec(spec) {
        default_pod_spec(pod);
    }
}

/// `SetDefaults_PodFailurePolicyOnPodConditionsPattern`: a pattern's status is `True`.
pub(crate) fn default_condition_patterns(spec: &mut Value) {
    if let Some(rules) = spec
        .pointer_mut("/podFailurePolicy/rules")
        .and_then(Value::as_array_mut)
    {
        for rule in rules {
            for pattern in rule
                .get_mut("onPodConditions")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                set_default(pattern, "status", json!("True"));
            }
        }
    }
}

/// A field error whose value upstream omits (`field.OmitValueType{}`).
fn invalid_omitted(path: &FieldPath, detail: &str) -> FieldError {
    FieldError {
        bad_value: None,
        ..FieldError::invalid(path, Value::Null, detail)
    }
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
fn quoted_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

fn int_opt(obj: &Value, field: &str) -> Option<i64> {
    present(obj, field).and_then(Value::as_i64)
}

/// `validateJobSpec`.
pub(crate) fn validate_job_spec(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for field in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
    ] {
        errs.extend(nonnegative_if_set(spec, field, path));
    }
    let parallelism = int_opt(spec, "parallelism");
    let completions = int_opt(spec, "completions");
    let per_index = int_opt(spec, "backoffLimitPerIndex");
    let max_failed = int_opt(spec, "maxFailedIndexes");
    if max_failed.is_some() {
        errs.extend(nonnegative_if_set(spec, "maxFailedIndexes", path));
        if per_index.is_none() {
            errs.push(FieldError::required(
                &path.child("backoffLimitPerIndex"),
                "when maxFailedIndexes is specified",
            ));
        }
    }
    if let Some(managed_by) = present(spec, "managedBy").and_then(Value::as_str) {
        errs.extend(domain_prefixed_path(&path.child("managedBy"), managed_by));
        if managed_by.len() > MAX_MANAGED_BY_LENGTH {
            errs.push(FieldError::too_long(
                &path.child("managedBy"),
                "",
                MAX_MANAGED_BY_LENGTH as i64,
            ));
        }
    }
    let mode = present(spec, "completionMode").and_then(Value::as_str);
    if let Some(mode) = mode {
        if !matches!(mode, "NonIndexed" | "Indexed") {
            errs.push(FieldError::not_supported(
                &path.child("completionMode"),
                mode,
                &["NonIndexed", "Indexed"],
            ));
        }
        if mode == "Indexed" {
            errs.extend(indexed_rules(
                path,
                parallelism,
                completions,
                per_index,
                max_failed,
            ));
        }
    }
    if matches!(mode, None | Some("NonIndexed")) {
        if let Some(n) = per_index {
            errs.push(FieldError::invalid(
                &path.child("backoffLimitPerIndex"),
                n,
                "requires indexed completion mode",
            ));
        }
        if let Some(n) = max_failed {
            errs.push(FieldError::invalid(
                &path.child("maxFailedIndexes"),
                n,
                "requires indexed completion mode",
            ));
        }
    }
    let failure_policy = present(spec, "podFailurePolicy");
    if let Some(policy) = failure_policy {
        errs.extend(validate_pod_failure_policy(
            spec,
            policy,
            &path.child("podFailurePolicy"),
        ));
    }
    if let Some(success) = present(spec, "successPolicy") {
        let success_path = path.child("successPolicy");
        if mode != Some("Indexed") {
            errs.push(
                FieldError::invalid(
                    &success_path,
                    success.clone(),
                    "requires indexed completion mode",
                )
                .with_rendered_value(super::workloads::internal_json(
                    "batch.v1.SuccessPolicy",
                    success,
                )),
            );
        } else {
            errs.extend(validate_success_policy(
                success,
                completions.unwrap_or(0),
                &success_path,
            ));
        }
    }
    if let Some(replacement) = present(spec, "podReplacementPolicy").and_then(Value::as_str) {
        let valid: &[&str] = if failure_policy.is_some() {
            &["Failed"]
        } else {
            POD_REPLACEMENT_POLICIES
        };
        if !valid.contains(&replacement) {
            errs.push(FieldError::not_supported(
                &path.child("podReplacementPolicy"),
                replacement,
                valid,
            ));
        }
    }
    let template = spec.get("template").unwrap_or(&Value::Null);
    let template_path = path.child("template");
    errs.extend(validate_pod_template(template, &template_path));
    let restart_path = template_path.child("spec").child("restartPolicy");
    let restart = template
        .pointer("/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("");
    match restart {
        // Defaulting makes an unset policy Always, so both read as unset.
        "Always" | "" => errs.push(FieldError::required(
            &restart_path,
            "valid values: \"OnFailure\", \"Never\"",
        )),
        "OnFailure" | "Never" => {
            if failure_policy.is_some() && restart != "Never" {
                errs.push(FieldError::invalid(
                    &restart_path,
                    restart,
                    "only \"Never\" is supported when podFailurePolicy is specified",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            &restart_path,
            other,
            &["OnFailure", "Never"],
        )),
    }
    errs
}

/// The Indexed completion mode's bounds.
fn indexed_rules(
    path: &FieldPath,
    parallelism: Option<i64>,
    completions: Option<i64>,
    per_index: Option<i64>,
    max_failed: Option<i64>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if completions.is_none() {
        errs.push(FieldError::required(
            &path.child("completions"),
            "when completion mode is Indexed",
        ));
    }
    if let Some(p) = parallelism.filter(|p| *p > MAX_PARALLELISM_FOR_INDEXED_JOB) {
        errs.push(FieldError::invalid(
            &path.child("parallelism"),
            p,
            format!(
                "must be less than or equal to {MAX_PARALLELISM_FOR_INDEXED_JOB} when completion mode is Indexed"
            ),
        ));
    }
    if let (Some(c), Some(m)) = (completions, max_failed)
        && m > c
    {
        errs.push(FieldError::invalid(
            &path.child("maxFailedIndexes"),
            m,
            "must be less than or equal to completions",
        ));
    }
    if let Some(m) = max_failed.filter(|m| *m > MAX_FAILED_INDEXES_FOR_INDEXED_JOB) {
        errs.push(FieldError::invalid(
            &path.child("maxFailedIndexes"),
            m,
            format!("must be less than or equal to {MAX_FAILED_INDEXES_FOR_INDEXED_JOB}"),
        ));
    }
    if completions.is_some_and(|c| c > COMPLETIONS_SOFT_LIMIT) && per_index.is_some() {
        if max_failed.is_none() {
            errs.push(FieldError::required(
                &path.child("maxFailedIndexes"),
                format!("must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}"),
            ));
        }
        if let Some(p) = parallelism.filter(|p| *p > PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS) {
            errs.push(FieldError::invalid(
                &path.child("parallelism"),
                p,
                format!(
                    "must be less than or equal to {PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS} when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
                ),
            ));
        }
        if let Some(m) = max_failed.filter(|m| *m > MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS) {
            errs.push(FieldError::invalid(
                &path.child("maxFailedIndexes"),
                m,
                format!(
                    "must be less than or equal to {MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS} when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
                ),
            ));
        }
    }
    errs
}

/// `IsDomainPrefixedPath` (k8s.io/apimachinery/pkg/util/validation).
/// candidate for apimachinery::validation
fn domain_prefixed_path(path: &FieldPath, value: &str) -> Vec<FieldError> {
    if value.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let Some((host, rest)) = value
        .split_once('/')
        .filter(|(h, r)| !h.is_empty() && !r.is_empty())
    else {
        return vec![FieldError::invalid(
            path,
            value,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        )];
    };
    let mut errs: Vec<FieldError> = is_dns1123_subdomain(host)
        .into_iter()
        .map(|m| FieldError::invalid(path, host, m))
        .collect();
    const HTTP_PATH_FMT: &str = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+";
    let path_ok = rest
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&b));
    if !path_ok {
        errs.push(FieldError::invalid(
            path,
            rest,
            regex_error("Invalid path", HTTP_PATH_FMT, &[]),
        ));
    }
    errs
}

/// The names of a template's containers and init containers.
fn container_names(spec: &Value) -> BTreeSet<String> {
    ["containers", "initContainers"]
        .into_iter()
        .flat_map(|list| {
            spec.pointer(&format!("/template/spec/{list}"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .map(|c| text(c, "name").to_string())
        .collect()
}

/// `validatePodFailurePolicy` and its rules.
fn validate_pod_failure_policy(spec: &Value, policy: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let rules_path = path.child("rules");
    let rules = policy
        .get("rules")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if rules.len() > MAX_POD_FAILURE_POLICY_RULES {
        errs.push(FieldError::too_many(
            &rules_path,
            Some(rules.len() as i64),
            Some(MAX_POD_FAILURE_POLICY_RULES as i64),
        ));
    }
    let names = container_names(spec);
    let per_index = present(spec, "backoffLimitPerIndex").is_some();
    for (i, rule) in rules.iter().enumerate() {
        let rule_path = rules_path.index(i);
        let action_path = rule_path.child("action");
        match text(rule, "action") {
            "" => errs.push(FieldError::required(
                &action_path,
                format!("valid values: {}", quoted_list(POD_FAILURE_ACTIONS)),
            )),
            "FailIndex" if !per_index => errs.push(FieldError::invalid(
                &action_path,
                "FailIndex",
                "requires the backoffLimitPerIndex to be set",
            )),
            action if !POD_FAILURE_ACTIONS.contains(&action) => errs.push(
                FieldError::not_supported(&action_path, action, POD_FAILURE_ACTIONS),
            ),
            _ => {}
        }
        let exit_codes = present(rule, "onExitCodes");
        if let Some(codes) = exit_codes {
            errs.extend(validate_on_exit_codes(
                codes,
                &rule_path.child("onExitCodes"),
                &names,
            ));
        }
        let conditions = rule
            .get("onPodConditions")
            .and_then(Value::as_array)
            .filter(|c| !c.is_empty());
        if let Some(patterns) = conditions {
            errs.extend(validate_on_pod_conditions(
                patterns,
                &rule_path.child("onPodConditions"),
            ));
        }
        match (exit_codes.is_some(), conditions.is_some()) {
            (true, true) => errs.push(invalid_omitted(
                &rule_path,
                "specifying both OnExitCodes and OnPodConditions is not supported",
            )),
            (false, false) => errs.push(invalid_omitted(
                &rule_path,
                "specifying one of OnExitCodes and OnPodConditions is required",
            )),
            _ => {}
        }
    }
    errs
}

fn validate_on_exit_codes(
    codes: &Value,
    path: &FieldPath,
    names: &BTreeSet<String>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let operator = text(codes, "operator");
    let operator_path = path.child("operator");
    if operator.is_empty() {
        errs.push(FieldError::required(
            &operator_path,
            format!("valid values: {}", quoted_list(EXIT_CODE_OPERATORS)),
        ));
    } else if !EXIT_CODE_OPERATORS.contains(&operator) {
        errs.push(FieldError::not_supported(
            &operator_path,
            operator,
            EXIT_CODE_OPERATORS,
        ));
    }
    if let Some(name) = present(codes, "containerName").and_then(Value::as_str)
        && !names.contains(name)
    {
        errs.push(FieldError::invalid(
            &path.child("containerName"),
            name,
            "must be one of the container or initContainer names in the pod template",
        ));
    }
    let values_path = path.child("values");
    let raw = present(codes, "values").cloned().unwrap_or(Value::Null);
    let values: Vec<i64> = raw
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    if values.is_empty() {
        errs.push(FieldError::invalid(
            &values_path,
            raw.clone(),
            "at least one value is required",
        ));
    } else if values.len() > MAX_ON_EXIT_CODES_VALUES {
        errs.push(FieldError::too_many(
            &values_path,
            Some(values.len() as i64),
            Some(MAX_ON_EXIT_CODES_VALUES as i64),
        ));
    }
    let mut seen = BTreeSet::new();
    let mut ordered = true;
    for (j, v) in values.iter().enumerate() {
        let value_path = values_path.index(j);
        if operator == "In" && *v == 0 {
            errs.push(FieldError::invalid(
                &value_path,
                0,
                "must not be 0 for the In operator",
            ));
        }
        if !seen.insert(*v) {
            errs.push(FieldError::duplicate(&value_path, *v));
        }
        if j > 0 && values[j - 1] > *v {
            ordered = false;
        }
    }
    if !ordered {
        errs.push(FieldError::invalid(&values_path, raw, "must be ordered"));
    }
    errs
}

fn validate_on_pod_conditions(patterns: &[Value], path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if patterns.len() > MAX_ON_POD_CONDITIONS_PATTERNS {
        errs.push(FieldError::too_many(
            path,
            Some(patterns.len() as i64),
            Some(MAX_ON_POD_CONDITIONS_PATTERNS as i64),
        ));
    }
    for (j, pattern) in patterns.iter().enumerate() {
        let pattern_path = path.index(j);
        errs.extend(validate_label_name(
            text(pattern, "type"),
            &pattern_path.child("type"),
        ));
        let status_path = pattern_path.child("status");
        match text(pattern, "status") {
            "" => errs.push(FieldError::required(
                &status_path,
                format!("valid values: {}", quoted_list(CONDITION_STATUSES)),
            )),
            s if !CONDITION_STATUSES.contains(&s) => errs.push(FieldError::not_supported(
                &status_path,
                s,
                CONDITION_STATUSES,
            )),
            _ => {}
        }
    }
    errs
}

/// `validateSuccessPolicy` (Indexed Jobs only).
fn validate_success_policy(policy: &Value, completions: i64, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let rules_path = path.child("rules");
    let rules = policy
        .get("rules")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if rules.is_empty() {
        errs.push(FieldError::required(
            &rules_path,
            "at least one rules must be specified when the successPolicy is specified",
        ));
    }
    if rules.len() > MAX_SUCCESS_POLICY_RULES {
        errs.push(FieldError::too_many(
            &rules_path,
            Some(rules.len() as i64),
            Some(MAX_SUCCESS_POLICY_RULES as i64),
        ));
    }
    for (i, rule) in rules.iter().enumerate() {
        let rule_path = rules_path.index(i);
        let count = int_opt(rule, "succeededCount");
        let indexes = present(rule, "succeededIndexes").and_then(Value::as_str);
        if count.is_none() && indexes.is_none() {
            errs.push(FieldError::required(
                &rule_path,
                "at least one of succeededCount or succeededIndexes must be specified",
            ));
        }
        let mut total = 0;
        if let Some(indexes) = indexes {
            let indexes_path = rule_path.child("succeededIndexes");
            if indexes.len() > MAX_SUCCEEDED_INDEXES_LENGTH {
                errs.push(FieldError::too_long(
                    &indexes_path,
                    "",
                    MAX_SUCCEEDED_INDEXES_LENGTH as i64,
                ));
            }
            match indexes_total(indexes, completions) {
                Ok(n) => total = n,
                Err(e) => errs.push(FieldError::invalid(
                    &indexes_path,
                    indexes,
                    format!("error parsing succeededIndexes: {e}"),
                )),
            }
        }
        if let Some(count) = count {
            let count_path = rule_path.child("succeededCount");
            errs.extend(nonnegative_if_set(rule, "succeededCount", &rule_path));
            if count > completions {
                errs.push(FieldError::invalid(
                    &count_path,
                    count,
                    format!(
                        "must be less than or equal to {completions} (the number of specified completions)"
                    ),
                ));
            }
            if indexes.is_some() && count > total {
                errs.push(FieldError::invalid(
                    &count_path,
                    count,
                    format!(
                        "must be less than or equal to {total} (the number of indexes in the specified succeededIndexes field)"
                    ),
                ));
            }
        }
    }
    errs
}

/// Go's `strconv.Atoi`, as the index parser uses it.
fn atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `parseIndexInterval`: `x` or `x-y`, below `completions`, increasing.
fn index_interval(interval: &str, completions: i64) -> Result<(i64, i64), String> {
    let limits: Vec<&str> = interval.split('-').collect();
    if limits.len() > 2 {
        return Err(format!(
            "the fragment {interval:?} violates the requirement that an index interval can have at most two parts separated by '-'"
        ));
    }
    let parse = |s: &str| {
        atoi(s).ok_or_else(|| format!("cannot convert string to integer for index: {s:?}"))
    };
    let x = parse(limits[0])?;
    if x >= completions {
        return Err(format!("too large index: {:?}", limits[0]));
    }
    let Some(high) = limits.get(1) else {
        return Ok((x, x));
    };
    let y = parse(high)?;
    if y >= completions {
        return Err(format!("too large index: {high:?}"));
    }
    if x >= y {
        return Err(format!("non-increasing order, previous: {x}, current: {y}"));
    }
    Ok((x, y))
}

/// `validateIndexesFormat`: the number of indexes of a `1,3-5` list.
fn indexes_total(indexes: &str, completions: i64) -> Result<i64, String> {
    if indexes.is_empty() {
        return Ok(0);
    }
    let mut last: Option<i64> = None;
    let mut total = 0;
    for interval in indexes.split(',') {
        let (x, y) = index_interval(interval, completions)?;
        if let Some(l) = last.filter(|l| *l >= x) {
            return Err(format!("non-increasing order, previous: {l}, current: {x}"));
        }
        total += y - x + 1;
        last = Some(y);
    }
    Ok(total)
}

/// The warning Jobs and CronJobs give for a name that is not a DNS label (pods and hostnames
/// are named after it).
pub(crate) fn name_warning(name: &str) -> Option<String> {
    let msgs = is_dns1123_label(name);
    (!msgs.is_empty()).then(|| {
        format!(
            "metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [{}]",
            msgs.join(" ")
        )
    })
}

/// `WarningsForJobSpec`, less the pod template's warnings (the pod module's).
pub(crate) fn job_spec_warnings(spec: &Value, path: &FieldPath) -> Vec<String> {
    let mut warnings = Vec::new();
    if text(spec, "completionMode") == "Indexed"
        && int_opt(spec, "completions").unwrap_or(0) > COMPLETIONS_SOFT_LIMIT
        && int_opt(spec, "parallelism").unwrap_or(0) > PARALLELISM_SOFT_LIMIT
    {
        warnings.push(format!(
            "{path}: In Indexed Jobs with a number of completions higher than 10^5 and a parallelism higher than 10^4, Kubernetes might not be able to track completedIndexes when a big number of indexes fail"
        ));
    }
    // Then the pod template's warnings, as upstream's `WarningsForJobSpec`.
    warnings.extend(super::pod::template_warnings(
        spec.get("template"),
        &path.child("template"),
    ));
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(spec: Value) -> Vec<String> {
        let mut spec = spec;
        default_job_spec(&mut spec);
        validate_job_spec(&spec, &FieldPath::new("spec"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn pod(restart: &str) -> Value {
        json!({"spec": {"restartPolicy": restart, "containers": [{"name": "c", "image": "i"}]}})
    }

    #[test]
    fn restart_policies_match_upstream() {
        assert_eq!(
            messages(json!({"template": pod("Always")})),
            [
                "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
            ]
        );
        assert_eq!(
            messages(
                json!({"template": pod("OnFailure"), "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}}]}})
            ),
            [
                "spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified"
            ]
        );
    }

    #[test]
    fn pod_failure_policies_match_upstream() {
        assert_eq!(
            messages(
                json!({"template": pod("Never"), "podFailurePolicy": {"rules": [
                    {"action": "", "onExitCodes": {"operator": "In", "values": [0, 2, 2, 1], "containerName": "x"}},
                    {"action": "Explode", "onPodConditions": [{"type": "bad type", "status": "Maybe"}]},
                    {"action": "FailIndex"},
                ]}})
            ),
            [
                "spec.podFailurePolicy.rules[0].action: Required value: valid values: [\"Count\" \"FailIndex\" \"FailJob\" \"Ignore\"]",
                "spec.podFailurePolicy.rules[0].onExitCodes.containerName: Invalid value: \"x\": must be one of the container or initContainer names in the pod template",
                "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator",
                "spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Duplicate value: 2",
                "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: [0,2,2,1]: must be ordered",
                "spec.podFailurePolicy.rules[1].action: Unsupported value: \"Explode\": supported values: \"Count\", \"FailIndex\", \"FailJob\", \"Ignore\"",
                "spec.podFailurePolicy.rules[1].onPodConditions[0].type: Invalid value: \"bad type\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "spec.podFailurePolicy.rules[1].onPodConditions[0].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"",
                "spec.podFailurePolicy.rules[2].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set",
                "spec.podFailurePolicy.rules[2]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
            ]
        );
    }

    #[test]
    fn indexed_jobs_and_success_policies_match_upstream() {
        assert_eq!(
            messages(
                json!({"template": pod("Never"), "completionMode": "Indexed", "parallelism": 2, "backoffLimitPerIndex": 1, "maxFailedIndexes": 3})
            ),
            ["spec.completions: Required value: when completion mode is Indexed"]
        );
        assert_eq!(
            messages(
                json!({"template": pod("Never"), "completionMode": "Indexed", "completions": 5, "successPolicy": {"rules": [
                    {"succeededIndexes": "0,2-3", "succeededCount": 4},
                    {"succeededIndexes": "3-1"},
                    {},
                ]}})
            ),
            [
                "spec.successPolicy.rules[0].succeededCount: Invalid value: 4: must be less than or equal to 3 (the number of indexes in the specified succeededIndexes field)",
                "spec.successPolicy.rules[1].succeededIndexes: Invalid value: \"3-1\": error parsing succeededIndexes: non-increasing order, previous: 3, current: 1",
                "spec.successPolicy.rules[2]: Required value: at least one of succeededCount or succeededIndexes must be specified",
            ]
        );
        assert_eq!(
            messages(
                json!({"template": pod("Never"), "successPolicy": {"rules": [{"succeededCount": 1}]}})
            ),
            [
                "spec.successPolicy: Invalid value: {\"Rules\":[{\"SucceededIndexes\":null,\"SucceededCount\":1}]}: requires indexed completion mode"
            ]
        );
    }

    #[test]
    fn managed_by_is_a_domain_prefixed_path() {
        assert!(
            messages(json!({"template": pod("Never"), "managedBy": "example.com/ctl"})).is_empty()
        );
        assert_eq!(
            messages(json!({"template": pod("Never"), "managedBy": "ctl"})),
            [
                "spec.managedBy: Invalid value: \"ctl\": must be a domain-prefixed path (such as \"acme.io/foo\")"
            ]
        );
    }

    #[test]
    fn names_that_are_not_labels_warn() {
        assert_eq!(
            name_warning("nightly.backup").as_deref(),
            Some(
                "metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [must not contain dots]"
            )
        );
        assert_eq!(name_warning("nightly"), None);
    }
}
