//! APIServices (upstream: staging/src/k8s.io/kube-aggregator/pkg/apis/apiregistration and
//! pkg/registry/apiservice). An APIService is named `<version>.<group>`; priorities are bounded;
//! a service reference defaults to port 443; a local APIService (no service: served by this
//! server itself) may carry neither a CA bundle nor insecureSkipTLSVerify. Status starts empty,
//! and a local APIService is marked available at once by the strategy's prepare-for-create, as
//! upstream's `PrepareForCreate` does (the `aggregator` crate's availability controller writes
//! the condition of remote ones). Updates must name the resourceVersion they
//! replace (`AllowUnconditionalUpdate` is false).

use apimachinery::validation::{
    FieldError, FieldPath, is_dns1035_label, is_dns1123_subdomain, is_path_segment_name,
    is_valid_port_num,
};
use apiserver::registry::Strategy;
use base64::Engine;
use serde_json::{Value, json};

use super::fields::{bool_at, int_at, list_at, set_at, str_at};

pub struct ApiServiceStrategy;

impl Strategy for ApiServiceStrategy {
    fn default(&self, obj: &mut Value) {
        // `SetDefaults_ServiceReference`.
        if let Some(service) = obj.pointer_mut("/spec/service").filter(|s| s.is_object())
            && service.get("port").is_none_or(Value::is_null)
        {
            service["port"] = json!(443);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if !obj.is_object() {
            return;
        }
        obj["status"] = json!({});
        let local = obj
            .get("spec")
            .is_none_or(|s| set_at(s, "service").is_none());
        if local {
            obj["status"]["conditions"] = json!([{
                "type": "Available",
                "status": "True",
                "lastTransitionTime": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                "reason": "Local",
                "message": "Local APIServices are always available",
            }]);
        }
    }

    // No `prepare_for_update`: the store keeps the stored status on updates of the object, and
    // a write through `/status` brings its own (upstream's status strategy takes it).

    fn name_validator(&self) -> apimachinery::validation::NameValidator {
        apimachinery::validation::NameValidator::PathSegment
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        let path = FieldPath::new("spec");
        let group = str_at(spec, "group");
        let version = str_at(spec, "version");
        let mut errs = Vec::new();
        // The name must be `version.group`, once it is a valid path segment (which the
        // metadata check reports).
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let required = format!("{version}.{group}");
        if !name.is_empty() && is_path_segment_name(name).is_empty() && name != required {
            errs.push(FieldError::invalid(
                &FieldPath::new("metadata").child("name"),
                name,
                format!(
                    "must be `spec.version+\".\"+spec.group`: {}",
                    apimachinery::validation::go_quote(&required)
                ),
            ));
        }
        if group.is_empty() && version != "v1" {
            errs.push(FieldError::required(
                &path.child("group"),
                "only v1 may have an empty group and it better be legacy kube",
            ));
        }
        if !group.is_empty() {
            for m in is_dns1123_subdomain(group) {
                errs.push(FieldError::invalid(&path.child("group"), group, m));
            }
        }
        for m in is_dns1035_label(version) {
            errs.push(FieldError::invalid(&path.child("version"), version, m));
        }
        let group_priority = int_at(spec, "groupPriorityMinimum");
        if group_priority <= 0 || group_priority > 20000 {
            errs.push(FieldError::invalid(
                &path.child("groupPriorityMinimum"),
                group_priority,
                "must be positive and less than 20000",
            ));
        }
        let version_priority = int_at(spec, "versionPriority");
        if version_priority <= 0 || version_priority > 1000 {
            errs.push(FieldError::invalid(
                &path.child("versionPriority"),
                version_priority,
                "must be positive and less than 1000",
            ));
        }
        let ca_bundle_len = base64::engine::general_purpose::STANDARD
            .decode(str_at(spec, "caBundle"))
            .map(|b| b.len())
            .unwrap_or(0);
        let insecure = bool_at(spec, "insecureSkipTLSVerify");
        let Some(service) = set_at(spec, "service") else {
            if ca_bundle_len != 0 {
                errs.push(FieldError::invalid(
                    &path.child("caBundle"),
                    format!("{ca_bundle_len} bytes"),
                    "local APIServices may not have a caBundle",
                ));
            }
            if insecure {
                errs.push(FieldError::invalid(
                    &path.child("insecureSkipTLSVerify"),
                    true,
                    "local APIServices may not have insecureSkipTLSVerify",
                ));
            }
            return errs;
        };
        for f in ["namespace", "name"] {
            if str_at(service, f).is_empty() {
                errs.push(FieldError::required(&path.child("service").child(f), ""));
            }
        }
        let port = int_at(service, "port");
        let port_errs = is_valid_port_num(port);
        if !port_errs.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("service").child("port"),
                port,
                format!("port is not valid: {}", port_errs.join(", ")),
            ));
        }
        if insecure && ca_bundle_len > 0 {
            errs.push(FieldError::invalid(
                &path.child("insecureSkipTLSVerify"),
                true,
                "may not be true if caBundle is present",
            ));
        }
        errs
    }

    /// `ValidateAPIServiceStatus`: condition statuses are True, False or Unknown.
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let path = FieldPath::new("status").child("conditions");
        let conditions = new
            .get("status")
            .map(|s| list_at(s, "conditions"))
            .unwrap_or(&[]);
        conditions
            .iter()
            .enumerate()
            .filter(|(_, c)| !matches!(str_at(c, "status"), "True" | "False" | "Unknown"))
            .map(|(i, c)| {
                FieldError::not_supported(
                    &path.index(i).child("status"),
                    str_at(c, "status"),
                    &["True", "False", "Unknown"],
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(obj: Value) -> Vec<String> {
        ApiServiceStrategy
            .validate(&obj)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn names_priorities_and_tls() {
        assert_eq!(
            messages(
                json!({"metadata": {"name": "v1.a.example.com"}, "spec": {"group": "b.example.com", "version": "v1", "groupPriorityMinimum": 0, "versionPriority": 10}})
            ),
            [
                "metadata.name: Invalid value: \"v1.a.example.com\": must be `spec.version+\".\"+spec.group`: \"v1.b.example.com\"",
                "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
            ]
        );
        assert_eq!(
            messages(
                json!({"metadata": {"name": "v1.x.io"}, "spec": {"group": "x.io", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1, "caBundle": "AAEC", "insecureSkipTLSVerify": true}})
            ),
            [
                "spec.caBundle: Invalid value: \"3 bytes\": local APIServices may not have a caBundle",
                "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify",
            ]
        );
        assert_eq!(
            messages(
                json!({"metadata": {"name": "v1.x.io"}, "spec": {"group": "x.io", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1, "service": {}, "caBundle": "AAEC", "insecureSkipTLSVerify": true}})
            ),
            [
                "spec.service.namespace: Required value",
                "spec.service.name: Required value",
                "spec.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
                "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
            ]
        );
    }

    #[test]
    fn local_services_are_available_at_once() {
        let mut local = json!({"spec": {"group": "x.io"}, "status": {"conditions": []}});
        ApiServiceStrategy.prepare_for_create(&mut local);
        assert_eq!(local["status"]["conditions"][0]["reason"], "Local");
        let mut remote = json!({"spec": {"service": {"name": "s", "namespace": "n"}}});
        ApiServiceStrategy.default(&mut remote);
        ApiServiceStrategy.prepare_for_create(&mut remote);
        assert_eq!(remote["status"], json!({}));
        assert_eq!(remote["spec"]["service"]["port"], 443);
    }
}
