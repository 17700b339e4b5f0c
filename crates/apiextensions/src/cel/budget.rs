//! The runtime cost budget of validation rules (upstream: `celconfig.RuntimeCELCostBudget` for
//! one object and `PerCallLimit` for one evaluation, charged as each rule runs). The `cel`
//! interpreter does not count what it evaluates, so each evaluation is charged what the shared
//! CEL layer's `runtime_cost` charges it: cel-go's estimate with the sizes of the value it runs
//! on (the lists, maps and strings that are actually there), an upper bound of what cel-go
//! would count. Rules run at every node
//! of their schema that the object has, in upstream's order (a node's rules, then its items or
//! properties); the first evaluation over the per-call limit, or past the object's budget, stops
//! validation with upstream's error. `oldSelf` is sized as `self`.

use std::collections::BTreeMap;
use std::sync::Arc;

use apimachinery::validation::{FieldError, FieldPath};
use apiserver::cel::runtime_cost::{self, ValueSizes};
use apiserver::cel::{self as celcheck, Checked, DeclType};
use serde_json::Value;

/// `RuntimeCELCostBudget`: what all rules may cost on one object.
pub const RUNTIME_COST_BUDGET: u64 = runtime_cost::RUNTIME_CEL_COST_BUDGET;

/// The checked rules of a schema, arranged like the schema (only where rules are).
#[derive(Default)]
pub struct CostTree {
    /// Each rule: its checked expression and how upstream names it in errors.
    rules: Vec<(Checked, String)>,
    schema_type: String,
    properties: BTreeMap<String, CostTree>,
    items: Option<Box<CostTree>>,
    additional: Option<Box<CostTree>>,
}

impl CostTree {
    /// The tree of `schema`, `None` where no rule is at or below it.
    pub fn build(schema: &Value, is_root: bool) -> Option<CostTree> {
        let mut tree = CostTree {
            schema_type: schema
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            ..CostTree::default()
        };
        if let Some(rules) = schema
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
        {
            let embedded = schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
            if let Some(decl) = DeclType::from_schema(schema, is_root || embedded) {
                let self_type = celcheck::Type::of_decl(&decl, "selfType");
                let optional = celcheck::Type::Optional(Box::new(self_type.clone()));
                for rule in rules {
                    let text = rule.get("rule").and_then(Value::as_str).unwrap_or("");
                    let old = match rule.get("optionalOldSelf") {
                        Some(Value::Bool(true)) => optional.clone(),
                        _ => self_type.clone(),
                    };
                    // Rules that do not check were refused when the CRD was written.
                    if let Ok(checked) =
                        celcheck::compile(text, &[("self", self_type.clone()), ("oldSelf", old)])
                    {
                        tree.rules.push((checked, rule_name(rule)));
                    }
                }
            }
        }
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (name, prop) in props {
                if let Some(child) = CostTree::build(prop, false) {
                    tree.properties.insert(name.clone(), child);
                }
            }
        }
        tree.items = schema
            .get("items")
            .filter(|i| i.is_object())
            .and_then(|i| CostTree::build(i, false))
            .map(Box::new);
        tree.additional = schema
            .get("additionalProperties")
            .filter(|a| a.is_object())
            .and_then(|a| CostTree::build(a, false))
            .map(Box::new);
        let empty = tree.rules.is_empty()
            && tree.properties.is_empty()
            && tree.items.is_none()
            && tree.additional.is_none();
        (!empty).then_some(tree)
    }

    /// Charges every rule evaluation `obj` needs against the budget; the error that stops
    /// validation, if one does.
    pub fn charge(&self, obj: &Value) -> Option<FieldError> {
        let mut remaining = RUNTIME_COST_BUDGET;
        self.walk(obj, &FieldPath::nil(), &mut remaining).err()
    }

    fn walk(&self, value: &Value, path: &FieldPath, remaining: &mut u64) -> Result<(), FieldError> {
        if value.is_null() {
            return Ok(());
        }
        let invalid = |detail: String| {
            FieldError::invalid(path, Value::from(self.schema_type.clone()), detail)
        };
        for (checked, name) in &self.rules {
            if *remaining == 0 {
                return Err(invalid(runtime_cost::OUT_OF_BUDGET.into()));
            }
            let charge = runtime_cost::charge(checked, &ValueSizes::of_self(value));
            let cost = charge.cost;
            if charge.over_limit {
                return Err(invalid(format!(
                    "'{}': no further validation rules will be run due to call cost exceeds limit for rule: {name}",
                    runtime_cost::COST_LIMIT_EXCEEDED
                )));
            }
            if cost > *remaining {
                return Err(invalid(runtime_cost::OUT_OF_BUDGET.into()));
            }
            *remaining -= cost;
        }
        match value {
            Value::Array(items) => {
                if let Some(tree) = &self.items {
                    for (i, item) in items.iter().enumerate() {
                        tree.walk(item, &path.index(i), remaining)?;
                    }
                }
            }
            Value::Object(map) => {
                for (key, child) in map {
                    if let Some(tree) = self.properties.get(key) {
                        tree.walk(child, &path.child(key), remaining)?;
                    } else if let Some(tree) = &self.additional {
                        tree.walk(child, &path.key(key), remaining)?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// `ruleErrorString`: a rule's message, else its text.
fn rule_name(rule: &Value) -> String {
    let text = |k: &str| {
        rule.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_string()
    };
    match text("message") {
        m if !m.is_empty() => m,
        _ => text("rule"),
    }
}

/// A shared tree for a schema, when it has rules.
pub fn for_schema(schema: &Arc<Value>) -> Option<Arc<CostTree>> {
    CostTree::build(schema, true).map(Arc::new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(n: usize) -> Value {
        Value::from((0..n).map(|i| format!("n{i}")).collect::<Vec<_>>())
    }

    #[test]
    fn one_evaluation_over_the_per_call_limit_stops_validation() {
        let schema = Arc::new(json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "properties": {"names": {"type": "array", "maxItems": 1000, "items": {"type": "string", "maxLength": 10}}},
            "x-kubernetes-validations": [{"rule": "self.names.all(x, self.names.exists(y, x == y))", "message": "names are their own"}],
        }}}));
        let rules = crate::cel::Rules::compile(&schema).unwrap();
        assert!(
            rules
                .validate(&json!({"spec": {"names": names(100)}}), None)
                .is_empty()
        );
        let errs: Vec<String> = rules
            .validate(&json!({"spec": {"names": names(1000)}}), None)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            [
                r#"spec: Invalid value: "object": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: names are their own"#
            ]
        );
    }

    #[test]
    fn rules_together_over_the_budget_stop_where_it_runs_out() {
        // Each rule stays under the per-call limit on every item; together, on fifty full
        // items, they cost more than the object's budget.
        let rule = |r: &str| json!({"rule": r});
        let schema = Arc::new(json!({"type": "object", "properties": {"items": {
            "type": "array", "maxItems": 50,
            "items": {
                "type": "object",
                "properties": {"names": {"type": "array", "maxItems": 150, "items": {"type": "string", "maxLength": 5}}},
                "x-kubernetes-validations": [
                    rule("self.names.all(x, self.names.exists_one(y, x == y))"),
                    rule("self.names.all(y, self.names.exists_one(x, y == x))"),
                ],
            },
        }}}));
        // The CRD itself is within upstream's static limits.
        let written = crate::crd::schema_errors_on_create(&schema);
        assert!(written.is_empty(), "{written:?}");
        let rules = crate::cel::Rules::compile(&schema).unwrap();
        let item = json!({"names": names(150)});
        let few = json!({"items": vec![item.clone(); 5]});
        assert!(rules.validate(&few, None).is_empty());
        let full = json!({"items": vec![item; 50]});
        let errs = rules.validate(&full, None);
        assert_eq!(errs.len(), 1);
        let text = errs[0].to_string();
        assert!(
            text.starts_with("items[") && text.ends_with(r#"]: Invalid value: "object": validation failed due to running out of cost budget, no further validation rules will be run"#),
            "{text}"
        );
    }
}
