//! Running compiled expressions against JSON values (upstream: cel-go's `Program.Eval` with an
//! activation, as apiserver/pkg/admission/plugin/cel binds `object`, `oldObject`, `request`,
//! `params`, `namespaceObject` and `variables`). Admission webhooks' match conditions and the
//! admission policies evaluate through here; CRD rules run through `kube-cel`'s schema
//! validator, which binds `self` with the schema's formats.

use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::common::ast::{
    EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue, MapEntryExpr, MapExpr,
};
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{self, ExecutionError};
use serde_json::Value;

use super::PER_CALL_LIMIT;
use super::checker::{self, Type};
use super::cost_tracker;
use super::runtime_cost;

/// An expression parsed once and run many times.
pub struct Program {
    pub source: String,
    expr: IdedExpr,
    /// Object initializers whose type names do not follow their field paths, reported when the
    /// expression runs (upstream checks them on the value an expression returns).
    type_mismatches: Vec<String>,
    /// The nodes that were object initializers (cel-go costs them as objects, not maps).
    structs: Vec<u64>,
    /// The expression type-checked in its environment (`check`) and planned for counting its
    /// runtime cost; `None` when it was not checked or does not check (upstream never runs
    /// such an expression). (Boxed: most programs are kept in enums beside small variants.)
    cost_plan: Option<Box<cost_tracker::Plan>>,
}

/// An evaluation and what it cost (`runtime_cost`).
pub struct Metered {
    pub value: Result<cel::Value, String>,
    pub cost: u64,
}

/// Which object types an expression may construct (`Type{field: value}`): none for most
/// expressions; a mutating policy's `Object` (with `Object.<field path>` below it) and
/// `JSONPatch`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ObjectTypes {
    None,
    Mutation,
}

impl Program {
    /// Parses `source`; the error is the parser's message.
    pub fn compile(source: &str) -> Result<Program, String> {
        Program::compile_with(source, ObjectTypes::None)
    }

    /// Parses `source`, with object initializers of `types` made into maps (the evaluator has no
    /// object types of its own; the values are JSON objects anyway). An initializer of another
    /// type is cel-go's undeclared reference.
    pub fn compile_with(source: &str, types: ObjectTypes) -> Result<Program, String> {
        let program = cel::Program::compile(source).map_err(|e| e.to_string())?;
        let mut expr = program.expression().clone();
        let mut type_mismatches = Vec::new();
        let mut structs = Vec::new();
        initializers_to_maps(&mut expr, types, None, &mut type_mismatches, &mut structs)?;
        Ok(Program {
            source: source.to_string(),
            expr,
            type_mismatches,
            structs,
            cost_plan: None,
        })
    }

    /// Type-checks the expression with the variables of its environment, so that its runtime
    /// cost can be estimated (`eval_metered`).
    pub fn check(mut self, vars: &[(&str, Type)]) -> Program {
        self.cost_plan = checker::check_parsed(self.expr.clone(), vars)
            .ok()
            .map(|checked| {
                Box::new(cost_tracker::Plan::new(
                    checked,
                    &self.expr,
                    self.structs.clone(),
                ))
            });
        self
    }

    /// `eval`, with what it costs counted as cel-go's cost tracker counts it
    /// (`cost_tracker`): past the per-call limit the evaluation fails with cel-go's
    /// cancellation. An expression that was not type-checked costs nothing.
    pub fn eval_metered(&self, vars: &Vars) -> Metered {
        let Some(plan) = &self.cost_plan else {
            return Metered {
                value: self.eval(vars),
                cost: 0,
            };
        };
        self.in_scope(vars, |ctx| {
            let tracked = cost_tracker::track(plan, ctx, PER_CALL_LIMIT);
            let value = if tracked.over_limit {
                Err(runtime_cost::COST_LIMIT_EXCEEDED.to_string())
            } else {
                self.eval_in(ctx)
            };
            Metered {
                value,
                cost: tracked.cost,
            }
        })
    }

    /// The value of the expression with `vars` bound, or the evaluation error in cel-go's words.
    pub fn eval(&self, vars: &Vars) -> Result<cel::Value, String> {
        self.in_scope(vars, |ctx| self.eval_in(ctx))
    }

    fn in_scope<T>(&self, vars: &Vars, f: impl FnOnce(&cel::Context) -> T) -> T {
        ROOT.with(|root| {
            let mut ctx = root.new_inner_scope();
            for (name, value) in &vars.bound {
                ctx.add_variable_from_value(name.clone(), value.clone());
            }
            f(&ctx)
        })
    }

    fn eval_in(&self, ctx: &cel::Context) -> Result<cel::Value, String> {
        if !self.type_mismatches.is_empty() {
            return Err(format!(
                "type mismatch: {}",
                self.type_mismatches.join("\n")
            ));
        }
        cel::Value::resolve(&self.expr, ctx).map_err(|e| go_error(&e))
    }
}

/// Replaces object initializers by map literals of their fields. `path` is the type name an
/// initializer must have where it stands (`Object.spec` as the value of field `spec` of an
/// `Object`), as `CheckTypeNamesMatchFieldPathNames` requires; a mismatch is kept in
/// `mismatches`.
fn initializers_to_maps(
    e: &mut IdedExpr,
    types: ObjectTypes,
    path: Option<&str>,
    mismatches: &mut Vec<String>,
    structs: &mut Vec<u64>,
) -> Result<(), String> {
    let children: Vec<(&mut IdedExpr, Option<String>)> = match &mut e.expr {
        Expr::Struct(s) => {
            structs.push(e.id);
            let name = s.type_name.clone();
            let root = name.split('.').next().unwrap_or("");
            let allowed =
                types == ObjectTypes::Mutation && (root == "Object" || name == "JSONPatch");
            if !allowed {
                return Err(format!(
                    "undeclared reference to '{name}' (in container '')"
                ));
            }
            let expected = path.map(str::to_string).unwrap_or_else(|| name.clone());
            if expected != name {
                mismatches.push(format!(
                    "unexpected type name {name:?}, expected {expected:?}, which matches field name path from root Object type"
                ));
            }
            let entries = std::mem::take(&mut s.entries)
                .into_iter()
                .map(|entry| {
                    let expr = match entry.expr {
                        EntryExpr::StructField(f) => EntryExpr::MapEntry(MapEntryExpr {
                            key: IdedExpr {
                                id: entry.id,
                                expr: Expr::Literal(LiteralValue::String(f.field.as_str().into())),
                            },
                            value: f.value,
                            optional: f.optional,
                        }),
                        other => other,
                    };
                    IdedEntryExpr { id: entry.id, expr }
                })
                .collect();
            e.expr = Expr::Map(MapExpr { entries });
            let Expr::Map(m) = &mut e.expr else {
                unreachable!("made a map above")
            };
            m.entries
                .iter_mut()
                .filter_map(|entry| match &mut entry.expr {
                    EntryExpr::MapEntry(me) => {
                        let field = match &me.key.expr {
                            Expr::Literal(LiteralValue::String(f)) => f.to_string(),
                            _ => String::new(),
                        };
                        // Below JSONPatch, values start their own paths.
                        let below = (name != "JSONPatch").then(|| format!("{name}.{field}"));
                        Some((&mut me.value, below))
                    }
                    EntryExpr::StructField(_) => None,
                })
                .collect()
        }
        // A list keeps the path of its field: its elements are that field's items.
        Expr::List(l) => l
            .elements
            .iter_mut()
            .map(|x| (x, path.map(str::to_string)))
            .collect(),
        Expr::Map(m) => m
            .entries
            .iter_mut()
            .flat_map(|entry| match &mut entry.expr {
                EntryExpr::MapEntry(me) => vec![
                    (&mut me.key, None),
                    (&mut me.value, path.map(str::to_string)),
                ],
                EntryExpr::StructField(f) => vec![(&mut f.value, None)],
            })
            .collect(),
        Expr::Call(c) => {
            let mut v: Vec<(&mut IdedExpr, Option<String>)> = Vec::new();
            if let Some(t) = c.target.as_deref_mut() {
                v.push((t, None));
            }
            v.extend(c.args.iter_mut().map(|a| (a, None)));
            v
        }
        Expr::Select(s) => vec![(&mut *s.operand, None)],
        Expr::Comprehension(c) => vec![
            (&mut c.iter_range, None),
            (&mut c.accu_init, None),
            (&mut c.loop_cond, None),
            (&mut c.loop_step, None),
            (&mut c.result, None),
        ],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    };
    for (child, below) in children {
        initializers_to_maps(child, types, below.as_deref(), mismatches, structs)?;
    }
    Ok(())
}

thread_local! {
    /// The standard library and Kubernetes' libraries, registered once per thread; each
    /// evaluation binds its variables in a child scope.
    static ROOT: cel::Context<'static> = {
        let mut ctx = cel::Context::default().with_all();
        super::authz::register(&mut ctx);
        ctx
    };
}

/// The variables of one evaluation.
#[derive(Default, Clone)]
pub struct Vars {
    bound: Vec<(String, cel::Value)>,
}

impl Vars {
    pub fn bind(mut self, name: &str, value: cel::Value) -> Self {
        self.bound.push((name.to_string(), value));
        self
    }

    pub fn bind_json(self, name: &str, value: Option<&Value>) -> Self {
        let v = value.map(json_to_cel).unwrap_or(cel::Value::Null);
        self.bind(name, v)
    }
}

/// A JSON value as CEL sees it: objects are maps, integers stay integers.
pub fn json_to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(json_to_cel).collect())),
        Value::Object(m) => cel::Value::Map(Map {
            map: Arc::new(
                m.iter()
                    .map(|(k, v)| (Key::String(Arc::new(k.clone())), json_to_cel(v)))
                    .collect(),
            ),
        }),
    }
}

/// A CEL value as JSON (what a mutation's result becomes), or `None` for values JSON cannot hold.
pub fn cel_to_json(v: &cel::Value) -> Option<Value> {
    Some(match v {
        cel::Value::Null => Value::Null,
        cel::Value::Bool(b) => Value::Bool(*b),
        cel::Value::Int(i) => Value::from(*i),
        cel::Value::UInt(u) => Value::from(*u),
        cel::Value::Float(f) => serde_json::Number::from_f64(*f).map(Value::Number)?,
        cel::Value::String(s) => Value::String(s.to_string()),
        cel::Value::List(items) => {
            Value::Array(items.iter().map(cel_to_json).collect::<Option<Vec<_>>>()?)
        }
        cel::Value::Map(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m.map.iter() {
                let key = match k {
                    Key::String(s) => s.to_string(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                out.insert(key, cel_to_json(v)?);
            }
            Value::Object(out)
        }
        _ => return None,
    })
}

/// An evaluation error as cel-go words it (the texts users see in admission messages).
fn go_error(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::NoSuchOverload => "no such overload".into(),
        ExecutionError::UndeclaredReference(r) => format!("undeclared reference to '{r}'"),
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::Overflow(..) => "integer overflow".into(),
        ExecutionError::FunctionError { function, message } if function.is_empty() => {
            message.clone()
        }
        ExecutionError::FunctionError { function, message } => {
            format!("{function}: {message}")
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(src: &str, obj: Value) -> Result<cel::Value, String> {
        Program::compile(src)?.eval(&Vars::default().bind_json("object", Some(&obj)))
    }

    #[test]
    fn binds_json_objects_and_runs_kubernetes_libraries() {
        let obj =
            json!({"metadata": {"name": "web", "labels": {"app": "x"}}, "spec": {"replicas": 3}});
        assert_eq!(
            eval(
                "object.spec.replicas > 2 && object.metadata.labels['app'] == 'x'",
                obj.clone()
            ),
            Ok(cel::Value::Bool(true))
        );
        assert_eq!(
            eval("object.metadata.name.matches('^w')", obj.clone()),
            Ok(cel::Value::Bool(true))
        );
        assert_eq!(
            eval("object.spec.missing", obj),
            Err("no such key: missing".into())
        );
    }

    #[test]
    fn converts_results_back_to_json() {
        let v = eval("{'a': [1, 'b', true]}", json!({})).unwrap();
        assert_eq!(cel_to_json(&v), Some(json!({"a": [1, "b", true]})));
    }

    #[test]
    fn object_initializers_are_only_for_mutations() {
        assert_eq!(
            Program::compile("Object{} == Object{}").err(),
            Some("undeclared reference to 'Object' (in container '')".into())
        );
        let p = Program::compile_with(
            "Object{spec: Object.spec{replicas: object.spec.replicas + 1, ports: [Object.spec.ports{port: 80}]}}",
            ObjectTypes::Mutation,
        )
        .unwrap();
        let v = p
            .eval(&Vars::default().bind_json("object", Some(&json!({"spec": {"replicas": 1}}))))
            .unwrap();
        assert_eq!(
            cel_to_json(&v),
            Some(json!({"spec": {"replicas": 2, "ports": [{"port": 80}]}}))
        );
        let patch = Program::compile_with(
            "[JSONPatch{op: 'add', path: '/metadata/labels', value: {'a': 'b'}}]",
            ObjectTypes::Mutation,
        )
        .unwrap();
        assert_eq!(
            cel_to_json(&patch.eval(&Vars::default()).unwrap()),
            Some(json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]))
        );
        let wrong = Program::compile_with(
            "Object{spec: Object.spec{selector: Object.spec.wrong{}}}",
            ObjectTypes::Mutation,
        )
        .unwrap();
        assert_eq!(
            wrong.eval(&Vars::default()).err(),
            Some("type mismatch: unexpected type name \"Object.spec.wrong\", expected \"Object.spec.selector\", which matches field name path from root Object type".into())
        );
    }
}
