//! CronJobs: `SetDefaults_CronJob`, `ValidateCronJobCreate` / `ValidateCronJobUpdate` (the
//! schedule, its time zone, the concurrency policy, the job template, history limits, and a
//! name short enough for the Jobs named after it) and the strategy's warnings.

use crate::strategies::{struct_field, template_pod_spec};
use apimachinery::validation::{FieldError, FieldPath, max_len_error};
use apiserver::registry::Strategy;
use serde_json::{Value, json};

use super::super::pod::default_pod_spec;
use super::super::set_default;
use super::super::workloads::{internal_json, nonnegative_if_set, present, text};
use super::cron::parse_standard;
use super::timezone::validate_time_zone;
use super::{job_spec_warnings, name_warning, validate_job_spec};

pub struct CronJobStrategy;

/// The controller names Jobs `<cronjob>-<11 characters>`, and Job names are DNS-1035 labels.
const MAX_NAME_LENGTH: usize = 63 - 11;

/// `validateScheduleFormat`: the schedule parses, and names no time zone unless an older
/// object already did (and then not together with `timeZone`).
fn validate_schedule(
    schedule: &str,
    allow_tz: bool,
    time_zone: Option<&str>,
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Err(e) = parse_standard(schedule) {
        errs.push(FieldError::invalid(path, schedule, e));
    }
    let has_tz = schedule.contains("TZ");
    if allow_tz && has_tz && time_zone.is_some() {
        errs.push(FieldError::invalid(
            path,
            schedule,
            "cannot use both timeZone field and TZ or CRON_TZ in schedule",
        ));
    } else if !allow_tz && has_tz {
        errs.push(FieldError::invalid(
            path,
            schedule,
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ));
    }
    errs
}

/// `ValidateJobTemplateSpec`: a Job spec whose selector the Job will generate.
fn validate_job_template(template: &Value, path: &FieldPath) -> Vec<FieldError> {
    let spec = template.get("spec").unwrap_or(&Value::Null);
    let spec_path = path.child("spec");
    let mut errs = validate_job_spec(spec, &spec_path);
    if let Some(selector) = present(spec, "selector") {
        errs.push(
            FieldError::invalid(
                &spec_path.child("selector"),
                selector.clone(),
                "`selector` will be auto-generated",
            )
            .with_rendered_value(internal_json("meta.v1.LabelSelector", selector)),
        );
    }
    if spec.get("manualSelector") == Some(&Value::Bool(true)) {
        errs.push(FieldError::not_supported(
            &spec_path.child("manualSelector"),
            true,
            &["nil", "false"],
        ));
    }
    errs
}

/// `validateCronJobSpec`; `old` is the spec being replaced, on update.
fn validate_spec(spec: &Value, old: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let schedule = text(spec, "schedule");
    let time_zone = present(spec, "timeZone").and_then(Value::as_str);
    if schedule.is_empty() {
        errs.push(FieldError::required(&path.child("schedule"), ""));
    } else {
        let allow_tz = old.is_some_and(|o| text(o, "schedule").contains("TZ"));
        errs.extend(validate_schedule(
            schedule,
            allow_tz,
            time_zone,
            &path.child("schedule"),
        ));
    }
    errs.extend(nonnegative_if_set(spec, "startingDeadlineSeconds", path));
    let old_zone = old
        .and_then(|o| present(o, "timeZone"))
        .and_then(Value::as_str);
    if (old.is_none() || old_zone != time_zone)
        && let Some(zone) = time_zone
    {
        errs.extend(validate_time_zone(zone, &path.child("timeZone")));
    }
    let concurrency_path = path.child("concurrencyPolicy");
    match text(spec, "concurrencyPolicy") {
        "Allow" | "Forbid" | "Replace" => {}
        "" => errs.push(FieldError::required(&concurrency_path, "")),
        other => errs.push(FieldError::not_supported(
            &concurrency_path,
            other,
            &["Allow", "Forbid", "Replace"],
        )),
    }
    errs.extend(validate_job_template(
        spec.get("jobTemplate").unwrap_or(&Value::Null),
        &path.child("jobTemplate"),
    ));
    errs.extend(nonnegative_if_set(spec, "successfulJobsHistoryLimit", path));
    errs.extend(nonnegative_if_set(spec, "failedJobsHistoryLimit", path));
    errs
}

fn name(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl Strategy for CronJobStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = struct_field(obj, "spec") else {
            return;
        };
        set_default(spec, "concurrencyPolicy", json!("Allow"));
        set_default(spec, "suspend", json!(false));
        set_default(spec, "successfulJobsHistoryLimit", json!(3));
        set_default(spec, "failedJobsHistoryLimit", json!(1));
        // Upstream defaults only the pod template of a job template and its pod failure
        // policy's condition patterns (`SetDefaults_PodFailurePolicyOnPodConditionsPattern`),
        // not its Job spec (`SetDefaults_Job` is the Job's).
        if let Some(pod) = struct_field(spec, "jobTemplate")
            .and_then(|t| struct_field(t, "spec"))
            .and_then(template_pod_spec)
        {
            default_pod_spec(pod);
        }
        if let Some(job_spec) = spec.pointer_mut("/jobTemplate/spec") {
            super::default_condition_patterns(job_spec);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        // `DropDisabledTemplateFields`.
        crate::strategies::pod::drop_disabled_template_fields(
            obj,
            "/spec/jobTemplate/spec/template",
            None,
        );
        obj["status"] = json!({});
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        crate::strategies::pod::drop_disabled_template_fields(
            new,
            "/spec/jobTemplate/spec/template",
            Some(old),
        );
    }

    /// `ValidateCronJobCreate`: the spec, then the name's length.
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = validate_spec(
            obj.get("spec").unwrap_or(&Value::Null),
            None,
            &FieldPath::new("spec"),
        );
        let name = name(obj);
        if name.len() > MAX_NAME_LENGTH {
            errs.push(FieldError::invalid(
                &FieldPath::new("metadata").child("name"),
                name,
                max_len_error(MAX_NAME_LENGTH),
            ));
        }
        errs
    }

    /// `ValidateCronJobUpdate`: the spec against the old one; longer names stay updatable.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_spec(
            new.get("spec").unwrap_or(&Value::Null),
            Some(old.get("spec").unwrap_or(&Value::Null)),
            &FieldPath::new("spec"),
        )
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        let mut warnings: Vec<String> = name_warning(name(obj)).into_iter().collect();
        warnings.extend(job_spec_warnings(
            obj.pointer("/spec/jobTemplate/spec")
                .unwrap_or(&Value::Null),
            &FieldPath::new("spec").child("jobTemplate").child("spec"),
        ));
        warnings
    }

    /// The job template's warnings when the spec changed (a new generation); then, on every
    /// update, a schedule naming a time zone (kept from an older object) is warned about, with
    /// upstream's path `spec.spec.schedule`.
    fn warnings_on_update(&self, new: &Value, old: &Value) -> Vec<String> {
        let mut warnings = Vec::new();
        if new.pointer("/metadata/generation") != old.pointer("/metadata/generation") {
            warnings.extend(job_spec_warnings(
                new.pointer("/spec/jobTemplate/spec")
                    .unwrap_or(&Value::Null),
                &FieldPath::new("spec").child("jobTemplate").child("spec"),
            ));
        }
        let schedule = new
            .pointer("/spec/schedule")
            .and_then(Value::as_str)
            .unwrap_or("");
        if schedule.contains("TZ") {
            warnings.push(
                "cannot use TZ or CRON_TZ in spec.spec.schedule, use timeZone instead, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details".to_string(),
            );
        }
        warnings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron(extra: Value, name: &str) -> Value {
        let mut spec = json!({"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        let mut o = json!({"metadata": {"name": name}, "spec": spec});
        CronJobStrategy.default(&mut o);
        o
    }

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_schedule_with_a_time_zone_warns_on_every_update() {
        let mut old = cron(json!({"schedule": "TZ=UTC 0 * * * *"}), "c");
        old["metadata"]["generation"] = json!(1);
        let new = old.clone();
        assert_eq!(
            CronJobStrategy.warnings_on_update(&new, &old),
            vec![
                "cannot use TZ or CRON_TZ in spec.spec.schedule, use timeZone instead, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details"
            ]
        );
        // An update may keep the zone the old schedule had.
        assert!(CronJobStrategy.validate_update(&new, &old).is_empty());
    }

    #[test]
    fn a_cron_job_gets_upstreams_defaults() {
        let c = cron(json!({}), "c");
        let spec = &c["spec"];
        assert_eq!(spec["concurrencyPolicy"], "Allow");
        assert_eq!(spec["suspend"], false);
        assert_eq!(spec["successfulJobsHistoryLimit"], 3);
        assert_eq!(spec["failedJobsHistoryLimit"], 1);
        let job = &spec["jobTemplate"]["spec"];
        assert_eq!(job["template"]["spec"]["dnsPolicy"], "ClusterFirst");
        assert!(job.get("backoffLimit").is_none());
        assert!(CronJobStrategy.validate(&c).is_empty());
    }

    #[test]
    fn schedules_and_names_are_checked() {
        assert_eq!(
            messages(CronJobStrategy.validate(&cron(json!({"schedule": "every minute"}), "c"))),
            [
                "spec.schedule: Invalid value: \"every minute\": expected exactly 5 fields, found 2: [every minute]"
            ]
        );
        assert_eq!(
            messages(
                CronJobStrategy.validate(&cron(json!({"schedule": "CRON_TZ=UTC 0 * * * *"}), "c"))
            ),
            [
                "spec.schedule: Invalid value: \"CRON_TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
            ]
        );
        let long = "c".repeat(53);
        assert_eq!(
            messages(CronJobStrategy.validate(&cron(json!({}), &long))),
            [format!(
                "metadata.name: Invalid value: \"{long}\": must be no more than 52 characters"
            )]
        );
        // Updates keep older long names valid.
        let old = cron(json!({}), &long);
        assert!(CronJobStrategy.validate_update(&old, &old).is_empty());
    }

    #[test]
    fn job_templates_generate_their_selector() {
        let mut c = cron(json!({}), "c");
        c["spec"]["jobTemplate"]["spec"]["selector"] = json!({"matchLabels": {"a": "b"}});
        c["spec"]["jobTemplate"]["spec"]["manualSelector"] = json!(true);
        assert_eq!(
            messages(CronJobStrategy.validate(&c)),
            [
                "spec.jobTemplate.spec.selector: Invalid value: {\"matchLabels\":{\"a\":\"b\"}}: `selector` will be auto-generated",
                "spec.jobTemplate.spec.manualSelector: Unsupported value: true: supported values: \"nil\", \"false\""
            ]
        );
    }

    #[test]
    fn time_zones_are_checked_when_set_or_changed() {
        let c = cron(json!({"timeZone": "Mars/Olympus"}), "c");
        assert_eq!(
            messages(CronJobStrategy.validate(&c)),
            ["spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus"]
        );
        // An unchanged zone is not checked again on update.
        assert!(CronJobStrategy.validate_update(&c, &c).is_empty());
    }

    #[test]
    fn dotted_names_warn() {
        assert_eq!(
            CronJobStrategy.warnings_on_create(&cron(json!({}), "nightly.backup")),
            [
                "metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [must not contain dots]"
            ]
        );
    }
}
