//! The managed fields of the `scale` subresource (upstream's `ScaleHandler`): a write through
//! `/scale` is tracked on the `autoscaling/v1 Scale` it edits, whose one owned field is
//! `spec.replicas`, and its managers are carried back to the parent object, where the field
//! lives at the kind's replicas path (`spec.replicas` for the built-in kinds, a CRD's
//! `specReplicasPath`).
//!
//! Entries keep upstream's identities across the trip: an Update manager's identity includes
//! its apiVersion, so a parent's Update entry seen on the Scale (in `autoscaling/v1`) is another
//! manager when it comes back, and the parent entry gives up the replicas path to it. Entries
//! that come from the Scale take their time from the parent entry of the same identity, which
//! new ones do not have: upstream's scale entries carry no time.

use serde_json::Value;

use super::fieldpath::{PathElement, Set};
use super::manager::{Entry, Managed};

const SCALE_API_VERSION: &str = "autoscaling/v1";

/// The replicas path of a kind in one of its versions.
pub enum ReplicasPath {
    /// The kind has no such version: its entries are dropped on the way back.
    UnknownVersion,
    /// The version has no scale subresource (a CRD version): entries pass unchanged.
    NoScale,
    At(Vec<PathElement>),
}

/// The two directions between a parent's managed fields and its Scale's.
pub struct ScaleHandler<'a> {
    /// The parent's managed fields, as stored.
    pub parent: &'a Managed,
    /// The parent's version the request is written in (where replicas coming back land).
    pub api_version: &'a str,
    /// The parent's replicas path in each version.
    pub replicas_path: &'a dyn Fn(&str) -> ReplicasPath,
}

fn replicas_in_scale() -> Vec<PathElement> {
    vec![PathElement::field("spec"), PathElement::field("replicas")]
}

fn only(path: &[PathElement]) -> Set {
    let mut s = Set::new();
    s.insert(path);
    s
}

impl ScaleHandler<'_> {
    /// The Scale's managed fields: the parent's managers of the replicas path, each owning
    /// `spec.replicas` in `autoscaling/v1`.
    pub fn to_subresource(&self) -> Managed {
        let entries = self
            .parent
            .entries
            .iter()
            .filter(|e| match (self.replicas_path)(&e.api_version) {
                ReplicasPath::At(path) => e.set.has(&path),
                _ => false,
            })
            .map(|e| Entry {
                id: e.id.clone(),
                set: only(&replicas_in_scale()),
                api_version: SCALE_API_VERSION.to_string(),
                applied: e.applied,
                time: e.time.clone(),
            })
            .collect();
        Managed { entries }
    }

    /// The parent's managed fields after the Scale's became `scale`: parent managers of the
    /// replicas path who no longer own it on the Scale lose it, and the Scale's owners of
    /// `spec.replicas` own the parent's replicas path in the request's version.
    pub fn to_parent(&self, scale: &Managed) -> Managed {
        let mut scale: Vec<&Entry> = scale.entries.iter().collect();
        let mut out = Managed::default();
        for e in &self.parent.entries {
            let path = match (self.replicas_path)(&e.api_version) {
                ReplicasPath::UnknownVersion => continue,
                ReplicasPath::NoScale => {
                    out.put(e.clone());
                    continue;
                }
                ReplicasPath::At(path) => path,
            };
            if !e.set.has(&path) {
                out.put(e.clone());
                continue;
            }
            match scale.iter().position(|s| s.id == e.id) {
                // Still an owner on the Scale: the entry stays as it is.
                Some(i) => {
                    scale.remove(i);
                    out.put(e.clone());
                }
                None => {
                    let rest = e.set.difference(&only(&path));
                    if !rest.is_empty() {
                        out.put(Entry {
                            set: rest,
                            ..e.clone()
                        });
                    }
                }
            }
        }
        let ReplicasPath::At(path) = (self.replicas_path)(self.api_version) else {
            return out;
        };
        for s in scale {
            if !s.set.has(&replicas_in_scale()) {
                continue;
            }
            out.put(Entry {
                id: s.id.clone(),
                set: only(&path),
                api_version: self.api_version.to_string(),
                applied: s.applied,
                time: self.parent.get(&s.id).and_then(|e| e.time.clone()),
            });
        }
        out
    }
}

/// A replicas path written as a JSON pointer (`/spec/replicas`) as field path elements.
pub fn pointer_path(pointer: &str) -> Vec<PathElement> {
    pointer
        .split('/')
        .filter(|p| !p.is_empty())
        .map(|p| PathElement::field(&p.replace("~1", "/").replace("~0", "~")))
        .collect()
}

/// Decodes an object's managed fields, or none when they do not decode.
pub fn managed_of(obj: &Value) -> Managed {
    obj.pointer("/metadata/managedFields")
        .map(Managed::decode)
        .and_then(Result::ok)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(v: Value) -> Managed {
        Managed::decode(&v).unwrap()
    }

    fn entry(manager: &str, op: &str, version: &str, sub: &str, fields: Value) -> Value {
        let mut e = json!({"manager": manager, "operation": op, "apiVersion": version,
                           "fieldsType": "FieldsV1", "fieldsV1": fields});
        if !sub.is_empty() {
            e["subresource"] = json!(sub);
        }
        e
    }

    fn spec_replicas(_: &str) -> ReplicasPath {
        ReplicasPath::At(pointer_path("/spec/replicas"))
    }

    #[test]
    fn owners_of_replicas_move_to_the_scale_and_back() {
        let parent = decode(json!([
            entry(
                "creator",
                "Apply",
                "apps/v1",
                "",
                json!({"f:spec": {"f:replicas": {}, "f:selector": {}}})
            ),
            entry(
                "other",
                "Update",
                "apps/v1",
                "",
                json!({"f:spec": {"f:paused": {}}})
            ),
        ]));
        let h = ScaleHandler {
            parent: &parent,
            api_version: "apps/v1",
            replicas_path: &spec_replicas,
        };
        let scale = h.to_subresource();
        assert_eq!(
            scale.encode().unwrap(),
            json!([{"manager": "creator", "operation": "Apply", "apiVersion": "autoscaling/v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}])
        );
        // A scaler took replicas: the creator keeps only the selector; the scaler's entry is in
        // the parent's version, without a time.
        let after = decode(json!([entry(
            "hpa",
            "Update",
            "autoscaling/v1",
            "scale",
            json!({"f:spec": {"f:replicas": {}}})
        )]));
        let back = h.to_parent(&after).encode().unwrap();
        assert_eq!(
            back,
            json!([
                {"manager": "creator", "operation": "Apply", "apiVersion": "apps/v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:selector": {}}}},
                {"manager": "hpa", "operation": "Update", "apiVersion": "apps/v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}},
                 "subresource": "scale"},
                {"manager": "other", "operation": "Update", "apiVersion": "apps/v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:paused": {}}}},
            ])
        );
        // The creator still owning replicas on the Scale keeps its entry whole.
        let kept = h.to_parent(&scale).encode().unwrap();
        assert_eq!(
            kept[0]["fieldsV1"],
            json!({"f:spec": {"f:replicas": {}, "f:selector": {}}})
        );
    }

    #[test]
    fn entries_of_unknown_versions_are_dropped_and_versions_without_scale_kept() {
        let parent = decode(json!([
            entry(
                "a",
                "Update",
                "example.com/v0",
                "",
                json!({"f:spec": {"f:x": {}}})
            ),
            entry(
                "b",
                "Update",
                "example.com/v1",
                "",
                json!({"f:spec": {"f:x": {}}})
            ),
        ]));
        let paths = |v: &str| match v {
            "example.com/v1" => ReplicasPath::NoScale,
            "example.com/v2" => ReplicasPath::At(pointer_path("/spec/size")),
            _ => ReplicasPath::UnknownVersion,
        };
        let h = ScaleHandler {
            parent: &parent,
            api_version: "example.com/v2",
            replicas_path: &paths,
        };
        assert!(h.to_subresource().is_empty());
        let back = h.to_parent(&Managed::default()).encode().unwrap();
        assert_eq!(back.as_array().unwrap().len(), 1);
        assert_eq!(back[0]["manager"], "b");
    }
}
