//! Event rows, for both `v1` Events and `events.k8s.io/v1` Events: the same upstream print function
//! serves both (they are one resource in storage), so each version's field names are mapped onto
//! the one set of rules.
//!
//! Columns: Last Seen, Type, Reason, Object, Subobject, Source, Message, First Seen, Count, Name.

use apimachinery::object::ObjectExt;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::field::{at, int_at, str_at};
use super::format::{since, time_at};

/// Where each field the printer reads sits in one version of Event.
struct EventFields {
    involved_object: &'static str,
    source: &'static str,
    reporting_controller: &'static str,
    first_timestamp: &'static str,
    last_timestamp: &'static str,
    count: &'static str,
    message: &'static str,
}

const CORE: EventFields = EventFields {
    involved_object: "involvedObject",
    source: "source",
    reporting_controller: "reportingComponent",
    first_timestamp: "firstTimestamp",
    last_timestamp: "lastTimestamp",
    count: "count",
    message: "message",
};

const EVENTS_V1: EventFields = EventFields {
    involved_object: "regarding",
    source: "deprecatedSource",
    reporting_controller: "reportingController",
    first_timestamp: "deprecatedFirstTimestamp",
    last_timestamp: "deprecatedLastTimestamp",
    count: "deprecatedCount",
    message: "note",
};

pub(super) fn core_event(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    event(obj, now, &CORE)
}

pub(super) fn events_v1_event(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    event(obj, now, &EVENTS_V1)
}

fn event(obj: &Value, now: DateTime<Utc>, f: &EventFields) -> Vec<Value> {
    // New-style events carry only eventTime; old-style ones first/last timestamps.
    let first = match time_at(obj, &[f.first_timestamp]) {
        Some(t) => since(Some(t), now),
        None => since(time_at(obj, &["eventTime"]), now),
    };
    let mut last = match time_at(obj, &[f.last_timestamp]) {
        Some(t) => since(Some(t), now),
        None => first.clone(),
    };
    let mut count = int_at(obj, &[f.count]);
    if let Some(series) = at(obj, &["series"]) {
        last = since(time_at(series, &["lastObservedTime"]), now);
        count = int_at(series, &["count"]);
    } else if count == 0 {
        // Singleton events of the new API have no count.
        count = 1;
    }
    let involved = f.involved_object;
    let kind = str_at(obj, &[involved, "kind"]).to_lowercase();
    let name = str_at(obj, &[involved, "name"]);
    let target = if name.is_empty() {
        kind
    } else {
        format!("{kind}/{name}")
    };
    let component = first_non_empty(
        str_at(obj, &[f.source, "component"]),
        str_at(obj, &[f.reporting_controller]),
    );
    let host = first_non_empty(
        str_at(obj, &[f.source, "host"]),
        str_at(obj, &["reportingInstance"]),
    );
    let source = if host.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {host}")
    };
    cells![
        last,
        str_at(obj, &["type"]),
        str_at(obj, &["reason"]),
        target,
        str_at(obj, &[involved, "fieldPath"]),
        source,
        str_at(obj, &[f.message]).trim(),
        first,
        count,
        obj.name(),
    ]
}

fn first_non_empty<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.is_empty() { b } else { a }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2025-06-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn old_style_core_event() {
        let ev = json!({
            "metadata": {"name": "p1.17f"}, "type": "Warning", "reason": "BackOff",
            "involvedObject": {"kind": "Pod", "name": "p1", "fieldPath": "spec.containers{a}"},
            "source": {"component": "kubelet", "host": "n1"}, "message": " Back-off restarting \n",
            "firstTimestamp": "2025-06-01T11:00:00Z", "lastTimestamp": "2025-06-01T11:58:00Z", "count": 7
        });
        assert_eq!(
            core_event(&ev, now()),
            vec![
                json!("2m"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/p1"),
                json!("spec.containers{a}"),
                json!("kubelet, n1"),
                json!("Back-off restarting"),
                json!("60m"),
                json!(7),
                json!("p1.17f")
            ]
        );
    }

    #[test]
    fn core_event_without_times_or_count() {
        // As recorded upstream after defaulting: every time null, source empty.
        let ev = json!({"metadata": {"name": "ev"}, "type": "Normal", "reason": "Test", "message": "m",
            "involvedObject": {"kind": "Pod", "name": "p1", "namespace": "golden"},
            "eventTime": null, "firstTimestamp": null, "lastTimestamp": null,
            "reportingComponent": "", "reportingInstance": "", "source": {}});
        assert_eq!(
            core_event(&ev, now()),
            vec![
                json!("<unknown>"),
                json!("Normal"),
                json!("Test"),
                json!("pod/p1"),
                json!(""),
                json!(""),
                json!("m"),
                json!("<unknown>"),
                json!(1),
                json!("ev")
            ]
        );
    }

    #[test]
    fn new_style_events_v1_event_with_series() {
        let ev = json!({
            "metadata": {"name": "ev2"}, "type": "Normal", "reason": "R", "note": "n",
            "regarding": {"kind": "Node"}, "reportingController": "golden/x", "reportingInstance": "i",
            "eventTime": "2025-06-01T11:00:00.000000Z", "deprecatedSource": {},
            "series": {"count": 4, "lastObservedTime": "2025-06-01T11:59:30.500000Z"}
        });
        assert_eq!(
            events_v1_event(&ev, now()),
            vec![
                json!("29s"),
                json!("Normal"),
                json!("R"),
                json!("node"),
                json!(""),
                json!("golden/x, i"),
                json!("n"),
                json!("60m"),
                json!(4),
                json!("ev2")
            ]
        );
    }
}
