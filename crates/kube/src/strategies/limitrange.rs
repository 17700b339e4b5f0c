//! LimitRanges: a container limit range fills its defaults as upstream's
//! `SetDefaults_LimitRangeItem` does: the default limit from the max, the default request from
//! the default limit, then from the min.

use apiserver::registry::Strategy;
use serde_json::Value;

use super::object_at;

pub struct LimitRangeStrategy;

/// Adds to `target` every resource of `source` it lacks.
fn fill(item: &mut Value, target: &str, source: &str) {
    let Some(from) = item.get(source).and_then(Value::as_object).cloned() else {
        return;
    };
    if let Some(to) = object_at(item, target).as_object_mut() {
        for (resource, quantity) in from {
            to.entry(resource).or_insert(quantity);
        }
    }
}

impl Strategy for LimitRangeStrategy {
    fn default(&self, obj: &mut Value) {
        for item in obj
            .pointer_mut("/spec/limits")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter(|i| i.get("type").and_then(Value::as_str) == Some("Container"))
        {
            fill(item, "default", "max");
            fill(item, "defaultRequest", "default");
            fill(item, "defaultRequest", "min");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn container_defaults_come_from_max_then_min() {
        let mut lr = json!({"spec": {"limits": [
            {"type": "Container", "max": {"cpu": "2", "memory": "1Gi"}, "min": {"cpu": "100m"}},
            {"type": "Pod", "max": {"cpu": "4"}}]}});
        LimitRangeStrategy.default(&mut lr);
        assert_eq!(
            lr["spec"]["limits"][0]["default"],
            json!({"cpu": "2", "memory": "1Gi"})
        );
        assert_eq!(
            lr["spec"]["limits"][0]["defaultRequest"],
            json!({"cpu": "2", "memory": "1Gi"})
        );
        assert!(lr["spec"]["limits"][1].get("default").is_none());
    }
}
