//! Pod fields of features that are off by default in v1.36 (upstream's `dropDisabledFields`
//! in pkg/api/pod/util.go): a new pod or template loses them unless the object being updated
//! already used them. Features on by default (or GA) keep their fields and are not listed.

use apimachinery::object::JsonPointer;
use serde_json::Value;

use super::util::visit_containers;

/// Projected volume sources behind a feature gate that is off: ClusterTrustBundleProjection
/// (beta, off) and PodCertificateRequest (beta, off).
const GATED_PROJECTIONS: &[&str] = &["clusterTrustBundle", "podCertificate"];

fn projected_sources(spec: &Value) -> impl Iterator<Item = &Value> {
    spec.get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.at("/projected/sources").and_then(Value::as_array))
        .flatten()
}

fn uses_projection(spec: Option<&Value>, kind: &str) -> bool {
    spec.is_some_and(|s| {
        projected_sources(s).any(|src| src.get(kind).is_some_and(|v| !v.is_null()))
    })
}

/// ContainerStopSignals (alpha, off): `lifecycle.stopSignal` of any container.
fn uses_stop_signal(spec: Option<&Value>) -> bool {
    spec.is_some_and(|s| {
        visit_containers(s, &apimachinery::validation::FieldPath::new(""))
            .iter()
            .any(|(c, _)| c.at("/lifecycle/stopSignal").is_some_and(|v| !v.is_null()))
    })
}

/// `dropDisabledFields` for the pod spec `spec`, given the spec being updated (`old`).
pub fn drop_disabled_fields(spec: &mut Value, old: Option<&Value>) {
    if !spec.is_object() {
        return;
    }
    for kind in GATED_PROJECTIONS {
        if uses_projection(old, kind) {
            continue;
        }
        for v in spec
            .get_mut("volumes")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            for src in v
                .pointer_mut("/projected/sources")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(m) = src.as_object_mut() {
                    m.remove(*kind);
                }
            }
        }
    }
    if !uses_stop_signal(old) {
        for list in ["initContainers", "containers", "ephemeralContainers"] {
            for c in spec
                .get_mut(list)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                let Some(lifecycle) = c.get_mut("lifecycle").and_then(Value::as_object_mut) else {
                    continue;
                };
                if lifecycle.remove("stopSignal").is_some()
                    && lifecycle.values().all(Value::is_null)
                    && let Some(m) = c.as_object_mut()
                {
                    // An emptied lifecycle is dropped as a whole, as upstream does.
                    m.remove("lifecycle");
                }
            }
        }
    }
    // GenericWorkload (alpha, off): the pod's scheduling group.
    let group_in_use = old
        .and_then(|o| o.get("schedulingGroup"))
        .is_some_and(|g| !g.is_null());
    if !group_in_use && let Some(m) = spec.as_object_mut() {
        m.remove("schedulingGroup");
    }
}

/// `DropDisabledTemplateFields` for the pod template at `pointer` of `obj` (a workload's
/// `/spec/template`), given the object being updated.
pub fn drop_disabled_template_fields(obj: &mut Value, pointer: &str, old: Option<&Value>) {
    let spec_pointer = format!("{pointer}/spec");
    let old_spec = old.and_then(|o| o.at(&spec_pointer)).cloned();
    if let Some(spec) = obj.pointer_mut(&spec_pointer) {
        drop_disabled_fields(spec, old_spec.as_ref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_of_disabled_features_are_dropped_unless_in_use() {
        let mut spec = json!({
            "schedulingGroup": {"podGroupName": "g"},
            "containers": [{"name": "c", "lifecycle": {"stopSignal": "SIGTERM"}},
                           {"name": "d", "lifecycle": {"stopSignal": "SIGTERM", "preStop": {"sleep": {"seconds": 1}}}}],
            "volumes": [{"name": "v", "projected": {"sources": [
                {"clusterTrustBundle": {"name": "b", "path": "p"}},
                {"podCertificate": {"signerName": "a/b", "keyType": "RSA3072", "credentialBundlePath": "c"}}]}}]});
        let old = spec.clone();
        let mut kept = spec.clone();
        drop_disabled_fields(&mut spec, None);
        assert_eq!(
            spec,
            json!({"containers": [{"name": "c"}, {"name": "d", "lifecycle": {"preStop": {"sleep": {"seconds": 1}}}}],
                   "volumes": [{"name": "v", "projected": {"sources": [{}, {}]}}]})
        );
        drop_disabled_fields(&mut kept, Some(&old));
        assert_eq!(kept, old);
    }
}
