//! The OpenAPI documents of the built-in groups: upstream's own v2 and v3 documents, kept as
//! compressed data, and the structural schemas read from v2 (for unknown-field pruning and
//! strategic merge patches).

use std::sync::{Arc, OnceLock};

use apimachinery::schema::Schemas;
use apiserver::openapi::{GzDoc, OpenApi};
use bytes::Bytes;

const V2: &[u8] = include_bytes!("../data/openapi/v2.json.gz");
include!(concat!(env!("OUT_DIR"), "/openapi_v3.rs"));

/// The documents as compressed static data: nothing is inflated or derived (the v2 ETag, the v2
/// protobuf form) until a client asks for it.
pub fn documents() -> OpenApi {
    OpenApi::new(
        Some(GzDoc(Bytes::from_static(V2))),
        V3_DOCS
            .iter()
            .map(|(p, b)| (p.to_string(), GzDoc(Bytes::from_static(b))))
            .collect(),
    )
}

/// The `meta/v1` schemas of the built-in OpenAPI v3 documents (ObjectMeta, ListMeta and what
/// they refer to), which other documents (custom resources') embed: taken from `api/v1`'s
/// document at build time (build.rs), because inflating and parsing that whole document was a
/// quarter of the CPU the server spent before it served.
pub fn meta_schemas_v3() -> serde_json::Map<String, serde_json::Value> {
    const META_V1: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/meta-v1-v3.json"));
    serde_json::from_slice(META_V1).unwrap_or_default()
}

/// The v2 document's definitions without descriptions, derived at build time (build.rs).
const V2_STRUCTURAL: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/v2-structural.json"));

/// The defaults of list-map key fields, which upstream's OpenAPI v3 documents carry and v2
/// leaves out (definition, field, JSON value): server-side apply reads a missing key as its
/// default (a container port without `protocol` is the `TCP` one), as upstream's type
/// converter, built from the v3 models, does.
const KEY_DEFAULTS: &[(&str, &str, &str)] = &[
    (
        "io.k8s.api.admissionregistration.v1.MatchCondition",
        "name",
        r#""""#,
    ),
    (
        "io.k8s.api.admissionregistration.v1.MutatingWebhook",
        "name",
        r#""""#,
    ),
    (
        "io.k8s.api.admissionregistration.v1.ValidatingWebhook",
        "name",
        r#""""#,
    ),
    (
        "io.k8s.api.admissionregistration.v1.Variable",
        "name",
        r#""""#,
    ),
    ("io.k8s.api.apps.v1.DaemonSetCondition", "type", r#""""#),
    ("io.k8s.api.apps.v1.DeploymentCondition", "type", r#""""#),
    ("io.k8s.api.apps.v1.ReplicaSetCondition", "type", r#""""#),
    ("io.k8s.api.apps.v1.StatefulSetCondition", "type", r#""""#),
    (
        "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerCondition",
        "type",
        r#""""#,
    ),
    (
        "io.k8s.api.certificates.v1.CertificateSigningRequestCondition",
        "type",
        r#""""#,
    ),
    ("io.k8s.api.core.v1.ComponentCondition", "type", r#""""#),
    ("io.k8s.api.core.v1.Container", "name", r#""""#),
    ("io.k8s.api.core.v1.ContainerPort", "containerPort", r#"0"#),
    ("io.k8s.api.core.v1.ContainerPort", "protocol", r#""TCP""#),
    ("io.k8s.api.core.v1.EnvVar", "name", r#""""#),
    ("io.k8s.api.core.v1.EphemeralContainer", "name", r#""""#),
    ("io.k8s.api.core.v1.HostAlias", "ip", r#""""#),
    ("io.k8s.api.core.v1.LocalObjectReference", "name", r#""""#),
    ("io.k8s.api.core.v1.NamespaceCondition", "type", r#""""#),
    ("io.k8s.api.core.v1.NodeAddress", "type", r#""""#),
    ("io.k8s.api.core.v1.NodeCondition", "type", r#""""#),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimCondition",
        "type",
        r#""""#,
    ),
    ("io.k8s.api.core.v1.PodCondition", "type", r#""""#),
    ("io.k8s.api.core.v1.PodIP", "ip", r#""""#),
    ("io.k8s.api.core.v1.PodResourceClaim", "name", r#""""#),
    ("io.k8s.api.core.v1.PodResourceClaimStatus", "name", r#""""#),
    ("io.k8s.api.core.v1.PodSchedulingGate", "name", r#""""#),
    (
        "io.k8s.api.core.v1.ReplicationControllerCondition",
        "type",
        r#""""#,
    ),
    ("io.k8s.api.core.v1.ResourceClaim", "name", r#""""#),
    ("io.k8s.api.core.v1.ResourceHealth", "resourceID", r#""""#),
    ("io.k8s.api.core.v1.ResourceStatus", "name", r#""""#),
    ("io.k8s.api.core.v1.ServicePort", "port", r#"0"#),
    ("io.k8s.api.core.v1.ServicePort", "protocol", r#""TCP""#),
    (
        "io.k8s.api.core.v1.TopologySpreadConstraint",
        "topologyKey",
        r#""""#,
    ),
    (
        "io.k8s.api.core.v1.TopologySpreadConstraint",
        "whenUnsatisfiable",
        r#""""#,
    ),
    ("io.k8s.api.core.v1.Volume", "name", r#""""#),
    ("io.k8s.api.core.v1.VolumeDevice", "devicePath", r#""""#),
    ("io.k8s.api.core.v1.VolumeMount", "mountPath", r#""""#),
    ("io.k8s.api.core.v1.VolumeMountStatus", "mountPath", r#""""#),
    (
        "io.k8s.api.resource.v1.AllocatedDeviceStatus",
        "device",
        r#""""#,
    ),
    (
        "io.k8s.api.resource.v1.AllocatedDeviceStatus",
        "driver",
        r#""""#,
    ),
    (
        "io.k8s.api.resource.v1.AllocatedDeviceStatus",
        "pool",
        r#""""#,
    ),
    (
        "io.k8s.api.resource.v1.ResourceClaimConsumerReference",
        "uid",
        r#""""#,
    ),
    ("io.k8s.api.storage.v1.CSINodeDriver", "name", r#""""#),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionCondition",
        "type",
        r#""""#,
    ),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.ValidationRule",
        "rule",
        r#""""#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.Condition",
        "type",
        r#""""#,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
        "uid",
        r#""""#,
    ),
    (
        "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceCondition",
        "type",
        r#""""#,
    ),
];

/// The structural schemas of the built-in kinds, parsed once per process: they are the same for
/// every server, and a process that starts many (a test suite on `ironplane::testing`) would
/// otherwise parse them for each.
pub fn shared_schemas() -> Result<Arc<Schemas>, String> {
    static SCHEMAS: OnceLock<Result<Arc<Schemas>, String>> = OnceLock::new();
    SCHEMAS.get_or_init(|| schemas().map(Arc::new)).clone()
}

/// Parses the structural schemas of the built-in kinds.
pub fn schemas() -> Result<Schemas, String> {
    let mut doc: serde_json::Value =
        serde_json::from_slice(V2_STRUCTURAL).map_err(|e| e.to_string())?;
    for (definition, field, value) in KEY_DEFAULTS {
        if let Some(prop) = doc
            .pointer_mut(&format!("/definitions/{definition}/properties/{field}"))
            .and_then(serde_json::Value::as_object_mut)
        {
            let value = serde_json::from_str(value).map_err(|e| e.to_string())?;
            prop.insert("default".into(), value);
        }
    }
    Ok(Schemas::from_openapi_v2(&doc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_schemas_are_the_core_documents_own() {
        let (_, doc) = V3_DOCS.iter().find(|(p, _)| *p == "api/v1").unwrap();
        let doc: serde_json::Value =
            serde_json::from_slice(&GzDoc(Bytes::from_static(doc)).inflate().unwrap()).unwrap();
        let expected: serde_json::Map<_, _> = doc["components"]["schemas"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.starts_with("io.k8s.apimachinery.pkg.apis.meta.v1."))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let meta = meta_schemas_v3();
        assert!(meta.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        assert!(meta.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry"));
        assert_eq!(meta, expected);
    }

    #[test]
    fn structural_schemas_keep_fields_named_description() {
        let schemas = schemas().unwrap();
        let root = schemas
            .root_for("scheduling.k8s.io", "v1", "PriorityClass")
            .unwrap();
        let mut pc = serde_json::json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p"}, "value": 10, "description": "kept", "bogus": 1});
        let unknown = schemas.prune_unknown(root, &mut pc);
        assert_eq!(unknown, vec![r#"unknown field "bogus""#.to_string()]);
        assert_eq!(pc["description"], "kept");
    }
}
