//! Decoding only part of an object. An in-process watcher that reads a few fields of every Pod
//! (the endpoints controllers, the Node authorizer's graph) would otherwise build the whole
//! object — managed fields, every container's probes and resources, every status — for each
//! event and drop it at once; with a projection the JSON parser skips what is not asked for
//! without allocating it, and the consumer still reads the kept fields as a `Value`.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Which fields of an object to keep: a tree of member names, built from dotted paths. A path's
/// last name keeps that member whole; a list is transparent (the names under it apply to each of
/// its items), so `spec.containers.ports` keeps every container's `ports` and nothing else of
/// the containers.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Projection {
    /// Members kept, sorted by name; `None` below a name keeps that member whole.
    children: Vec<(String, Option<Projection>)>,
}

impl Projection {
    /// The projection keeping each of `paths` (dotted member names, as `metadata.labels`).
    pub fn of<S: AsRef<str>>(paths: impl IntoIterator<Item = S>) -> Projection {
        let mut root = Projection::default();
        for path in paths {
            root.insert(path.as_ref().split('.'));
        }
        root
    }

    fn insert<'a>(&mut self, mut names: impl Iterator<Item = &'a str>) {
        let Some(name) = names.next() else { return };
        let at = match self
            .children
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
        {
            Ok(i) => i,
            Err(i) => {
                self.children
                    .insert(i, (name.to_string(), Some(Projection::default())));
                i
            }
        };
        let rest: Vec<&str> = names.collect();
        let child = &mut self.children[at].1;
        if rest.is_empty() {
            // A shorter path keeps the member whole, whatever longer paths asked for.
            *child = None;
        } else if let Some(c) = child {
            c.insert(rest.into_iter());
        }
    }

    /// The index in `children` of the member `name`, if it is kept.
    fn child(&self, name: &str) -> Option<usize> {
        self.children
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
    }

    /// Parses `json`, keeping only the projected members (a document that is not an object is
    /// kept as it is).
    pub fn decode(&self, json: &[u8]) -> serde_json::Result<Value> {
        let mut de = serde_json::Deserializer::from_slice(json);
        let v = self.deserialize(&mut de)?;
        de.end()?;
        Ok(v)
    }
}

impl<'de> DeserializeSeed<'de> for &Projection {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(Project(self))
    }
}

/// Visits one value under a projection: maps keep the projected members, lists project each
/// item, anything else is kept.
struct Project<'p>(&'p Projection);

/// A member name, matched against the projection without allocating it: the index of the kept
/// member, or `None` for one to skip.
struct Key<'p>(&'p Projection);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Self::Value, E> {
        Ok(self.0.child(name))
    }
}

impl<'de> Visitor<'de> for Project<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(kept) = map.next_key_seed(Key(self.0))? {
            match kept {
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
                Some(i) => {
                    let (name, sub) = &self.0.children[i];
                    let v = match sub {
                        None => map.next_value::<Value>()?,
                        Some(p) => map.next_value_seed(p)?,
                    };
                    out.insert(name.clone(), v);
                }
            }
        }
        Ok(Value::Object(out))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(v) = seq.next_element_seed(self.0)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn project(paths: &[&str], v: Value) -> Value {
        Projection::of(paths.iter())
            .decode(&serde_json::to_vec(&v).unwrap())
            .unwrap()
    }

    #[test]
    fn keeps_only_the_projected_members() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "n", "labels": {"a": "b"},
                         "managedFields": [{"manager": "m"}]},
            "spec": {"nodeName": "n1", "containers": [
                {"name": "c", "image": "i", "ports": [{"containerPort": 80}], "env": [{"name": "x"}]},
                {"name": "d", "image": "j"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1"}
        });
        let got = project(
            &[
                "metadata.name",
                "metadata.labels",
                "spec.nodeName",
                "spec.containers.ports",
                "status.phase",
            ],
            pod,
        );
        assert_eq!(
            got,
            json!({
                "metadata": {"name": "p", "labels": {"a": "b"}},
                "spec": {"nodeName": "n1", "containers": [{"ports": [{"containerPort": 80}]}, {}]},
                "status": {"phase": "Running"}
            })
        );
    }

    #[test]
    fn a_shorter_path_keeps_the_whole_member() {
        let v = json!({"spec": {"a": {"b": 1, "c": 2}, "d": 3}});
        assert_eq!(
            project(&["spec.a.b", "spec.a"], v.clone()),
            json!({"spec": {"a": {"b": 1, "c": 2}}})
        );
        assert_eq!(project(&["spec"], v.clone()), v);
    }

    #[test]
    fn keeps_scalars_where_a_map_was_projected_and_reads_escaped_names() {
        let got = Projection::of(["spec.x", "a\"b"])
            .decode(br#"{"spec": null, "a\"b": [1, 2.5, true, "s"], "c": {"d": [1]}}"#)
            .unwrap();
        assert_eq!(got, json!({"spec": null, "a\"b": [1, 2.5, true, "s"]}));
    }

    #[test]
    fn refuses_what_is_not_json() {
        assert!(Projection::of(["a"]).decode(b"{\"a\": 1} x").is_err());
        assert!(Projection::of(["a"]).decode(b"{\"b\": [1,}").is_err());
    }
}
