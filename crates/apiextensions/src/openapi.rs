//! OpenAPI v3 documents of custom resources (upstream: apiextensions-apiserver
//! pkg/controller/openapi/builder): one document per group and version, served at
//! `/openapi/v3/apis/<group>/<version>`, with each kind's schema (the CRD's `openAPIV3Schema`
//! with `apiVersion`, `kind` and `metadata` described as upstream's builder describes them), its
//! list, and the `meta/v1` schemas they refer to, so that `kubectl explain` works on them.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::registration::CrdFacts;
use crate::schema::definition_name;

const API_VERSION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const META: &str = "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.";

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

/// The kind's schema and its list's, for one served version.
fn kind_schemas(
    facts: &CrdFacts,
    version: &Value,
    schema: Option<&Value>,
    out: &mut Map<String, Value>,
) {
    let v = version.get("name").and_then(Value::as_str).unwrap_or("");
    let mut schema = schema.cloned().unwrap_or_else(|| json!({"type": "object"}));
    if let Some(m) = schema.as_object_mut() {
        let props = m
            .entry("properties")
            .or_insert_with(|| json!({}))
            .as_object_mut();
        if let Some(props) = props {
            props.insert(
                "apiVersion".into(),
                json!({"type": "string", "description": API_VERSION}),
            );
            props.insert(
                "kind".into(),
                json!({"type": "string", "description": KIND}),
            );
            props.insert(
                "metadata".into(),
                json!({"allOf": [{"$ref": format!("{META}ObjectMeta")}], "description": METADATA}),
            );
        }
        m.insert(
            "x-kubernetes-group-version-kind".into(),
            gvk(&facts.group, v, &facts.kind),
        );
    }
    let name = definition_name(&facts.group, v, &facts.kind);
    let list_kind = format!("{}List", facts.kind);
    out.insert(
        definition_name(&facts.group, v, &list_kind),
        json!({
            "description": format!("{list_kind} is a list of {}", facts.kind),
            "type": "object",
            "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string", "description": API_VERSION},
                "items": {
                    "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", facts.plural),
                    "type": "array",
                    "items": {"$ref": format!("#/components/schemas/{name}")},
                },
                "kind": {"type": "string", "description": KIND},
                "metadata": {"allOf": [{"$ref": format!("{META}ListMeta")}], "description": LIST_METADATA},
            },
            "x-kubernetes-group-version-kind": gvk(&facts.group, v, &list_kind),
        }),
    );
    out.insert(name, schema);
}

/// The read paths of one version (the collection and an object), each `get` carrying the
/// kind, which is how `kubectl explain` finds a resource's schema.
fn paths(facts: &CrdFacts, version: &str, out: &mut Map<String, Value>) {
    let base = if facts.namespaced {
        format!(
            "/apis/{}/{version}/namespaces/{{namespace}}/{}",
            facts.group, facts.plural
        )
    } else {
        format!("/apis/{}/{version}/{}", facts.group, facts.plural)
    };
    let kind_gvk = json!({"group": facts.group, "kind": facts.kind, "version": version});
    let schema = |kind: &str| json!({"$ref": format!("#/components/schemas/{}", definition_name(&facts.group, version, kind))});
    let op = |action: &str, id: String, body: Value| {
        json!({"get": {
            "description": format!("{action} {}", facts.kind),
            "operationId": id,
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": body}}}},
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": kind_gvk,
        }})
    };
    let scope = if facts.namespaced { "Namespaced" } else { "" };
    out.insert(
        base.clone(),
        op(
            "list",
            format!("list{scope}{}", facts.kind),
            schema(&format!("{}List", facts.kind)),
        ),
    );
    out.insert(
        format!("{base}/{{name}}"),
        op(
            "get",
            format!("read{scope}{}", facts.kind),
            schema(&facts.kind),
        ),
    );
}

/// The documents of the served CRDs by path (`apis/<group>/<version>`), as JSON bytes.
/// `meta_schemas` are the `meta/v1` schemas of the built-in documents.
pub fn documents(
    crds: &[&CrdFacts],
    meta_schemas: &Map<String, Value>,
) -> BTreeMap<String, Vec<u8>> {
    // Per document: its paths and its schemas.
    type Parts = (Map<String, Value>, Map<String, Value>);
    let mut by_path: BTreeMap<String, Parts> = BTreeMap::new();
    for facts in crds {
        for (version, schema) in facts.versions.iter().zip(&facts.schemas) {
            let v = version.get("name").and_then(Value::as_str).unwrap_or("");
            let (paths_of, schemas) = by_path
                .entry(format!("apis/{}/{v}", facts.group))
                .or_insert_with(|| (Map::new(), meta_schemas.clone()));
            paths(facts, v, paths_of);
            kind_schemas(facts, version, schema.as_deref(), schemas);
        }
    }
    by_path
        .into_iter()
        .map(|(path, (paths, schemas))| {
            let doc = json!({
                "openapi": "3.0.0",
                "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
                "paths": paths,
                "components": {"schemas": schemas},
            });
            (path, serde_json::to_vec(&doc).unwrap_or_default())
        })
        .collect()
}
