//! CustomResourceDefinition objects: upstream's defaults (apiextensions/v1 `SetDefaults_*`) and
//! what its strategy does on create and update (status reset, `storedVersions` kept up to date
//! with the storage version). Validating the CRD itself (names, versions, structural schemas,
//! CEL rules) and serving custom resources belong to the `apiextensions` layer that issue 8
//! builds; this module moves there with it.

use serde_json::{Value, json};

use super::{object_at, set_default};
use apiserver::registry::Strategy;

pub struct CustomResourceDefinitionStrategy;

/// The name of the version marked `storage: true`, if any.
fn storage_version(crd: &Value) -> Option<String> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name").and_then(Value::as_str))
        .map(str::to_string)
}

/// Appends the storage version to `status.storedVersions` unless it is there: a CRD records
/// every version its objects may have been stored in.
fn record_stored_version(crd: &mut Value) {
    let Some(version) = storage_version(crd) else {
        return;
    };
    let status = object_at(crd, "status");
    if !status.get("storedVersions").is_some_and(Value::is_array) {
        status["storedVersions"] = json!([]);
    }
    if let Some(stored) = status["storedVersions"].as_array_mut()
        && !stored.iter().any(|v| v.as_str() == Some(version.as_str()))
    {
        stored.push(json!(version));
    }
}

impl Strategy for CustomResourceDefinitionStrategy {
    fn default(&self, crd: &mut Value) {
        let Some(spec) = crd.get_mut("spec").filter(|s| s.is_object()) else {
            return;
        };
        if let Some(names) = spec.get_mut("names").filter(|n| n.is_object()) {
            let kind = names
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            set_default(names, "singular", json!(kind.to_lowercase()));
            if !kind.is_empty() {
                set_default(names, "listKind", json!(format!("{kind}List")));
            }
        }
        if spec.get("conversion").is_none_or(Value::is_null) {
            spec["conversion"] = json!({"strategy": "None"});
        }
        // `SetDefaults_ServiceReference`: a conversion webhook's service listens on 443.
        if let Some(service) = spec
            .pointer_mut("/conversion/webhook/clientConfig/service")
            .filter(|s| s.is_object())
            && service.get("port").is_none_or(Value::is_null)
        {
            service["port"] = json!(443);
        }
        // `storedVersions` starts with the storage version.
        let has_stored = crd
            .pointer("/status/storedVersions")
            .and_then(Value::as_array)
            .is_some_and(|v| !v.is_empty());
        if !has_stored {
            record_stored_version(crd);
        }
    }

    fn prepare_for_create(&self, crd: &mut Value) {
        // Status is the controllers' to write; a create starts from the stored version alone.
        crd["status"] = json!({});
        record_stored_version(crd);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        // The store keeps the old status; the storage version joins the stored versions.
        record_stored_version(new);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1beta1", "served": true, "storage": false}, {"name": "v1", "served": true, "storage": true}]},
            "status": {"acceptedNames": {"kind": "Bogus"}}})
    }

    #[test]
    fn names_conversion_and_stored_versions_are_defaulted() {
        let s = CustomResourceDefinitionStrategy;
        let mut c = crd();
        s.default(&mut c);
        s.prepare_for_create(&mut c);
        assert_eq!(c["spec"]["names"]["singular"], "widget");
        assert_eq!(c["spec"]["names"]["listKind"], "WidgetList");
        assert_eq!(c["spec"]["conversion"], json!({"strategy": "None"}));
        assert_eq!(c["status"], json!({"storedVersions": ["v1"]}));
    }

    #[test]
    fn a_new_storage_version_is_recorded_on_update() {
        let s = CustomResourceDefinitionStrategy;
        let mut c = crd();
        c["status"] = json!({"storedVersions": ["v1beta1"]});
        s.prepare_for_update(&mut c, &Value::Null);
        assert_eq!(c["status"]["storedVersions"], json!(["v1beta1", "v1"]));
    }

    #[test]
    fn webhook_services_default_to_port_443() {
        let s = CustomResourceDefinitionStrategy;
        let mut c = crd();
        c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"name": "s", "namespace": "n"}}, "conversionReviewVersions": ["v1"]}});
        s.default(&mut c);
        assert_eq!(
            c["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"],
            443
        );
    }
}
