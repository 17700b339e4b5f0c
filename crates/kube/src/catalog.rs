//! The catalog of built-in resources: one `ResourceInfo` row per served group/version/resource,
//! read from upstream's discovery documents of v1.36 (kept as data in `data/discovery`), in
//! upstream's group and version order. Per-kind facts that discovery does not carry (selectable
//! fields, generation tracking) are the tables below; behaviour is in `strategies`.

use std::sync::Arc;

use apiserver::registry::{
    ImmutableField, Refusal, ResourceInfo, STATUS_RESETS_METADATA, SelectableField, SubresourceInfo,
};
use serde_json::Value;

const API_GROUPS: &str = include_str!("../data/discovery/discovery_apis.json");
const CORE_V1: &str = include_str!("../data/discovery/discovery_api_v1.json");

/// The group-version resource lists, by `<group>_<version>`.
fn group_version_doc(group: &str, version: &str) -> Option<&'static str> {
    macro_rules! docs {
        ($($g:literal $v:literal),* $(,)?) => {
            match (group, version) {
                $(($g, $v) => Some(include_str!(concat!("../data/discovery/apis_", $g, "_", $v, ".json"))),)*
                _ => None,
            }
        };
    }
    docs!(
        "admissionregistration.k8s.io" "v1", "apiextensions.k8s.io" "v1", "apiregistration.k8s.io" "v1",
        "apps" "v1", "authentication.k8s.io" "v1", "authorization.k8s.io" "v1", "autoscaling" "v1",
        "autoscaling" "v2", "batch" "v1", "certificates.k8s.io" "v1", "coordination.k8s.io" "v1",
        "discovery.k8s.io" "v1", "events.k8s.io" "v1", "flowcontrol.apiserver.k8s.io" "v1",
        "networking.k8s.io" "v1", "node.k8s.io" "v1", "policy" "v1", "rbac.authorization.k8s.io" "v1",
        "resource.k8s.io" "v1", "scheduling.k8s.io" "v1", "storage.k8s.io" "v1",
    )
}

/// Subresources Ironplane serves; discovery lists only these (pods/log, exec and the like come
/// with the kubelet-facing work). `approval` is a CertificateSigningRequest's, `token` a
/// ServiceAccount's (TokenRequest).
const SERVED_SUBRESOURCES: &[&str] = &[
    "token",
    "status",
    "scale",
    "finalize",
    "binding",
    "approval",
    "eviction",
    "ephemeralcontainers",
    "resize",
];

/// Kinds whose objects carry `metadata.generation` (recorded from upstream's defaulted objects).
/// Fields updates may not change, per resource, with upstream's words for the refusal (each from
/// the kind's `Validate*Update`). Rules that are more than "this field stays" live in the kind's
/// strategy.
fn immutable_fields(group: &str, resource: &str) -> &'static [ImmutableField] {
    const IMMUTABLE: Refusal = Refusal::Invalid("field is immutable");
    // A struct literal (not a call) so that each table is a promoted constant.
    macro_rules! field {
        ($pointer:expr, $path:expr, $refusal:expr $(,)?) => {
            ImmutableField {
                pointer: $pointer,
                path: $path,
                refusal: $refusal,
            }
        };
    }
    // Workloads (apps, batch, ControllerRevisions) check their immutable fields in their
    // strategies, where upstream's order of causes and Go struct printing are kept.
    match (group, resource) {
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => &[field!(
            "/roleRef",
            "roleRef",
            Refusal::InvalidGo("rbac.v1.RoleRef", "cannot change roleRef"),
        )],
        ("scheduling.k8s.io", "priorityclasses") => &[field!(
            "/value",
            "value",
            Refusal::Forbidden("may not be changed in an update."),
        )],
        ("networking.k8s.io", "ingressclasses") => {
            &[field!("/spec/controller", "spec.controller", IMMUTABLE)]
        }
        _ => &[],
    }
}

/// The fields each strategy resets, by resource and subresource (`""` the main resource):
/// changes there belong to no field manager (upstream's `GetResetFields`, as the REST storage
/// exposes it — podgroups and podcertificaterequests declare none on the main resource).
const RESET_FIELDS: &[(&str, &str, ResetRows)] = &[
    ("apps", "daemonsets", MAIN_STATUS),
    (
        "apps",
        "deployments",
        &[("", &["status"]), ("status", &["spec", "metadata.labels"])],
    ),
    ("apps", "replicasets", MAIN_STATUS),
    ("apps", "statefulsets", MAIN_STATUS),
    ("autoscaling", "horizontalpodautoscalers", MAIN_STATUS),
    ("batch", "jobs", MAIN_STATUS),
    ("batch", "cronjobs", MAIN_STATUS),
    (
        "certificates.k8s.io",
        "certificatesigningrequests",
        &[
            ("", &["spec", "status"]),
            ("status", &["spec", "status.conditions"]),
            ("approval", &["spec", "status.certificate"]),
        ],
    ),
    (
        "certificates.k8s.io",
        "podcertificaterequests",
        &[("status", &["spec"])],
    ),
    (
        "",
        "namespaces",
        &[
            ("", &["status"]),
            ("status", &["spec"]),
            ("finalize", &["status"]),
        ],
    ),
    ("", "nodes", MAIN_STATUS),
    ("", "persistentvolumes", MAIN_STATUS),
    ("", "persistentvolumeclaims", MAIN_STATUS),
    (
        "",
        "pods",
        &[
            ("", &["status"]),
            (
                "status",
                &[
                    "spec",
                    "metadata.deletionTimestamp",
                    "metadata.ownerReferences",
                ],
            ),
        ],
    ),
    ("", "replicationcontrollers", MAIN_STATUS),
    ("", "resourcequotas", MAIN_STATUS),
    ("", "services", MAIN_STATUS),
    ("networking.k8s.io", "ingresses", MAIN_STATUS),
    ("policy", "poddisruptionbudgets", MAIN_STATUS),
    (
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        MAIN_STATUS,
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        STATUS_AND_METADATA,
    ),
    (
        "internal.apiserver.k8s.io",
        "storageversions",
        STATUS_AND_METADATA,
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        "flowschemas",
        STATUS_AND_METADATA,
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations",
        STATUS_AND_METADATA,
    ),
    ("networking.k8s.io", "servicecidrs", STATUS_AND_METADATA),
    ("resource.k8s.io", "resourceclaims", STATUS_AND_METADATA),
    ("resource.k8s.io", "devicetaintrules", STATUS_AND_METADATA),
    (
        "resource.k8s.io",
        "resourcepoolstatusrequests",
        STATUS_AND_METADATA,
    ),
    (
        "scheduling.k8s.io",
        "podgroups",
        &[("status", &["spec", "metadata"])],
    ),
    ("storage.k8s.io", "volumeattachments", STATUS_AND_METADATA),
    (
        "storagemigration.k8s.io",
        "storageversionmigrations",
        STATUS_AND_METADATA,
    ),
    ("apiregistration.k8s.io", "apiservices", STATUS_AND_METADATA),
];

/// A resource's reset fields: (subresource, dotted paths) rows.
type ResetRows = &'static [(&'static str, &'static [&'static str])];

/// Status is the status strategy's, the spec the main strategy's.
const MAIN_STATUS: ResetRows = &[("", &["status"]), ("status", &["spec"])];
/// As [`MAIN_STATUS`], and the status strategy resets all metadata too.
const STATUS_AND_METADATA: ResetRows = &[("", &["status"]), ("status", &["spec", "metadata"])];

fn reset_fields(group: &str, resource: &str) -> Vec<(String, apimachinery::managedfields::Set)> {
    RESET_FIELDS
        .iter()
        .find(|(g, r, _)| *g == group && *r == resource)
        .map(|(.., subs)| {
            subs.iter()
                .map(|(sub, paths)| {
                    (
                        sub.to_string(),
                        apimachinery::managedfields::reset_set(paths),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What a write through `/status` keeps as stored, by resource (upstream's status strategies:
/// `ResetObjectMetaForStatus` or `ObjectMeta = old` keeps everything a client writes; Deployment
/// keeps its labels, Pod its owner references, APIService all four); every other kind takes the
/// client's labels, annotations, finalizers and owner references.
const STATUS_KEEPS_METADATA: &[(&str, &str, &[&str])] = &[
    ("", "pods", &["ownerReferences"]),
    ("apps", "deployments", &["labels"]),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        STATUS_RESETS_METADATA,
    ),
    (
        "internal.apiserver.k8s.io",
        "storageversions",
        STATUS_RESETS_METADATA,
    ),
    (
        "certificates.k8s.io",
        "podcertificaterequests",
        STATUS_RESETS_METADATA,
    ),
    ("networking.k8s.io", "servicecidrs", STATUS_RESETS_METADATA),
    (
        "resource.k8s.io",
        "devicetaintrules",
        STATUS_RESETS_METADATA,
    ),
    ("resource.k8s.io", "resourceclaims", STATUS_RESETS_METADATA),
    (
        "resource.k8s.io",
        "resourcepoolstatusrequests",
        STATUS_RESETS_METADATA,
    ),
    ("scheduling.k8s.io", "podgroups", STATUS_RESETS_METADATA),
    (
        "storage.k8s.io",
        "volumeattachments",
        STATUS_RESETS_METADATA,
    ),
    (
        "storagemigration.k8s.io",
        "storageversionmigrations",
        STATUS_RESETS_METADATA,
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        "flowschemas",
        STATUS_RESETS_METADATA,
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations",
        STATUS_RESETS_METADATA,
    ),
    (
        "apiregistration.k8s.io",
        "apiservices",
        STATUS_RESETS_METADATA,
    ),
];

const TRACKS_GENERATION: &[(&str, &str)] = &[
    ("", "pods"),
    ("", "podtemplates"),
    ("", "replicationcontrollers"),
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("batch", "jobs"),
    ("batch", "cronjobs"),
    ("networking.k8s.io", "ingresses"),
    ("networking.k8s.io", "ingressclasses"),
    ("networking.k8s.io", "networkpolicies"),
    ("policy", "poddisruptionbudgets"),
    ("scheduling.k8s.io", "priorityclasses"),
    ("discovery.k8s.io", "endpointslices"),
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    ),
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
    ),
    ("admissionregistration.k8s.io", "mutatingadmissionpolicies"),
    (
        "admissionregistration.k8s.io",
        "mutatingadmissionpolicybindings",
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("flowcontrol.apiserver.k8s.io", "flowschemas"),
    (
        "flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations",
    ),
    ("resource.k8s.io", "deviceclasses"),
    ("resource.k8s.io", "resourceslices"),
];

/// Field selectors beyond name and namespace, in upstream's order: (group, resource, field,
/// path, value when absent).
const SELECTABLE_FIELDS: &[(&str, &str, &str, &str, &str)] = &[
    ("", "pods", "spec.nodeName", "spec.nodeName", ""),
    ("", "pods", "spec.restartPolicy", "spec.restartPolicy", ""),
    ("", "pods", "spec.schedulerName", "spec.schedulerName", ""),
    (
        "",
        "pods",
        "spec.serviceAccountName",
        "spec.serviceAccountName",
        "",
    ),
    ("", "pods", "spec.hostNetwork", "spec.hostNetwork", "false"),
    ("", "pods", "status.phase", "status.phase", ""),
    ("", "pods", "status.podIP", "status.podIP", ""),
    (
        "",
        "pods",
        "status.nominatedNodeName",
        "status.nominatedNodeName",
        "",
    ),
    (
        "",
        "events",
        "involvedObject.kind",
        "involvedObject.kind",
        "",
    ),
    (
        "",
        "events",
        "involvedObject.namespace",
        "involvedObject.namespace",
        "",
    ),
    (
        "",
        "events",
        "involvedObject.name",
        "involvedObject.name",
        "",
    ),
    ("", "events", "involvedObject.uid", "involvedObject.uid", ""),
    (
        "",
        "events",
        "involvedObject.apiVersion",
        "involvedObject.apiVersion",
        "",
    ),
    (
        "",
        "events",
        "involvedObject.resourceVersion",
        "involvedObject.resourceVersion",
        "",
    ),
    (
        "",
        "events",
        "involvedObject.fieldPath",
        "involvedObject.fieldPath",
        "",
    ),
    ("", "events", "reason", "reason", ""),
    ("", "events", "reportingComponent", "reportingComponent", ""),
    ("", "events", "source", "source.component", ""),
    ("", "events", "type", "type", ""),
    ("", "secrets", "type", "type", ""),
    ("", "namespaces", "status.phase", "status.phase", ""),
    (
        "",
        "nodes",
        "spec.unschedulable",
        "spec.unschedulable",
        "false",
    ),
    (
        "",
        "replicationcontrollers",
        "status.replicas",
        "status.replicas",
        "0",
    ),
    ("", "services", "spec.clusterIP", "spec.clusterIP", ""),
    ("", "services", "spec.type", "spec.type", ""),
    // Not apps/v1 ReplicaSets' `status.replicas`: their strategy indexes it, but apps/v1
    // registers no field label conversion, so the REST API refuses it (only the removed
    // extensions/v1beta1 accepted it); checked against a real kube-apiserver v1.36.2.
    (
        "batch",
        "jobs",
        "status.successful",
        "status.successful",
        "0",
    ),
    (
        "certificates.k8s.io",
        "certificatesigningrequests",
        "spec.signerName",
        "spec.signerName",
        "",
    ),
    // events.k8s.io names core's selectable fields after its own fields; `source` is not one
    // of them (pkg/apis/events/v1/conversion.go AddFieldLabelConversionsForEvent).
    ("events.k8s.io", "events", "reason", "reason", ""),
    (
        "events.k8s.io",
        "events",
        "regarding.kind",
        "regarding.kind",
        "",
    ),
    (
        "events.k8s.io",
        "events",
        "regarding.namespace",
        "regarding.namespace",
        "",
    ),
    (
        "events.k8s.io",
        "events",
        "regarding.name",
        "regarding.name",
        "",
    ),
    (
        "events.k8s.io",
        "events",
        "regarding.uid",
        "regarding.uid",
        "",
    ),
    (
        "events.k8s.io",
        "events",
        "regarding.apiVersion",
        "regarding.apiVersion",
        "",
    ),
    (
        "events.k8s.io",
        "events",
        "regarding.resourceVersion",
        "regarding.resourceVersion",
        "",
    ),
    (
        "events.k8s.io",
        "events",
        "regarding.fieldPath",
        "regarding.fieldPath",
        "",
    ),
    (
        "events.k8s.io",
        "events",
        "reportingController",
        "reportingController",
        "",
    ),
    ("events.k8s.io", "events", "type", "type", ""),
    (
        "resource.k8s.io",
        "resourceslices",
        "spec.nodeName",
        "spec.nodeName",
        "",
    ),
    (
        "resource.k8s.io",
        "resourceslices",
        "spec.driver",
        "spec.driver",
        "",
    ),
];

/// Upstream's refusal of a field label when the kind's conversion words it otherwise than
/// core's `field label not supported: <label>`: (group, resource, message with `{version}` and
/// `{field}`). ResourceSlice's conversion names its GroupVersionKind
/// (pkg/apis/resource/v1/conversion.go).
const FIELD_LABEL_MESSAGES: &[(&str, &str, &str)] = &[(
    "resource.k8s.io",
    "resourceslices",
    "field label not supported for resource.k8s.io/{version}, Kind=ResourceSlice: {field}",
)];

/// Selectable fields read elsewhere when their path is empty: (group, resource, field, path).
/// An event's `source` is its reporting controller when it has no source component
/// (upstream's `EventToSelectableFields`).
const FIELD_FALLBACKS: &[(&str, &str, &str, &str)] =
    &[("", "events", "source", "reportingComponent")];

/// Selectable fields of a version served over another's storage, by the name the storage
/// version indexes them under: (group, resource, field, indexed as). Upstream's field label
/// conversion maps events.k8s.io's labels to core's (pkg/apis/events/v1/conversion.go).
const FIELD_INDEXES: &[(&str, &str, &str, &str)] = &[
    (
        "events.k8s.io",
        "events",
        "regarding.kind",
        "involvedObject.kind",
    ),
    (
        "events.k8s.io",
        "events",
        "regarding.namespace",
        "involvedObject.namespace",
    ),
    (
        "events.k8s.io",
        "events",
        "regarding.name",
        "involvedObject.name",
    ),
    (
        "events.k8s.io",
        "events",
        "regarding.uid",
        "involvedObject.uid",
    ),
    (
        "events.k8s.io",
        "events",
        "regarding.apiVersion",
        "involvedObject.apiVersion",
    ),
    (
        "events.k8s.io",
        "events",
        "regarding.resourceVersion",
        "involvedObject.resourceVersion",
    ),
    (
        "events.k8s.io",
        "events",
        "regarding.fieldPath",
        "involvedObject.fieldPath",
    ),
    (
        "events.k8s.io",
        "events",
        "reportingController",
        "reportingComponent",
    ),
];

/// Resources stored in another group's storage: (group, resource, storage group, storage
/// version). Upstream keeps events.k8s.io's events as core/v1 events.
const SHARED_STORAGE: &[(&str, &str, &str, &str)] = &[("events.k8s.io", "events", "", "v1")];

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Deprecated APIs that are still served, with the release that deprecated them and their
/// replacement (upstream's `APILifecycleDeprecated` and `APILifecycleReplacement` of k8s.io/api).
const DEPRECATED: &[(&str, &str, &str, &str, Option<&str>)] = &[
    ("", "v1", "componentstatuses", "1.19", None),
    (
        "",
        "v1",
        "endpoints",
        "1.33",
        Some("discovery.k8s.io/v1 EndpointSlice"),
    ),
];

/// The warning upstream's deprecation filter sends: `<group/version> <Kind> is deprecated in
/// v<release>+`, with `; use <replacement>` when there is one.
fn deprecation_warning(group: &str, version: &str, resource: &str, kind: &str) -> Option<String> {
    let (_, _, _, release, replacement) = DEPRECATED
        .iter()
        .find(|(g, v, r, ..)| *g == group && *v == version && *r == resource)?;
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut warning = format!("{gv} {kind} is deprecated in v{release}+");
    if let Some(r) = replacement {
        warning.push_str(&format!("; use {r}"));
    }
    Some(warning)
}

fn rows_of(group: &str, version: &str, doc: &str) -> Vec<ResourceInfo> {
    let body: Value = serde_json::from_str::<Value>(doc)
        .map(|d| d["body"].clone())
        .unwrap_or(Value::Null);
    let resources = body["resources"].as_array().cloned().unwrap_or_default();
    let mut rows: Vec<ResourceInfo> = Vec::new();
    for r in &resources {
        let name = r["name"].as_str().unwrap_or_default();
        if name.contains('/') {
            continue;
        }
        let selectable_fields = SELECTABLE_FIELDS
            .iter()
            .filter(|(g, res, ..)| *g == group && *res == name)
            .map(|(_, _, field, path, default)| {
                let split = |p: &str| p.split('.').map(str::to_string).collect::<Vec<_>>();
                SelectableField {
                    name: field.to_string(),
                    path: split(path),
                    default: default.to_string(),
                    fallback: FIELD_FALLBACKS
                        .iter()
                        .find(|(g, r, f, _)| *g == group && *r == name && f == field)
                        .map(|(.., p)| split(p))
                        .unwrap_or_default(),
                    indexed_as: FIELD_INDEXES
                        .iter()
                        .find(|(g, r, f, _)| *g == group && *r == name && f == field)
                        .map(|(.., i)| i.to_string()),
                }
            })
            .collect();
        rows.push(ResourceInfo {
            group: group.to_string(),
            version: version.to_string(),
            resource: name.to_string(),
            kind: r["kind"].as_str().unwrap_or_default().to_string(),
            singular: r["singularName"].as_str().unwrap_or_default().to_string(),
            namespaced: r["namespaced"].as_bool().unwrap_or(false),
            short_names: strings(r.get("shortNames")),
            categories: strings(r.get("categories")),
            verbs: strings(r.get("verbs")),
            subresources: Vec::new(),
            tracks_generation: TRACKS_GENERATION.contains(&(group, name)),
            generation_fixed: (group, name) == ("scheduling.k8s.io", "priorityclasses"),
            status_keeps_metadata: STATUS_KEEPS_METADATA
                .iter()
                .find(|(g, r, _)| *g == group && *r == name)
                .map_or(&[], |(.., fields)| *fields),
            return_deleted_object: false,
            selectable_fields,
            field_label_message: FIELD_LABEL_MESSAGES
                .iter()
                .find(|(g, r, _)| *g == group && *r == name)
                .map(|(.., m)| m.replace("{version}", version)),
            immutable_fields: immutable_fields(group, name),
            storage_key: storage_key(group, name),
            storage_version: None,
            storage_version_hash: r["storageVersionHash"].as_str().map(str::to_string),
            // Upstream's componentstatus REST names the singular in its NotFound.
            not_found_resource: (group.is_empty() && name == "componentstatuses")
                .then(|| "componentstatus".to_string()),
            scale_paths: None,
            unstructured: false,
            reset_fields: reset_fields(group, name),
            deprecation_warning: deprecation_warning(
                group,
                version,
                name,
                r["kind"].as_str().unwrap_or_default(),
            ),
        });
    }
    for r in &resources {
        let Some((parent, sub)) = r["name"].as_str().unwrap_or_default().split_once('/') else {
            continue;
        };
        if !SERVED_SUBRESOURCES.contains(&sub) {
            continue;
        }
        if let Some(row) = rows.iter_mut().find(|row| row.resource == parent) {
            row.subresources.push(SubresourceInfo {
                name: sub.to_string(),
                group: r["group"].as_str().unwrap_or_default().to_string(),
                version: r["version"].as_str().unwrap_or_default().to_string(),
                kind: r["kind"].as_str().unwrap_or_default().to_string(),
                verbs: strings(r.get("verbs")),
            });
        }
    }
    rows
}

/// Every built-in resource, core first, then groups in upstream's priority order.
pub fn builtin_resources() -> Vec<Arc<ResourceInfo>> {
    let mut out: Vec<ResourceInfo> = rows_of("", "v1", CORE_V1);
    let groups: Value = serde_json::from_str::<Value>(API_GROUPS)
        .map(|d| d["body"].clone())
        .unwrap_or(Value::Null);
    for g in groups["groups"].as_array().into_iter().flatten() {
        let name = g["name"].as_str().unwrap_or_default();
        for v in g["versions"].as_array().into_iter().flatten() {
            let version = v["version"].as_str().unwrap_or_default();
            if let Some(doc) = group_version_doc(name, version) {
                out.extend(rows_of(name, version, doc));
            }
        }
    }
    // A resource served in several versions is stored once, in its preferred (first) version.
    let mut seen: Vec<(String, String, String)> = Vec::new();
    for row in &mut out {
        match seen
            .iter()
            .find(|(g, r, _)| *g == row.group && *r == row.resource)
        {
            Some((_, _, v)) => row.storage_version = Some(v.clone()),
            None => seen.push((row.group.clone(), row.resource.clone(), row.version.clone())),
        }
        if let Some((.., version)) = SHARED_STORAGE
            .iter()
            .find(|(g, r, ..)| *g == row.group && *r == row.resource)
        {
            row.storage_version = Some(version.to_string());
        }
    }
    out.into_iter().map(Arc::new).collect()
}

/// Where upstream keeps a built-in resource under `--etcd-prefix`: `<resource>`, except its
/// `SpecialDefaultResourcePrefixes` (pkg/kubeapiserver/default_storage_factory_builder.go), kept
/// from Kubernetes' first releases, and the two groups that belong to other servers in its chain
/// (`<group>/<resource>`, as those servers' storage factories make them). Sharing etcd with
/// kube-apiserver needs exactly these keys.
pub fn storage_key(group: &str, resource: &str) -> String {
    match (group, resource) {
        ("", "replicationcontrollers") => "controllers".into(),
        ("", "endpoints") => "services/endpoints".into(),
        ("", "nodes") => "minions".into(),
        ("", "services") => "services/specs".into(),
        ("networking.k8s.io" | "extensions", "ingresses") => "ingress".into(),
        ("apiextensions.k8s.io" | "apiregistration.k8s.io", _) => format!("{group}/{resource}"),
        _ => resource.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_keys_are_upstreams() {
        let rows = builtin_resources();
        let key = |group: &str, resource: &str| {
            rows.iter()
                .find(|r| r.group == group && r.resource == resource)
                .map(|r| r.storage_key.clone())
                .unwrap_or_else(|| panic!("{group}/{resource} is served"))
        };
        for (group, resource, expected) in [
            ("", "services", "services/specs"),
            ("", "endpoints", "services/endpoints"),
            ("", "nodes", "minions"),
            ("", "replicationcontrollers", "controllers"),
            ("", "pods", "pods"),
            ("", "configmaps", "configmaps"),
            ("networking.k8s.io", "ingresses", "ingress"),
            ("apps", "deployments", "deployments"),
            ("events.k8s.io", "events", "events"),
            ("", "events", "events"),
            (
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                "apiextensions.k8s.io/customresourcedefinitions",
            ),
            (
                "apiregistration.k8s.io",
                "apiservices",
                "apiregistration.k8s.io/apiservices",
            ),
        ] {
            assert_eq!(key(group, resource), expected, "{group}/{resource}");
        }
    }

    #[test]
    fn catalog_has_every_group_and_upstream_rows() {
        let rows = builtin_resources();
        let groups: std::collections::BTreeSet<&str> =
            rows.iter().map(|r| r.group.as_str()).collect();
        assert_eq!(
            groups.len(),
            21,
            "core plus the 20 recorded groups: {groups:?}"
        );
        let deploy = rows
            .iter()
            .find(|r| r.group == "apps" && r.resource == "deployments")
            .unwrap();
        assert_eq!(deploy.short_names, vec!["deploy"]);
        assert_eq!(deploy.categories, vec!["all"]);
        assert!(deploy.subresource("scale").is_some() && deploy.has_status());
        assert!(deploy.tracks_generation);
        let hpa: Vec<_> = rows
            .iter()
            .filter(|r| r.resource == "horizontalpodautoscalers")
            .collect();
        assert_eq!(hpa.len(), 2);
        assert_eq!(hpa[1].storage_version.as_deref(), Some("v2"));
    }
}
