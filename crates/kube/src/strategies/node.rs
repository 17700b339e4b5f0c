//! Nodes (upstream: `SetDefaults_NodeStatus`, the v1 `NodeSpec` conversion, `ValidateNode` and
//! `ValidateNodeUpdate` of pkg/apis/core/validation, pkg/registry/core/node/strategy.go).
//!
//! Unlike other kinds, a node may set its status on create. Allocatable defaults to capacity;
//! `podCIDR` and `podCIDRs` agree (the first CIDR is the single one); pod CIDRs and the provider
//! ID are set once; the removed dynamic kubelet config (`configSource`) is dropped from new
//! nodes. Taints are validated under `metadata.taints`, as upstream reports them.

use apimachinery::validation::{
    FieldError, FieldPath, get_warnings_for_cidr, go_quote, is_valid_cidr_for_legacy_field,
};
use apiserver::registry::Strategy;
use ironplane_protobuf::{GoStyle, go_struct_json};
use serde_json::{Value, json};

use super::nodeselection::{items, str_of, strings, validate_node_taints};
use super::resources::{entries, validate_resource_quantity};

pub struct NodeStrategy;

fn node_resources(node: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for list in ["capacity", "allocatable"] {
        let path = FieldPath::new("status").child(list);
        for (k, q) in entries(node.pointer(&format!("/status/{list}"))) {
            errs.extend(validate_resource_quantity(k, &q, &path.child(k)));
        }
    }
    errs
}

/// `ValidateNode` without the metadata (the store checks it).
fn validate_node(node: &Value) -> Vec<FieldError> {
    let meta = FieldPath::new("metadata");
    let mut errs = Vec::new();
    errs.extend(node_annotations(node, &meta.child("annotations")));
    let taints = items(node.pointer("/spec/taints"));
    if !taints.is_empty() {
        errs.extend(validate_node_taints(taints, &meta.child("taints")));
    }
    errs.extend(node_resources(node));
    errs.extend(swap_status(node, &meta.child("nodeSwapStatus")));
    errs.extend(declared_features(node));
    let cidrs = strings(node.pointer("/spec/podCIDRs"));
    if !cidrs.is_empty() {
        let path = FieldPath::new("spec").child("podCIDRs");
        for (i, c) in cidrs.iter().enumerate() {
            errs.extend(is_valid_cidr_for_legacy_field(&path.index(i), c, true, &[]));
        }
        if cidrs.len() > 1 {
            // `netutils.IsDualStackCIDRStrings`: an unparsable CIDR is an internal error, and
            // the list is then not a dual-stack pair either.
            let mut families = Vec::new();
            for (i, c) in cidrs.iter().enumerate() {
                if is_valid_cidr_for_legacy_field(&path, c, false, &[]).is_empty() {
                    // Go's `To4()`: an IPv4-mapped address is IPv4.
                    let mapped = c.to_ascii_lowercase().starts_with("::ffff:") && c.contains('.');
                    families.push(c.contains(':') && !mapped);
                } else {
                    errs.push(FieldError::internal(
                        &path,
                        format!(
                            "invalid PodCIDRs. failed to check with dual stack with error:\
                             invalid CIDR[{i}]: <nil> (invalid CIDR address: {c})"
                        ),
                    ));
                    families.clear();
                    break;
                }
            }
            let dual = families.contains(&true) && families.contains(&false);
            if !dual || cidrs.len() > 2 {
                errs.push(FieldError::invalid(
                    &path,
                    json!(cidrs),
                    "may specify no more than one CIDR for each IP family",
                ));
            }
        }
    }
    errs
}

/// `validateNodeSwapStatus`: a reported swap capacity is positive (upstream reports it under
/// `metadata.nodeSwapStatus`).
fn swap_status(node: &Value, path: &FieldPath) -> Vec<FieldError> {
    match node
        .pointer("/status/nodeInfo/swap/capacity")
        .and_then(Value::as_i64)
    {
        Some(c) if c <= 0 => vec![FieldError::invalid(
            &path.child("capacity"),
            c,
            "must be greater than zero",
        )],
        _ => Vec::new(),
    }
}

/// `validateNodeDeclaredFeatures` (the NodeDeclaredFeatures gate is on in v1.36): each name an
/// UpperCamelCase segment with further `/`-separated segments, the list sorted and unique.
fn declared_features(node: &Value) -> Vec<FieldError> {
    let path = FieldPath::new("status").child("declaredFeatures");
    let features = strings(node.pointer("/status/declaredFeatures"));
    let mut errs = Vec::new();
    for (i, f) in features.iter().enumerate() {
        if let Some(msg) = declared_feature_name_error(f) {
            errs.push(FieldError::invalid(&path.index(i), *f, msg));
        }
        if let Some(next) = features.get(i + 1) {
            if f == next {
                errs.push(FieldError::duplicate(&path.index(i + 1), *next));
            } else if f > next {
                errs.push(FieldError::invalid(
                    &path.index(i + 1),
                    *next,
                    "list must be sorted alphabetically",
                ));
            }
        }
    }
    errs
}

fn declared_feature_name_error(name: &str) -> Option<String> {
    if name.len() > 253 {
        return Some(format!(
            "invalid feature name {}: must be no more than 253 characters",
            go_quote(name)
        ));
    }
    let mut segments = name.split('/');
    let first_ok = segments.next().is_some_and(|s| {
        s.bytes().next().is_some_and(|c| c.is_ascii_uppercase())
            && s.bytes().all(|c| c.is_ascii_alphanumeric())
    });
    let rest_ok = segments.all(|s| {
        s.bytes().next().is_some_and(|c| c.is_ascii_alphabetic())
            && s.bytes().all(|c| c.is_ascii_alphanumeric())
    });
    (!(first_ok && rest_ok)).then(|| {
        format!(
            "invalid feature name {}: must start with an UpperCamelCase segment, with subsequent \
             segments separated by '/' (e.g., MyFeature or MyFeature/mySubFeature), and contain \
             only alphanumeric characters and slashes",
            go_quote(name)
        )
    })
}

/// `ValidateNodeSpecificAnnotations`: the legacy taints and preferAvoidPods annotations.
fn node_annotations(node: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = taints_annotation(node, path);
    errs.extend(avoid_pods_annotation(node, path));
    errs
}

/// Go's `json.Unmarshal` of an annotation into the Go type named by `message`: its syntax
/// error, then its type error, in Go's words.
fn unmarshal_annotation(text: &str, message: &str) -> Result<Value, String> {
    apimachinery::gojson::check(text.as_bytes())?;
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    ironplane_protobuf::check_go_message(message, &value)?;
    Ok(value)
}

/// `ValidateAvoidPodsInNodeAnnotations`: each entry names a pod signature whose controller
/// reference is a controller.
fn avoid_pods_annotation(node: &Value, path: &FieldPath) -> Vec<FieldError> {
    const KEY: &str = "scheduler.alpha.kubernetes.io/preferAvoidPods";
    let Some(text) = node
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(KEY))
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    else {
        return Vec::new();
    };
    let avoids = match unmarshal_annotation(text, "k8s.io.api.core.v1.AvoidPods") {
        Ok(v) => v,
        Err(e) => return vec![FieldError::invalid(&path.child("AvoidPods"), KEY, e)],
    };
    let mut errs = Vec::new();
    for (i, entry) in items(avoids.get("preferAvoidPods")).iter().enumerate() {
        let at = path.child(KEY).index(i).child("PodSignature");
        match entry
            .pointer("/podSignature/podController")
            .filter(|c| !c.is_null())
        {
            None => errs.push(FieldError::required(&at, "")),
            Some(controller) => {
                // Upstream dereferences `controller` unchecked; a missing one is not refused here.
                if controller.get("controller") == Some(&Value::Bool(false)) {
                    errs.push(FieldError::invalid(
                        &at.child("PodController").child("Controller"),
                        false,
                        "must point to a controller",
                    ));
                }
            }
        }
    }
    errs
}

/// Taints given in the legacy annotation (`ValidateTaintsInNodeAnnotations`).
fn taints_annotation(node: &Value, path: &FieldPath) -> Vec<FieldError> {
    const KEY: &str = "scheduler.alpha.kubernetes.io/taints";
    let Some(text) = node
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(KEY))
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    else {
        return Vec::new();
    };
    // Go's `[]core.Taint`: a JSON array of taints.
    let parsed = apimachinery::gojson::check(text.as_bytes()).and_then(|()| {
        let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        match &v {
            Value::Array(list) => {
                for t in list {
                    ironplane_protobuf::check_go_message("k8s.io.api.core.v1.Taint", t)?;
                }
                Ok(list.clone())
            }
            Value::Null => Ok(Vec::new()),
            other => Err(format!(
                "json: cannot unmarshal {} into Go value of type []core.Taint",
                json_kind(other)
            )),
        }
    });
    match parsed {
        Ok(taints) if taints.is_empty() => Vec::new(),
        Ok(taints) => validate_node_taints(&taints, &path.child(KEY)),
        Err(e) => vec![FieldError::invalid(path, KEY, e)],
    }
}

/// `ValidateNodeUpdate`.
fn validate_node_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = node_annotations(new, &FieldPath::new("metadata").child("annotations"));
    errs.extend(node_resources(new));
    errs.extend(declared_features(new));
    let mut seen: Vec<&Value> = Vec::new();
    let addresses = FieldPath::new("status").child("addresses");
    for (i, a) in items(new.pointer("/status/addresses")).iter().enumerate() {
        if seen.contains(&a) {
            let mut err = FieldError::duplicate(&addresses.index(i), a.clone());
            if let Some(r) = go_struct_json("core.v1.NodeAddress", a, GoStyle::Internal) {
                err = err.with_rendered_value(r);
            }
            errs.push(err);
        }
        seen.push(a);
    }
    const SET_ONCE: &str = "node updates may not change podCIDR except from \"\" to valid";
    let old_cidrs = strings(old.pointer("/spec/podCIDRs"));
    let new_cidrs = strings(new.pointer("/spec/podCIDRs"));
    let cidrs_path = FieldPath::new("spec").child("podCIDRs");
    if !old_cidrs.is_empty() {
        if old_cidrs.len() != new_cidrs.len() {
            errs.push(FieldError::forbidden(&cidrs_path, SET_ONCE));
        } else {
            for (o, n) in old_cidrs.iter().zip(&new_cidrs) {
                if o != n {
                    errs.push(FieldError::forbidden(&cidrs_path, SET_ONCE));
                }
            }
        }
    }
    let provider = |n: &Value| {
        n.pointer("/spec/providerID")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if !provider(old).is_empty() && provider(old) != provider(new) {
        errs.push(FieldError::forbidden(
            &FieldPath::new("spec").child("providerID"),
            "node updates may not change providerID except from \"\" to valid",
        ));
    }
    if let Some(source) = new.pointer("/spec/configSource").filter(|s| !s.is_null()) {
        errs.extend(config_source(
            source,
            true,
            &FieldPath::new("spec").child("configSource"),
        ));
    }
    if let Some(config) = new.pointer("/status/config").filter(|c| !c.is_null()) {
        let path = FieldPath::new("status").child("config");
        for field in ["assigned", "active", "lastKnownGood"] {
            if let Some(source) = config.get(field).filter(|s| !s.is_null()) {
                errs.extend(config_source(source, false, &path.child(field)));
            }
        }
    }
    let taints = items(new.pointer("/spec/taints"));
    if !taints.is_empty() {
        errs.extend(validate_node_taints(
            taints,
            &FieldPath::new("metadata").child("taints"),
        ));
    }
    let external = |n: &Value| n.pointer("/spec/externalID").cloned().unwrap_or(json!(""));
    if external(new) != external(old) {
        errs.push(FieldError::forbidden(
            &FieldPath::new("spec").child("externalID"),
            "may not be updated",
        ));
    }
    errs
}

/// The removed dynamic kubelet config, still validated for old nodes
/// (`validateNodeConfigSourceSpec` / `validateNodeConfigSourceStatus`).
fn config_source(source: &Value, in_spec: bool, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(cm) = source.get("configMap").filter(|c| !c.is_null()) else {
        let mut err = FieldError::invalid(
            path,
            source.clone(),
            "exactly one reference subfield must be non-nil",
        );
        if let Some(r) = go_struct_json("core.v1.NodeConfigSource", source, GoStyle::Internal) {
            err = err.with_rendered_value(r);
        }
        return vec![err];
    };
    let at = path.child("configMap");
    let uid = str_of(cm, "uid");
    let rv = str_of(cm, "resourceVersion");
    if in_spec {
        if !uid.is_empty() {
            errs.push(FieldError::forbidden(
                &at.child("uid"),
                "uid must not be set in spec",
            ));
        }
        if !rv.is_empty() {
            errs.push(FieldError::forbidden(
                &at.child("resourceVersion"),
                "resourceVersion must not be set in spec",
            ));
        }
    } else {
        if uid.is_empty() {
            errs.push(FieldError::required(
                &at.child("uid"),
                "uid must be set in status",
            ));
        }
        if rv.is_empty() {
            errs.push(FieldError::required(
                &at.child("resourceVersion"),
                "resourceVersion must be set in status",
            ));
        }
    }
    for (field, what) in [("namespace", "namespace"), ("name", "name")] {
        let v = str_of(cm, field);
        if v.is_empty() {
            errs.push(FieldError::required(
                &at.child(field),
                format!("{what} must be set"),
            ));
        } else {
            let validator = if field == "namespace" {
                apimachinery::validation::NameValidator::Dns1123Label
            } else {
                apimachinery::validation::NameValidator::Dns1123Subdomain
            };
            for m in validator.validate(v, false) {
                errs.push(FieldError::invalid(&at.child(field), v, m));
            }
        }
    }
    let key = str_of(cm, "kubeletConfigKey");
    if key.is_empty() {
        errs.push(FieldError::required(
            &at.child("kubeletConfigKey"),
            "kubeletConfigKey must be set",
        ));
    } else {
        for m in apimachinery::validation::is_config_map_key(key) {
            errs.push(FieldError::invalid(&at.child("kubeletConfigKey"), key, m));
        }
    }
    errs
}

fn deprecated_field_warnings(node: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if node
        .pointer("/spec/configSource")
        .is_some_and(|s| !s.is_null())
    {
        out.push("spec.configSource: the feature is removed".into());
    }
    if node
        .pointer("/spec/externalID")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
    {
        out.push("spec.externalID: this field is deprecated, and is unused by Kubernetes".into());
    }
    for (i, c) in strings(node.pointer("/spec/podCIDRs")).iter().enumerate() {
        out.extend(get_warnings_for_cidr(&format!("spec.podCIDRs[{i}]"), c));
    }
    out
}

/// How Go's JSON decoder names a value's type in `cannot unmarshal X`.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn remove(obj: &mut Value, parent: &str, field: &str) {
    if let Some(m) = obj.get_mut(parent).and_then(Value::as_object_mut) {
        m.remove(field);
    }
}

impl Strategy for NodeStrategy {
    /// Allocatable defaults to capacity; the v1 `podCIDR` and internal `podCIDRs` agree, the
    /// single field winning when they differ.
    fn default(&self, obj: &mut Value) {
        if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut)
            && status.get("allocatable").is_none_or(Value::is_null)
            && let Some(capacity) = status.get("capacity").filter(|c| c.is_object()).cloned()
        {
            status.insert("allocatable".into(), capacity);
        }
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            let single = spec
                .get("podCIDR")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string);
            let first = spec
                .get("podCIDRs")
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .and_then(Value::as_str)
                .map(str::to_string);
            match (single, first) {
                (Some(s), Some(f)) if s != f => {
                    spec.insert("podCIDRs".into(), json!([s]));
                }
                (Some(s), None) => {
                    spec.insert("podCIDRs".into(), json!([s]));
                }
                (None, Some(f)) => {
                    spec.insert("podCIDR".into(), json!(f));
                }
                _ => {}
            }
        }
    }

    /// Nodes may set every field on create, except the removed dynamic kubelet config.
    fn prepare_for_create(&self, obj: &mut Value) {
        remove(obj, "spec", "configSource");
        remove(obj, "status", "config");
    }

    /// The store keeps the stored status on spec writes and the stored spec on status writes;
    /// the dynamic kubelet config stays only where it already was.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if old.pointer("/spec/configSource").is_none_or(Value::is_null) {
            remove(new, "spec", "configSource");
        }
        if old.pointer("/status/config").is_none_or(Value::is_null) {
            remove(new, "status", "config");
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_node(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = validate_node(new);
        errs.extend(validate_node_update(new, old));
        errs
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_node_update(new, old)
    }

    fn warnings_on_create(&self, obj: &Value) -> Vec<String> {
        deprecated_field_warnings(obj)
    }

    fn warnings_on_update(&self, new: &Value, _old: &Value) -> Vec<String> {
        deprecated_field_warnings(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocatable_defaults_to_capacity_and_both_are_checked() {
        let mut node = json!({"status": {"capacity": {"cpu": "-1"}}});
        NodeStrategy.default(&mut node);
        let msgs: Vec<String> = NodeStrategy
            .validate(&node)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "status.capacity.cpu: Invalid value: \"-1\": must be greater than or equal to 0",
                "status.allocatable.cpu: Invalid value: \"-1\": must be greater than or equal to 0",
            ]
        );
    }

    #[test]
    fn pod_cidr_fields_agree_and_are_set_once() {
        let mut node = json!({"spec": {"podCIDR": "10.0.1.0/24"}});
        NodeStrategy.default(&mut node);
        assert_eq!(node["spec"]["podCIDRs"], json!(["10.0.1.0/24"]));
        let old = node.clone();
        let mut new = json!({"spec": {"podCIDR": "10.0.2.0/24", "podCIDRs": ["10.0.2.0/24"]}});
        NodeStrategy.default(&mut new);
        assert_eq!(
            NodeStrategy.validate_update(&new, &old)[0].to_string(),
            "spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid"
        );
    }

    #[test]
    fn config_source_is_dropped_on_create() {
        let mut node = json!({"spec": {"configSource": {"configMap": {}}}});
        NodeStrategy.prepare_for_create(&mut node);
        assert!(node["spec"].get("configSource").is_none());
        assert!(NodeStrategy.warnings_on_create(&node).is_empty());
    }
}
