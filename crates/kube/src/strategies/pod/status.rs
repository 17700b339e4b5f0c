//! The `status` subresource of pods (pkg/registry/core/pod/strategy.go `podStatusStrategy`,
//! pkg/apis/core/validation `ValidatePodStatusUpdate`): what a status write keeps from the
//! stored pod, the rules a new status must follow (conditions, node names, QoS class, container
//! state transitions under the container restart rules, resource claim statuses, IPs,
//! container users, allocated resource health) and the warnings about IP addresses.

use apimachinery::object::JsonPointer;
use apimachinery::validation::{
    FieldError, FieldPath, is_dns1123_label, is_dns1123_subdomain, is_qualified_name,
    is_valid_group_id, is_valid_user_id,
};
use serde_json::Value;

use super::update::{annotation_updates, empty, spec_of};
use super::util::{items, list, map, opt_int, present, text};

/// The most a resource health message may say (`v1.ResourceHealthMessageMaxLength`).
const RESOURCE_HEALTH_MESSAGE_MAX: i64 = 1024;

/// `ValidatePodStatusUpdate` (after the generic metadata update rules, which the store checks).
pub fn validate_status_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = annotation_updates(new, old, &FieldPath::new("metadata").child("annotations"));
    let status = new.get("status").unwrap_or(empty());
    let old_status = old.get("status").unwrap_or(empty());
    let sp = FieldPath::new("status");
    errs.extend(validate_conditions(status, &sp.child("conditions")));
    if text(spec_of(new), "nodeName") != text(spec_of(old), "nodeName") {
        errs.push(FieldError::forbidden(
            &sp.child("nodeName"),
            "may not be changed directly",
        ));
    }
    let nominated = text(status, "nominatedNodeName");
    if nominated != text(old_status, "nominatedNodeName") && !nominated.is_empty() {
        errs.extend(
            is_dns1123_subdomain(nominated)
                .into_iter()
                .map(|m| FieldError::invalid(&sp.child("nominatedNodeName"), nominated, m)),
        );
    }
    // ClearingNominatedNodeNameAfterBinding (beta, on in v1.36): a bound pod gets no new
    // nominated node.
    if !text(spec_of(old), "nodeName").is_empty()
        && !nominated.is_empty()
        && nominated != text(old_status, "nominatedNodeName")
    {
        errs.push(FieldError::forbidden(
            &sp.child("nominatedNodeName"),
            "may not be set on pods that are already bound to a node",
        ));
    }
    if let Some(g) = opt_int(status, "observedGeneration")
        && g < 0
    {
        errs.push(FieldError::invalid(
            &sp.child("observedGeneration"),
            g,
            "must be a non-negative integer",
        ));
    }
    let (nq, oq) = (text(status, "qosClass"), text(old_status, "qosClass"));
    if nq != oq {
        errs.push(FieldError::invalid(
            &sp.child("qosClass"),
            nq,
            "field is immutable",
        ));
    }
    // The transitions are judged by the stored spec (the new one is the same).
    let spec = spec_of(old);
    errs.extend(state_transitions(
        status,
        old_status,
        "containerStatuses",
        spec,
        Some("containers"),
        &sp,
    ));
    errs.extend(state_transitions(
        status,
        old_status,
        "initContainerStatuses",
        spec,
        Some("initContainers"),
        &sp,
    ));
    errs.extend(state_transitions(
        status,
        old_status,
        "ephemeralContainerStatuses",
        spec,
        None,
        &sp,
    ));
    let new_spec = spec_of(new);
    errs.extend(resource_claim_statuses(
        status,
        new_spec,
        &sp.child("resourceClaimStatuses"),
    ));
    errs.extend(extended_resource_claim_status(
        status,
        new_spec,
        &sp.child("extendedResourceClaimStatus"),
    ));
    // `validatePodIPs`: legacy IP fields (strict parsing, StrictIPCIDRValidation is on), whose
    // old values may stay.
    errs.extend(status_ips(status, old_status, "podIPs", &sp, false));
    // `validateHostIPs`: the first host IP is `hostIP`, then the same IP rules.
    errs.extend(status_ips(status, old_status, "hostIPs", &sp, true));
    let windows = new_spec.at("/os/name").and_then(Value::as_str) == Some("windows");
    let linux = new_spec
        .at("/os/name")
        .and_then(Value::as_str)
        .is_none_or(|n| n == "linux");
    for list_name in [
        "containerStatuses",
        "initContainerStatuses",
        "ephemeralContainerStatuses",
    ] {
        errs.extend(container_status_users(
            status,
            list_name,
            &sp.child(list_name),
            windows,
            linux,
        ));
    }
    errs.extend(allocated_resources_status(
        status,
        "containerStatuses",
        list(new_spec, "containers"),
        &sp.child("containerStatuses"),
    ));
    errs.extend(allocated_resources_status(
        status,
        "initContainerStatuses",
        list(new_spec, "initContainers"),
        &sp.child("initContainerStatuses"),
    ));
    // Ephemeral containers have no resources to report on.
    for (i, s) in items(status, "ephemeralContainerStatuses") {
        if !list(s, "allocatedResourcesStatus").is_empty() {
            errs.push(FieldError::forbidden(
                &sp.child("ephemeralContainerStatuses")
                    .index(i)
                    .child("allocatedResourcesStatus"),
                "must not be specified in container status",
            ));
        }
    }
    errs
}

/// `validatePodConditions`: upstream names the internal field (`Type`).
fn validate_conditions(status: &Value, cp: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, c) in items(status, "conditions") {
        if let Some(g) = opt_int(c, "observedGeneration")
            && g < 0
        {
            errs.push(FieldError::invalid(
                &cp.index(i).child("observedGeneration"),
                g,
                "must be a non-negative integer",
            ));
        }
        let t = text(c, "type");
        if !matches!(t, "PodScheduled" | "Ready" | "Initialized") {
            errs.extend(
                is_qualified_name(t)
                    .into_iter()
                    .map(|m| FieldError::invalid(&cp.index(i).child("Type"), t, m)),
            );
        }
    }
    errs
}

/// `FindMatchingContainerRestartRule`: the first rule whose exit codes take in `exit`.
fn matching_restart_rule(c: &Value, exit: i64) -> Option<&Value> {
    list(c, "restartPolicyRules").iter().find(|rule| {
        let Some(codes) = rule.get("exitCodes").filter(|v| !v.is_null()) else {
            return false;
        };
        let matched = list(codes, "values")
            .iter()
            .any(|v| v.as_i64() == Some(exit));
        match text(codes, "operator") {
            "In" => matched,
            "NotIn" => !matched,
            _ => false,
        }
    })
}

/// `ContainerShouldRestart`: the container's restart rules, then its restart policy, then
/// the pod's (RestartAllContainersOnContainerExits is on, so that action restarts too).
fn container_should_restart(c: &Value, spec: &Value, exit: i64) -> bool {
    if present(c, "restartPolicy") {
        if let Some(rule) = matching_restart_rule(c, exit)
            && matches!(text(rule, "action"), "Restart" | "RestartAllContainers")
        {
            return true;
        }
        match text(c, "restartPolicy") {
            "Always" => return true,
            "OnFailure" => return exit != 0,
            "Never" => return false,
            _ => {}
        }
    }
    match text(spec, "restartPolicy") {
        "OnFailure" => exit != 0,
        "Never" => false,
        _ => true,
    }
}

/// `AllContainersCouldRestart`: some container may restart them all.
fn all_containers_could_restart(spec: &Value) -> bool {
    ["initContainers", "containers"].iter().any(|kind| {
        list(spec, kind).iter().any(|c| {
            list(c, "restartPolicyRules")
                .iter()
                .any(|r| text(r, "action") == "RestartAllContainers")
        })
    })
}

fn terminated(s: &Value) -> Option<&Value> {
    s.get("state")
        .and_then(|st| st.get("terminated"))
        .filter(|t| !t.is_null())
}

/// `ValidateContainerStateTransition`, `ValidateInitContainerStateTransition` (both under
/// ContainerRestartRules, beta, on in v1.36) and `ValidateEphemeralContainerStateTransition`
/// (`containers` None): a terminated container may run again only if it would be restarted.
/// The error is at the old status's index.
fn state_transitions(
    status: &Value,
    old_status: &Value,
    list_name: &str,
    spec: &Value,
    containers: Option<&str>,
    sp: &FieldPath,
) -> Vec<FieldError> {
    let path = sp.child(list_name);
    let mut errs = Vec::new();
    if containers.is_some() && all_containers_could_restart(spec) {
        return errs;
    }
    let new_statuses = list(status, list_name);
    for (i, old) in items(old_status, list_name) {
        let Some(term) = terminated(old) else {
            continue;
        };
        let name = text(old, "name");
        let running_again = new_statuses
            .iter()
            .filter(|n| text(n, "name") == name && terminated(n).is_none());
        match containers {
            Some(kind) => {
                if running_again.count() == 0 {
                    continue;
                }
                let exit = opt_int(term, "exitCode").unwrap_or(0);
                let allowed = list(spec, kind)
                    .iter()
                    .find(|c| text(c, "name") == name)
                    .is_some_and(|c| container_should_restart(c, spec, exit));
                if !allowed {
                    errs.push(FieldError::forbidden(
                        &path.index(i).child("state"),
                        "may not be transitioned to non-terminated state",
                    ));
                }
            }
            None => {
                for _ in running_again {
                    errs.push(FieldError::forbidden(
                        &path.index(i).child("state"),
                        "may not be transitioned to non-terminated state",
                    ));
                }
            }
        }
    }
    errs
}

/// `validatePodResourceClaimStatuses`: each status names a claim of the spec, once, and a
/// generated claim name is a DNS subdomain.
fn resource_claim_statuses(status: &Value, spec: &Value, path: &FieldPath) -> Vec<FieldError> {
    let claims: Vec<&str> = list(spec, "resourceClaims")
        .iter()
        .map(|c| text(c, "name"))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    let mut errs = Vec::new();
    for (i, s) in items(status, "resourceClaimStatuses") {
        let ip = path.index(i);
        let name = text(s, "name");
        if !claims.contains(&name) {
            errs.push(FieldError::invalid(
                &ip.child("name"),
                name,
                "must match the name of an entry in `spec.resourceClaims`",
            ));
        }
        if !seen.insert(name) {
            errs.push(FieldError::duplicate(&ip.child("name"), name));
        }
        if let Some(claim) = s.get("resourceClaimName").and_then(Value::as_str) {
            errs.extend(
                is_dns1123_subdomain(claim)
                    .into_iter()
                    .map(|m| FieldError::invalid(&ip.child("resourceClaimName"), claim, m)),
            );
        }
    }
    errs
}

/// `validatePodExtendedResourceClaimStatus` (DRAExtendedResource, beta, on in v1.36). The
/// request name is checked at the status's own `requestName` path, as upstream does.
fn extended_resource_claim_status(
    status: &Value,
    spec: &Value,
    path: &FieldPath,
) -> Vec<FieldError> {
    let Some(ext) = status
        .get("extendedResourceClaimStatus")
        .filter(|v| !v.is_null())
    else {
        return Vec::new();
    };
    // Regular containers take the place of init containers of the same name.
    let mut containers: std::collections::BTreeMap<&str, &Value> = Default::default();
    for kind in ["initContainers", "containers"] {
        for c in list(spec, kind) {
            containers.insert(text(c, "name"), c);
        }
    }
    let mut errs = Vec::new();
    let rp = path.child("requestMappings");
    let mappings = list(ext, "requestMappings");
    if mappings.is_empty() {
        errs.push(FieldError::required(
            &rp,
            "at least one request mapping is required",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, rm) in mappings.iter().enumerate() {
        let ip = rp.index(i);
        let (container, resource, request) = (
            text(rm, "containerName"),
            text(rm, "resourceName"),
            text(rm, "requestName"),
        );
        match containers.get(container) {
            Some(c) => {
                let requests = map(c.get("resources").unwrap_or(empty()), "requests");
                if !requests.contains_key(resource) {
                    errs.push(FieldError::invalid(
                        &ip.child("resourceName"),
                        resource,
                        "must match the extended resource name of an entry in spec.initContainers.resources.requests or spec.containers.resources.requests",
                    ));
                }
            }
            None => errs.push(FieldError::invalid(
                &ip.child("containerName"),
                container,
                "must match the name of an entry in spec.initContainers.name or spec.containers.name",
            )),
        }
        errs.extend(
            is_dns1123_label(request)
                .into_iter()
                .map(|m| FieldError::invalid(&path.child("requestName"), request, m)),
        );
        if !seen.insert((container, resource, request)) {
            errs.push(FieldError::duplicate(&ip.child("containerName"), container));
            errs.push(FieldError::duplicate(&ip.child("resourceName"), resource));
            errs.push(FieldError::duplicate(&ip.child("requestName"), request));
        }
    }
    let claim = text(ext, "resourceClaimName");
    if claim.is_empty() {
        errs.push(FieldError::required(&path.child("resourceClaimName"), ""));
    } else {
        errs.extend(
            is_dns1123_subdomain(claim)
                .into_iter()
                .map(|m| FieldError::invalid(&path.child("resourceClaimName"), claim, m)),
        );
    }
    errs
}

/// `validateContainerStatusUsers`: a Windows pod reports no Linux user; a Linux pod's (the
/// default OS) user and group ids are valid.
fn container_status_users(
    status: &Value,
    list_name: &str,
    path: &FieldPath,
    windows: bool,
    linux: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, s) in items(status, list_name) {
        let Some(user) = s.get("user").filter(|u| !u.is_null()) else {
            continue;
        };
        let lp = path.index(i).child("user").child("linux");
        let Some(lu) = user.get("linux").filter(|l| !l.is_null()) else {
            continue;
        };
        if windows {
            errs.push(FieldError::forbidden(
                &lp,
                "cannot be set for a windows pod",
            ));
            continue;
        }
        if !linux {
            continue;
        }
        let uid = opt_int(lu, "uid").unwrap_or(0);
        errs.extend(
            is_valid_user_id(uid)
                .into_iter()
                .map(|m| FieldError::invalid(&lp.child("uid"), uid, m)),
        );
        let gid = opt_int(lu, "gid").unwrap_or(0);
        errs.extend(
            is_valid_group_id(gid)
                .into_iter()
                .map(|m| FieldError::invalid(&lp.child("gid"), gid, m)),
        );
        for (g, v) in items(lu, "supplementalGroups") {
            let gid = v.as_i64().unwrap_or(0);
            errs.extend(
                is_valid_group_id(gid)
                    .into_iter()
                    .map(|m| FieldError::invalid(&lp.child("supplementalGroups").index(g), gid, m)),
            );
        }
    }
    errs
}

/// `validateContainerStatusAllocatedResourcesStatus`: a reported resource is one the
/// container requests (or one of its claims, `claim:<name>[/<request>]`), with a supported
/// health, a message that is not empty nor too long, and resource ids reported once.
fn allocated_resources_status(
    status: &Value,
    list_name: &str,
    containers: &[Value],
    path: &FieldPath,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, s) in items(status, list_name) {
        let container = containers
            .iter()
            .find(|c| text(c, "name") == text(s, "name"));
        for (j, allocated) in items(s, "allocatedResourcesStatus") {
            let ap = path.index(i).child("allocatedResourcesStatus").index(j);
            let name = text(allocated, "name");
            if let Some(c) = container {
                let resources = c.get("resources").unwrap_or(empty());
                let (found, why) = if name.starts_with("claim:") {
                    (
                        list(resources, "claims").iter().any(|claim| {
                            let mut full = format!("claim:{}", text(claim, "name"));
                            if !text(claim, "request").is_empty() {
                                full = format!("{full}/{}", text(claim, "request"));
                            }
                            full == name
                        }),
                        "must match one of the container's resource claims in a format 'claim:<claimName>/<request>' or 'claim:<claimName>' if request is empty",
                    )
                } else {
                    (
                        map(resources, "requests").contains_key(name),
                        "must match one of the container's resource requests",
                    )
                };
                if !found {
                    errs.push(FieldError::invalid(&ap.child("name"), name, why));
                }
            }
            let mut ids = std::collections::BTreeSet::new();
            for (k, r) in items(allocated, "resources") {
                let rp = ap.child("resources").index(k);
                let health = text(r, "health");
                if !matches!(health, "Healthy" | "Unhealthy" | "Unknown") {
                    errs.push(FieldError::not_supported(
                        &rp.child("health"),
                        health,
                        &["Healthy", "Unhealthy", "Unknown"],
                    ));
                }
                if let Some(msg) = r.get("message").and_then(Value::as_str) {
                    if msg.is_empty() {
                        errs.push(FieldError::required(
                            &rp.child("message"),
                            "must be non-empty if specified",
                        ));
                    } else if msg.len() as i64 > RESOURCE_HEALTH_MESSAGE_MAX {
                        errs.push(FieldError::too_long(
                            &rp.child("message"),
                            msg,
                            RESOURCE_HEALTH_MESSAGE_MAX,
                        ));
                    }
                }
                let id = text(r, "resourceID");
                if !ids.insert(id) {
                    errs.push(FieldError::duplicate(&rp.child("resourceID"), id));
                }
            }
        }
    }
    errs
}

/// An address as Go's `netutils.ParseIPSloppy` reads it: IPv4 octets may have leading zeros
/// (read as decimal).
fn parse_ip_sloppy(s: &str) -> Option<std::net::IpAddr> {
    if !s.contains(':') {
        let octets: Vec<u8> = s
            .split('.')
            .map(|o| {
                (!o.is_empty() && o.len() <= 3 && o.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| o.parse::<u8>().ok())
                    .flatten()
            })
            .collect::<Option<_>>()?;
        let [a, b, c, d] = octets[..] else {
            return None;
        };
        return Some(std::net::Ipv4Addr::new(a, b, c, d).into());
    }
    s.parse().ok()
}

/// `validatePodIPs` / `validateHostIPs` over `status.<list>`. With more than one address they
/// must be one of each family (`IsDualStackIPStrings`); an address that does not parse makes
/// that check an internal error before the refusal.
fn status_ips(
    status: &Value,
    old_status: &Value,
    list_name: &str,
    sp: &FieldPath,
    host: bool,
) -> Vec<FieldError> {
    let ips: Vec<&Value> = items(status, list_name).map(|(_, v)| v).collect();
    let lp = sp.child(list_name);
    let mut errs = Vec::new();
    if host
        && let Some(first) = ips.first()
        && text(first, "ip") != text(status, "hostIP")
    {
        errs.push(FieldError::invalid(
            &lp.index(0).child("ip"),
            text(first, "ip"),
            "must be equal to `hostIP`",
        ));
    }
    let old_ips: Vec<&str> = items(old_status, list_name)
        .map(|(_, v)| text(v, "ip"))
        .collect();
    for (i, ip) in ips.iter().enumerate() {
        errs.extend(apimachinery::validation::is_valid_ip_for_legacy_field(
            &lp.index(i),
            text(ip, "ip"),
            true,
            &old_ips,
        ));
    }
    if ips.len() > 1 {
        // `IsDualStackIPStrings`: an IPv4-mapped IPv6 address is IPv4 to Go.
        let mut dual_stack = false;
        let parsed: Vec<Option<std::net::IpAddr>> = ips
            .iter()
            .map(|ip| parse_ip_sloppy(text(ip, "ip")))
            .collect();
        match parsed.iter().position(Option::is_none) {
            Some(i) => errs.push(FieldError::internal(
                &lp,
                format!(
                    "failed to check for dual stack with error:invalid IP[{i}]: {}",
                    text(ips[i], "ip")
                ),
            )),
            None => {
                let v4 = |ip: &std::net::IpAddr| match ip {
                    std::net::IpAddr::V4(_) => true,
                    std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().is_some(),
                };
                let parsed: Vec<std::net::IpAddr> = parsed.into_iter().flatten().collect();
                dual_stack = parsed.iter().any(v4) && parsed.iter().any(|ip| !v4(ip));
            }
        }
        if !dual_stack || ips.len() > 2 {
            let values: Vec<Value> = ips.iter().map(|v| (*v).clone()).collect();
            let rendered = ironplane_protobuf::go_slice_json(
                if host {
                    "core.v1.HostIP"
                } else {
                    "core.v1.PodIP"
                },
                &values,
                ironplane_protobuf::GoStyle::Internal,
            )
            .unwrap_or_default();
            errs.push(
                FieldError::invalid(
                    &lp,
                    Value::Array(values),
                    "may specify no more than one IP for each IP family",
                )
                .with_rendered_value(rendered),
            );
        }
    }
    errs
}

/// `podStatusStrategy.PrepareForUpdate` past the spec and metadata (which the store keeps
/// for a status write): the QoS class may not be dropped, observed generations a client left
/// out keep their stored values, and status fields of features that are off go unless the
/// stored status used them. (An update of the pod itself keeps the stored status, so this
/// changes nothing there.)
pub fn prepare_status_update(new: &mut Value, old: &Value) {
    let old_status = old.get("status").unwrap_or(empty());
    let Some(status) = new.get_mut("status").filter(|s| s.is_object()) else {
        return;
    };
    if text(status, "qosClass").is_empty()
        && let Some(q) = old_status.get("qosClass")
    {
        status["qosClass"] = q.clone();
    }
    preserve_observed_generation(status, old_status);
    drop_disabled_status_fields(status, old_status);
}

/// `preserveOldObservedGeneration`: a zero observed generation, of the status or of a
/// condition, takes the stored one (conditions matched by type, in order).
fn preserve_observed_generation(status: &mut Value, old_status: &Value) {
    if opt_int(status, "observedGeneration").unwrap_or(0) == 0
        && let Some(g) = opt_int(old_status, "observedGeneration").filter(|g| *g != 0)
    {
        status["observedGeneration"] = g.into();
    }
    let mut old_by_type: std::collections::BTreeMap<String, std::collections::VecDeque<i64>> =
        Default::default();
    for c in list(old_status, "conditions") {
        old_by_type
            .entry(text(c, "type").to_string())
            .or_default()
            .push_back(opt_int(c, "observedGeneration").unwrap_or(0));
    }
    let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) else {
        return;
    };
    for c in conditions {
        let old_gen = old_by_type
            .get_mut(text(c, "type"))
            .and_then(|q| q.pop_front())
            .unwrap_or(0);
        if opt_int(c, "observedGeneration").unwrap_or(0) == 0 && old_gen != 0 {
            c["observedGeneration"] = old_gen.into();
        }
    }
}

/// `dropDisabledPodStatusFields` for the gates that are off in v1.36: ImageVolumeWithDigest
/// (alpha: the image status of volume mounts) and DRANodeAllocatableResources (alpha: node
/// allocatable resource claim statuses).
fn drop_disabled_status_fields(status: &mut Value, old_status: &Value) {
    let lists = [
        "containerStatuses",
        "initContainerStatuses",
        "ephemeralContainerStatuses",
    ];
    let image_in_use = lists.iter().any(|l| {
        list(old_status, l).iter().any(|s| {
            list(s, "volumeMounts")
                .iter()
                .any(|m| m.get("image").is_some_and(|i| !i.is_null()))
        })
    });
    if !image_in_use {
        for l in lists {
            for s in status
                .get_mut(l)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                for m in s
                    .get_mut("volumeMounts")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                {
                    if let Some(m) = m.as_object_mut() {
                        m.remove("image");
                    }
                }
            }
        }
    }
    if list(old_status, "nodeAllocatableResourceClaimStatuses").is_empty()
        && let Some(s) = status.as_object_mut()
    {
        s.remove("nodeAllocatableResourceClaimStatuses");
    }
}

/// The status strategy's `WarningsOnUpdate`: pod and host IPs in non-standard form.
pub fn status_warnings(new: &Value) -> Vec<String> {
    let status = new.get("status").unwrap_or(empty());
    let mut w = Vec::new();
    for list_name in ["podIPs", "hostIPs"] {
        for (i, ip) in items(status, list_name) {
            w.extend(apimachinery::validation::get_warnings_for_ip(
                &format!("status.{list_name}[{i}].ip"),
                text(ip, "ip"),
            ));
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: Value, status: Value) -> Value {
        json!({"metadata": {"name": "s", "namespace": "n"}, "spec": spec, "status": status})
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn terminated_status(exit: i64) -> Value {
        json!({"qosClass": "BestEffort", "containerStatuses": [
            {"name": "c", "state": {"terminated": {"exitCode": exit}}}]})
    }

    fn running_status() -> Value {
        json!({"qosClass": "BestEffort", "containerStatuses": [
            {"name": "c", "state": {"running": {}}}]})
    }

    #[test]
    fn terminated_containers_restart_only_as_their_policies_say() {
        let never = json!({"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]});
        let errs = validate_status_update(
            &pod(never.clone(), running_status()),
            &pod(never, terminated_status(1)),
        );
        assert_eq!(
            messages(&errs),
            [
                "status.containerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state"
            ]
        );
        let on_failure =
            json!({"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "i"}]});
        assert!(
            validate_status_update(
                &pod(on_failure.clone(), running_status()),
                &pod(on_failure, terminated_status(1))
            )
            .is_empty()
        );
        // A container rule restarts on exit code 42 although the pod never restarts.
        let rules = json!({"restartPolicy": "Never", "containers": [{"name": "c", "image": "i",
            "restartPolicy": "Never", "restartPolicyRules": [{"action": "Restart",
            "exitCodes": {"operator": "In", "values": [42]}}]}]});
        assert!(
            validate_status_update(
                &pod(rules.clone(), running_status()),
                &pod(rules.clone(), terminated_status(42))
            )
            .is_empty()
        );
        assert_eq!(
            validate_status_update(
                &pod(rules.clone(), running_status()),
                &pod(rules, terminated_status(1))
            )
            .len(),
            1
        );
    }

    #[test]
    fn observed_generations_are_kept() {
        let old = pod(
            json!({}),
            json!({"observedGeneration": 3, "conditions": [
                {"type": "Ready", "status": "True", "observedGeneration": 2}]}),
        );
        let mut new = pod(
            json!({}),
            json!({"conditions": [{"type": "Ready", "status": "False"}]}),
        );
        prepare_status_update(&mut new, &old);
        assert_eq!(new["status"]["observedGeneration"], 3);
        assert_eq!(new["status"]["conditions"][0]["observedGeneration"], 2);
    }

    #[test]
    fn resource_claim_statuses_name_spec_claims() {
        let spec = json!({"resourceClaims": [{"name": "a"}]});
        let status = json!({"resourceClaimStatuses": [{"name": "b"}, {"name": "b", "resourceClaimName": "X"}]});
        let errs = validate_status_update(&pod(spec.clone(), status), &pod(spec, json!({})));
        assert_eq!(errs.len(), 4, "{:?}", messages(&errs));
        assert!(
            messages(&errs)[2]
                .starts_with("status.resourceClaimStatuses[1].name: Duplicate value: \"b\"")
        );
    }
}
