//! Dynamic resource allocation claims (resource.k8s.io/v1 ResourceClaim and
//! ResourceClaimTemplate; upstream: pkg/apis/resource/v1/defaults.go,
//! pkg/apis/resource/validation, pkg/registry/resource/*/strategy.go). A request for an exact
//! count of devices counts one unless it says otherwise; request names are DNS labels, unique
//! in the claim; a claim's spec never changes, and its status is the scheduler's.
//!
//! Only the request rules are implemented: selectors (CEL), constraints and configuration are
//! accepted as given.

use std::collections::BTreeSet;

use apimachinery::validation::{FieldError, FieldPath, NameValidator, is_dns1123_label};
use apiserver::registry::Strategy;
use ironplane_protobuf::{GoStyle, go_struct_json};
use serde_json::{Value, json};

use super::nodeselection::{items, str_of};
use super::set_default;

pub struct ResourceClaimStrategy {
    /// A ResourceClaimTemplate (its claim spec is under `spec.spec`), else a ResourceClaim.
    pub template: bool,
}

/// `SetDefaults_ExactDeviceRequest`: `ExactCount` of one device.
fn default_exact(req: &mut Value) {
    if !req.is_object() {
        return;
    }
    set_default(req, "allocationMode", json!("ExactCount"));
    if req.get("allocationMode").and_then(Value::as_str) == Some("ExactCount")
        && req.get("count").and_then(Value::as_i64).unwrap_or(0) == 0
    {
        req["count"] = json!(1);
    }
}

fn default_claim_spec(spec: &mut Value) {
    let Some(requests) = spec
        .pointer_mut("/devices/requests")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for req in requests {
        if let Some(exact) = req.get_mut("exactly") {
            default_exact(exact);
        }
        if let Some(subs) = req.get_mut("firstAvailable").and_then(Value::as_array_mut) {
            for sub in subs {
                default_exact(sub);
            }
        }
    }
}

/// One exact request (`validateExactDeviceRequest` / a subrequest): a class, and a count that
/// fits the allocation mode.
fn validate_exact(req: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let class = str_of(req, "deviceClassName");
    if class.is_empty() {
        errs.push(FieldError::required(&path.child("deviceClassName"), ""));
    } else {
        for m in NameValidator::Dns1123Subdomain.validate(class, false) {
            errs.push(FieldError::invalid(
                &path.child("deviceClassName"),
                class,
                m,
            ));
        }
    }
    let count = req.get("count").and_then(Value::as_i64).unwrap_or(0);
    match str_of(req, "allocationMode") {
        "All" if count != 0 => errs.push(FieldError::invalid(
            &path.child("count"),
            count,
            "must not be specified when allocationMode is 'All'",
        )),
        "ExactCount" if count <= 0 => errs.push(FieldError::invalid(
            &path.child("count"),
            count,
            "must be greater than zero",
        )),
        "All" | "ExactCount" => {}
        mode => errs.push(FieldError::not_supported(
            &path.child("allocationMode"),
            mode,
            &["All", "ExactCount"],
        )),
    }
    errs
}

fn validate_request_name(name: &str, path: &FieldPath) -> Vec<FieldError> {
    is_dns1123_label(name)
        .into_iter()
        .map(|m| FieldError::invalid(path, name, m))
        .collect()
}

/// The requests of a claim spec.
fn validate_claim_spec(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let requests_path = path.child("devices").child("requests");
    let mut names = BTreeSet::new();
    for (i, req) in items(spec.pointer("/devices/requests")).iter().enumerate() {
        let at = requests_path.index(i);
        let name = str_of(req, "name");
        errs.extend(validate_request_name(name, &at.child("name")));
        if !names.insert(name) {
            errs.push(FieldError::duplicate(&at.child("name"), name));
        }
        let exact = req.get("exactly").filter(|e| !e.is_null());
        let first = items(req.get("firstAvailable"));
        match (exact, first.is_empty()) {
            (Some(e), true) => errs.extend(validate_exact(e, &at.child("exactly"))),
            (None, false) => {
                let mut sub_names = BTreeSet::new();
                for (j, sub) in first.iter().enumerate() {
                    let sat = at.child("firstAvailable").index(j);
                    let sub_name = str_of(sub, "name");
                    errs.extend(validate_request_name(sub_name, &sat.child("name")));
                    if !sub_names.insert(sub_name) {
                        errs.push(FieldError::duplicate(&sat.child("name"), sub_name));
                    }
                    errs.extend(validate_exact(sub, &sat));
                }
            }
            (None, true) => errs.push(FieldError::required(
                &at,
                "exactly one of `exactly` or `firstAvailable` is required",
            )),
            (Some(_), false) => errs.push(FieldError::invalid(
                &at,
                Value::Null,
                "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
            )
            .with_rendered_value("null")),
        }
    }
    errs
}

impl ResourceClaimStrategy {
    fn spec_pointer(&self) -> &'static str {
        if self.template { "/spec/spec" } else { "/spec" }
    }

    fn spec_path(&self) -> FieldPath {
        if self.template {
            FieldPath::new("spec").child("spec")
        } else {
            FieldPath::new("spec")
        }
    }
}

impl Strategy for ResourceClaimStrategy {
    fn default(&self, obj: &mut Value) {
        if let Some(spec) = obj.pointer_mut(self.spec_pointer()) {
            default_claim_spec(spec);
        }
    }

    /// A claim's status is the scheduler's.
    fn prepare_for_create(&self, obj: &mut Value) {
        if !self.template {
            obj["status"] = json!({});
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let spec = obj.pointer(self.spec_pointer()).unwrap_or(&Value::Null);
        validate_claim_spec(spec, &self.spec_path())
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let spec = |o: &Value| o.get("spec").cloned().unwrap_or(Value::Null);
        if spec(new) != spec(old) {
            let go_type = if self.template {
                "resource.v1.ResourceClaimTemplateSpec"
            } else {
                "resource.v1.ResourceClaimSpec"
            };
            let mut err =
                FieldError::invalid(&FieldPath::new("spec"), spec(new), "field is immutable");
            if let Some(r) = go_struct_json(go_type, &spec(new), GoStyle::Internal) {
                err = err.with_rendered_value(r);
            }
            errs.push(err);
        }
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_requests_default_to_one_device() {
        let mut claim = json!({"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}},
            {"name": "two", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}]}}});
        ResourceClaimStrategy { template: false }.default(&mut claim);
        assert_eq!(
            claim["spec"]["devices"]["requests"][0]["exactly"],
            json!({"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1})
        );
        assert_eq!(
            claim["spec"]["devices"]["requests"][1]["exactly"]["count"],
            2
        );
    }

    #[test]
    fn request_names_are_dns_labels() {
        let claim = json!({"spec": {"devices": {"requests": [
            {"name": "GPU_1", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}}]}}});
        let errs = ResourceClaimStrategy { template: false }.validate(&claim);
        assert_eq!(errs.len(), 1);
        assert!(errs[0].to_string().starts_with(
            "spec.devices.requests[0].name: Invalid value: \"GPU_1\": a lowercase RFC 1123 label"
        ));
    }
}
