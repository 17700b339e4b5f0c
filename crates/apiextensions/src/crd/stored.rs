//! CustomResourceDefinitions as kube-apiserver stores them: in `apiextensions.k8s.io/v1beta1`,
//! the more compact form (upstream stores v1beta1 "until https://issue.k8s.io/82292 is
//! resolved": a schema shared by every version is written once, at the top). Ironplane keeps
//! CRDs in v1; a v1beta1 object met in storage (written by kube-apiserver on a shared etcd) is
//! converted on read as upstream's conversion through the internal version does
//! (`Convert_apiextensions_CustomResourceDefinitionSpec_To_v1_...` and its neighbours).

use serde_json::{Map, Value};
use storage::StoredVersion;

/// The stored versions the built-in storage codec must read for this kind.
pub const STORED_VERSIONS: &[StoredVersion] = &[StoredVersion {
    api_version: "apiextensions.k8s.io/v1beta1",
    kind: "CustomResourceDefinition",
    upgrade: v1beta1_to_v1,
}];

/// Converts a v1beta1 CustomResourceDefinition to v1 in place.
fn v1beta1_to_v1(obj: &mut Value) -> Result<(), String> {
    let root = obj
        .as_object_mut()
        .ok_or("a CustomResourceDefinition is not an object")?;
    root.insert("apiVersion".into(), "apiextensions.k8s.io/v1".into());
    let Some(spec) = root.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let version = spec.remove("version");
    let validation = spec.remove("validation");
    let subresources = spec.remove("subresources");
    let columns = spec.remove("additionalPrinterColumns").map(columns_to_v1);
    let selectable = spec.remove("selectableFields");

    let versions = spec
        .entry("versions")
        .or_insert_with(|| Value::Array(Vec::new()));
    let versions = versions
        .as_array_mut()
        .ok_or("spec.versions is not a list")?;
    if versions.is_empty()
        && let Some(Value::String(name)) = version
        && !name.is_empty()
    {
        let mut only = Map::new();
        only.insert("name".into(), name.into());
        only.insert("served".into(), true.into());
        only.insert("storage".into(), true.into());
        versions.push(Value::Object(only));
    }
    for v in versions.iter_mut().filter_map(Value::as_object_mut) {
        if let Some(c) = v.remove("additionalPrinterColumns") {
            v.insert("additionalPrinterColumns".into(), columns_to_v1(c));
        }
        // What the top level says applies to every version (v1beta1 refuses both at once).
        for (field, value) in [
            ("subresources", &subresources),
            ("schema", &validation),
            ("additionalPrinterColumns", &columns),
            ("selectableFields", &selectable),
        ] {
            if let Some(value) = value.as_ref().filter(|v| !v.is_null()) {
                v.insert(field.into(), value.clone());
            }
        }
    }

    // A pointer in v1beta1 (unset meant true there, but stored objects were defaulted), a plain
    // bool in v1 that is omitted when false.
    match spec.get("preserveUnknownFields") {
        Some(Value::Bool(true)) => {}
        Some(_) => {
            spec.remove("preserveUnknownFields");
        }
        None => {}
    }

    if let Some(conversion) = spec.get_mut("conversion").and_then(Value::as_object_mut) {
        let client = conversion.remove("webhookClientConfig");
        let review = conversion.remove("conversionReviewVersions");
        if client.is_some() || review.is_some() {
            let mut webhook = Map::new();
            if let Some(client) = client.filter(|c| !c.is_null()) {
                webhook.insert("clientConfig".into(), client);
            }
            if let Some(review) = review.filter(|r| !r.is_null()) {
                webhook.insert("conversionReviewVersions".into(), review);
            }
            conversion.insert("webhook".into(), Value::Object(webhook));
        }
    }
    Ok(())
}

/// Printer columns: v1beta1 spells the path `JSONPath`, v1 `jsonPath`.
fn columns_to_v1(mut columns: Value) -> Value {
    for c in columns
        .as_array_mut()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        if let Some(path) = c.remove("JSONPath") {
            c.insert("jsonPath".into(), path);
        }
    }
    columns
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A CRD as kube-apiserver v1.36 stored it on etcd (read back raw), from `kubectl create`
    /// of a v1 CRD with one version: the schema moved to the top, `spec.version` set.
    fn kube_apiserver_stored() -> Value {
        serde_json::from_str(include_str!("testdata/kube-apiserver-stored-crd.json")).unwrap()
    }

    #[test]
    fn kube_apiservers_v1beta1_crds_read_as_v1() {
        let mut crd = kube_apiserver_stored();
        v1beta1_to_v1(&mut crd).unwrap();
        assert_eq!(crd["apiVersion"], "apiextensions.k8s.io/v1");
        let spec = &crd["spec"];
        assert!(spec.get("version").is_none() && spec.get("validation").is_none());
        assert!(
            spec.get("preserveUnknownFields").is_none(),
            "false is omitted in v1"
        );
        assert_eq!(
            spec["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"]
                ["default"],
            1
        );
        assert_eq!(spec["conversion"], json!({"strategy": "None"}));
        assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
        assert_eq!(crd["metadata"], kube_apiserver_stored()["metadata"]);
    }

    #[test]
    fn top_level_parts_go_to_every_version_and_webhooks_nest() {
        let mut crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1beta1",
            "kind": "CustomResourceDefinition",
            "spec": {
                "version": "v1",
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": "Age", "type": "date",
                                              "JSONPath": ".metadata.creationTimestamp"}],
                "versions": [{"name": "v1", "served": true, "storage": true},
                             {"name": "v2", "served": true, "storage": false}],
                "conversion": {"strategy": "Webhook", "conversionReviewVersions": ["v1"],
                               "webhookClientConfig": {"url": "https://example.com/convert"}},
                "preserveUnknownFields": true
            }
        });
        v1beta1_to_v1(&mut crd).unwrap();
        for v in crd["spec"]["versions"].as_array().unwrap() {
            assert_eq!(v["subresources"], json!({"status": {}}));
            assert_eq!(
                v["additionalPrinterColumns"][0]["jsonPath"],
                ".metadata.creationTimestamp"
            );
        }
        assert_eq!(
            crd["spec"]["conversion"],
            json!({"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": "https://example.com/convert"},
                "conversionReviewVersions": ["v1"]}})
        );
        assert_eq!(crd["spec"]["preserveUnknownFields"], true);
    }

    #[test]
    fn a_bare_version_becomes_the_only_one() {
        let mut crd = json!({"apiVersion": "apiextensions.k8s.io/v1beta1",
                             "kind": "CustomResourceDefinition", "spec": {"version": "v3"}});
        v1beta1_to_v1(&mut crd).unwrap();
        assert_eq!(
            crd["spec"]["versions"],
            json!([{"name": "v3", "served": true, "storage": true}])
        );
    }
}
