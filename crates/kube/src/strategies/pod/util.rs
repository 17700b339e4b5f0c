//! Small readers of a pod's JSON as upstream's Go structs see it: a missing field, `null` and the
//! zero value are the same thing, so every reader here answers the zero value for all three.

pub(super) use crate::strategies::fields::{
    bool_at as flag, int_at as int, list_at as list, opt_int, opt_str as opt_text, str_at as text,
};
use apimachinery::quantity::Quantity;
use serde_json::{Map, Value};

/// A field that is set to something other than null (Go's non-nil pointer).
pub(super) fn present(v: &Value, field: &str) -> bool {
    v.get(field).is_some_and(|x| !x.is_null())
}

/// An object field that is set.
pub(super) fn object<'a>(v: &'a Value, field: &str) -> Option<&'a Value> {
    v.get(field).filter(|x| x.is_object())
}

/// The elements of a list field, with their indexes; none when absent.
pub(super) fn items<'a>(v: &'a Value, field: &str) -> impl Iterator<Item = (usize, &'a Value)> {
    list(v, field).iter().enumerate()
}

/// The strings of a list field (non-strings skipped).
pub(super) fn strings<'a>(v: &'a Value, field: &str) -> Vec<&'a str> {
    list(v, field).iter().filter_map(Value::as_str).collect()
}

static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

/// A map field (labels, resource lists); empty when absent. Keys come sorted, which stands for
/// Go's map order wherever upstream iterates a map.
pub(super) fn map<'a>(v: &'a Value, field: &str) -> &'a Map<String, Value> {
    v.get(field).and_then(Value::as_object).unwrap_or(&EMPTY)
}

/// A quantity as JSON holds it: a string, or a number (which Go's decoder accepts too).
pub(super) fn quantity(v: &Value) -> Option<Quantity> {
    match v {
        Value::String(s) => Quantity::parse(s).ok(),
        Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
        _ => None,
    }
}

/// The containers of every kind with their paths, as upstream's `VisitContainersWithPath`:
/// init containers, then containers, then ephemeral containers.
pub(super) fn visit_containers<'a>(
    spec: &'a Value,
    path: &apimachinery::validation::FieldPath,
) -> Vec<(&'a Value, apimachinery::validation::FieldPath)> {
    let mut out = Vec::new();
    for kind in ["initContainers", "containers", "ephemeralContainers"] {
        let p = path.child(kind);
        for (i, c) in items(spec, kind) {
            out.push((c, p.index(i)));
        }
    }
    out
}

/// `UpdatePodCondition` on a pod's status object: the first condition of the same type is
/// replaced where it is (keeping its transition time when its status does not change), else
/// the condition is added. `condition` carries `now` as its transition time.
pub(super) fn update_pod_condition(status: &mut Value, mut condition: Value) {
    if !status.is_object() {
        *status = Value::Object(Map::new());
    }
    let kind = condition["type"].clone();
    let conditions = status
        .as_object_mut()
        .map(|s| s.entry("conditions").or_insert(Value::Array(Vec::new())));
    let Some(list) = conditions else {
        return;
    };
    if !list.is_array() {
        *list = Value::Array(Vec::new());
    }
    let Some(list) = list.as_array_mut() else {
        return;
    };
    match list.iter_mut().find(|c| c["type"] == kind) {
        Some(old) => {
            if old["status"] == condition["status"] {
                condition["lastTransitionTime"] = old
                    .get("lastTransitionTime")
                    .cloned()
                    .unwrap_or(Value::Null);
            }
            *old = condition;
        }
        None => list.push(condition),
    }
}
