//! One MutatingAdmissionPolicy, compiled once when it changes, and its mutations (upstream:
//! admission/plugin/policy/mutating and its patch package): an ApplyConfiguration expression
//! builds a partial `Object{...}` that is merged into the object by the kind's schema (atomic
//! values may not be touched); a JSONPatch expression builds a list of `JSONPatch{...}`
//! operations applied in order (a failed `test` leaves the object as it was).

use apimachinery::Status;
use apimachinery::schema::Schemas;
use kube_cel::cel;
use serde_json::{Value, json};

use super::compiled::{Core, Expr, Input, spec_list};
use crate::admission::rules::text;
use crate::cel::eval::{ObjectTypes, cel_to_json};
use crate::cel::runtime_cost::RUNTIME_CEL_COST_BUDGET;

enum PatchType {
    ApplyConfiguration,
    JsonPatch,
}

pub struct Mutation {
    patch_type: PatchType,
    expr: Expr,
}

pub struct MutatingPolicy {
    pub core: Core,
    pub mutations: Vec<Mutation>,
    /// `reinvocationPolicy: IfNeeded`.
    pub reinvoke_if_needed: bool,
}

/// Why a mutation did not apply: an error the failure policy decides on, or an answer of its own
/// (a kind without a schema).
pub enum MutationError {
    Policy(String),
    Status(Status),
}

impl MutatingPolicy {
    pub fn compile(policy: &Value) -> MutatingPolicy {
        let spec = policy.get("spec").unwrap_or(&Value::Null);
        let core = Core::compile(policy);
        MutatingPolicy {
            mutations: spec_list(spec, "mutations")
                .iter()
                .map(|m| {
                    let (patch_type, field) = match text(m, "patchType") {
                        "JSONPatch" => (PatchType::JsonPatch, "jsonPatch"),
                        _ => (PatchType::ApplyConfiguration, "applyConfiguration"),
                    };
                    let source = m
                        .get(field)
                        .map(|f| text(f, "expression"))
                        .unwrap_or_default();
                    Mutation {
                        patch_type,
                        expr: core.expr_with(source, ObjectTypes::Mutation),
                    }
                })
                .collect(),
            reinvoke_if_needed: text(spec, "reinvocationPolicy") == "IfNeeded",
            core,
        }
    }
}

/// The kind of the object being mutated, as errors name it (`apps/v1, Kind=Deployment`).
pub struct Gvk<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
}

impl std::fmt::Display for Gvk<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}, Kind={}", self.version, self.kind)
        } else {
            write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
        }
    }
}

impl Mutation {
    /// The object after this mutation (`Patcher.Patch`), evaluated with `input` (whose `object`
    /// is `obj`); `schemas` describe the object's kind.
    pub fn apply(
        &self,
        input: &mut Input<'_>,
        obj: &Value,
        gvk: &Gvk<'_>,
        schemas: Option<&Schemas>,
    ) -> Result<Value, MutationError> {
        // Each mutation is a filter of its own with the whole budget (`Patcher.Patch` is given
        // `RuntimeCELCostBudget`).
        input.filter(RUNTIME_CEL_COST_BUDGET);
        match self.patch_type {
            PatchType::ApplyConfiguration => {
                // A kind without a schema cannot be merged into (upstream: no type converter).
                let Some((schemas, root)) = schemas.and_then(|s| {
                    s.root_for(gvk.group, gvk.version, gvk.kind)
                        .map(|root| (s, root))
                }) else {
                    return Err(MutationError::Status(Status::service_unavailable(format!(
                        "Resource kind {gvk} not found. There can be a delay between when CustomResourceDefinitions are created and when they are available."
                    ))));
                };
                let result = input
                    .eval(&self.expr)
                    .map_err(|e| MutationError::Policy(e.to_string()))?;
                let Some(mut patch @ Value::Object(_)) = cel_to_json(&result) else {
                    return Err(MutationError::Policy(format!(
                        "unsupported return type from ApplyConfiguration expression: {}",
                        super::validating::type_name(&result)
                    )));
                };
                // The patch is of the object's kind, whatever it says.
                for field in ["apiVersion", "kind"] {
                    if let Some(v) = obj.get(field) {
                        patch[field] = v.clone();
                    }
                }
                let atomics = apimachinery::structured_merge::atomics(schemas, root, &patch);
                if !atomics.is_empty() {
                    return Err(MutationError::Policy(format!(
                        "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
                        atomics.join(", ")
                    )));
                }
                apimachinery::structured_merge::merge(schemas, root, obj, &patch).map_err(|e| {
                    MutationError::Policy(format!(
                        "error applying patch: failed to merge patch: {e}"
                    ))
                })
            }
            PatchType::JsonPatch => {
                let result = input
                    .eval(&self.expr)
                    .map_err(|e| MutationError::Policy(e.to_string()))?;
                let cel::Value::List(items) = &result else {
                    return Err(MutationError::Policy(
                        "type mismatch: JSONPatchType.expression should evaluate to array".into(),
                    ));
                };
                let mut current = obj.clone();
                for item in items.iter() {
                    let Some(Value::Object(op)) = cel_to_json(item) else {
                        return Err(MutationError::Policy(
                            "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch".into(),
                        ));
                    };
                    let mut operation = json!({
                        "op": op.get("op").cloned().unwrap_or(json!("")),
                        "path": op.get("path").cloned().unwrap_or(json!("")),
                    });
                    if let Some(from) = op.get("from").filter(|f| f.as_str() != Some("")) {
                        operation["from"] = from.clone();
                    }
                    if let Some(value) = op.get("value") {
                        operation["value"] = value.clone();
                    }
                    let is_test = operation["op"] == "test";
                    let bytes = serde_json::to_vec(&[operation]).unwrap_or_default();
                    match apimachinery::patch::apply_json_patch(&current, &bytes) {
                        Ok(next) => current = next,
                        // A failed test leaves the object as it was.
                        Err(_) if is_test => return Ok(obj.clone()),
                        Err(e) => {
                            return Err(MutationError::Policy(format!(
                                "JSON Patch: {}",
                                e.message
                            )));
                        }
                    }
                }
                Ok(current)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel::eval::Vars;

    fn schemas() -> Schemas {
        Schemas::from_openapi_v2(&json!({"definitions": {
            "Thing": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Thing"}],
                "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "metadata": {"type": "object", "properties": {
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
                    "spec": {"type": "object", "properties": {
                        "replicas": {"type": "integer"},
                        "args": {"type": "array", "items": {"type": "string"}}}},
                }
            }
        }}))
    }

    fn mutate(spec: Value, obj: &Value) -> Result<Value, String> {
        let policy = MutatingPolicy::compile(&json!({"metadata": {"name": "p"}, "spec": spec}));
        let s = schemas();
        let gvk = Gvk {
            group: "example.com",
            version: "v1",
            kind: "Thing",
        };
        let mut out = obj.clone();
        for m in &policy.mutations {
            let mut input = Input::new(
                &policy.core,
                Vars::default().bind_json("object", Some(&out)),
            );
            out = match m.apply(&mut input, &out, &gvk, Some(&s)) {
                Ok(v) => v,
                Err(MutationError::Policy(e)) => return Err(e),
                Err(MutationError::Status(s)) => return Err(s.message),
            };
        }
        Ok(out)
    }

    #[test]
    fn apply_configurations_merge_and_json_patches_apply() {
        let obj = json!({"apiVersion": "example.com/v1", "kind": "Thing",
                         "metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 1}});
        let out = mutate(
            json!({"mutations": [
                {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                    "Object{metadata: Object.metadata{labels: {'b': '2'}}, spec: Object.spec{replicas: object.spec.replicas + 1}}"}},
                {"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "[JSONPatch{op: 'add', path: '/metadata/labels/c', value: string(object.spec.replicas)}]"}},
            ]}),
            &obj,
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"apiVersion": "example.com/v1", "kind": "Thing",
                   "metadata": {"labels": {"a": "1", "b": "2", "c": "2"}}, "spec": {"replicas": 2}})
        );
    }

    #[test]
    fn atomic_values_failed_tests_and_bad_patches() {
        let obj = json!({"spec": {"replicas": 1, "args": ["x"]}});
        assert_eq!(
            mutate(
                json!({"mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                    "Object{spec: Object.spec{args: ['y']}}"}}]}),
                &obj
            ),
            Err("error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.args".into())
        );
        assert_eq!(
            mutate(
                json!({"mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "[JSONPatch{op: 'test', path: '/spec/replicas', value: 5}, JSONPatch{op: 'replace', path: '/spec/replicas', value: 9}]"}}]}),
                &obj
            ),
            Ok(obj.clone())
        );
        assert!(
            mutate(
                json!({"mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "[JSONPatch{op: 'replace', path: '/spec/missing/deeper', value: 1}]"}}]}),
                &obj
            )
            .unwrap_err()
            .starts_with("JSON Patch: ")
        );
    }
}
