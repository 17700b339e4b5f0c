//! OpenAPI v3 documents of custom resources (upstream: apiextensions-apiserver
//! pkg/controller/openapi/builder): one document per group and version, served at
//! `/openapi/v3/apis/<group>/<version>`, with each kind's schema (the CRD's `openAPIV3Schema`
//! with `apiVersion`, `kind` and `metadata` described as upstream's builder describes them), its
//! list, and the `meta/v1` schemas they refer to, so that `kubectl explain` works on them; and
//! their part of the one `/openapi/v2` document, with each schema reduced to what OpenAPI v2
//! can say (upstream's `ToStructuralOpenAPIV2`).

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

/// `ToStructuralOpenAPIV2`: no logical junctors; a nullable or unknown-field-preserving node
/// loses what v2 clients would enforce wrongly (its type, properties and items), an array
/// without items its type, and a nullable property its place in `required`.
fn to_v2(s: &mut Value) {
    let Some(m) = s.as_object_mut() else {
        return;
    };
    for junctor in ["allOf", "oneOf", "anyOf", "not"] {
        m.remove(junctor);
    }
    let flag = |m: &Map<String, Value>, f: &str| m.get(f).and_then(Value::as_bool) == Some(true);
    if flag(m, "nullable") {
        m.remove("type");
        m.remove("nullable");
        m.remove("items");
        m.remove("properties");
    }
    if flag(m, "x-kubernetes-preserve-unknown-fields") {
        m.remove("items");
        m.remove("properties");
        if m.get("type").and_then(Value::as_str) == Some("object") {
            m.remove("type");
        }
    }
    if !m.contains_key("items") && m.get("type").and_then(Value::as_str) == Some("array") {
        m.remove("type");
    }
    let nullable: Vec<String> = m
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, v)| v.get("nullable").and_then(Value::as_bool) == Some(true))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
    let additional_nullable = m
        .get("additionalProperties")
        .and_then(|a| a.get("nullable"))
        .and_then(Value::as_bool)
        == Some(true);
    if let Some(Value::Array(required)) = m.get_mut("required") {
        required.retain(|r| !r.as_str().is_some_and(|r| nullable.iter().any(|n| n == r)));
        if required.is_empty() || additional_nullable {
            m.remove("required");
        }
    }
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        props.values_mut().for_each(to_v2);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = m.get_mut(key).filter(|v| v.is_object()) {
            to_v2(sub);
        }
    }
}

/// The `paths` and `definitions` the served CRDs add to `/openapi/v2`: each version's kind and
/// list (metadata referring to `meta/v1`'s definitions by `$ref`, as v2 writes it) and its
/// read paths.
pub fn v2_fragment(crds: &[&CrdFacts]) -> Value {
    const META_V2: &str = "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.";
    let mut paths_out = Map::new();
    let mut definitions = Map::new();
    for facts in crds {
        for (version, schema) in facts.versions.iter().zip(&facts.schemas) {
            let v = version.get("name").and_then(Value::as_str).unwrap_or("");
            let mut kinds = Map::new();
            kind_schemas(facts, version, schema.as_deref(), &mut kinds);
            for (name, mut def) in kinds {
                to_v2(&mut def);
                // v3's `allOf: [$ref]` for metadata is a plain `$ref` in v2, and references
                // point at `definitions`.
                let text = def
                    .to_string()
                    .replace("#/components/schemas/", "#/definitions/");
                let mut def: Value = serde_json::from_str(&text).unwrap_or(def);
                if let Some(props) = def.get_mut("properties").and_then(Value::as_object_mut)
                    && let Some(meta) = props.get_mut("metadata")
                {
                    let list = name.ends_with("List");
                    *meta = json!({
                        "$ref": format!("{META_V2}{}", if list { "ListMeta" } else { "ObjectMeta" }),
                        "description": if list { LIST_METADATA } else { METADATA },
                    });
                }
                definitions.insert(name, def);
            }
            let mut v3_paths = Map::new();
            paths(facts, v, &mut v3_paths);
            for (path, item) in v3_paths {
                let mut item = item;
                if let Some(get) = item.get_mut("get").and_then(Value::as_object_mut) {
                    let schema = get
                        .get("responses")
                        .and_then(|r| r.pointer("/200/content/application~1json/schema"))
                        .cloned()
                        .unwrap_or(Value::Null);
                    let schema: Value = serde_json::from_str(
                        &schema
                            .to_string()
                            .replace("#/components/schemas/", "#/definitions/"),
                    )
                    .unwrap_or(Value::Null);
                    get.insert(
                        "responses".into(),
                        json!({"200": {"description": "OK", "schema": schema}, "401": {"description": "Unauthorized"}}),
                    );
                    get.insert(
                        "produces".into(),
                        json!(["application/json", "application/yaml"]),
                    );
                    get.insert("schemes".into(), json!(["https"]));
                }
                paths_out.insert(path, item);
            }
        }
    }
    json!({"paths": paths_out, "definitions": definitions})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_schemas_say_only_what_v2_can() {
        let mut s = json!({"type": "object", "required": ["a", "n"], "anyOf": [{"required": ["a"]}],
        "properties": {
            "a": {"type": "string"},
            "n": {"type": "string", "nullable": true},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"x": {"type": "string"}}},
            "list": {"type": "array", "nullable": true, "items": {"type": "string"}},
        }});
        to_v2(&mut s);
        assert_eq!(
            s,
            json!({"type": "object", "required": ["a"], "properties": {
                "a": {"type": "string"},
                "n": {},
                "free": {"x-kubernetes-preserve-unknown-fields": true},
                "list": {},
            }})
        );
    }
}
