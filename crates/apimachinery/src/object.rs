//! Typed access to `apiVersion`, `kind` and `metadata` of any object held as JSON. Generic code
//! (built-in kinds and custom resources alike) reads and writes objects only through these.

use serde_json::{Map, Value};

/// Accessors for the parts of an object that every kind shares.
pub trait ObjectExt {
    fn api_version(&self) -> &str;
    fn kind(&self) -> &str;
    fn metadata(&self) -> Option<&Map<String, Value>>;
    /// The metadata object, created empty when absent or not an object.
    fn metadata_mut(&mut self) -> &mut Map<String, Value>;
    fn meta_str(&self, field: &str) -> &str;
    fn set_meta(&mut self, field: &str, value: impl Into<Value>);
    fn remove_meta(&mut self, field: &str) -> Option<Value>;
    fn meta_map(&self, field: &str) -> Option<&Map<String, Value>>;

    fn name(&self) -> &str {
        self.meta_str("name")
    }
    fn namespace(&self) -> &str {
        self.meta_str("namespace")
    }
    fn generate_name(&self) -> &str {
        self.meta_str("generateName")
    }
    fn uid(&self) -> &str {
        self.meta_str("uid")
    }
    fn resource_version(&self) -> &str {
        self.meta_str("resourceVersion")
    }
    fn deletion_timestamp(&self) -> Option<&str> {
        self.metadata()
            .and_then(|m| m.get("deletionTimestamp"))
            .and_then(Value::as_str)
    }
    fn labels(&self) -> Option<&Map<String, Value>> {
        self.meta_map("labels")
    }
    fn annotations(&self) -> Option<&Map<String, Value>> {
        self.meta_map("annotations")
    }
    fn finalizers(&self) -> Vec<&str> {
        self.metadata()
            .and_then(|m| m.get("finalizers"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }
    fn generation(&self) -> i64 {
        self.metadata()
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    }
    /// The owner reference that is the controller (upstream's `metav1.GetControllerOf`;
    /// validation allows one at most).
    fn controller_ref(&self) -> Option<&Value> {
        self.metadata()?
            .get("ownerReferences")?
            .as_array()?
            .iter()
            .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
    }
}

impl ObjectExt for Value {
    fn api_version(&self) -> &str {
        self.get("apiVersion").and_then(Value::as_str).unwrap_or("")
    }

    fn kind(&self) -> &str {
        self.get("kind").and_then(Value::as_str).unwrap_or("")
    }

    fn metadata(&self) -> Option<&Map<String, Value>> {
        self.get("metadata").and_then(Value::as_object)
    }

    fn metadata_mut(&mut self) -> &mut Map<String, Value> {
        if !self.is_object() {
            *self = Value::Object(Map::new());
        }
        let obj = self.as_object_mut().expect("made an object above");
        let meta = obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if !meta.is_object() {
            *meta = Value::Object(Map::new());
        }
        meta.as_object_mut().expect("made an object above")
    }

    fn meta_str(&self, field: &str) -> &str {
        self.metadata()
            .and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    fn set_meta(&mut self, field: &str, value: impl Into<Value>) {
        self.metadata_mut().insert(field.to_string(), value.into());
    }

    fn remove_meta(&mut self, field: &str) -> Option<Value> {
        self.metadata_mut().remove(field)
    }

    fn meta_map(&self, field: &str) -> Option<&Map<String, Value>> {
        self.metadata()
            .and_then(|m| m.get(field))
            .and_then(Value::as_object)
    }
}

/// A JSON Pointer lookup (RFC 6901) that finds what `Value::pointer` finds without allocating:
/// serde_json's unescapes every token into two new strings, and on a Pod's way through
/// validation, admission and the controllers that read it, those lookups cost more than the
/// tree walks they do. A token is unescaped (`~1` → `/`, `~0` → `~`) only when it holds a `~`.
pub trait JsonPointer {
    fn at(&self, pointer: &str) -> Option<&Value>;
}

impl JsonPointer for Value {
    fn at(&self, pointer: &str) -> Option<&Value> {
        if pointer.is_empty() {
            return Some(self);
        }
        pointer
            .strip_prefix('/')?
            .split('/')
            .try_fold(self, |target, token| {
                if token.contains('~') {
                    step(target, &token.replace("~1", "/").replace("~0", "~"))
                } else {
                    step(target, token)
                }
            })
    }
}

/// One token of a pointer: a member of an object, or an index of an array written as
/// serde_json reads it (no sign, no leading zero).
fn step<'a>(target: &'a Value, token: &str) -> Option<&'a Value> {
    match target {
        Value::Object(map) => map.get(token),
        Value::Array(list) => {
            if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
                return None;
            }
            list.get(token.parse::<usize>().ok()?)
        }
        _ => None,
    }
}

/// Reads a nested field by path segments, e.g. `["spec", "nodeName"]`.
pub fn get_path<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, seg| v.get(*seg))
}

/// The string form of a nested field for field selectors and table cells: strings as they are,
/// numbers and booleans printed, anything else absent.
pub fn get_path_string(obj: &Value, path: &[&str]) -> Option<String> {
    match get_path(obj, path)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_finds_what_pointer_finds() {
        let v = serde_json::json!({
            "spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80}]}, {"name": "b"}]},
            "a/b": {"c~d": 1, "": 2},
            "": {"x": 3},
            "list": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
            "s": "text"
        });
        for pointer in [
            "",
            "/",
            "/spec",
            "/spec/containers",
            "/spec/containers/0/name",
            "/spec/containers/1/name",
            "/spec/containers/2",
            "/spec/containers/0/ports/0/containerPort",
            "/a~1b/c~0d",
            "/a~1b/",
            "/a~1b/c~01",
            "//x",
            "/list/11",
            "/list/01",
            "/list/+1",
            "/list/-1",
            "/list/1.0",
            "/list/",
            "/s/0",
            "/missing/x",
            "spec",
            "/spec/containers/x",
            "/a~1b/c~2d",
            "/list/18446744073709551616",
        ] {
            assert_eq!(v.at(pointer), v.pointer(pointer), "{pointer:?}");
        }
        assert_eq!(v.at("/a~1b/c~0d"), Some(&serde_json::json!(1)));
    }
    use serde_json::json;

    #[test]
    fn the_controller_is_the_owner_reference_marked_so() {
        let owned = |refs: serde_json::Value| json!({"metadata": {"ownerReferences": refs}});
        let o = owned(json!([
            {"kind": "A", "uid": "1"},
            {"kind": "B", "uid": "2", "controller": false},
            {"kind": "C", "uid": "3", "controller": true},
        ]));
        assert_eq!(
            o.controller_ref().map(|r| r["uid"].clone()),
            Some(json!("3"))
        );
        assert_eq!(
            owned(json!([{"kind": "A", "uid": "1"}])).controller_ref(),
            None
        );
        assert_eq!(json!({"metadata": {}}).controller_ref(), None);
    }

    #[test]
    fn reads_and_writes_metadata() {
        let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "y"}}});
        assert_eq!(o.name(), "a");
        assert_eq!(o.namespace(), "");
        assert_eq!(o.labels().unwrap()["x"], "y");
        o.set_meta("namespace", "ns");
        assert_eq!(o.namespace(), "ns");
        let mut bare = json!(null);
        bare.set_meta("name", "b");
        assert_eq!(bare, json!({"metadata": {"name": "b"}}));
    }

    #[test]
    fn nested_paths() {
        let o = json!({"spec": {"nodeName": "n1", "replicas": 3}});
        assert_eq!(
            get_path_string(&o, &["spec", "nodeName"]).as_deref(),
            Some("n1")
        );
        assert_eq!(
            get_path_string(&o, &["spec", "replicas"]).as_deref(),
            Some("3")
        );
        assert_eq!(get_path_string(&o, &["status", "phase"]), None);
    }
}

/// Whether `value` nests objects and arrays more than `max` levels deep (a scalar is level 0,
/// `{}` and `[]` are level 1). Iterative, so that it is safe on any input the parsers produce.
pub fn nests_deeper_than(value: &Value, max: usize) -> bool {
    let mut pending: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((value, depth)) = pending.pop() {
        let inner = depth + 1;
        match value {
            Value::Object(_) if inner > max => return true,
            Value::Array(_) if inner > max => return true,
            Value::Object(map) => pending.extend(map.values().map(|child| (child, inner))),
            Value::Array(items) => pending.extend(items.iter().map(|child| (child, inner))),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod depth_tests {
    use super::nests_deeper_than;
    use serde_json::json;

    #[test]
    fn counts_objects_and_arrays() {
        assert!(!nests_deeper_than(&json!(5), 0));
        assert!(nests_deeper_than(&json!({}), 0));
        assert!(!nests_deeper_than(&json!({"a": [1, {"b": 2}]}), 3));
        assert!(nests_deeper_than(&json!({"a": [1, {"b": {}}]}), 3));
        let mut deep = json!(1);
        for _ in 0..50 {
            deep = json!([deep]);
        }
        assert!(!nests_deeper_than(&deep, 50));
        assert!(nests_deeper_than(&deep, 49));
    }
}
