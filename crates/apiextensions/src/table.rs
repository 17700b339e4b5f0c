//! Server-side printing of custom resources (upstream: apiextensions-apiserver
//! pkg/registry/customresource/tableconvertor): a Name column, then the version's
//! `additionalPrinterColumns` (or an `Age` column when it has none), each cell found by the
//! column's JSONPath and typed by the column's type.

use apiserver::endpoints::TableConvertor;
use apiserver::registry::ResourceInfo;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const CREATION_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

struct Column {
    name: String,
    kind: String,
    format: String,
    description: String,
    priority: i64,
    path: Vec<Step>,
}

/// One step of the simple JSONPath that printer columns allow.
#[derive(Debug, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    /// `[?(@.a.b=="v")]`: the elements whose field equals the value.
    Filter(Vec<String>, Value),
}

/// The tables of a CRD's served versions (each version has its own printer columns).
pub struct CustomResourceTables {
    by_version: std::collections::HashMap<String, CustomResourceTable>,
}

impl CustomResourceTables {
    /// From the served versions of a CRD (`spec.versions[]` entries).
    pub fn new(versions: &[Value]) -> Self {
        Self {
            by_version: versions
                .iter()
                .map(|v| {
                    let name = v.get("name").and_then(Value::as_str).unwrap_or("");
                    let columns = v.get("additionalPrinterColumns").and_then(Value::as_array);
                    (name.to_string(), CustomResourceTable::new(columns))
                })
                .collect(),
        }
    }

    fn of(&self, info: &ResourceInfo) -> Option<&CustomResourceTable> {
        self.by_version.get(&info.version)
    }
}

impl TableConvertor for CustomResourceTables {
    fn column_definitions(&self, info: &ResourceInfo) -> Value {
        self.of(info)
            .map(|t| t.column_definitions(info))
            .unwrap_or_else(|| json!([]))
    }

    fn cells(&self, info: &ResourceInfo, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        self.of(info)
            .map(|t| t.cells(info, obj, now))
            .unwrap_or_default()
    }
}

pub struct CustomResourceTable {
    columns: Vec<Column>,
}

impl CustomResourceTable {
    /// The table of a CRD version from its `additionalPrinterColumns` (upstream's default `Age`
    /// column when it lists none). A column whose path cannot be parsed prints no value.
    pub fn new(columns: Option<&Vec<Value>>) -> Self {
        let default_age = vec![json!({
            "name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
            "description": CREATION_DESCRIPTION,
        })];
        let columns = match columns {
            Some(c) if !c.is_empty() => c,
            _ => &default_age,
        };
        let text = |c: &Value, f: &str| c.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        Self {
            columns: columns
                .iter()
                .map(|c| {
                    let path = text(c, "jsonPath");
                    let description = match text(c, "description") {
                        d if d.is_empty() => {
                            format!(
                                "Custom resource definition column (in JSONPath format): {path}"
                            )
                        }
                        d => d,
                    };
                    Column {
                        name: text(c, "name"),
                        kind: text(c, "type"),
                        format: text(c, "format"),
                        description,
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        path: parse_path(&path).unwrap_or_default(),
                    }
                })
                .collect(),
        }
    }
}

impl TableConvertor for CustomResourceTable {
    fn column_definitions(&self, _info: &ResourceInfo) -> Value {
        let mut defs = vec![json!({
            "name": "Name", "type": "string", "format": "name",
            "description": NAME_DESCRIPTION, "priority": 0,
        })];
        defs.extend(self.columns.iter().map(|c| {
            json!({
                "name": c.name, "type": c.kind, "format": c.format,
                "description": c.description, "priority": c.priority,
            })
        }));
        Value::Array(defs)
    }

    fn cells(&self, _info: &ResourceInfo, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let name = obj
            .pointer("/metadata/name")
            .cloned()
            .unwrap_or_else(|| json!(""));
        let mut cells = vec![name];
        for c in &self.columns {
            let found = if c.path.is_empty() {
                None
            } else {
                find(obj, &c.path)
            };
            cells.push(match found {
                None | Some(Value::Null) => Value::Null,
                Some(v) => cell(&c.kind, v, now),
            });
        }
        cells
    }
}

/// A cell of the column's type, as upstream's `cellForJSONValue`; a string column prints any
/// value (objects and lists as JSON).
fn cell(kind: &str, v: &Value, now: DateTime<Utc>) -> Value {
    match (kind, v) {
        ("string", Value::String(s)) => json!(s),
        ("string", other) => json!(other.to_string()),
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, Value::from),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, Value::from),
        ("boolean", Value::Bool(b)) => json!(b),
        ("date", Value::String(s)) => match DateTime::parse_from_rfc3339(s) {
            Ok(t) => json!(apimachinery::duration::human_duration(
                now - t.with_timezone(&Utc)
            )),
            Err(_) => json!("<invalid>"),
        },
        _ => Value::Null,
    }
}

/// The first value the path finds.
fn find<'a>(v: &'a Value, path: &[Step]) -> Option<&'a Value> {
    let Some((step, rest)) = path.split_first() else {
        return Some(v);
    };
    match step {
        Step::Field(f) => find(v.get(f)?, rest),
        Step::Index(i) => find(v.get(*i)?, rest),
        Step::All => match v {
            Value::Array(items) => items.iter().find_map(|i| find(i, rest)),
            Value::Object(m) => m.values().find_map(|i| find(i, rest)),
            _ => None,
        },
        Step::Filter(field, want) => v.as_array()?.iter().find_map(|item| {
            let mut got = item;
            for f in field {
                got = got.get(f)?;
            }
            (got == want).then(|| find(item, rest)).flatten()
        }),
    }
}

/// Parses the simple JSONPath of printer columns: `.a.b`, `.a[0]`, `.a[*].b`, `.a['b.c']` and
/// `.a[?(@.type=="Ready")].status`.
fn parse_path(path: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    let mut rest = path.trim();
    rest = rest
        .strip_prefix('{')
        .and_then(|r| r.strip_suffix('}'))
        .unwrap_or(rest);
    rest = rest.strip_prefix('$').unwrap_or(rest);
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            steps.push(Step::Field(r[..end].to_string()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = r[..end].trim();
            rest = &r[end + 1..];
            if inner == "*" {
                steps.push(Step::All);
            } else if let Ok(i) = inner.parse::<usize>() {
                steps.push(Step::Index(i));
            } else if let Some(q) = inner
                .strip_prefix('\'')
                .and_then(|q| q.strip_suffix('\''))
                .or_else(|| inner.strip_prefix('"').and_then(|q| q.strip_suffix('"')))
            {
                steps.push(Step::Field(q.to_string()));
            } else {
                let expr = inner.strip_prefix("?(")?.strip_suffix(')')?.trim();
                let (lhs, rhs) = expr.split_once("==")?;
                let field: Vec<String> = lhs
                    .trim()
                    .strip_prefix("@.")?
                    .split('.')
                    .map(str::to_string)
                    .collect();
                let rhs = rhs.trim();
                let want = match rhs
                    .strip_prefix('"')
                    .and_then(|s| s.strip_suffix('"'))
                    .or_else(|| rhs.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
                {
                    Some(s) => json!(s),
                    None => serde_json::from_str(rhs).ok()?,
                };
                steps.push(Step::Filter(field, want));
            }
        } else {
            return None;
        }
    }
    Some(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_find_values() {
        let obj = json!({"spec": {"replicas": 3, "a.b": "x"}, "status": {"conditions": [
            {"type": "Progressing", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        let at = |p: &str| find(&obj, &parse_path(p).unwrap()).cloned();
        assert_eq!(at(".spec.replicas"), Some(json!(3)));
        assert_eq!(at(".spec['a.b']"), Some(json!("x")));
        assert_eq!(at(".status.conditions[1].type"), Some(json!("Ready")));
        assert_eq!(at(".status.conditions[*].type"), Some(json!("Progressing")));
        assert_eq!(
            at(".status.conditions[?(@.type==\"Ready\")].status"),
            Some(json!("True"))
        );
        assert_eq!(at(".spec.missing"), None);
        assert!(parse_path(".spec..x").is_none());
    }

    #[test]
    fn cells_are_typed_as_upstream() {
        let now = Utc::now();
        assert_eq!(cell("integer", &json!(2.7), now), json!(2));
        assert_eq!(cell("string", &json!(5), now), json!("5"));
        assert_eq!(cell("boolean", &json!("true"), now), Value::Null);
        assert_eq!(cell("date", &json!("nope"), now), json!("<invalid>"));
        let t = (now - chrono::TimeDelta::seconds(30)).to_rfc3339();
        assert_eq!(cell("date", &json!(t), now), json!("30s"));
    }
}
