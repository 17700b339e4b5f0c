//! Running compiled expressions against JSON values (upstream: cel-go's `Program.Eval` with an
//! activation, as apiserver/pkg/admission/plugin/cel binds `object`, `oldObject`, `request`,
//! `params`, `namespaceObject` and `variables`). Admission webhooks' match conditions and the
//! admission policies evaluate through here; CRD rules run through `kube-cel`'s schema
//! validator, which binds `self` with the schema's formats.

use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{self, ExecutionError};
use serde_json::Value;

/// An expression parsed once and run many times.
pub struct Program {
    pub source: String,
    program: cel::Program,
}

impl Program {
    /// Parses `source`; the error is the parser's message.
    pub fn compile(source: &str) -> Result<Program, String> {
        let program = cel::Program::compile(source).map_err(|e| e.to_string())?;
        Ok(Program {
            source: source.to_string(),
            program,
        })
    }

    /// The value of the expression with `vars` bound, or the evaluation error in cel-go's words.
    pub fn eval(&self, vars: &Vars) -> Result<cel::Value, String> {
        ROOT.with(|root| {
            let mut ctx = root.new_inner_scope();
            for (name, value) in &vars.bound {
                ctx.add_variable_from_value(name.clone(), value.clone());
            }
            self.program.execute(&ctx).map_err(|e| go_error(&e))
        })
    }
}

thread_local! {
    /// The standard library and Kubernetes' libraries, registered once per thread; each
    /// evaluation binds its variables in a child scope.
    static ROOT: cel::Context<'static> = cel::Context::default().with_all();
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
}
