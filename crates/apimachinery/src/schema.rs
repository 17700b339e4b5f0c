//! A structural view of OpenAPI v2 definitions: which fields an object has, what a list or a map
//! holds, and the `x-kubernetes-*` metadata that strategic merge patch, server-side apply and
//! pruning need (`patch-strategy`, `patch-merge-key`, `list-type`, `list-map-keys`, `map-type`).
//!
//! The document is parsed once into a flat arena of nodes addressed by [`SchemaRef`]; lookups
//! afterwards are a binary search in a node's sorted field list. Descriptions, validation keywords
//! and everything else a patch or a decoder does not look at are dropped, so the whole built-in
//! API fits in a few hundred kilobytes.
//!
//! This module does not validate values (types, formats, enums, required fields): that belongs to
//! each kind's strategy. It only answers "what does the schema say is here", and prunes fields the
//! schema does not know, as Go's decoder drops them for built-in kinds.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// What [`Schemas::visit_embedded_resources`] calls: the path and the embedded object.
pub type EmbeddedVisitor<'a> = dyn FnMut(&str, &mut Map<String, Value>) -> Result<(), String> + 'a;

/// A node of a parsed schema. Cheap to copy; only meaningful with the [`Schemas`] that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SchemaRef(u32);

/// `x-kubernetes-patch-strategy`, split on commas (`"merge,retainKeys"` sets both flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PatchStrategy {
    pub merge: bool,
    pub retain_keys: bool,
    pub replace: bool,
}

/// `x-kubernetes-list-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListType {
    Atomic,
    Set,
    Map,
}

/// `x-kubernetes-map-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapType {
    Atomic,
    Granular,
}

/// What shape of value a node describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaKind {
    /// A struct: named fields (it may also allow extra keys through `additionalProperties`).
    Object,
    /// A map: only `additionalProperties`, every key holds the same schema.
    Map,
    List,
    /// A string, number, boolean, int-or-string, quantity or time.
    Scalar,
    /// Anything goes and nothing below is known: `RawExtension`, `FieldsV1`, apiextensions
    /// `JSON`, preserve-unknown-fields without properties, or a definition the document lacks.
    Opaque,
}

/// Definitions whose Go types decode themselves from raw JSON: whatever the client sends is kept.
const OPAQUE_DEFINITIONS: &[&str] = &[
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
];

/// The apiextensions `JSONSchemaPropsOr{Array,Bool,StringArray}` types decode themselves too, but
/// into `JSONSchemaProps` with Go's lenient decoder: unknown fields inside are dropped silently,
/// never reported as strict errors.
const LENIENT_PREFIX: &str =
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOr";
const LENIENT_TARGET: &str =
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps";

/// Go's decoder keeps at most this many strict-decoding errors per object.
const MAX_REPORTED_UNKNOWN_FIELDS: usize = 100;

/// How deep `$ref` chains are followed; the documents never chain more than twice, so a longer
/// chain is a cycle in a malformed document and is treated as opaque.
const MAX_REF_DEPTH: usize = 16;

const SCALAR: SchemaRef = SchemaRef(0);
const ANY: SchemaRef = SchemaRef(1);

#[derive(Debug)]
enum Shape {
    /// A `$ref` (or a single-element `allOf`) that carries extensions of its own, e.g.
    /// `DeploymentSpec.strategy` with `x-kubernetes-patch-strategy: retainKeys`.
    Ref(SchemaRef),
    Object {
        /// Sorted by name, for binary search.
        fields: Box<[(Box<str>, SchemaRef)]>,
        additional: Option<SchemaRef>,
        preserve_unknown: bool,
        /// The `default` of the properties that have one (server-side apply reads a missing
        /// list-map key as its default).
        defaults: Box<[(Box<str>, Value)]>,
    },
    Array(Option<SchemaRef>),
    Scalar,
    Any,
    /// A `JSONSchemaPropsOr*` value: an object or a list of objects of the inner schema, pruned
    /// silently, or a boolean / string list kept as is.
    Lenient(SchemaRef),
}

#[derive(Debug, Default)]
struct Extensions {
    strategy: PatchStrategy,
    merge_key: Option<Box<str>>,
    list_type: Option<ListType>,
    list_map_keys: Box<[Box<str>]>,
    map_type: Option<MapType>,
    /// `x-kubernetes-embedded-resource`: an object with its own `apiVersion`, `kind` and
    /// `metadata` (custom resources only).
    embedded: bool,
}

#[derive(Debug)]
struct Node {
    shape: Shape,
    /// Most nodes have no `x-kubernetes-*` metadata; boxing keeps the arena small.
    ext: Option<Box<Extensions>>,
}

#[derive(Debug)]
struct KindEntry {
    group: Box<str>,
    version: Box<str>,
    schema: SchemaRef,
}

/// Parsed OpenAPI v2 definitions. See the module documentation.
#[derive(Debug)]
pub struct Schemas {
    nodes: Vec<Node>,
    definitions: HashMap<Box<str>, SchemaRef>,
    /// Kind → `(group, version, definition)` for every `x-kubernetes-group-version-kind`. Keyed by
    /// kind alone so that a lookup borrows its arguments instead of allocating a key.
    kinds: HashMap<Box<str>, Vec<KindEntry>>,
}

impl Schemas {
    /// Parses the `definitions` of an OpenAPI v2 document. A document without definitions gives an
    /// empty set; a `$ref` to a missing definition is treated as opaque.
    pub fn from_openapi_v2(doc: &Value) -> Schemas {
        let empty = Map::new();
        let defs = doc
            .get("definitions")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let mut builder = Builder {
            nodes: vec![
                Node {
                    shape: Shape::Scalar,
                    ext: None,
                },
                Node {
                    shape: Shape::Any,
                    ext: None,
                },
            ],
            definitions: HashMap::with_capacity(defs.len()),
        };
        // Every definition gets its slot first so that references resolve in one pass, whatever
        // the order of the document.
        for name in defs.keys() {
            let slot = builder.push(Node {
                shape: Shape::Any,
                ext: None,
            });
            builder.definitions.insert(name.as_str().into(), slot);
        }
        let mut kinds: HashMap<Box<str>, Vec<KindEntry>> = HashMap::new();
        for (name, def) in defs {
            let Some(&slot) = builder.definitions.get(name.as_str()) else {
                continue;
            };
            let node = builder.definition(name, def);
            builder.nodes[slot.0 as usize] = node;
            for gvk in def
                .get("x-kubernetes-group-version-kind")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let field = |k: &str| gvk.get(k).and_then(Value::as_str).unwrap_or("");
                let entries: &mut Vec<KindEntry> = kinds.entry(field("kind").into()).or_default();
                entries.push(KindEntry {
                    group: field("group").into(),
                    version: field("version").into(),
                    schema: slot,
                });
            }
        }
        let Builder {
            mut nodes,
            definitions,
        } = builder;
        nodes.shrink_to_fit();
        Schemas {
            nodes,
            definitions,
            kinds,
        }
    }

    /// The definition named `name` (e.g. `io.k8s.api.core.v1.Pod`).
    pub fn definition(&self, name: &str) -> Option<SchemaRef> {
        self.definitions.get(name).copied()
    }

    /// The top-level schema of a kind, found through `x-kubernetes-group-version-kind`.
    pub fn root_for(&self, group: &str, version: &str, kind: &str) -> Option<SchemaRef> {
        self.kinds
            .get(kind)?
            .iter()
            .find(|e| &*e.group == group && &*e.version == version)
            .map(|e| e.schema)
    }

    /// What shape of value `r` describes.
    pub fn kind(&self, r: SchemaRef) -> SchemaKind {
        match &self.resolved(r).shape {
            Shape::Object {
                fields,
                additional,
                preserve_unknown,
                ..
            } => {
                if fields.is_empty() && additional.is_some() {
                    SchemaKind::Map
                } else if fields.is_empty() && *preserve_unknown {
                    SchemaKind::Opaque
                } else {
                    SchemaKind::Object
                }
            }
            Shape::Array(_) => SchemaKind::List,
            Shape::Scalar => SchemaKind::Scalar,
            Shape::Any | Shape::Lenient(_) | Shape::Ref(_) => SchemaKind::Opaque,
        }
    }

    /// True when nothing below `r` is known: values there are kept as sent and patched as JSON.
    pub fn is_opaque(&self, r: SchemaRef) -> bool {
        self.kind(r) == SchemaKind::Opaque
    }

    /// Whether the object schema `r` keeps keys it does not declare
    /// (`x-kubernetes-preserve-unknown-fields`, or `additionalProperties`).
    pub fn allows_unknown_fields(&self, r: SchemaRef) -> bool {
        match &self.resolved(r).shape {
            Shape::Object {
                additional,
                preserve_unknown,
                ..
            } => additional.is_some() || *preserve_unknown,
            _ => true,
        }
    }

    /// The `default` of the field `name` of the object schema `r`.
    pub fn field_default(&self, r: SchemaRef, name: &str) -> Option<&Value> {
        match &self.resolved(r).shape {
            Shape::Object { defaults, .. } => {
                defaults.iter().find(|(n, _)| &**n == name).map(|(_, v)| v)
            }
            _ => None,
        }
    }

    /// The `JSONSchemaProps` schema a `JSONSchemaPropsOr*` value `r` holds, if `r` is one: Go
    /// decodes it leniently, so a strict decoder reports nothing below it (see [`Self::kind`],
    /// which calls it opaque), although pruning still drops what the inner schema lacks.
    pub fn lenient_inner(&self, r: SchemaRef) -> Option<SchemaRef> {
        match self.resolved(r).shape {
            Shape::Lenient(inner) => Some(inner),
            _ => None,
        }
    }

    /// Whether `r` is `RawExtension`, which server-side apply owns as one atomic value.
    pub fn is_raw_extension(&self, r: SchemaRef) -> bool {
        self.definitions
            .get(OPAQUE_DEFINITIONS[0])
            .is_some_and(|d| std::ptr::eq(self.resolved(*d), self.resolved(r)))
    }

    /// The named field of an object schema.
    pub fn field(&self, r: SchemaRef, name: &str) -> Option<SchemaRef> {
        match &self.resolved(r).shape {
            Shape::Object { fields, .. } => fields
                .binary_search_by(|(n, _)| (**n).cmp(name))
                .ok()
                .map(|i| fields[i].1),
            _ => None,
        }
    }

    /// The schema of every value of a map (`additionalProperties`).
    pub fn map_values(&self, r: SchemaRef) -> Option<SchemaRef> {
        match &self.resolved(r).shape {
            Shape::Object { additional, .. } => *additional,
            _ => None,
        }
    }

    /// What the key `key` of an object or map holds: the named field, else the map value schema.
    pub fn child(&self, r: SchemaRef, key: &str) -> Option<SchemaRef> {
        self.field(r, key).or_else(|| self.map_values(r))
    }

    /// The schema of a list's items (opaque when the list does not say).
    pub fn items(&self, r: SchemaRef) -> Option<SchemaRef> {
        match &self.resolved(r).shape {
            Shape::Array(items) => Some(items.unwrap_or(ANY)),
            _ => None,
        }
    }

    /// `x-kubernetes-patch-strategy` of the field `r` (default: none).
    pub fn patch_strategy(&self, r: SchemaRef) -> PatchStrategy {
        self.extension(r, |e| {
            (e.strategy != PatchStrategy::default()).then_some(e.strategy)
        })
        .unwrap_or_default()
    }

    /// `x-kubernetes-patch-merge-key` of the list field `r`.
    pub fn merge_key(&self, r: SchemaRef) -> Option<&str> {
        self.extension(r, |e| e.merge_key.as_deref())
    }

    /// `x-kubernetes-list-type` of the list field `r`.
    pub fn list_type(&self, r: SchemaRef) -> Option<ListType> {
        self.extension(r, |e| e.list_type)
    }

    /// `x-kubernetes-list-map-keys` of the list field `r` (empty when not a map list).
    pub fn list_map_keys(&self, r: SchemaRef) -> impl Iterator<Item = &str> + '_ {
        self.extension(r, |e| {
            (!e.list_map_keys.is_empty()).then_some(&e.list_map_keys[..])
        })
        .unwrap_or(&[])
        .iter()
        .map(|k| &**k)
    }

    /// `x-kubernetes-map-type` of the object or map `r`.
    pub fn map_type(&self, r: SchemaRef) -> Option<MapType> {
        self.extension(r, |e| e.map_type)
    }

    /// Whether any node is an embedded resource (most schemas have none: nothing to visit).
    pub fn has_embedded_resources(&self) -> bool {
        self.nodes
            .iter()
            .any(|n| n.ext.as_ref().is_some_and(|e| e.embedded))
    }

    /// Calls `f` on every object of `value` that the schema marks as an embedded resource
    /// (`x-kubernetes-embedded-resource`), with its path in field-error form (`spec.template`,
    /// `spec.items[0]`, `spec.byName[a]`), outermost first; stops at the first error.
    pub fn visit_embedded_resources(
        &self,
        r: SchemaRef,
        value: &mut Value,
        path: &mut String,
        f: &mut EmbeddedVisitor<'_>,
    ) -> Result<(), String> {
        if self.extension(r, |e| e.embedded.then_some(())).is_some()
            && let Value::Object(map) = value
        {
            f(path, map)?;
        }
        let mark = path.len();
        match value {
            Value::Object(map) => {
                for (key, child) in map.iter_mut() {
                    let (schema, step) = match self.field(r, key) {
                        Some(s) => (
                            s,
                            if mark == 0 {
                                key.clone()
                            } else {
                                format!(".{key}")
                            },
                        ),
                        None => match self.map_values(r) {
                            Some(s) => (s, format!("[{key}]")),
                            None => continue,
                        },
                    };
                    path.push_str(&step);
                    let found = self.visit_embedded_resources(schema, child, path, f);
                    path.truncate(mark);
                    found?;
                }
            }
            Value::Array(items) => {
                if let Some(schema) = self.items(r) {
                    for (i, item) in items.iter_mut().enumerate() {
                        path.push_str(&format!("[{i}]"));
                        let found = self.visit_embedded_resources(schema, item, path, f);
                        path.truncate(mark);
                        found?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Removes every field of `obj` that the schema `root` does not know, as Go's decoder drops
    /// them for built-in kinds, and returns upstream's strict-decoding message for each one:
    /// `unknown field "bogus"`, `unknown field "spec.containers[0].bogus"` (at most 100, as
    /// upstream keeps). `apiVersion`, `kind` and `metadata` are always known at the top level.
    ///
    /// The messages come in the order of `obj`'s keys (sorted, as `serde_json` keeps them). That is
    /// upstream's order wherever Go decodes JSON that it wrote from a map itself (a YAML body
    /// converted to JSON, the result of a merge patch); a JSON body's own order, and its
    /// duplicate keys (`serde_json` has already kept the last one), are for a scan of its text.
    pub fn prune_unknown(&self, root: SchemaRef, obj: &mut Value) -> Vec<String> {
        let mut pruner = Pruner {
            schemas: self,
            path: String::new(),
            found: Vec::new(),
        };
        pruner.value(root, obj, true, true);
        pruner.found
    }

    fn resolved(&self, mut r: SchemaRef) -> &Node {
        for _ in 0..MAX_REF_DEPTH {
            let node = &self.nodes[r.0 as usize];
            match node.shape {
                Shape::Ref(target) => r = target,
                _ => return node,
            }
        }
        &self.nodes[ANY.0 as usize]
    }

    /// The first value `pick` finds along `r`'s reference chain: the field's own extensions win
    /// over those of the definition it refers to.
    fn extension<'a, T>(
        &'a self,
        mut r: SchemaRef,
        pick: impl Fn(&'a Extensions) -> Option<T>,
    ) -> Option<T> {
        for _ in 0..MAX_REF_DEPTH {
            let node = &self.nodes[r.0 as usize];
            if let Some(found) = node.ext.as_deref().and_then(&pick) {
                return Some(found);
            }
            match node.shape {
                Shape::Ref(target) => r = target,
                _ => return None,
            }
        }
        None
    }
}

struct Builder {
    nodes: Vec<Node>,
    definitions: HashMap<Box<str>, SchemaRef>,
}

impl Builder {
    fn push(&mut self, node: Node) -> SchemaRef {
        // The built-in document has a few thousand nodes; u32 cannot overflow in practice, and a
        // document that large is cut short rather than panicking.
        let index = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX);
        if index == u32::MAX {
            return ANY;
        }
        self.nodes.push(node);
        SchemaRef(index)
    }

    fn definition(&mut self, name: &str, def: &Value) -> Node {
        if OPAQUE_DEFINITIONS.contains(&name) {
            return Node {
                shape: Shape::Any,
                ext: extensions(def),
            };
        }
        if name.starts_with(LENIENT_PREFIX) {
            let inner = self.definitions.get(LENIENT_TARGET).copied().unwrap_or(ANY);
            return Node {
                shape: Shape::Lenient(inner),
                ext: extensions(def),
            };
        }
        Node {
            shape: self.shape(def),
            ext: extensions(def),
        }
    }

    /// An inline schema (a property, items, additionalProperties). Plain scalars, opaque values
    /// and bare references share nodes instead of allocating one each.
    fn inline(&mut self, schema: &Value) -> SchemaRef {
        let ext = extensions(schema);
        let shape = self.shape(schema);
        if ext.is_none() {
            match shape {
                Shape::Scalar => return SCALAR,
                Shape::Any => return ANY,
                Shape::Ref(target) => return target,
                _ => {}
            }
        }
        self.push(Node { shape, ext })
    }

    fn shape(&mut self, schema: &Value) -> Shape {
        let Some(obj) = schema.as_object() else {
            return Shape::Any;
        };
        if let Some(reference) = obj.get("$ref").and_then(Value::as_str) {
            return Shape::Ref(self.reference(reference));
        }
        // OpenAPI v3 documents wrap a reference with siblings in a one-element allOf.
        if let Some([single]) = obj
            .get("allOf")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            return self.shape(single);
        }
        let preserve_unknown = obj
            .get("x-kubernetes-preserve-unknown-fields")
            .and_then(Value::as_bool)
            == Some(true);
        let properties = obj.get("properties").and_then(Value::as_object);
        let additional = match obj.get("additionalProperties") {
            Some(Value::Bool(true)) => Some(ANY),
            Some(schema @ Value::Object(_)) => Some(self.inline(schema)),
            _ => None,
        };
        if properties.is_some() || additional.is_some() {
            let mut fields: Vec<(Box<str>, SchemaRef)> = properties
                .into_iter()
                .flatten()
                .map(|(name, prop)| (Box::from(name.as_str()), self.inline(prop)))
                .collect();
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            let defaults = properties
                .into_iter()
                .flatten()
                .filter_map(|(name, prop)| {
                    Some((Box::from(name.as_str()), prop.get("default")?.clone()))
                })
                .collect();
            return Shape::Object {
                fields: fields.into_boxed_slice(),
                additional,
                preserve_unknown,
                defaults,
            };
        }
        match obj.get("type").and_then(Value::as_str) {
            Some("array") => Shape::Array(obj.get("items").map(|items| self.inline(items))),
            // An object without properties is an empty Go struct (every key is unknown) unless
            // it preserves unknown fields.
            Some("object") if preserve_unknown => Shape::Any,
            Some("object") => Shape::Object {
                fields: Box::new([]),
                additional: None,
                preserve_unknown: false,
                defaults: Box::new([]),
            },
            Some(_) => Shape::Scalar,
            None if obj
                .get("x-kubernetes-int-or-string")
                .and_then(Value::as_bool)
                == Some(true) =>
            {
                Shape::Scalar
            }
            None => Shape::Any,
        }
    }

    fn reference(&self, reference: &str) -> SchemaRef {
        let name = reference
            .strip_prefix("#/definitions/")
            .or_else(|| reference.strip_prefix("#/components/schemas/"))
            .unwrap_or(reference);
        self.definitions.get(name).copied().unwrap_or(ANY)
    }
}

fn extensions(schema: &Value) -> Option<Box<Extensions>> {
    let obj = schema.as_object()?;
    let mut ext = Extensions::default();
    let mut any = false;
    if let Some(strategy) = obj
        .get("x-kubernetes-patch-strategy")
        .and_then(Value::as_str)
    {
        for part in strategy.split(',') {
            match part.trim() {
                "merge" => ext.strategy.merge = true,
                "retainKeys" => ext.strategy.retain_keys = true,
                "replace" => ext.strategy.replace = true,
                _ => {}
            }
        }
        any = true;
    }
    if let Some(key) = obj
        .get("x-kubernetes-patch-merge-key")
        .and_then(Value::as_str)
    {
        ext.merge_key = Some(key.into());
        any = true;
    }
    if let Some(list_type) = obj.get("x-kubernetes-list-type").and_then(Value::as_str) {
        ext.list_type = match list_type {
            "atomic" => Some(ListType::Atomic),
            "set" => Some(ListType::Set),
            "map" => Some(ListType::Map),
            _ => None,
        };
        any = true;
    }
    if let Some(keys) = obj
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
    {
        ext.list_map_keys = keys
            .iter()
            .filter_map(Value::as_str)
            .map(Box::from)
            .collect();
        any = true;
    }
    if let Some(map_type) = obj.get("x-kubernetes-map-type").and_then(Value::as_str) {
        ext.map_type = match map_type {
            "atomic" => Some(MapType::Atomic),
            "granular" => Some(MapType::Granular),
            _ => None,
        };
        any = true;
    }
    if obj.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true)) {
        ext.embedded = true;
        any = true;
    }
    any.then(|| Box::new(ext))
}

/// Walks a value beside its schema, dropping unknown keys and recording where they were.
struct Pruner<'a> {
    schemas: &'a Schemas,
    /// The current path in upstream's strict-error form: keys joined with `.`, list indexes as
    /// `[i]` (sigs.k8s.io/json builds the same path, map keys included).
    path: String,
    found: Vec<String>,
}

impl Pruner<'_> {
    fn value(&mut self, r: SchemaRef, value: &mut Value, report: bool, top: bool) {
        let schemas = self.schemas;
        match &schemas.resolved(r).shape {
            Shape::Object {
                fields,
                additional,
                preserve_unknown,
                ..
            } => {
                if let Value::Object(map) = value {
                    self.object(fields, *additional, *preserve_unknown, map, report, top);
                }
            }
            Shape::Array(Some(items)) => {
                if let Value::Array(list) = value {
                    for (i, item) in list.iter_mut().enumerate() {
                        let mark = self.path.len();
                        self.path.push_str(&format!("[{i}]"));
                        self.value(*items, item, report, false);
                        self.path.truncate(mark);
                    }
                }
            }
            Shape::Lenient(inner) => match value {
                Value::Object(_) => self.value(*inner, value, false, false),
                Value::Array(list) => list
                    .iter_mut()
                    .for_each(|item| self.value(*inner, item, false, false)),
                _ => {}
            },
            Shape::Array(None) | Shape::Scalar | Shape::Any | Shape::Ref(_) => {}
        }
    }

    fn object(
        &mut self,
        fields: &[(Box<str>, SchemaRef)],
        additional: Option<SchemaRef>,
        preserve_unknown: bool,
        map: &mut Map<String, Value>,
        report: bool,
        top: bool,
    ) {
        map.retain(|key, child| {
            let known = fields
                .binary_search_by(|(n, _)| (**n).cmp(key.as_str()))
                .ok()
                .map(|i| fields[i].1)
                .or(additional);
            let mark = self.path.len();
            if !self.path.is_empty() {
                self.path.push('.');
            }
            self.path.push_str(key);
            let keep = match known {
                Some(schema) => {
                    self.value(schema, child, report, false);
                    true
                }
                None if top && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") => true,
                None if preserve_unknown => true,
                None => {
                    if report && self.found.len() < MAX_REPORTED_UNKNOWN_FIELDS {
                        self.found
                            .push(format!("unknown field {}", go_quote(&self.path)));
                    }
                    false
                }
            };
            self.path.truncate(mark);
            keep
        });
    }
}

/// Go's `strconv.Quote`: double quotes, backslash escapes for quotes, backslashes and control
/// characters, printable Unicode kept as is.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            // Go escapes what `unicode.IsPrint` rejects: controls, spaces other than ' ', and the
            // invisible format characters.
            c if c.is_control()
                || (c.is_whitespace() && c != ' ')
                || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{feff}') =>
            {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::OnceLock;

    /// The built-in API's schemas, parsed once for every test of the crate.
    pub(crate) fn builtin() -> &'static Schemas {
        static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
        SCHEMAS.get_or_init(|| {
            use std::io::Read;
            let path = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../kube/data/openapi/v2.json.gz"
            );
            let file = std::fs::File::open(path).expect("the recorded OpenAPI v2 document");
            let mut text = String::new();
            flate2::read::GzDecoder::new(file)
                .read_to_string(&mut text)
                .expect("gzip JSON");
            let doc: Value = serde_json::from_str(&text).expect("JSON");
            Schemas::from_openapi_v2(&doc)
        })
    }

    fn path(s: &Schemas, root: SchemaRef, fields: &[&str]) -> SchemaRef {
        fields.iter().fold(root, |r, f| {
            s.child(r, f)
                .or_else(|| s.items(r).and_then(|i| s.child(i, f)))
                .expect(f)
        })
    }

    #[test]
    fn finds_kinds_by_group_version_kind() {
        let s = builtin();
        assert_eq!(
            s.root_for("", "v1", "Pod"),
            s.definition("io.k8s.api.core.v1.Pod")
        );
        assert!(s.root_for("apps", "v1", "Deployment").is_some());
        assert!(
            s.root_for("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
                .is_some()
        );
        assert_eq!(s.root_for("apps", "v1", "Pod"), None);
        assert_eq!(s.root_for("", "v1", "Nope"), None);
    }

    #[test]
    fn reads_patch_metadata_of_pod_and_deployment_fields() {
        let s = builtin();
        let deploy = s.root_for("apps", "v1", "Deployment").unwrap();
        let containers = path(s, deploy, &["spec", "template", "spec", "containers"]);
        assert_eq!(s.kind(containers), SchemaKind::List);
        assert_eq!(
            s.patch_strategy(containers),
            PatchStrategy {
                merge: true,
                ..Default::default()
            }
        );
        assert_eq!(s.merge_key(containers), Some("name"));
        assert_eq!(s.list_type(containers), Some(ListType::Map));
        assert_eq!(
            s.list_map_keys(containers).collect::<Vec<_>>(),
            vec!["name"]
        );
        let env = path(s, containers, &["env"]);
        assert_eq!(s.merge_key(env), Some("name"));

        // A `$ref` with its own extension: the field's metadata, the definition's structure.
        let strategy = path(s, deploy, &["spec", "strategy"]);
        assert_eq!(
            s.patch_strategy(strategy),
            PatchStrategy {
                retain_keys: true,
                ..Default::default()
            }
        );
        assert_eq!(s.kind(strategy), SchemaKind::Object);
        assert!(s.field(strategy, "rollingUpdate").is_some());

        let pod = s.root_for("", "v1", "Pod").unwrap();
        let volumes = path(s, pod, &["spec", "volumes"]);
        assert_eq!(
            s.patch_strategy(volumes),
            PatchStrategy {
                merge: true,
                retain_keys: true,
                replace: false
            }
        );
        let tolerations = path(s, pod, &["spec", "tolerations"]);
        assert_eq!(s.patch_strategy(tolerations), PatchStrategy::default());
        assert_eq!(s.merge_key(tolerations), None);
        assert_eq!(s.list_type(tolerations), Some(ListType::Atomic));

        let service = s.root_for("", "v1", "Service").unwrap();
        let ports = path(s, service, &["spec", "ports"]);
        assert_eq!(s.merge_key(ports), Some("port"));
        assert_eq!(
            s.list_map_keys(ports).collect::<Vec<_>>(),
            vec!["port", "protocol"]
        );

        let pdb = s.root_for("policy", "v1", "PodDisruptionBudget").unwrap();
        let selector = path(s, pdb, &["spec", "selector"]);
        assert!(s.patch_strategy(selector).replace);
        assert_eq!(s.map_type(selector), Some(MapType::Atomic));
    }

    #[test]
    fn knows_maps_scalars_and_opaque_values() {
        let s = builtin();
        let cm = s.root_for("", "v1", "ConfigMap").unwrap();
        let labels = path(s, cm, &["metadata", "labels"]);
        assert_eq!(s.kind(labels), SchemaKind::Map);
        assert_eq!(s.kind(s.map_values(labels).unwrap()), SchemaKind::Scalar);
        let finalizers = path(s, cm, &["metadata", "finalizers"]);
        assert!(s.patch_strategy(finalizers).merge);
        assert_eq!(s.merge_key(finalizers), None);
        let owners = path(s, cm, &["metadata", "ownerReferences"]);
        assert_eq!(s.merge_key(owners), Some("uid"));
        let fields_v1 = path(s, cm, &["metadata", "managedFields", "fieldsV1"]);
        assert!(s.is_opaque(fields_v1));

        let revision = s.root_for("apps", "v1", "ControllerRevision").unwrap();
        assert!(s.is_opaque(path(s, revision, &["data"])));
        let deploy = s.root_for("apps", "v1", "Deployment").unwrap();
        assert_eq!(
            s.kind(path(
                s,
                deploy,
                &["spec", "strategy", "rollingUpdate", "maxSurge"]
            )),
            SchemaKind::Scalar
        );
        let crd = s
            .root_for("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
            .unwrap();
        let props = path(s, crd, &["spec", "versions", "schema", "openAPIV3Schema"]);
        assert!(s.is_opaque(path(s, props, &["default"])));
    }

    #[test]
    fn prunes_an_unknown_top_level_field() {
        let s = builtin();
        let cm = s.root_for("", "v1", "ConfigMap").unwrap();
        let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "u"}, "bogus": 1, "data": {"a": "b"}});
        assert_eq!(
            s.prune_unknown(cm, &mut obj),
            vec![r#"unknown field "bogus""#]
        );
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "u"}, "data": {"a": "b"}})
        );
    }

    #[test]
    fn prunes_nested_fields_with_upstream_paths() {
        let s = builtin();
        let pod = s.root_for("", "v1", "Pod").unwrap();
        let mut obj = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "bogus": true, "labels": {"any": "thing"}},
            "spec": {
                "foo": {"x": 1},
                "containers": [
                    {"name": "a", "image": "i", "bogus": 1, "ports": [{"containerPort": 80, "nope": 2}]},
                    {"name": "b", "image": "i", "resources": {"limits": {"cpu": "1"}, "extra": {}}}
                ]
            },
            "status": {"phase": "Running"}
        });
        let found = s.prune_unknown(pod, &mut obj);
        assert_eq!(
            found,
            vec![
                r#"unknown field "metadata.bogus""#,
                r#"unknown field "spec.containers[0].bogus""#,
                r#"unknown field "spec.containers[0].ports[0].nope""#,
                r#"unknown field "spec.containers[1].resources.extra""#,
                r#"unknown field "spec.foo""#,
            ]
        );
        assert_eq!(
            obj,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "labels": {"any": "thing"}},
                "spec": {"containers": [
                    {"name": "a", "image": "i", "ports": [{"containerPort": 80}]},
                    {"name": "b", "image": "i", "resources": {"limits": {"cpu": "1"}}}
                ]},
                "status": {"phase": "Running"}
            })
        );
    }

    #[test]
    fn prunes_deployment_templates_and_keeps_opaque_values() {
        let s = builtin();
        let deploy = s.root_for("apps", "v1", "Deployment").unwrap();
        let mut obj = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                "metadata": {"labels": {"a": "b"}, "oops": 1},
                "spec": {"containers": [{"name": "c", "image": "i", "env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "x", "q": 1}}}]}]}
            }}
        });
        assert_eq!(
            s.prune_unknown(deploy, &mut obj),
            vec![
                r#"unknown field "spec.template.metadata.oops""#,
                r#"unknown field "spec.template.spec.containers[0].env[0].valueFrom.fieldRef.q""#,
            ]
        );

        let revision = s.root_for("apps", "v1", "ControllerRevision").unwrap();
        let mut obj = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "r"},
                             "revision": 1, "data": {"anything": {"goes": [1, 2]}}});
        let before = obj.clone();
        assert!(s.prune_unknown(revision, &mut obj).is_empty());
        assert_eq!(obj, before);
    }

    #[test]
    fn prunes_crd_schema_props_silently_inside_lenient_types() {
        let s = builtin();
        let crd = s
            .root_for("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
            .unwrap();
        let mut obj = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "a.b"},
        "spec": {"group": "b", "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
            "type": "object", "bad": 1,
            "properties": {"spec": {"type": "array", "items": {"type": "string", "silent": 2}}},
            "default": {"free": "form"}
        }}}]}});
        assert_eq!(
            s.prune_unknown(crd, &mut obj),
            vec![r#"unknown field "spec.versions[0].schema.openAPIV3Schema.bad""#]
        );
        let schema = &obj["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        assert_eq!(
            schema["properties"]["spec"]["items"],
            json!({"type": "string"})
        );
        assert_eq!(schema["default"], json!({"free": "form"}));
    }

    #[test]
    fn quotes_paths_as_go_does() {
        let s = builtin();
        let cm = s.root_for("", "v1", "ConfigMap").unwrap();
        let mut obj = json!({"metadata": {}, "we\"ird\n": 1, "ünï": 2});
        assert_eq!(
            s.prune_unknown(cm, &mut obj),
            vec![
                r#"unknown field "we\"ird\n""#.to_string(),
                "unknown field \"ünï\"".to_string()
            ]
        );
    }

    #[test]
    fn reports_at_most_a_hundred_fields_but_prunes_all() {
        let s = builtin();
        let cm = s.root_for("", "v1", "ConfigMap").unwrap();
        let mut obj = json!({});
        for i in 0..150 {
            obj[format!("f{i:03}")] = json!(i);
        }
        assert_eq!(s.prune_unknown(cm, &mut obj).len(), 100);
        assert_eq!(obj, json!({}));
    }

    #[test]
    fn parses_small_documents_and_tolerates_broken_ones() {
        let doc = json!({"definitions": {
            "a.Thing": {"type": "object", "properties": {
                "list": {"type": "array", "items": {"$ref": "#/definitions/a.Missing"}},
                "wrapped": {"allOf": [{"$ref": "#/definitions/a.Loop"}], "x-kubernetes-patch-strategy": "replace"},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "empty": {"type": "object"}
            }, "x-kubernetes-group-version-kind": [{"group": "g", "version": "v", "kind": "Thing"}]},
            "a.Loop": {"$ref": "#/definitions/a.Loop"}
        }});
        let s = Schemas::from_openapi_v2(&doc);
        let thing = s.root_for("g", "v", "Thing").unwrap();
        let list = s.field(thing, "list").unwrap();
        assert!(s.is_opaque(s.items(list).unwrap()));
        let wrapped = s.field(thing, "wrapped").unwrap();
        assert!(s.patch_strategy(wrapped).replace);
        assert!(s.is_opaque(wrapped));
        assert!(s.is_opaque(s.field(thing, "free").unwrap()));
        let mut obj = json!({"free": {"x": 1}, "empty": {"y": 2}});
        assert_eq!(
            s.prune_unknown(thing, &mut obj),
            vec![r#"unknown field "empty.y""#]
        );
        assert_eq!(
            Schemas::from_openapi_v2(&json!([])).root_for("", "v1", "Pod"),
            None
        );
    }
}
