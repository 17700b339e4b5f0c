//! Objects read through their kind's schema as structured-merge-diff reads typed values
//! (upstream: `typed.TypedValue`): the set of fields an object sets, the comparison of two
//! objects, and the removal of a set of fields from an object.
//!
//! What a node is comes from the OpenAPI schema as kube-openapi's `schemaconv` turns it into
//! structured-merge-diff types: structs and maps are granular unless
//! `x-kubernetes-map-type: atomic`; lists are what `x-kubernetes-list-type` says, else keyed by
//! `x-kubernetes-patch-merge-key` under the `merge` patch strategy, a set under `merge` without
//! a key, atomic otherwise. Values the schema does not describe (preserve-unknown-fields, maps
//! without a schema) are "deduced": objects granular, lists atomic. `RawExtension` is one atomic
//! leaf.

use serde_json::{Map, Value};

use super::fieldpath::{PathElement, Set};
use crate::schema::{ListType, MapType, SchemaKind, SchemaRef, Schemas};

/// The type of a node.
#[derive(Clone, Copy, Debug)]
pub enum Ty {
    Schema(SchemaRef),
    /// Shaped by the value: objects are granular maps of deduced values, the rest leaves.
    Deduced,
    /// One atomic value whatever its shape.
    Untyped,
}

/// How the items of a list relate.
#[derive(Clone, Debug)]
pub enum ListRel {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// What a node is, for a given value.
pub(crate) enum Node {
    Leaf,
    Map,
    List(ListRel),
}

pub(crate) fn list_rel(schemas: &Schemas, r: SchemaRef) -> ListRel {
    match schemas.list_type(r) {
        Some(ListType::Atomic) => ListRel::Atomic,
        Some(ListType::Set) => ListRel::Set,
        Some(ListType::Map) => ListRel::Map(schemas.list_map_keys(r).map(str::to_string).collect()),
        None => {
            let strategy = schemas.patch_strategy(r);
            match (strategy.merge, schemas.merge_key(r)) {
                (true, Some(key)) => ListRel::Map(vec![key.to_string()]),
                (true, None) => ListRel::Set,
                _ => ListRel::Atomic,
            }
        }
    }
}

pub(crate) fn node(schemas: &Schemas, ty: Ty, v: Option<&Value>) -> Node {
    let deduced = |v: Option<&Value>| match v {
        Some(Value::Object(_)) => Node::Map,
        _ => Node::Leaf,
    };
    match ty {
        Ty::Untyped => Node::Leaf,
        Ty::Deduced => deduced(v),
        Ty::Schema(r) => match schemas.kind(r) {
            SchemaKind::Scalar => Node::Leaf,
            SchemaKind::Object | SchemaKind::Map => {
                if schemas.map_type(r) == Some(MapType::Atomic) {
                    Node::Leaf
                } else {
                    Node::Map
                }
            }
            SchemaKind::List => match list_rel(schemas, r) {
                ListRel::Atomic => Node::Leaf,
                rel => Node::List(rel),
            },
            SchemaKind::Opaque if schemas.is_raw_extension(r) => Node::Leaf,
            SchemaKind::Opaque => deduced(v),
        },
    }
}

pub(crate) fn child_ty(schemas: &Schemas, ty: Ty, key: &str) -> Ty {
    match ty {
        Ty::Schema(r) if !schemas.is_opaque(r) => {
            schemas.child(r, key).map(Ty::Schema).unwrap_or(Ty::Deduced)
        }
        Ty::Untyped => Ty::Untyped,
        _ => Ty::Deduced,
    }
}

pub(crate) fn items_ty(schemas: &Schemas, ty: Ty) -> Ty {
    match ty {
        Ty::Schema(r) => schemas.items(r).map(Ty::Schema).unwrap_or(Ty::Untyped),
        _ => Ty::Untyped,
    }
}

/// Whether `key` is a named field of the struct `ty` (upstream's `FindField`).
fn is_named_field(schemas: &Schemas, ty: Ty, key: &str) -> bool {
    matches!(ty, Ty::Schema(r) if schemas.field(r, key).is_some())
}

/// The path element of a list item: its key fields, or its value in a set. A missing key field
/// counts as its default in the list's item schema, and is left out when it has none.
pub(crate) fn item_element(
    schemas: &Schemas,
    item_ty: Ty,
    rel: &ListRel,
    item: &Value,
) -> Result<PathElement, String> {
    item_element_with(rel, item, |key| match item_ty {
        Ty::Schema(r) => schemas.field_default(r, key).cloned(),
        _ => None,
    })
}

fn item_element_with(
    rel: &ListRel,
    item: &Value,
    key_default: impl Fn(&str) -> Option<Value>,
) -> Result<PathElement, String> {
    match rel {
        ListRel::Atomic => Err("invalid indexing of non-associative list".into()),
        ListRel::Set => match item {
            Value::Object(_) => {
                Err("associative list without keys has an element that's a map type".into())
            }
            Value::Array(_) => Err("not supported: associative list with lists as elements".into()),
            Value::Null => {
                Err("associative list without keys has an element that's an explicit null".into())
            }
            v => Ok(PathElement::Value(v.clone())),
        },
        ListRel::Map(keys) => {
            let Value::Object(m) = item else {
                return Err(if item.is_null() {
                    "associative list with keys may not have a null element".into()
                } else {
                    "associative list with keys may not have non-map elements".into()
                });
            };
            let mut fields: Vec<(Box<str>, Value)> = keys
                .iter()
                .filter_map(|k| {
                    let v = m.get(k).cloned().or_else(|| key_default(k))?;
                    Some((k.as_str().into(), v))
                })
                .collect();
            if fields.is_empty() {
                let quoted: Vec<String> = keys
                    .iter()
                    .map(|k| crate::validation::go_quote(k))
                    .collect();
                return Err(format!(
                    "associative list with keys has an element that omits all key fields [{}] (and doesn't have default values for any key fields)",
                    quoted.join(" ")
                ));
            }
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(PathElement::Key(fields.into_boxed_slice()))
        }
    }
}

/// A field set brought in line with the schema as it is now (upstream's
/// `ReconcileFieldSetWithSchema`): a manager that owned the fields inside a struct, map or list
/// that has since become atomic (`x-kubernetes-map-type: atomic`, `x-kubernetes-list-type:
/// atomic`) owns that node as a whole instead. The reverse change, atomic to granular, needs
/// nothing: the owner of the node keeps it and owns none of its new parts, as if it had always
/// been granular. `None` when nothing changed.
pub fn reconcile_field_set_with_schema(schemas: &Schemas, root: Ty, set: &Set) -> Option<Set> {
    let mut now_atomic = Set::new();
    let mut path = Vec::new();
    reconcile_children(schemas, root, set, &mut path, &mut now_atomic);
    if now_atomic.is_empty() {
        return None;
    }
    Some(set.recursive_difference(&now_atomic).union(&now_atomic))
}

/// Visits the owned parts of the node of type `ty` at `path` whose set is `set`.
fn reconcile_children(
    schemas: &Schemas,
    ty: Ty,
    set: &Set,
    path: &mut Vec<PathElement>,
    now_atomic: &mut Set,
) {
    let Ty::Schema(r) = ty else {
        // Deduced values (preserve-unknown-fields) have no atomic or granular tags.
        return;
    };
    let child_of = |pe: &PathElement| match schemas.kind(r) {
        SchemaKind::List => Some(items_ty(schemas, ty)),
        SchemaKind::Object | SchemaKind::Map => match pe {
            PathElement::Field(name) => schemas.child(r, name).map(Ty::Schema),
            _ => schemas.map_values(r).map(Ty::Schema),
        },
        _ => None,
    };
    // Owned as a whole (a member without parts below it) or in parts (a subtree).
    let parts = set
        .children()
        .iter()
        .map(|(pe, sub)| (pe, Some(sub)))
        .chain(
            set.members()
                .iter()
                .filter(|pe| set.child(pe).is_none())
                .map(|pe| (pe, None)),
        );
    for (pe, sub) in parts {
        let (Some(child), Some(sub)) = (child_of(pe), sub) else {
            // A node owned whole stays so, whatever it has become.
            continue;
        };
        path.push(pe.clone());
        if is_atomic_container(schemas, child) {
            if !sub.is_empty() {
                now_atomic.insert(path);
            }
        } else {
            reconcile_children(schemas, child, sub, path, now_atomic);
        }
        path.pop();
    }
}

/// Whether `ty` is a struct, map or list that is atomic (not a scalar, which is atomic anyway).
fn is_atomic_container(schemas: &Schemas, ty: Ty) -> bool {
    let Ty::Schema(r) = ty else {
        return false;
    };
    match schemas.kind(r) {
        SchemaKind::Object | SchemaKind::Map => schemas.map_type(r) == Some(MapType::Atomic),
        SchemaKind::List => matches!(list_rel(schemas, r), ListRel::Atomic),
        _ => false,
    }
}

/// A path in the form upstream's validation errors use (`.spec.ports`).
fn error_path(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// The fields `v` sets (upstream's `ToFieldSet`): leaves, keys of granular maps that are not
/// struct fields, list items, and empty or null values. Items without their keys are an error.
pub fn to_field_set(schemas: &Schemas, root: Ty, v: &Value) -> Result<Set, String> {
    field_set_checked(schemas, root, v, false)
}

/// [`to_field_set`] of a configuration a client applies, which is also checked against the
/// schema as upstream types it: a field the schema does not declare is an error.
pub fn applied_field_set(schemas: &Schemas, root: Ty, v: &Value) -> Result<Set, String> {
    field_set_checked(schemas, root, v, true)
}

fn field_set_checked(schemas: &Schemas, root: Ty, v: &Value, strict: bool) -> Result<Set, String> {
    let mut set = Set::new();
    let mut errors = Vec::new();
    let mut walk = FieldSetWalk {
        schemas,
        strict,
        set: &mut set,
        errors: &mut errors,
    };
    walk.visit(root, v, &mut Vec::new());
    match errors.len() {
        0 => Ok(set),
        // Upstream's `ValidationErrors`: one error alone, or a list under `errors:`.
        1 => Err(errors.remove(0)),
        _ => Err(format!("errors:\n  {}", errors.join("\n  "))),
    }
}

struct FieldSetWalk<'a> {
    schemas: &'a Schemas,
    strict: bool,
    set: &'a mut Set,
    errors: &'a mut Vec<String>,
}

impl FieldSetWalk<'_> {
    fn visit(&mut self, ty: Ty, v: &Value, path: &mut Vec<PathElement>) {
        let schemas = self.schemas;
        match node(schemas, ty, Some(v)) {
            Node::Leaf => self.set.insert(path),
            Node::Map => {
                let Value::Object(m) = v else {
                    return;
                };
                for (k, cv) in m {
                    path.push(PathElement::field(k));
                    // A kind's type fields are always declared (custom resources' schemas
                    // may leave them out; upstream's converter adds them).
                    let type_meta = path.len() == 1 && (k == "apiVersion" || k == "kind");
                    if self.strict
                        && !type_meta
                        && let Ty::Schema(r) = ty
                        && schemas.kind(r) == SchemaKind::Object
                        && schemas.field(r, k).is_none()
                        && !schemas.allows_unknown_fields(r)
                    {
                        self.errors.push(format!(
                            "{}: field not declared in schema",
                            error_path(path)
                        ));
                        path.pop();
                        continue;
                    }
                    self.visit(child_ty(schemas, ty, k), cv, path);
                    let empty = cv.is_null() || cv.as_object().is_some_and(Map::is_empty);
                    if empty || !is_named_field(schemas, ty, k) {
                        self.set.insert(path);
                    }
                    path.pop();
                }
            }
            Node::List(rel) => {
                let Value::Array(items) = v else {
                    return;
                };
                let item_ty = items_ty(schemas, ty);
                let mut elements = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match item_element(schemas, item_ty, &rel, item) {
                        Ok(pe) => elements.push(pe),
                        Err(e) => {
                            self.errors
                                .push(format!("{}: element {i}: {e}", error_path(path)));
                            return;
                        }
                    }
                }
                for (i, item) in items.iter().enumerate() {
                    let pe = &elements[i];
                    let duplicate = elements.iter().filter(|e| *e == pe).count() > 1;
                    path.push(pe.clone());
                    if !duplicate {
                        self.visit(item_ty, item, path);
                    }
                    // Upstream owns a duplicated item whole, never its fields.
                    self.set.insert(path);
                    path.pop();
                }
            }
        }
    }
}

/// What changed between two objects (upstream's `Comparison`).
#[derive(Debug, Default)]
pub struct Comparison {
    pub added: Set,
    pub modified: Set,
    pub removed: Set,
}

impl Comparison {
    /// Drops everything at or below the paths of `excluded` (the strategy's reset fields).
    pub fn exclude(mut self, excluded: &Set) -> Self {
        self.added.subtract_recursive(excluded);
        self.modified.subtract_recursive(excluded);
        self.removed.subtract_recursive(excluded);
        self
    }
}

/// Compares `lhs` (old) with `rhs` (new), both of type `root` (upstream's `Compare`).
pub fn compare(schemas: &Schemas, root: Ty, lhs: &Value, rhs: &Value) -> Comparison {
    let mut c = Comparison::default();
    compare_node(schemas, root, Some(lhs), Some(rhs), &mut Vec::new(), &mut c);
    c
}

fn is_empty_value(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    }
}

fn compare_leaf(l: Option<&Value>, r: Option<&Value>, path: &[PathElement], c: &mut Comparison) {
    match (l, r) {
        (None, _) => c.added.insert(path),
        (_, None) => c.removed.insert(path),
        (Some(a), Some(b)) if !values_equal(a, b) => c.modified.insert(path),
        _ => {}
    }
}

/// JSON equality with numbers compared numerically, as upstream compares ints with floats.
fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || (x.as_f64().is_some() && x.as_f64() == y.as_f64())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| values_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

fn compare_node(
    schemas: &Schemas,
    ty: Ty,
    l: Option<&Value>,
    r: Option<&Value>,
    path: &mut Vec<PathElement>,
    c: &mut Comparison,
) {
    // A subtree only one side has is added or removed whole: its paths are written below
    // their parent in one descent rather than each from the root.
    if let Some((last, parent)) = path.split_last() {
        match (l, r) {
            (None, Some(v)) => {
                whole_subtree(schemas, ty, v, c.added.node_mut(parent), last.clone());
                return;
            }
            (Some(v), None) => {
                whole_subtree(schemas, ty, v, c.removed.node_mut(parent), last.clone());
                return;
            }
            _ => {}
        }
    }
    let shape = node(schemas, ty, r.or(l));
    match shape {
        Node::Leaf => return compare_leaf(l, r, path, c),
        Node::Map => {
            let lm = l.and_then(Value::as_object);
            let rm = r.and_then(Value::as_object);
            if is_empty_value(l) && is_empty_value(r) {
                return compare_leaf(l, r, path, c);
            }
            let mut keys: Vec<&String> = lm.map(|m| m.keys().collect()).unwrap_or_default();
            if let Some(rm) = rm {
                for k in rm.keys() {
                    if !lm.is_some_and(|m| m.contains_key(k)) {
                        keys.push(k);
                    }
                }
            }
            for k in keys {
                path.push(PathElement::field(k));
                compare_node(
                    schemas,
                    child_ty(schemas, ty, k),
                    lm.and_then(|m| m.get(k)),
                    rm.and_then(|m| m.get(k)),
                    path,
                    c,
                );
                path.pop();
            }
        }
        Node::List(rel) => {
            if is_empty_value(l) && is_empty_value(r) {
                return compare_leaf(l, r, path, c);
            }
            compare_items(schemas, ty, &rel, l, r, path, c);
        }
    }
    match (l, r) {
        (None, Some(_)) => c.added.insert(path),
        (Some(_), None) => c.removed.insert(path),
        _ => {}
    }
}

/// Every path [`compare_node`] finds at or below `v` when the other side has nothing there,
/// written into `at` (the set of `v`'s parent) under `pe`: each node is a path of its own; an
/// item that appears twice in a list is owned whole.
fn whole_subtree(schemas: &Schemas, ty: Ty, v: &Value, at: &mut Set, pe: PathElement) {
    match node(schemas, ty, Some(v)) {
        Node::Leaf => {}
        Node::Map => {
            if let Some(m) = v.as_object().filter(|m| !m.is_empty()) {
                let below = at.child_mut(&pe);
                for (k, cv) in m {
                    whole_subtree(
                        schemas,
                        child_ty(schemas, ty, k),
                        cv,
                        below,
                        PathElement::field(k),
                    );
                }
            }
        }
        Node::List(rel) => {
            if v.as_array().is_some_and(|a| !a.is_empty()) {
                let item_ty = items_ty(schemas, ty);
                let groups = group_items(schemas, item_ty, &rel, Some(v));
                if !groups.is_empty() {
                    let below = at.child_mut(&pe);
                    for (item_pe, items) in groups {
                        match items.as_slice() {
                            [item] => whole_subtree(schemas, item_ty, item, below, item_pe),
                            _ => below.insert_member(item_pe),
                        }
                    }
                }
            }
        }
    }
    at.insert_member(pe);
}

/// The items of a list grouped by path element, in first-seen order.
fn group_items<'v>(
    schemas: &Schemas,
    item_ty: Ty,
    rel: &ListRel,
    list: Option<&'v Value>,
) -> Vec<(PathElement, Vec<&'v Value>)> {
    let mut out: Vec<(PathElement, Vec<&Value>)> = Vec::new();
    for item in list.and_then(Value::as_array).into_iter().flatten() {
        let Ok(pe) = item_element(schemas, item_ty, rel, item) else {
            continue;
        };
        match out.iter_mut().find(|(p, _)| *p == pe) {
            Some((_, items)) => items.push(item),
            None => out.push((pe, vec![item])),
        }
    }
    out
}

fn compare_items(
    schemas: &Schemas,
    ty: Ty,
    rel: &ListRel,
    l: Option<&Value>,
    r: Option<&Value>,
    path: &mut Vec<PathElement>,
    c: &mut Comparison,
) {
    let item_ty = items_ty(schemas, ty);
    let left = group_items(schemas, item_ty, rel, l);
    let right = group_items(schemas, item_ty, rel, r);
    let mut all: Vec<&PathElement> = left.iter().map(|(p, _)| p).collect();
    for (p, _) in &right {
        if !left.iter().any(|(q, _)| q == p) {
            all.push(p);
        }
    }
    fn find<'v>(groups: &[(PathElement, Vec<&'v Value>)], pe: &PathElement) -> Vec<&'v Value> {
        groups
            .iter()
            .find(|(p, _)| p == pe)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }
    for pe in all {
        let (ll, rl) = (find(&left, pe), find(&right, pe));
        path.push(pe.clone());
        match (ll.len(), rl.len()) {
            (a, b) if a <= 1 && b <= 1 => {
                compare_node(
                    schemas,
                    item_ty,
                    ll.first().copied(),
                    rl.first().copied(),
                    path,
                    c,
                );
            }
            (a, b) if a >= 2 && b >= 2 => {
                if ll.len() != rl.len() || ll.iter().zip(&rl).any(|(p, q)| !values_equal(p, q)) {
                    c.modified.insert(path);
                }
            }
            (a, _) if a >= 2 => {
                if let Some(first) = rl.first() {
                    compare_node(schemas, item_ty, None, Some(first), path, c);
                }
                c.removed.insert(path);
            }
            _ => {
                if let Some(first) = ll.first() {
                    compare_node(schemas, item_ty, Some(first), None, path, c);
                }
                c.added.insert(path);
            }
        }
        path.pop();
    }
}

/// `set` with every named struct field that has paths below it made a member too (upstream's
/// `EnsureNamedFieldsAreMembers`), so that removing the set removes those fields whole.
pub fn ensure_named_fields_are_members(schemas: &Schemas, ty: Ty, set: &Set) -> Set {
    let mut members = set.members().to_vec();
    let mut children = Vec::with_capacity(set.children().len());
    for (pe, child) in set.children() {
        let cty = match pe {
            PathElement::Field(name) => {
                if is_named_field(schemas, ty, name)
                    && let Err(i) = members.binary_search(pe)
                {
                    members.insert(i, pe.clone());
                }
                child_ty(schemas, ty, name)
            }
            _ => items_ty(schemas, ty),
        };
        children.push((
            pe.clone(),
            ensure_named_fields_are_members(schemas, cty, child),
        ));
    }
    Set::from_parts(members, children)
}

/// `v` without the fields and items of `set` (upstream's `RemoveItems`). A map or list emptied
/// by the removal stays, empty.
pub fn remove_items(schemas: &Schemas, ty: Ty, v: &Value, set: &Set) -> Value {
    remove(schemas, ty, v, set).unwrap_or(Value::Null)
}

fn remove(schemas: &Schemas, ty: Ty, v: &Value, set: &Set) -> Option<Value> {
    match node(schemas, ty, Some(v)) {
        // Atomic maps and lists are removed whole by their parent; reached here they go.
        Node::Leaf => match v {
            Value::Object(_) | Value::Array(_) => None,
            _ => Some(v.clone()),
        },
        Node::Map => {
            let m = v.as_object()?;
            if m.is_empty() {
                return None;
            }
            let mut out = Map::new();
            let mut had_matches = false;
            for (k, cv) in m {
                let pe = PathElement::field(k);
                if set.has_member(&pe) {
                    continue;
                }
                match set.child(&pe) {
                    Some(sub) => {
                        had_matches = true;
                        let removed = remove(schemas, child_ty(schemas, ty, k), cv, sub);
                        let kept = match removed {
                            Some(x) if !x.is_null() => x,
                            _ if cv.is_object() => Value::Object(Map::new()),
                            _ if cv.is_array() => Value::Array(Vec::new()),
                            _ => Value::Null,
                        };
                        out.insert(k.clone(), kept);
                    }
                    None => {
                        out.insert(k.clone(), cv.clone());
                    }
                }
            }
            (!out.is_empty() || had_matches).then_some(Value::Object(out))
        }
        Node::List(rel) => {
            let items = v.as_array()?;
            if items.is_empty() {
                return None;
            }
            let item_ty = items_ty(schemas, ty);
            let mut out = Vec::with_capacity(items.len());
            let mut had_matches = false;
            for item in items {
                let Ok(pe) = item_element(schemas, item_ty, &rel, item) else {
                    out.push(item.clone());
                    continue;
                };
                if set.has_member(&pe) {
                    continue;
                }
                match set.child(&pe) {
                    Some(sub) => {
                        had_matches = true;
                        let kept = match remove(schemas, item_ty, item, sub) {
                            Some(x) if !x.is_null() => x,
                            _ if item.is_object() => Value::Object(Map::new()),
                            _ if item.is_array() => Value::Array(Vec::new()),
                            _ => Value::Null,
                        };
                        out.push(kept);
                    }
                    None => out.push(item.clone()),
                }
            }
            (!out.is_empty() || had_matches).then_some(Value::Array(out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schemas() -> Schemas {
        Schemas::from_openapi_v2(&json!({"definitions": {
            "Thing": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Thing"}],
                "properties": {
                    "metadata": {"type": "object", "properties": {
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
                    "spec": {"type": "object", "properties": {
                        "replicas": {"type": "integer"},
                        "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                                     "additionalProperties": {"type": "string"}},
                        "args": {"type": "array", "items": {"type": "string"}},
                        "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-patch-strategy": "merge"},
                        "containers": {"type": "array", "x-kubernetes-patch-strategy": "merge",
                                       "x-kubernetes-patch-merge-key": "name",
                                       "items": {"type": "object", "properties": {
                                           "name": {"type": "string"}, "image": {"type": "string"}}}}}}
                }
            }
        }}))
    }

    fn fields(set: &Set) -> Value {
        set.to_fields_v1()
    }

    #[test]
    fn field_sets_mark_map_keys_and_items_but_not_struct_fields() {
        let s = schemas();
        let root = Ty::Schema(s.root_for("example.com", "v1", "Thing").unwrap());
        let obj = json!({"metadata": {"labels": {"a": "1"}},
                         "spec": {"replicas": 2, "selector": {"x": "y"}, "args": ["1"],
                                  "finalizers": ["f"], "containers": [{"name": "c", "image": "i"}]}});
        let set = to_field_set(&s, root, &obj).unwrap();
        assert_eq!(
            fields(&set),
            json!({"f:metadata": {"f:labels": {"f:a": {}}},
                   "f:spec": {"f:replicas": {}, "f:selector": {}, "f:args": {},
                              "f:finalizers": {"v:\"f\"": {}},
                              "f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:name": {}, "f:image": {}}}}})
        );
        let unknown = json!({"spec": {"replicas": 1, "bogus": 1}, "extra": true});
        assert_eq!(
            applied_field_set(&s, root, &unknown).unwrap_err(),
            "errors:\n  .extra: field not declared in schema\n  .spec.bogus: field not declared in schema"
        );
        assert!(to_field_set(&s, root, &unknown).is_ok());
        let bad = json!({"spec": {"containers": [{"image": "i"}]}});
        assert_eq!(
            to_field_set(&s, root, &bad).unwrap_err(),
            ".spec.containers: element 0: associative list with keys has an element that omits all key fields [\"name\"] (and doesn't have default values for any key fields)"
        );
    }

    /// Fields owned inside nodes that are atomic now (written while `selector` was a granular
    /// map and `args` a set) become ownership of the whole node; the rest stays.
    #[test]
    fn reconciling_with_the_schema_owns_nodes_now_atomic_whole() {
        let s = schemas();
        let root = Ty::Schema(s.root_for("example.com", "v1", "Thing").unwrap());
        let written = Set::from_fields_v1(&json!({
            "f:metadata": {"f:labels": {".": {}, "f:a": {}}},
            "f:spec": {"f:selector": {"f:x": {}}, "f:args": {".": {}, "v:\"1\"": {}},
                       "f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}},
                       "f:replicas": {}}}))
        .unwrap();
        let reconciled = reconcile_field_set_with_schema(&s, root, &written).expect("a change");
        assert_eq!(
            fields(&reconciled),
            json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}},
                   "f:spec": {"f:selector": {}, "f:args": {},
                              "f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}},
                              "f:replicas": {}}})
        );
        // Owned whole already (or granular still): nothing to do.
        assert!(reconcile_field_set_with_schema(&s, root, &reconciled).is_none());
    }

    #[test]
    fn comparisons_add_the_maps_they_create() {
        let s = schemas();
        let root = Ty::Schema(s.root_for("example.com", "v1", "Thing").unwrap());
        let old = json!({"metadata": {}, "spec": {"replicas": 1, "containers": null}});
        let new = json!({"metadata": {"labels": {"a": "1"}},
                         "spec": {"replicas": 2, "containers": [{"name": "c", "image": "i"}]}});
        let c = compare(&s, root, &old, &new);
        assert_eq!(
            fields(&c.added),
            json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}},
                   "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:name": {}, "f:image": {}}}}})
        );
        assert_eq!(fields(&c.modified), json!({"f:spec": {"f:replicas": {}}}));
        let back = compare(&s, root, &new, &old);
        assert_eq!(
            fields(&back.removed),
            json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}},
                   "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:name": {}, "f:image": {}}}}})
        );
    }

    #[test]
    fn removal_keeps_emptied_parents() {
        let s = schemas();
        let root = Ty::Schema(s.root_for("example.com", "v1", "Thing").unwrap());
        let obj = json!({"metadata": {"labels": {"a": "1"}},
                         "spec": {"replicas": 2, "containers": [{"name": "c", "image": "i"}, {"name": "d"}]}});
        let set = Set::from_fields_v1(&json!({"f:metadata": {"f:labels": {"f:a": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"d\"}": {}, "k:{\"name\":\"c\"}": {"f:image": {}}}}}))
        .unwrap();
        assert_eq!(
            remove_items(&s, root, &obj, &set),
            json!({"metadata": {"labels": {}}, "spec": {"replicas": 2, "containers": [{"name": "c"}]}})
        );
        let named = ensure_named_fields_are_members(&s, root, &set);
        assert!(named.has(&[PathElement::field("spec")]));
        assert!(named.has(&[PathElement::field("metadata"), PathElement::field("labels")]));
        assert!(!named.has(&[
            PathElement::field("metadata"),
            PathElement::field("labels"),
            PathElement::field("b")
        ]));
    }
}
