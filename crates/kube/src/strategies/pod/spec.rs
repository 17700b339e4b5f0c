//! A pod spec as a whole (pkg/apis/core/validation `ValidatePodSpec`, in upstream's order), the
//! pod template spec around it (`ValidatePodTemplateSpec`), what only pods check
//! (`validatePodMetadataAndSpec`, `ValidatePodCreate`), and the small spec-level rules: restart,
//! DNS and preemption policies, DNS config, host aliases, names, resource claims.

use std::collections::BTreeSet;

use apimachinery::validation::{
    FieldError, FieldPath, inclusive_range_error, is_dns1123_label, is_dns1123_subdomain,
    is_dns1123_subdomain_with_underscore, is_valid_ip_for_legacy_field, validate_annotations,
    validate_labels,
};
use serde_json::Value;

use super::containers::{
    PodContext, file_key_ref_volumes, image_whitespace, validate_containers,
    validate_ephemeral_containers, validate_init_containers,
};
use super::resources::{validate_overhead, validate_pod_resources};
use super::scheduling::{
    validate_affinity, validate_readiness_gates, validate_scheduling_gates, validate_tolerations,
    validate_topology_spread,
};
use super::security::{
    validate_annotations_match_fields, validate_host_process, validate_host_users,
    validate_hostname_override, validate_os, validate_pod_annotations,
    validate_pod_security_context,
};
use super::util::{flag, int, items, list, object, opt_int, opt_text, present, strings, text};
use super::volumes::validate_volumes;

/// What differs between validating a pod and a template's pod spec.
#[derive(Clone, Copy, Default)]
pub struct PodSpecOptions<'a> {
    /// The spec is a pod's (upstream's `ResourceIsPod`): host ports must equal container ports
    /// under `hostNetwork`.
    pub resource_is_pod: bool,
    /// The pod's name, for the names of the claims generic ephemeral volumes create.
    pub pod_name: Option<&'a str>,
}

fn dns_label(value: &str, path: &FieldPath) -> Vec<FieldError> {
    is_dns1123_label(value)
        .into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

/// `IsValidIPForLegacyField` as v1.36 runs it: StrictIPCIDRValidation (beta, on) refuses
/// leading zeros and IPv4-mapped IPv6 addresses, but any other spelling passes.
fn legacy_ip(path: &FieldPath, value: &str) -> Vec<FieldError> {
    is_valid_ip_for_legacy_field(path, value, true, &[])
}

fn dns_subdomain(value: &str, path: &FieldPath) -> Vec<FieldError> {
    is_dns1123_subdomain(value)
        .into_iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

/// `ValidatePodSpec`.
pub fn validate_spec(spec: &Value, path: &FieldPath, opts: PodSpecOptions) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let grace = opt_int(spec, "terminationGracePeriodSeconds");
    if grace.is_none() {
        errs.push(FieldError::required(
            &path.child("terminationGracePeriodSeconds"),
            "",
        ));
    }
    let host_users = spec.get("hostUsers").and_then(Value::as_bool) != Some(false);
    let (volumes, verrs) = validate_volumes(spec, opts.pod_name, &path.child("volumes"));
    errs.extend(verrs);
    let claims: BTreeSet<String> = items(spec, "resourceClaims")
        .map(|(_, c)| text(c, "name"))
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect();
    errs.extend(validate_resource_claims(
        spec,
        &path.child("resourceClaims"),
    ));
    let restart = text(spec, "restartPolicy");
    let ctx = PodContext {
        volumes: &volumes,
        claims: &claims,
        grace_period: grace,
        restart_policy: restart,
        host_users,
    };
    errs.extend(validate_containers(spec, &ctx, &path.child("containers")));
    errs.extend(validate_init_containers(
        spec,
        &ctx,
        &path.child("initContainers"),
    ));
    errs.extend(validate_ephemeral_containers(
        spec,
        &ctx,
        &path.child("ephemeralContainers"),
    ));
    errs.extend(validate_pod_resources(
        spec,
        &claims,
        &path.child("resources"),
    ));
    errs.extend(host_network_ports(spec, path, opts.resource_is_pod));
    match restart {
        "Always" | "OnFailure" | "Never" => {}
        "" => errs.push(FieldError::required(&path.child("restartPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            &path.child("restartPolicy"),
            other,
            &["Always", "OnFailure", "Never"],
        )),
    }
    let dns_policy = text(spec, "dnsPolicy");
    match dns_policy {
        "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None" => {}
        "" => errs.push(FieldError::required(&path.child("dnsPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            &path.child("dnsPolicy"),
            other,
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        )),
    }
    errs.extend(validate_labels(
        spec.get("nodeSelector"),
        &path.child("nodeSelector"),
    ));
    errs.extend(validate_pod_security_context(
        spec,
        &path.child("securityContext"),
    ));
    errs.extend(validate_affinity(spec, &path.child("affinity")));
    errs.extend(validate_dns_config(
        spec,
        dns_policy,
        &path.child("dnsConfig"),
    ));
    errs.extend(validate_readiness_gates(
        spec,
        &path.child("readinessGates"),
    ));
    errs.extend(validate_scheduling_gates(
        spec,
        &path.child("schedulingGates"),
    ));
    errs.extend(validate_topology_spread(
        spec,
        &path.child("topologySpreadConstraints"),
    ));
    errs.extend(validate_host_process(spec, path));
    errs.extend(validate_host_users(spec, path));
    errs.extend(validate_hostname_override(spec, path));
    for field in ["serviceAccountName", "nodeName"] {
        let v = text(spec, field);
        if !v.is_empty() {
            errs.extend(dns_subdomain(v, &path.child(field)));
        }
    }
    if let Some(ads) = opt_int(spec, "activeDeadlineSeconds")
        && !(1..=i64::from(i32::MAX)).contains(&ads)
    {
        errs.push(FieldError::invalid(
            &path.child("activeDeadlineSeconds"),
            ads,
            inclusive_range_error(1, i64::from(i32::MAX)),
        ));
    }
    for field in ["hostname", "subdomain"] {
        let v = text(spec, field);
        if !v.is_empty() {
            errs.extend(dns_label(v, &path.child(field)));
        }
    }
    errs.extend(validate_tolerations(spec, &path.child("tolerations")));
    for (i, alias) in items(spec, "hostAliases") {
        let p = path.child("hostAliases").index(i);
        errs.extend(legacy_ip(&p.child("ip"), text(alias, "ip")));
        for (j, h) in strings(alias, "hostnames").into_iter().enumerate() {
            errs.extend(dns_subdomain(h, &p.child("hostnames").index(j)));
        }
    }
    let pc = text(spec, "priorityClassName");
    if !pc.is_empty() {
        errs.extend(dns_subdomain(pc, &path.child("priorityClassName")));
    }
    if let Some(rc) = opt_text(spec, "runtimeClassName") {
        errs.extend(dns_subdomain(rc, &path.child("runtimeClassName")));
    }
    if let Some(pp) = opt_text(spec, "preemptionPolicy") {
        match pp {
            "PreemptLowerPriority" | "Never" => {}
            "" => errs.push(FieldError::required(&path.child("preemptionPolicy"), "")),
            other => errs.push(FieldError::not_supported(
                &path.child("preemptionPolicy"),
                other,
                &["PreemptLowerPriority", "Never"],
            )),
        }
    }
    if let Some(overhead) = object(spec, "overhead") {
        errs.extend(validate_overhead(overhead, &path.child("overhead")));
    }
    errs.extend(validate_os(spec, path));
    errs.extend(file_key_ref_volumes(spec, path));
    errs
}

/// `validatePodResourceClaims`.
fn validate_resource_claims(spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for (i, claim) in items(spec, "resourceClaims") {
        let p = path.index(i);
        let name = text(claim, "name");
        if name.is_empty() {
            errs.push(FieldError::required(&p.child("name"), ""));
        } else if names.contains(name) {
            errs.push(FieldError::duplicate(&p.child("name"), name));
        } else {
            errs.extend(dns_label(name, &p.child("name")));
            names.insert(name);
        }
        let rendered = || {
            ironplane_protobuf::go_struct_json(
                "core.v1.PodResourceClaim",
                claim,
                ironplane_protobuf::GoStyle::Internal,
            )
            .unwrap_or_default()
        };
        let by_name = opt_text(claim, "resourceClaimName");
        let by_template = opt_text(claim, "resourceClaimTemplateName");
        if by_name.is_some() && by_template.is_some() {
            errs.push(
                FieldError::invalid(
                    &p,
                    claim.clone(),
                    "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified",
                )
                .with_rendered_value(rendered()),
            );
        }
        if by_name.is_none() && by_template.is_none() {
            errs.push(
                FieldError::invalid(
                    &p,
                    claim.clone(),
                    "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
                )
                .with_rendered_value(rendered()),
            );
        }
        if let Some(n) = by_name {
            errs.extend(dns_subdomain(n, &p.child("resourceClaimName")));
        }
        if let Some(n) = by_template {
            errs.extend(dns_subdomain(n, &p.child("resourceClaimTemplateName")));
        }
    }
    errs
}

/// `validatePodHostNetworkDeps`.
fn host_network_ports(spec: &Value, path: &FieldPath, resource_is_pod: bool) -> Vec<FieldError> {
    if !flag(spec, "hostNetwork") {
        return Vec::new();
    }
    let mut errs = Vec::new();
    for (i, c) in items(spec, "containers") {
        for (j, port) in items(c, "ports") {
            let (hp, cp) = (int(port, "hostPort"), int(port, "containerPort"));
            if (resource_is_pod || hp != 0) && hp != cp {
                errs.push(FieldError::invalid(
                    &path
                        .child("containers")
                        .index(i)
                        .child("ports")
                        .index(j)
                        .child("hostPort"),
                    hp,
                    "must match `containerPort` when `hostNetwork` is true",
                ));
            }
        }
    }
    errs
}

/// `validatePodDNSConfig` (relaxed search names, as v1.36 has them).
fn validate_dns_config(spec: &Value, policy: &str, path: &FieldPath) -> Vec<FieldError> {
    let config = object(spec, "dnsConfig");
    if policy == "None" {
        let Some(c) = config else {
            return vec![FieldError::required(
                path,
                "must provide `dnsConfig` when `dnsPolicy` is None",
            )];
        };
        if list(c, "nameservers").is_empty() {
            return vec![FieldError::required(
                &path.child("nameservers"),
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            )];
        }
    }
    let Some(c) = config else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    let nameservers = list(c, "nameservers");
    if nameservers.len() > 3 {
        errs.push(FieldError::invalid(
            &path.child("nameservers"),
            Value::Array(nameservers.to_vec()),
            "must not have more than 3 nameservers",
        ));
    }
    for (i, ns) in strings(c, "nameservers").into_iter().enumerate() {
        errs.extend(legacy_ip(&path.child("nameservers").index(i), ns));
    }
    let searches = strings(c, "searches");
    if searches.len() > 32 {
        errs.push(FieldError::invalid(
            &path.child("searches"),
            Value::Array(list(c, "searches").to_vec()),
            "must not have more than 32 search paths",
        ));
    }
    if searches.join(" ").len() > 2048 {
        errs.push(FieldError::invalid(
            &path.child("searches"),
            Value::Array(list(c, "searches").to_vec()),
            "must not have more than 2048 characters (including spaces) in the search list",
        ));
    }
    for (i, s) in searches.iter().enumerate() {
        if *s != "." {
            let s = s.strip_suffix('.').unwrap_or(s);
            errs.extend(
                is_dns1123_subdomain_with_underscore(s)
                    .into_iter()
                    .map(|m| FieldError::invalid(&path.child("searches").index(i), s, m)),
            );
        }
    }
    for (i, o) in items(c, "options") {
        if text(o, "name").is_empty() {
            errs.push(FieldError::required(
                &path.child("options").index(i),
                "must not be empty",
            ));
        }
    }
    errs
}

/// `ValidatePodTemplateSpec` of the template at `path` (a workload's `spec.template`, a
/// PodTemplate's `template`).
pub fn validate_template_spec(template: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let empty = Value::Null;
    let template = template.unwrap_or(&empty);
    let meta = template.get("metadata").unwrap_or(&empty);
    let spec = template.get("spec").unwrap_or(&empty);
    let mut errs = validate_template_metadata(template, path);
    let sp = path.child("spec");
    errs.extend(validate_spec(spec, &sp, PodSpecOptions::default()));
    errs.extend(validate_annotations_match_fields(meta, spec, &sp));
    if !list(spec, "ephemeralContainers").is_empty() {
        errs.push(FieldError::forbidden(
            &sp.child("ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
    errs
}

/// The template's labels, annotations and pod-specific annotations. The template's ObjectMeta
/// is embedded in Go: they are reported at `<template>.labels` and `<template>.annotations`.
pub fn validate_template_metadata(template: &Value, path: &FieldPath) -> Vec<FieldError> {
    let empty = Value::Null;
    let meta = template.get("metadata").unwrap_or(&empty);
    let spec = template.get("spec").unwrap_or(&empty);
    let mut errs = validate_labels(meta.get("labels"), &path.child("labels"));
    errs.extend(validate_annotations(
        meta.get("annotations"),
        &path.child("annotations"),
    ));
    errs.extend(validate_pod_annotations(
        meta,
        spec,
        &path.child("annotations"),
    ));
    errs
}

/// `validatePodMetadataAndSpec` without the generic metadata rules (the store checks those):
/// pod annotations, the spec, and what only pods refuse.
pub fn validate_pod_metadata_and_spec(pod: &Value) -> Vec<FieldError> {
    let empty = Value::Null;
    let meta = pod.get("metadata").unwrap_or(&empty);
    let spec = pod.get("spec").unwrap_or(&empty);
    let sp = FieldPath::new("spec");
    let mut errs =
        validate_pod_annotations(meta, spec, &FieldPath::new("metadata").child("annotations"));
    let opts = PodSpecOptions {
        resource_is_pod: true,
        pod_name: Some(text(meta, "name")),
    };
    errs.extend(validate_spec(spec, &sp, opts));
    if text(spec, "serviceAccountName").is_empty() {
        for (vi, vol) in items(spec, "volumes") {
            let Some(projected) = object(vol, "projected") else {
                continue;
            };
            for (si, source) in items(projected, "sources") {
                if present(source, "serviceAccountToken") {
                    errs.push(FieldError::forbidden(
                        &sp.child("volumes")
                            .index(vi)
                            .child("projected")
                            .child("sources")
                            .index(si)
                            .child("serviceAccountToken"),
                        "must not be specified when serviceAccountName is not set",
                    ));
                }
            }
        }
    }
    for kind in ["containers", "initContainers"] {
        for (i, c) in items(spec, kind) {
            errs.extend(image_whitespace(c, &sp.child(kind).index(i)));
        }
    }
    errs
}

/// `ValidatePodCreate` (after the generic metadata rules).
pub fn validate_pod_create(pod: &Value) -> Vec<FieldError> {
    let mut errs = validate_pod_metadata_and_spec(pod);
    let empty = Value::Null;
    let meta = pod.get("metadata").unwrap_or(&empty);
    let spec = pod.get("spec").unwrap_or(&empty);
    let sp = FieldPath::new("spec");
    if !list(spec, "ephemeralContainers").is_empty() {
        errs.push(FieldError::forbidden(
            &sp.child("ephemeralContainers"),
            "cannot be set on create",
        ));
    }
    if !text(spec, "nodeName").is_empty() && !list(spec, "schedulingGates").is_empty() {
        errs.push(FieldError::forbidden(
            &sp.child("nodeName"),
            "cannot be set until all schedulingGates have been cleared",
        ));
    }
    errs.extend(validate_annotations_match_fields(meta, spec, &sp));
    errs
}
