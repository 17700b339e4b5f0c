//! Events, served as core/v1 (the storage version) and events.k8s.io/v1: one stored object, two
//! views (upstream stores events once, in core's form, and converts: pkg/apis/events/v1/conversion.go).
//! events.k8s.io renames `message` to `note`, `involvedObject` to `regarding`,
//! `reportingComponent` to `reportingController`, and keeps the legacy `source`, timestamps and
//! count as `deprecated*` fields.
//!
//! Validation (pkg/apis/core/validation/events.go) is the same legacy check for both, on core's
//! field names; events.k8s.io adds the strict rules (eventTime required, type Normal or
//! Warning, no legacy fields, a series of at least two) and, on update, immutability of what
//! an event says.

use apimachinery::validation::{FieldError, FieldPath, NameValidator, is_qualified_name};
use apiserver::registry::{Strategy, SyncConversion};
use serde_json::{Map, Value, json};

use super::nodeselection::str_of;

pub struct EventStrategy {
    /// Whether this is the events.k8s.io/v1 view (else core/v1).
    pub events_api: bool,
}

/// core/v1 field ↔ events.k8s.io/v1 field, for the fields that are renamed.
const RENAMED: &[(&str, &str)] = &[
    ("message", "note"),
    ("involvedObject", "regarding"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// Fields with the same name in both versions.
const SHARED: &[&str] = &[
    "metadata",
    "eventTime",
    "series",
    "reportingInstance",
    "action",
    "reason",
    "related",
    "type",
];

const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

/// Converts between the two forms; `to_events` picks the direction. What the other version has
/// no field for is dropped, as Go's conversion does.
fn convert(obj: &Value, to_events: bool) -> Value {
    let mut out = Map::new();
    let (api_version, pairs): (&str, Vec<(&str, &str)>) = if to_events {
        ("events.k8s.io/v1", RENAMED.to_vec())
    } else {
        ("v1", RENAMED.iter().map(|(a, b)| (*b, *a)).collect())
    };
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    for f in SHARED {
        if let Some(v) = obj.get(*f) {
            out.insert((*f).into(), v.clone());
        }
    }
    for (from, to) in pairs {
        if let Some(v) = obj.get(from) {
            out.insert(to.into(), v.clone());
        }
    }
    let mut v = Value::Object(out);
    go_form(&mut v);
    v
}

/// The object as Go's encoder writes its type (zero values of non-omitempty fields filled).
fn go_form(obj: &mut Value) {
    if let Ok(go) = ironplane_protobuf::go_form(obj) {
        *obj = go;
    }
}

/// events.k8s.io/v1 over core/v1 storage.
pub struct EventsV1Conversion;

impl SyncConversion for EventsV1Conversion {
    fn to_served(&self, obj: Value) -> Value {
        convert(&obj, true)
    }

    fn to_storage(&self, obj: Value) -> Value {
        convert(&obj, false)
    }
}

/// Whether a timestamp is Go's zero time (unset).
fn is_zero_time(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty() || s.starts_with("0001-01-01T00:00:00"),
        Some(_) => false,
    }
}

fn len_of(event: &Value, field: &str) -> usize {
    str_of(event, field).len()
}

/// `legacyValidateEvent`, on core's form; a core/v1 request names the controller field
/// `reportingComponent`, events.k8s.io `reportingController`.
fn legacy(event: &Value, events_api: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let namespace = event
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let involved_ns = event
        .pointer("/involvedObject/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let ns_path = FieldPath::new("involvedObject").child("namespace");
    const MISMATCH: &str = "does not match event.namespace";
    if is_zero_time(event.get("eventTime")) {
        let mismatch = if involved_ns.is_empty() {
            !namespace.is_empty() && namespace != "default"
        } else {
            namespace != involved_ns
        };
        if mismatch {
            errs.push(FieldError::invalid(&ns_path, involved_ns, MISMATCH));
        }
    } else {
        if involved_ns.is_empty() && namespace != "default" && namespace != "kube-system" {
            errs.push(FieldError::invalid(&ns_path, involved_ns, MISMATCH));
        }
        let controller = str_of(event, "reportingComponent");
        let controller_path = FieldPath::new(if events_api {
            "reportingController"
        } else {
            "reportingComponent"
        });
        if controller.is_empty() {
            errs.push(FieldError::required(&controller_path, ""));
        }
        for m in is_qualified_name(controller) {
            errs.push(FieldError::invalid(&controller_path, controller, m));
        }
        let limited = [
            ("reportingInstance", REPORTING_INSTANCE_LIMIT, true),
            ("action", ACTION_LIMIT, true),
            ("reason", REASON_LIMIT, true),
            ("message", NOTE_LIMIT, false),
        ];
        for (field, limit, required) in limited {
            let path = FieldPath::new(field);
            if required && len_of(event, field) == 0 {
                errs.push(FieldError::required(&path, ""));
            }
            if len_of(event, field) > limit {
                errs.push(FieldError::invalid(
                    &path,
                    "",
                    format!("can have at most {limit} characters"),
                ));
            }
        }
    }
    for m in NameValidator::Dns1123Subdomain.validate(namespace, false) {
        errs.push(FieldError::invalid(
            &FieldPath::new("namespace"),
            namespace,
            m,
        ));
    }
    errs
}

/// `validateV1EventSeries`.
fn series(event: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(series) = event.get("series").filter(|s| !s.is_null()) {
        if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            errs.push(FieldError::invalid(
                &FieldPath::new("series.count"),
                "",
                "should be at least 2",
            ));
        }
        if is_zero_time(series.get("lastObservedTime")) {
            errs.push(FieldError::required(
                &FieldPath::new("series.lastObservedTime"),
                "",
            ));
        }
    }
    errs
}

/// The strict rules of events.k8s.io on create (after the legacy ones).
fn strict_create(event: &Value) -> Vec<FieldError> {
    let mut errs = series(event);
    if is_zero_time(event.get("eventTime")) {
        errs.push(FieldError::required(&FieldPath::new("eventTime"), ""));
    }
    let ty = str_of(event, "type");
    if ty != "Normal" && ty != "Warning" {
        errs.push(FieldError::invalid(
            &FieldPath::new("type"),
            "",
            format!("has invalid value: {ty}"),
        ));
    }
    for field in ["firstTimestamp", "lastTimestamp"] {
        if !is_zero_time(event.get(field)) {
            errs.push(FieldError::invalid(
                &FieldPath::new(field),
                "",
                "needs to be unset",
            ));
        }
    }
    if event.get("count").and_then(Value::as_i64).unwrap_or(0) != 0 {
        errs.push(FieldError::invalid(
            &FieldPath::new("count"),
            "",
            "needs to be unset",
        ));
    }
    let source = event.get("source").unwrap_or(&Value::Null);
    if !str_of(source, "component").is_empty() || !str_of(source, "host").is_empty() {
        errs.push(FieldError::invalid(
            &FieldPath::new("source"),
            "",
            "needs to be unset",
        ));
    }
    errs
}

/// The fields an events.k8s.io update may not change, in upstream's order (reason twice).
const IMMUTABLE: &[&str] = &[
    "involvedObject",
    "reason",
    "message",
    "source",
    "firstTimestamp",
    "lastTimestamp",
    "count",
    "reason",
    "type",
    "eventTime",
    "action",
    "related",
    "reportingComponent",
    "reportingInstance",
];

/// The name upstream reports for a core field (its Go path is core's, except the controller).
fn reported(field: &str) -> &str {
    if field == "reportingComponent" {
        "reportingController"
    } else {
        field
    }
}

impl EventStrategy {
    /// The event in core's form, as upstream validates the internal object.
    fn core(&self, obj: &Value) -> Value {
        if self.events_api {
            convert(obj, false)
        } else {
            obj.clone()
        }
    }
}

impl Strategy for EventStrategy {
    /// Both views validate core's internal `Event`.
    fn internal_group(&self) -> Option<&'static str> {
        Some("")
    }

    /// Core events keep only upstream's generic name rule (a path segment); events.k8s.io
    /// checks a DNS subdomain.
    fn name_validator(&self) -> NameValidator {
        if self.events_api {
            NameValidator::Dns1123Subdomain
        } else {
            NameValidator::PathSegment
        }
    }

    /// Upstream's `ValidateEventCreate` checks no metadata for core/v1 requests: the generic
    /// check of `BeforeCreate` (no finalizer name rules) runs only once the event passed. An
    /// events.k8s.io request runs core's `ValidateObjectMeta` (finalizer names too) between
    /// the legacy and the strict rules.
    fn create_errors(&self, obj: &Value, meta: Vec<FieldError>) -> Vec<FieldError> {
        let event = self.core(obj);
        let mut errs = legacy(&event, self.events_api);
        if !self.events_api {
            return if errs.is_empty() { meta } else { errs };
        }
        errs.extend(meta);
        errs.extend(strict_create(&event));
        errs
    }

    /// Core's finalizer name rule comes with core's `ValidateObjectMeta(Update)`, which only
    /// events.k8s.io requests run.
    fn checks_kube_finalizer_names(&self) -> bool {
        self.events_api
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let event = self.core(obj);
        let mut errs = legacy(&event, self.events_api);
        if self.events_api {
            errs.extend(strict_create(&event));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let event = self.core(new);
        let mut errs = legacy(&event, self.events_api);
        if !self.events_api {
            return errs;
        }
        let old = self.core(old);
        if event.get("series") != old.get("series") {
            errs.extend(series(&event));
        }
        for field in IMMUTABLE {
            let n = event.get(*field).cloned().unwrap_or(Value::Null);
            if Some(&n) != old.get(*field) && !(n.is_null() && old.get(*field).is_none()) {
                let rendered = match *field {
                    // Structs print as Go's internal types.
                    "involvedObject" | "source" | "related" => ironplane_protobuf::go_struct_json(
                        if *field == "source" {
                            "core.v1.EventSource"
                        } else {
                            "core.v1.ObjectReference"
                        },
                        &n,
                        ironplane_protobuf::GoStyle::Internal,
                    ),
                    _ => None,
                };
                let mut err =
                    FieldError::invalid(&FieldPath::new(reported(field)), n, "field is immutable");
                if let Some(r) = rendered {
                    err = err.with_rendered_value(r);
                }
                errs.push(err);
            }
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1_event() -> Value {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "ns"},
            "eventTime": "2024-01-01T00:00:00.000000Z",
            "reportingController": "example.com/ctl", "reportingInstance": "ctl-1",
            "action": "Scale", "reason": "Scaled", "type": "Normal", "note": "scaled",
            "regarding": {"kind": "Deployment", "namespace": "ns", "name": "d"}})
    }

    #[test]
    fn the_two_views_convert_both_ways() {
        let core = EventsV1Conversion.to_storage(v1_event());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["message"], "scaled");
        assert_eq!(core["reportingComponent"], "example.com/ctl");
        assert_eq!(core["involvedObject"]["name"], "d");
        let back = EventsV1Conversion.to_served(core);
        assert_eq!(back["note"], "scaled");
        assert_eq!(back["regarding"]["kind"], "Deployment");
        assert_eq!(back["reportingController"], "example.com/ctl");
        assert!(back.get("message").is_none());
    }

    #[test]
    fn events_api_is_strict_and_reports_core_names() {
        let s = EventStrategy { events_api: true };
        let mut e = v1_event();
        assert!(s.validate(&e).is_empty());
        e["note"] = json!("n".repeat(1025));
        assert_eq!(
            s.validate(&e)[0].to_string(),
            "message: Invalid value: \"\": can have at most 1024 characters"
        );
        let mut e = v1_event();
        e.as_object_mut().unwrap().remove("eventTime");
        let errs = s.validate(&e);
        assert_eq!(
            errs.last().unwrap().to_string(),
            "eventTime: Required value"
        );
    }

    #[test]
    fn core_events_are_lenient() {
        let s = EventStrategy { events_api: false };
        let e = json!({"metadata": {"name": "e", "namespace": "ns"}, "type": "Fatal",
            "involvedObject": {"namespace": "other"}});
        assert_eq!(
            s.validate(&e)[0].to_string(),
            "involvedObject.namespace: Invalid value: \"other\": does not match event.namespace"
        );
    }
}
