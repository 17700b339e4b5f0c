//! CustomResourceDefinitions as kube-apiserver stores them: in `apiextensions.k8s.io/v1beta1`
//! JSON, the more compact form (upstream stores v1beta1 "until https://issue.k8s.io/82292 is
//! resolved": a schema shared by every version is written once, at the top). Ironplane serves
//! and handles CRDs in v1 and stores them as upstream does: converted to v1beta1 on the way in
//! and back to v1 on every read, as upstream's conversions through the internal version do
//! (`Convert_v1_CustomResourceDefinitionSpec_To_apiextensions_...` and the reverse), so that
//! either server reads what the other wrote on a shared etcd.

use serde_json::{Map, Value};
use storage::StoredVersion;

/// The stored versions the built-in storage codec must read for this kind.
pub const STORED_VERSIONS: &[StoredVersion] = &[StoredVersion {
    api_version: "apiextensions.k8s.io/v1beta1",
    kind: "CustomResourceDefinition",
    upgrade: v1beta1_to_v1,
    write: Some(("apiextensions.k8s.io/v1", v1_to_v1beta1)),
}];

/// The per-version parts that v1beta1 also has at the top of the spec, where a value every
/// version shares is written once.
const HOISTED: [&str; 4] = [
    "subresources",
    "schema",
    "additionalPrinterColumns",
    "selectableFields",
];

/// Converts a v1 CustomResourceDefinition to v1beta1 in place: `spec.version` is the first
/// version's name; a per-version part equal in every version (absent in all counts) moves to the
/// top (`schema` becomes `validation`); printer columns spell `JSONPath`; the webhook conversion
/// fields come up a level; `preserveUnknownFields` is always written.
fn v1_to_v1beta1(obj: &mut Value) -> Result<(), String> {
    let root = obj
        .as_object_mut()
        .ok_or("a CustomResourceDefinition is not an object")?;
    root.insert("apiVersion".into(), "apiextensions.k8s.io/v1beta1".into());
    let Some(spec) = root.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let preserve = spec
        .get("preserveUnknownFields")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    spec.insert("preserveUnknownFields".into(), preserve.into());
    if let Some(conversion) = spec.get_mut("conversion").and_then(Value::as_object_mut)
        && let Some(Value::Object(mut webhook)) = conversion.remove("webhook")
    {
        if let Some(review) = webhook.remove("conversionReviewVersions") {
            conversion.insert("conversionReviewVersions".into(), review);
        }
        if let Some(client) = webhook.remove("clientConfig") {
            conversion.insert("webhookClientConfig".into(), client);
        }
    }
    let Some(versions) = spec.get_mut("versions").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    if versions.is_empty() {
        return Ok(());
    }
    for v in versions.iter_mut().filter_map(Value::as_object_mut) {
        if let Some(c) = v.remove("additionalPrinterColumns") {
            v.insert("additionalPrinterColumns".into(), columns_to_v1beta1(c));
        }
    }
    let first_name = versions[0].get("name").cloned();
    let mut top = Vec::new();
    for field in HOISTED {
        let first = versions[0].get(field).cloned();
        if versions.iter().all(|v| v.get(field) == first.as_ref()) {
            for v in versions.iter_mut().filter_map(Value::as_object_mut) {
                v.remove(field);
            }
            if let Some(value) = first {
                top.push((
                    if field == "schema" {
                        "validation"
                    } else {
                        field
                    },
                    value,
                ));
            }
        }
    }
    if let Some(name) = first_name {
        spec.insert("version".into(), name);
    }
    for (field, value) in top {
        spec.insert(field.into(), value);
    }
    Ok(())
}

/// Printer columns: v1 spells the path `jsonPath`, v1beta1 `JSONPath`.
fn columns_to_v1beta1(mut columns: Value) -> Value {
    for c in columns
        .as_array_mut()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        if let Some(path) = c.remove("jsonPath") {
            c.insert("JSONPath".into(), path);
        }
    }
    columns
}

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

    /// What Ironplane stores for a CRD is what kube-apiserver stored for it: kube-apiserver's
    /// value read as v1 and written again gives the same JSON.
    #[test]
    fn ironplane_writes_what_kube_apiserver_stored() {
        let mut crd = kube_apiserver_stored();
        v1beta1_to_v1(&mut crd).unwrap();
        v1_to_v1beta1(&mut crd).unwrap();
        assert_eq!(crd, kube_apiserver_stored());
    }

    /// v1 → v1beta1 → v1 keeps every CRD as it was: parts that differ between versions stay
    /// with each version, shared ones come back to each.
    #[test]
    fn v1_objects_survive_the_stored_form() {
        let schema = |t: &str| json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": t}}}});
        let column =
            json!([{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]);
        let v1 = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [
                    {"name": "v2", "served": true, "storage": true, "schema": schema("object"),
                     "subresources": {"status": {}}, "additionalPrinterColumns": column},
                    {"name": "v1", "served": true, "storage": false, "schema": schema("string"),
                     "subresources": {"status": {}}, "additionalPrinterColumns": column,
                     "deprecated": true}
                ],
                "conversion": {"strategy": "Webhook", "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": "https://example.com/convert"}}},
                "preserveUnknownFields": true
            }
        });
        let mut stored = v1.clone();
        v1_to_v1beta1(&mut stored).unwrap();
        let spec = &stored["spec"];
        assert_eq!(spec["version"], "v2");
        assert_eq!(spec["subresources"], json!({"status": {}}));
        assert_eq!(
            spec["additionalPrinterColumns"][0]["JSONPath"],
            ".metadata.creationTimestamp"
        );
        assert!(spec.get("validation").is_none(), "the schemas differ");
        assert_eq!(spec["versions"][1]["schema"], schema("string"));
        assert!(spec["versions"][0].get("subresources").is_none());
        assert_eq!(
            spec["conversion"]["webhookClientConfig"]["url"],
            "https://example.com/convert"
        );
        let mut back = stored;
        v1beta1_to_v1(&mut back).unwrap();
        assert_eq!(back, v1);
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
