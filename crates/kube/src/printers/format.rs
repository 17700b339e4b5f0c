//! The text forms that many printers share, kept exactly as upstream writes them: human durations
//! (`k8s.io/apimachinery/pkg/util/duration.HumanDuration`), ages, label sets and label selectors,
//! container lists, quantities and the "a,b,c + 2 more..." lists.
//!
//! Nothing here knows a kind; the per-kind printers pick fields and call these.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::field::{list_at, map_at, opt_str, str_at, strings_at};

pub use apimachinery::duration::human_duration;

/// The time at `path`; `None` when absent, unparsable or Go's zero time (what `IsZero` reports).
pub(super) fn time_at(obj: &Value, path: &[&str]) -> Option<DateTime<Utc>> {
    let text = opt_str(obj, path)?;
    let t = DateTime::parse_from_rfc3339(text).ok()?.with_timezone(&Utc);
    // Go's zero time is 0001-01-01T00:00:00Z; a stored value equal to it still reads as unset.
    (t.timestamp() != -62_135_596_800 || t.timestamp_subsec_nanos() != 0).then_some(t)
}

/// Upstream's `translateTimestampSince`: "<unknown>" for an unset time, else the human duration
/// from `t` to `now`.
pub(super) fn since(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match t {
        None => "<unknown>".to_string(),
        Some(t) => human_duration(now - t),
    }
}

/// The Age cell: how long ago the object was created.
pub(super) fn age(obj: &Value, now: DateTime<Utc>) -> String {
    since(time_at(obj, &["metadata", "creationTimestamp"]), now)
}

/// A time in Go's `time.RFC3339` layout in UTC, with Go's zero time for an unset one: the "Created
/// At" cell of the default table.
pub(super) fn rfc3339(t: Option<DateTime<Utc>>) -> String {
    match t {
        None => "0001-01-01T00:00:00Z".to_string(),
        Some(t) => t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
    }
}

/// `labels.FormatLabels`: "k=v" pairs sorted as whole strings and joined by commas, or "<none>".
pub(super) fn format_labels(labels: Option<&Map<String, Value>>) -> String {
    // Upstream sorts the joined "k=v" strings, not the keys: "a.b=1" sorts before "a=1".
    let mut pairs: Vec<String> = labels
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".to_string()
    } else {
        pairs.join(",")
    }
}

/// The text of `metav1.LabelSelectorAsSelector(sel).String()`: requirements sorted by key and
/// joined by commas; "" for a nil or empty selector. `None` when the selector cannot be converted
/// (an unknown operator, or values that do not fit the operator).
pub(super) fn label_selector_string(sel: Option<&Value>) -> Option<String> {
    let Some(sel) = sel else {
        return Some(String::new());
    };
    let mut requirements: Vec<(&str, String)> = Vec::new();
    for (key, value) in map_at(sel, &["matchLabels"]).into_iter().flatten() {
        requirements.push((key, format!("{key}={}", value.as_str().unwrap_or(""))));
    }
    for expr in list_at(sel, &["matchExpressions"]) {
        let key = str_at(expr, &["key"]);
        let mut values = strings_at(expr, &["values"]);
        let text = match str_at(expr, &["operator"]) {
            op @ ("In" | "NotIn") => {
                if values.is_empty() {
                    return None;
                }
                values.sort_unstable();
                let word = if op == "In" { "in" } else { "notin" };
                format!("{key} {word} ({})", values.join(","))
            }
            "Exists" if values.is_empty() => key.to_string(),
            "DoesNotExist" if values.is_empty() => format!("!{key}"),
            _ => return None,
        };
        requirements.push((key, text));
    }
    // Upstream sorts requirements by key when it builds the selector.
    requirements.sort_by(|a, b| a.0.cmp(b.0));
    let texts: Vec<String> = requirements.into_iter().map(|(_, t)| t).collect();
    Some(texts.join(","))
}

/// `metav1.FormatLabelSelector`: the selector's text, "<none>" when it selects everything or
/// nothing, "<error>" when it cannot be converted.
pub(super) fn format_label_selector(sel: Option<&Value>) -> String {
    match label_selector_string(sel) {
        None => "<error>".to_string(),
        Some(text) if text.is_empty() => "<none>".to_string(),
        Some(text) => text,
    }
}

/// The generated Go `String()` of a `*metav1.LabelSelector` (a struct dump), which upstream prints
/// for a policy binding whose `paramRef` has a selector and no name.
pub(super) fn label_selector_go_string(sel: &Value) -> String {
    let mut labels: Vec<(&String, &str)> = map_at(sel, &["matchLabels"])
        .into_iter()
        .flatten()
        .map(|(k, v)| (k, v.as_str().unwrap_or("")))
        .collect();
    labels.sort();
    let labels: String = labels.iter().map(|(k, v)| format!("{k}: {v},")).collect();
    let expressions: String = list_at(sel, &["matchExpressions"])
        .iter()
        .map(|e| {
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                str_at(e, &["key"]),
                str_at(e, &["operator"]),
                strings_at(e, &["values"]).join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )
}

/// Container names and images, each joined by commas (upstream's `layoutContainerCells`).
pub(super) fn container_cells(containers: &[Value]) -> (String, String) {
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, &["image"])).collect();
    (names.join(","), images.join(","))
}

/// A short list with the count of what did not fit: "a,b,c + 2 more...", or "<unset>" when empty
/// (upstream's `listWithMoreString`).
pub(super) fn list_with_more(list: &[String], more: bool, count: usize, max: usize) -> String {
    let joined = list.join(",");
    if more {
        return format!("{joined} + {} more...", count.saturating_sub(max));
    }
    if joined.is_empty() {
        "<unset>".to_string()
    } else {
        joined
    }
}

/// A resource quantity as stored; `None` when absent (callers print Go's zero "0" or a nil
/// pointer's "<nil>", as upstream does in each place).
///
/// Upstream prints the canonical form of the parsed quantity; objects reach the printers already
/// canonicalized by their strategies, so the stored text is printed as it is.
pub(super) fn quantity(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// An int-or-string value (`intstr.IntOrString.String()`).
pub(super) fn int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// Upstream's `printBoolPtr`: "True", "False" or "<unset>".
pub(super) fn bool_ptr(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    }
}

/// `net.JoinHostPort`: IPv6 hosts are bracketed.
pub(super) fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The load-balancer ingress points of a Service or Ingress: each IP, else hostname, sorted and
/// without duplicates, joined by commas. Tables are generated wide, so nothing is clipped.
pub(super) fn load_balancer_ingress(ingress: &[Value]) -> String {
    let mut points: Vec<&str> = ingress
        .iter()
        .filter_map(|i| {
            let ip = str_at(i, &["ip"]);
            let hostname = str_at(i, &["hostname"]);
            if !ip.is_empty() {
                Some(ip)
            } else if !hostname.is_empty() {
                Some(hostname)
            } else {
                None
            }
        })
        .collect();
    points.sort_unstable();
    points.dedup();
    points.join(",")
}

/// Persistent volume access modes in upstream's fixed order, without duplicates: "RWO,ROX,RWX,RWOP".
pub(super) fn access_modes(modes: &[Value]) -> String {
    let modes: Vec<&str> = modes.iter().filter_map(Value::as_str).collect();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| modes.contains(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_and_ages() {
        let now = DateTime::parse_from_rfc3339("2025-01-01T00:10:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let o = json!({"metadata": {"creationTimestamp": "2025-01-01T00:00:00Z"}});
        assert_eq!(age(&o, now), "10m");
        assert_eq!(age(&json!({}), now), "<unknown>");
        let bad = json!({"metadata": {"creationTimestamp": "<creationTimestamp>"}});
        assert_eq!(age(&bad, now), "<unknown>");
        let zero = json!({"t": "0001-01-01T00:00:00Z"});
        assert_eq!(time_at(&zero, &["t"]), None);
        assert_eq!(rfc3339(None), "0001-01-01T00:00:00Z");
        let micro = json!({"t": "2025-01-01T01:00:00.123456+01:00"});
        assert_eq!(rfc3339(time_at(&micro, &["t"])), "2025-01-01T00:00:00Z");
    }

    #[test]
    fn labels_sort_as_joined_pairs() {
        let labels = json!({"a": "1", "a.b": "2", "c": "3"});
        assert_eq!(format_labels(labels.as_object()), "a.b=2,a=1,c=3");
        assert_eq!(format_labels(None), "<none>");
        assert_eq!(format_labels(json!({}).as_object()), "<none>");
    }

    #[test]
    fn label_selectors() {
        let sel = json!({
            "matchLabels": {"tier": "web", "app": "x"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                {"key": "zone", "operator": "NotIn", "values": ["a"]},
                {"key": "b", "operator": "Exists"},
                {"key": "c", "operator": "DoesNotExist"}
            ]
        });
        assert_eq!(
            format_label_selector(Some(&sel)),
            "app=x,b,!c,env in (dev,prod),tier=web,zone notin (a)"
        );
        assert_eq!(format_label_selector(None), "<none>");
        assert_eq!(format_label_selector(Some(&json!({}))), "<none>");
        let bad = json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]});
        assert_eq!(format_label_selector(Some(&bad)), "<error>");
        let bad = json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]});
        assert_eq!(label_selector_string(Some(&bad)), None);
        assert_eq!(label_selector_string(None).as_deref(), Some(""));
    }

    #[test]
    fn label_selector_go_dump() {
        let sel = json!({
            "matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [{"key": "k", "operator": "In", "values": ["x", "y"]}]
        });
        assert_eq!(
            label_selector_go_string(&sel),
            "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:k,Operator:In,Values:[x y],},},}"
        );
    }

    #[test]
    fn small_formats() {
        let containers =
            json!([{"name": "a", "image": "nginx"}, {"name": "b", "image": "busybox"}]);
        let (names, images) = container_cells(containers.as_array().unwrap());
        assert_eq!((names.as_str(), images.as_str()), ("a,b", "nginx,busybox"));
        let list = vec!["1".to_string(), "2".to_string(), "3".to_string()];
        assert_eq!(list_with_more(&list, true, 5, 3), "1,2,3 + 2 more...");
        assert_eq!(list_with_more(&[], false, 0, 3), "<unset>");
        assert_eq!(join_host_port("fd00::1", 80), "[fd00::1]:80");
        assert_eq!(join_host_port("10.0.0.1", 80), "10.0.0.1:80");
        let lb = json!([{"ip": "2.2.2.2"}, {"hostname": "a.example"}, {"ip": "1.1.1.1"}, {"ip": "2.2.2.2"}]);
        assert_eq!(
            load_balancer_ingress(lb.as_array().unwrap()),
            "1.1.1.1,2.2.2.2,a.example"
        );
        let modes = json!(["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"]);
        assert_eq!(access_modes(modes.as_array().unwrap()), "RWO,RWX");
        assert_eq!(quantity(Some(&json!("1Gi"))).as_deref(), Some("1Gi"));
        assert_eq!(quantity(Some(&json!(5))).as_deref(), Some("5"));
        assert_eq!(int_or_string(&json!("50%")), "50%");
        assert_eq!(int_or_string(&json!(2)), "2");
        assert_eq!(bool_ptr(None), "<unset>");
    }
}
