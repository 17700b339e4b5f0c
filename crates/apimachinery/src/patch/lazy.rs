//! The bytes kube-apiserver's patch library (`gopkg.in/evanphx/json-patch.v4`) writes for the
//! result of a JSON patch or a merge patch. A client sees them when the result is refused
//! (`patch: Invalid value: "{...}": strict decoding error: ...`), and the strict decoder meets
//! the result's unknown fields in their order.
//!
//! v4 holds a document as lazy nodes: a value stays the bytes it was read from until an
//! operation looks into it, and an object it looks into becomes a Go map, which Go writes sorted.
//! So the result keeps the stored object's members in Go's struct order wherever no operation
//! went, has every object on an operation's way sorted, and keeps a value taken from the patch
//! as the patch wrote it (compacted, with Go's HTML escapes), numbers' text and duplicate keys
//! included, unless the library looked into it: a merge patch prunes the nulls of what it adds,
//! a `test` compares by looking into the tested value, a `copy` writes what it copies.
//!
//! [`Document`] is that model. What a patch means stays with the appliers of the parent module:
//! the model follows their operations once they succeeded, and its bytes are used only if they
//! read back as the appliers' result.

use std::collections::BTreeMap;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::gojson;

/// A value as v4 holds it.
#[derive(Clone, Debug)]
pub(crate) enum Node {
    /// Go's nil node: a `null` member, element or operation value.
    Null,
    /// Not looked into: the bytes it was read from.
    Raw(Box<str>),
    /// An object looked into: a Go map, written sorted.
    Doc(BTreeMap<String, Node>),
    /// An array looked into.
    Ary(Vec<Node>),
}

type Members<'a> = BTreeMap<String, Option<&'a RawValue>>;

impl Node {
    /// The node of a value read from JSON (`None` is `null`).
    pub(crate) fn read(raw: Option<&RawValue>) -> Node {
        match raw {
            Some(raw) if raw.get() != "null" => Node::Raw(raw.get().into()),
            _ => Node::Null,
        }
    }

    /// v4's `intoDoc`: the node as a map, if it is an object. Go's map keeps the last of keys
    /// given twice, as a `BTreeMap` built from them does.
    fn as_doc(&mut self) -> Option<&mut BTreeMap<String, Node>> {
        if let Node::Raw(text) = self {
            let members: Members<'_> = serde_json::from_str(text).ok()?;
            let doc = members
                .into_iter()
                .map(|(name, raw)| (name, Node::read(raw)))
                .collect();
            *self = Node::Doc(doc);
        }
        match self {
            Node::Doc(doc) => Some(doc),
            _ => None,
        }
    }

    /// v4's `intoAry`: the node as a list, if it is an array.
    fn as_ary(&mut self) -> Option<&mut Vec<Node>> {
        if let Node::Raw(text) = self {
            let items: Vec<Option<&RawValue>> = serde_json::from_str(text).ok()?;
            *self = Node::Ary(items.into_iter().map(Node::read).collect());
        }
        match self {
            Node::Ary(items) => Some(items),
            _ => None,
        }
    }

    /// Looks into the node and everything below it, as v4's `equal` does to a value a `test`
    /// matched.
    fn look_into_all(&mut self) {
        if self.as_doc().is_some()
            && let Node::Doc(doc) = self
        {
            doc.values_mut().for_each(Node::look_into_all);
        } else if let Some(items) = self.as_ary() {
            items.iter_mut().for_each(Node::look_into_all);
        }
    }

    /// v4's `pruneNulls` for a merge patch's added value: an object loses its null members, at
    /// every depth; a list keeps its null elements (v4 appends them back) but its objects are
    /// pruned.
    fn prune_nulls(&mut self) {
        if let Some(doc) = self.as_doc() {
            doc.retain(|_, v| !matches!(v, Node::Null));
            doc.values_mut().for_each(Node::prune_nulls);
        } else if let Some(items) = self.as_ary() {
            items
                .iter_mut()
                .filter(|v| !matches!(v, Node::Null))
                .for_each(Node::prune_nulls);
        }
    }

    /// Appends the node as Go writes it.
    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Node::Null => out.extend_from_slice(b"null"),
            Node::Raw(text) => gojson::compact(text.as_bytes(), out),
            Node::Doc(doc) => gojson::write_object(doc, out, |node, out| node.write(out)),
            Node::Ary(items) => gojson::write_array(items, out, |node, out| node.write(out)),
        }
    }
}

/// A JSON document as v4 holds it while patching.
pub(crate) struct Document {
    root: Node,
}

impl Document {
    /// The document v4 reads from `json` (an object; its top level is looked into at once).
    pub(crate) fn read(json: &str) -> Option<Document> {
        let mut root = Node::Raw(json.into());
        root.as_doc()?;
        Some(Document { root })
    }

    /// The document's bytes, as Go writes them.
    pub(crate) fn json(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.root.write(&mut out);
        out
    }

    /// The bytes, if they read back as `result`, what the applier made of the same patch.
    pub(crate) fn json_if_same(&self, result: &Value) -> Option<Vec<u8>> {
        let json = self.json();
        let back: Value = serde_json::from_slice(&json).ok()?;
        (back == *result).then_some(json)
    }

    // JSON patch operations, given their pointers as the applier normalized them (indexes
    // canonical and within bounds). `None` when the model cannot follow.

    pub(crate) fn add(&mut self, path: &str, value: Node) -> Option<()> {
        let (container, key) = container(&mut self.root, path)?;
        match container {
            Node::Doc(doc) => {
                doc.insert(key, value);
            }
            Node::Ary(items) if key == "-" => items.push(value),
            Node::Ary(items) => {
                let at = index(&key, items.len() + 1)?;
                items.insert(at, value);
            }
            _ => return None,
        }
        Some(())
    }

    pub(crate) fn replace(&mut self, path: &str, value: Node) -> Option<()> {
        let (container, key) = container(&mut self.root, path)?;
        match container {
            Node::Doc(doc) => {
                doc.insert(key, value);
            }
            Node::Ary(items) => {
                let at = index(&key, items.len())?;
                items[at] = value;
            }
            _ => return None,
        }
        Some(())
    }

    pub(crate) fn remove(&mut self, path: &str) -> Option<Node> {
        let (container, key) = container(&mut self.root, path)?;
        match container {
            Node::Doc(doc) => doc.remove(&key),
            Node::Ary(items) => {
                let at = index(&key, items.len())?;
                Some(items.remove(at))
            }
            _ => None,
        }
    }

    /// The node at `path`, as it stands (a `copy`'s source).
    fn get(&mut self, path: &str) -> Option<&mut Node> {
        let (container, key) = container(&mut self.root, path)?;
        match container {
            Node::Doc(doc) => doc.get_mut(&key),
            Node::Ary(items) => {
                let at = index(&key, items.len())?;
                items.get_mut(at)
            }
            _ => None,
        }
    }

    /// A `copy`: v4 adds a copy written out and read back as bytes.
    pub(crate) fn copy(&mut self, from: &str, path: &str) -> Option<()> {
        let copied = match self.get(from)? {
            Node::Null => Node::Null,
            node => {
                let mut out = Vec::new();
                node.write(&mut out);
                Node::Raw(String::from_utf8(out).ok()?.into())
            }
        };
        self.add(path, copied)
    }

    /// A `test` that matched: v4 looked into the tested value.
    pub(crate) fn test(&mut self, path: &str) -> Option<()> {
        if let Some(node) = self.get(path) {
            node.look_into_all();
        }
        Some(())
    }

    /// A merge patch (v4's `MergePatch` of an object into this document).
    pub(crate) fn merge(&mut self, patch: &str) -> Option<()> {
        let mut patch = Node::Raw(patch.into());
        let patch = std::mem::take(patch.as_doc()?);
        let doc = self.root.as_doc()?;
        merge_docs(doc, patch);
        Some(())
    }
}

/// v4's `mergeDocs`: a null removes a member; a member the document lacks is added pruned; an
/// object merges into an object; anything else replaces.
fn merge_docs(doc: &mut BTreeMap<String, Node>, patch: BTreeMap<String, Node>) {
    for (name, value) in patch {
        if matches!(value, Node::Null) {
            doc.remove(&name);
            continue;
        }
        match doc.remove(&name) {
            None | Some(Node::Null) => {
                let mut value = value;
                value.prune_nulls();
                doc.insert(name, value);
            }
            Some(current) => {
                doc.insert(name, merge(current, value));
            }
        }
    }
}

/// v4's `merge` of one member: an object patch into an object merges; a patch into a
/// non-object replaces it pruned; a non-object patch into an object replaces it as it is.
fn merge(mut current: Node, mut patch: Node) -> Node {
    if current.as_doc().is_none() {
        patch.prune_nulls();
        return patch;
    }
    let Some(patch) = patch.as_doc().map(std::mem::take) else {
        return patch;
    };
    if let Node::Doc(doc) = &mut current {
        merge_docs(doc, patch);
    }
    current
}

/// v4's `findObject`: the container that `path`'s last token is a key of, looking into every
/// container on the way (an array if its bytes start with `[`), and that key.
fn container<'a>(root: &'a mut Node, path: &str) -> Option<(&'a mut Node, String)> {
    let mut tokens: Vec<&str> = path.split('/').collect();
    if tokens.len() < 2 {
        return None;
    }
    let key = decode_key(tokens.pop()?);
    let mut at = root;
    for token in &tokens[1..] {
        let next = match at {
            Node::Doc(doc) => doc.get_mut(&decode_key(token))?,
            Node::Ary(items) => {
                let i = index(token, items.len())?;
                items.get_mut(i)?
            }
            _ => return None,
        };
        let array = match &*next {
            Node::Null => return None,
            Node::Raw(text) => text.trim_start_matches([' ', '\n', '\t']).starts_with('['),
            Node::Ary(_) => true,
            Node::Doc(_) => false,
        };
        if array {
            next.as_ary()?;
        } else {
            next.as_doc()?;
        }
        at = next;
    }
    Some((at, key))
}

/// RFC 6901's unescaping of a pointer token.
fn decode_key(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// An index token into a list of `len` places (negative ones count from the end, as v4 allows).
fn index(token: &str, len: usize) -> Option<usize> {
    let at: i64 = token.parse().ok()?;
    let len = i64::try_from(len).ok()?;
    let at = if at < 0 { at + len } else { at };
    (0..len).contains(&at).then_some(at as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(json: &str) -> Document {
        Document::read(json).unwrap()
    }

    fn text(d: &Document) -> String {
        String::from_utf8(d.json()).unwrap()
    }

    #[test]
    fn untouched_members_keep_their_order_and_the_way_is_sorted() {
        let mut d = doc(
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"n","uid":"u"},"data":{"z":"1","b":"2"}}"#,
        );
        d.add("/data/c", Node::Raw(r#""3""#.into())).unwrap();
        assert_eq!(
            text(&d),
            r#"{"apiVersion":"v1","data":{"b":"2","c":"3","z":"1"},"kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u"}}"#
        );
    }

    #[test]
    fn values_from_the_patch_keep_their_text() {
        let mut d = doc(r#"{"spec":{"x":1}}"#);
        let value: Box<RawValue> =
            serde_json::from_str(r#"{ "b": 1.50, "a": "<&>", "b": 2e1 }"#).unwrap();
        d.add("/spec/y", Node::read(Some(&*value))).unwrap();
        // Compacted, HTML-escaped, numbers and duplicate keys as written.
        assert_eq!(
            text(&d),
            r#"{"spec":{"x":1,"y":{"b":1.50,"a":"\u003c\u0026\u003e","b":2e1}}}"#
        );
    }

    #[test]
    fn lists_move_copy_and_test() {
        let mut d = doc(r#"{"l":[{"y":1,"x":2},{"q":3,"p":4}],"m":{"d":1,"c":2}}"#);
        d.add("/l/-", Node::Raw("5".into())).unwrap();
        d.add("/l/0", Node::Null).unwrap();
        let moved = d.remove("/m").unwrap();
        d.add("/n", moved).unwrap();
        d.copy("/l/1", "/k").unwrap();
        d.test("/l/2").unwrap();
        assert_eq!(
            text(&d),
            r#"{"k":{"y":1,"x":2},"l":[null,{"y":1,"x":2},{"p":4,"q":3},5],"n":{"d":1,"c":2}}"#
        );
        assert!(d.add("/nope/x", Node::Null).is_none());
        assert!(d.replace("/l/9", Node::Null).is_none());
    }

    #[test]
    fn merge_patches_sort_what_they_merge_and_prune_what_they_add() {
        let mut d = doc(
            r#"{"kind":"K","metadata":{"name":"a","labels":{"z":"1","a":"2"}},"spec":{"y":1,"x":2},"status":{"s":1}}"#,
        );
        d.merge(r#"{"metadata":{"labels":{"m":"3","z":null}},"spec":[{"b":1,"a":null}],"new":{"d":null,"c":[null,{"f":null,"e":1}]}}"#)
            .unwrap();
        assert_eq!(
            text(&d),
            r#"{"kind":"K","metadata":{"labels":{"a":"2","m":"3"},"name":"a"},"new":{"c":[null,{"e":1}]},"spec":[{"b":1,"a":null}],"status":{"s":1}}"#
        );
    }

    #[test]
    fn the_bytes_are_used_only_if_they_read_back_as_the_result() {
        let d = doc(r#"{"b":1,"a":2}"#);
        assert!(
            d.json_if_same(&serde_json::json!({"a": 2, "b": 1}))
                .is_some()
        );
        assert!(d.json_if_same(&serde_json::json!({"a": 2})).is_none());
    }
}
