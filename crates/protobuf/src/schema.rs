//! The schema: every message of the built-in API packages, with the Go facts that decide how a
//! field travels (JSON name, `omitempty`, pointer or not, inline), and the map from an
//! `apiVersion` and `kind` to a message.
//!
//! Loaded once, on first use, from the table `build.rs` generates out of upstream's
//! `generated.proto` files and Go struct facts. This module describes messages; it does not
//! read or write any. Names borrow from the embedded table and a field is found by number (or
//! by JSON name, among a struct's members) with a binary search, so the parsed schema (1,192 messages, 4,059 fields) stays a few hundred KiB
//! of the idle server's heap instead of a million small strings and maps' worth.

use std::collections::HashMap;
use std::sync::LazyLock;

/// Index of a message in [`Schema::messages`].
pub(crate) type MessageId = usize;

/// Messages whose Go type marshals itself; everything else is a plain struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Special {
    None,
    /// `metav1.Time`: RFC 3339 in whole seconds, `null` when zero.
    Time,
    /// `metav1.MicroTime`: RFC 3339 with microseconds, `null` when zero.
    MicroTime,
    /// `metav1.Duration`: Go's duration string.
    Duration,
    /// `resource.Quantity`: its string form.
    Quantity,
    /// `intstr.IntOrString`: a JSON number or string.
    IntOrString,
    /// `runtime.RawExtension`: embedded JSON, or an embedded protobuf envelope.
    RawExtension,
    /// `metav1.FieldsV1` and apiextensions `JSON`: embedded JSON, `null` when empty.
    RawJson,
    /// Named string slices (`ExtraValue`, `Verbs`): a JSON array.
    Strings,
    /// apiextensions `JSONSchemaPropsOrBool`: a schema or a boolean.
    SchemaOrBool,
    /// apiextensions `JSONSchemaPropsOrArray`: a schema or an array of schemas.
    SchemaOrArray,
    /// apiextensions `JSONSchemaPropsOrStringArray`: a schema or an array of strings.
    SchemaOrStringArray,
    /// `runtime.Unknown`: a nested envelope.
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Type {
    String,
    Bool,
    Int32,
    Int64,
    Double,
    Bytes,
    Message(MessageId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cardinality {
    Single,
    Repeated,
    /// A `map<string, T>`; [`Field::ty`] is the value type.
    Map,
}

#[derive(Debug)]
pub(crate) struct Field {
    pub number: u32,
    /// The JSON name; empty for inline (embedded) structs.
    pub json: &'static str,
    pub ty: Type,
    pub cardinality: Cardinality,
    /// The Go field is a pointer: absent means nil, and only a present value is written.
    pub pointer: bool,
    pub omitempty: bool,
    /// The Go field is `omitzero`: a zero value is left out of JSON.
    pub omitzero: bool,
    /// An embedded struct whose JSON fields sit in the parent object.
    pub inline: bool,
    /// The Go type as `reflect` names it, pointer stripped (`int32`, `[]v1.Container`,
    /// `map[string]string`), for Go's decoding errors; empty inside special types.
    pub go_type: &'static str,
    /// The Go field name (`TimeAdded`); empty inside special types.
    pub go_name: &'static str,
}

#[derive(Debug)]
pub(crate) struct Message {
    pub name: &'static str,
    pub special: Special,
    /// In Go declaration order, which is the order of JSON keys.
    pub fields: Vec<Field>,
    /// Indices into `fields` in field-number order, which is the order Go writes protobuf in.
    pub wire_order: Vec<u16>,
    /// The struct's JSON members, its inline structs' included, sorted by name as a JSON
    /// object's members are: a walk of an object's own members finds each one's field here.
    pub members: Vec<MemberField>,
    /// The members Go writes even when the object lacks them (structs that are not pointers,
    /// fields without `omitempty`), which a walk of the object's own members would miss.
    pub written_when_absent: Vec<MemberField>,
}

/// A JSON member of a struct: field `index` of message `message`, which is the struct itself
/// or one it inlines `inline_depth` levels down.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MemberField {
    /// A [`MessageId`], kept small: every struct's members are listed, so the lists are a
    /// part of the idle server's heap.
    message: u32,
    pub index: u16,
    /// The member's place among the struct's JSON members in Go's declaration order, inline
    /// structs' members at the inline field's place: the order Go writes them in.
    pub rank: u16,
    pub inline_depth: u8,
}

impl MemberField {
    pub(crate) fn message(self) -> MessageId {
        self.message as MessageId
    }
}

impl Message {
    /// The index into `fields` of field `number` (a binary search of the wire order: messages
    /// have tens of fields, where a map per message would cost more memory than it saves time).
    pub(crate) fn field_index(&self, number: u32) -> Option<usize> {
        self.wire_order
            .binary_search_by_key(&number, |&i| self.fields[usize::from(i)].number)
            .ok()
            .map(|at| usize::from(self.wire_order[at]))
    }
}

#[derive(Debug)]
pub(crate) struct Schema {
    pub messages: Vec<Message>,
    by_name: HashMap<&'static str, MessageId>,
    /// (Go package directory, version) → proto package, e.g. (`apps`, `v1`) → `k8s.io.api.apps.v1`.
    versions: HashMap<(&'static str, &'static str), &'static str>,
}

const META_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";

/// How many (`apiVersion`, `kind`) answers each thread keeps: a server thread serves several
/// kinds at once (the requests' own and those its controllers and watchers touch).
const RESOLVED_KEPT: usize = 8;

/// One answer of [`Schema::resolve`]: `apiVersion`, `kind`, and the message.
type Resolved = (Box<str>, Box<str>, Option<MessageId>);

thread_local! {
    /// A thread's last answers of [`Schema::resolve`], oldest first.
    static RESOLVED: std::cell::RefCell<Vec<Resolved>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Kinds of meta/v1 that upstream registers in every group version (`metav1.AddToGroupVersion`
/// and the unversioned types), so an object of these kinds may carry any `apiVersion`.
const META_KINDS: &[&str] = &[
    "Status",
    "WatchEvent",
    "DeleteOptions",
    "ListOptions",
    "GetOptions",
    "CreateOptions",
    "UpdateOptions",
    "PatchOptions",
    "APIVersions",
    "APIGroupList",
    "APIGroup",
    "APIResourceList",
];

static TABLE: &str = include_str!(concat!(env!("OUT_DIR"), "/schema.txt"));

static SCHEMA: LazyLock<Schema> = LazyLock::new(|| match Schema::parse(TABLE) {
    Ok(schema) => schema,
    // The table is generated by build.rs from data in this crate, never from client input:
    // a failure here is a bug in the build script, found by the first test that runs.
    Err(message) => panic!("the embedded protobuf schema is corrupt: {message}"),
});

pub(crate) fn schema() -> &'static Schema {
    &SCHEMA
}

impl Schema {
    fn parse(table: &'static str) -> Result<Schema, String> {
        let mut by_name = HashMap::new();
        for line in table.lines() {
            if let Some(rest) = line.strip_prefix("M\t") {
                let name = rest.split('\t').next().unwrap_or_default();
                let id = by_name.len();
                by_name.insert(name, id);
            }
        }
        let mut messages: Vec<Message> = Vec::with_capacity(by_name.len());
        let mut versions = HashMap::new();
        for line in table.lines() {
            let columns: Vec<&str> = line.split('\t').collect();
            match columns.as_slice() {
                ["M", name, special] => messages.push(Message {
                    name,
                    special: special_named(special)?,
                    fields: Vec::new(),
                    wire_order: Vec::new(),
                    members: Vec::new(),
                    written_when_absent: Vec::new(),
                }),
                ["F", number, json, flags, cardinality, ty, go_type, go_name] => {
                    let message = messages.last_mut().ok_or("field before any message")?;
                    let ty = match *ty {
                        "s" => Type::String,
                        "b" => Type::Bool,
                        "i32" => Type::Int32,
                        "i64" => Type::Int64,
                        "f64" => Type::Double,
                        "y" => Type::Bytes,
                        name => Type::Message(
                            *by_name
                                .get(name)
                                .ok_or_else(|| format!("unknown type {name}"))?,
                        ),
                    };
                    let cardinality = match *cardinality {
                        "1" => Cardinality::Single,
                        "*" => Cardinality::Repeated,
                        "m" => Cardinality::Map,
                        other => return Err(format!("unknown cardinality {other}")),
                    };
                    let number = number
                        .parse()
                        .map_err(|_| format!("bad number in {line}"))?;
                    let dash_is_empty = |s: &'static str| if s == "-" { "" } else { s };
                    message.fields.push(Field {
                        number,
                        json: dash_is_empty(json),
                        ty,
                        cardinality,
                        pointer: flags.contains('p'),
                        omitempty: flags.contains('o'),
                        omitzero: flags.contains('z'),
                        inline: flags.contains('i'),
                        go_type: dash_is_empty(go_type),
                        go_name: dash_is_empty(go_name),
                    });
                }
                ["V", dir, version, package] => {
                    versions.insert((*dir, *version), *package);
                }
                _ => return Err(format!("unreadable line {line:?}")),
            }
        }
        for message in &mut messages {
            let count = u16::try_from(message.fields.len())
                .map_err(|_| format!("message {} has too many fields", message.name))?;
            let mut order: Vec<u16> = (0..count).collect();
            order.sort_by_key(|&index| message.fields[usize::from(index)].number);
            if order.windows(2).any(|w| {
                message.fields[usize::from(w[0])].number == message.fields[usize::from(w[1])].number
            }) {
                return Err(format!("message {} repeats a field number", message.name));
            }
            message.fields.shrink_to_fit();
            message.wire_order = order;
        }
        for id in 0..messages.len() {
            let mut members = Vec::new();
            json_members(&messages, id, 0, &mut members)?;
            let field = |m: &MemberField| &messages[m.message()].fields[usize::from(m.index)];
            members.sort_by(|a, b| field(a).json.cmp(field(b).json));
            let written_when_absent = members
                .iter()
                .filter(|m| {
                    let f = field(m);
                    let plain_struct = f.cardinality == Cardinality::Single
                        && matches!(f.ty, Type::Message(_))
                        && !f.pointer;
                    !f.omitempty || plain_struct
                })
                .copied()
                .collect();
            messages[id].members = members;
            messages[id].written_when_absent = written_when_absent;
        }
        Ok(Schema {
            messages,
            by_name,
            versions,
        })
    }

    pub(crate) fn message_named(&self, full_name: &str) -> Option<MessageId> {
        self.by_name.get(full_name).copied()
    }

    /// The message for an object of this `apiVersion` and `kind`, as upstream's scheme would
    /// pick its Go type.
    ///
    /// A write asks this several times of the same kind (its checks, its Go form, its
    /// encodings), and finding it costs two allocations and three hash lookups, so each thread
    /// remembers its last few answers. The cache is for the process's one schema ([`schema`]):
    /// a schema built in a test resolves directly.
    pub(crate) fn resolve(&self, api_version: &str, kind: &str) -> Option<MessageId> {
        if !std::ptr::eq(self, schema()) {
            return self.resolve_uncached(api_version, kind);
        }
        RESOLVED.with_borrow_mut(|cache| {
            if let Some(hit) = cache
                .iter()
                .find(|(v, k, _)| **v == *api_version && **k == *kind)
            {
                return hit.2;
            }
            let found = self.resolve_uncached(api_version, kind);
            if cache.len() == RESOLVED_KEPT {
                cache.remove(0);
            }
            cache.push((api_version.into(), kind.into(), found));
            found
        })
    }

    fn resolve_uncached(&self, api_version: &str, kind: &str) -> Option<MessageId> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        if version.is_empty() || kind.is_empty() || kind.contains('.') {
            return None;
        }
        let found = package_dirs(group).into_iter().flatten().find_map(|dir| {
            let package = self.versions.get(&(dir.as_str(), version))?;
            self.message_named(&format!("{package}.{kind}"))
        });
        found
            .or_else(|| {
                META_KINDS
                    .contains(&kind)
                    .then(|| self.message_named(&format!("{META_V1}.{kind}")))
                    .flatten()
            })
            // Only structs are objects: `Time` or `Quantity` are not kinds.
            .filter(|&id| self.messages[id].special == Special::None)
    }
}

/// The JSON members of message `id`, inline structs' flattened into it.
fn json_members(
    messages: &[Message],
    id: MessageId,
    inline_depth: u8,
    out: &mut Vec<MemberField>,
) -> Result<(), String> {
    for (index, field) in messages[id].fields.iter().enumerate() {
        if field.inline {
            let Type::Message(inner) = field.ty else {
                return Err(format!(
                    "{}: an inline field that is not a struct",
                    messages[id].name
                ));
            };
            if inline_depth >= 8 {
                return Err(format!(
                    "{}: inline structs nest too deep",
                    messages[id].name
                ));
            }
            json_members(messages, inner, inline_depth + 1, out)?;
            continue;
        }
        out.push(MemberField {
            message: u32::try_from(id).map_err(|_| "too many messages")?,
            index: u16::try_from(index).map_err(|_| "too many fields")?,
            rank: u16::try_from(out.len()).map_err(|_| "too many members")?,
            inline_depth,
        });
    }
    Ok(())
}

fn special_named(name: &str) -> Result<Special, String> {
    Ok(match name {
        "-" => Special::None,
        "time" => Special::Time,
        "microtime" => Special::MicroTime,
        "duration" => Special::Duration,
        "quantity" => Special::Quantity,
        "intorstring" => Special::IntOrString,
        "rawextension" => Special::RawExtension,
        "rawjson" => Special::RawJson,
        "strings" => Special::Strings,
        "schemaorbool" => Special::SchemaOrBool,
        "schemaorarray" => Special::SchemaOrArray,
        "schemaorstringarray" => Special::SchemaOrStringArray,
        "unknown" => Special::Unknown,
        other => return Err(format!("unknown special codec {other}")),
    })
}

/// The Go package directories an API group may live in. Upstream names each package after the
/// group's first DNS label (`rbac.authorization.k8s.io` → `rbac`, `apiextensions.k8s.io` →
/// `apiextensions`), the legacy core group is `core`, and `internal.apiserver.k8s.io` joins its
/// first two labels (`apiserverinternal`). Only built-in groups qualify: dotless ones and those
/// under `k8s.io`, so that a custom group such as `apps.example.com` never matches `apps`.
fn package_dirs(group: &str) -> [Option<String>; 2] {
    if group.is_empty() {
        return [Some("core".to_string()), None];
    }
    if group.contains('.') && !group.ends_with(".k8s.io") {
        return [None, None];
    }
    let mut labels = group.split('.');
    let first = labels.next().unwrap_or_default();
    let joined = labels.next().map(|second| format!("{second}{first}"));
    [Some(first.to_string()), joined]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of(api_version: &str, kind: &str) -> Option<&'static str> {
        let schema = schema();
        schema
            .resolve(api_version, kind)
            .map(|id| &*schema.messages[id].name)
    }

    #[test]
    fn groups_map_to_their_go_packages() {
        let cases = [
            ("v1", "Pod", "k8s.io.api.core.v1.Pod"),
            ("v1", "List", "k8s.io.api.core.v1.List"),
            (
                "apps/v1",
                "DeploymentList",
                "k8s.io.api.apps.v1.DeploymentList",
            ),
            (
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                "k8s.io.api.rbac.v1.ClusterRole",
            ),
            (
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
            ),
            (
                "apiregistration.k8s.io/v1",
                "APIService",
                "k8s.io.kube_aggregator.pkg.apis.apiregistration.v1.APIService",
            ),
            (
                "internal.apiserver.k8s.io/v1alpha1",
                "StorageVersion",
                "k8s.io.api.apiserverinternal.v1alpha1.StorageVersion",
            ),
            (
                "flowcontrol.apiserver.k8s.io/v1",
                "FlowSchema",
                "k8s.io.api.flowcontrol.v1.FlowSchema",
            ),
            (
                "v1",
                "Status",
                "k8s.io.apimachinery.pkg.apis.meta.v1.Status",
            ),
            (
                "apps/v1",
                "DeleteOptions",
                "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
            ),
            (
                "apps/v1",
                "WatchEvent",
                "k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent",
            ),
            (
                "meta.k8s.io/v1",
                "PartialObjectMetadataList",
                "k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadataList",
            ),
            (
                "meta.k8s.io/v1beta1",
                "PartialObjectMetadataList",
                "k8s.io.apimachinery.pkg.apis.meta.v1beta1.PartialObjectMetadataList",
            ),
        ];
        for (api_version, kind, expected) in cases {
            assert_eq!(
                name_of(api_version, kind),
                Some(expected),
                "{api_version} {kind}"
            );
        }
    }

    #[test]
    fn unknown_and_custom_kinds_do_not_resolve() {
        for (api_version, kind) in [
            ("apps.example.com/v1", "Deployment"),
            ("stable.example.com/v1", "CronTab"),
            ("v1", "Deployment"),
            ("apps/v9", "Deployment"),
            ("meta.k8s.io/v1", "Table"),
            ("meta.k8s.io/v1", "Time"),
            ("", "Pod"),
            ("v1", ""),
        ] {
            assert_eq!(name_of(api_version, kind), None, "{api_version} {kind}");
        }
    }

    #[test]
    fn facts_reach_the_fields() {
        let schema = schema();
        let id = schema.message_named(&format!("{META_V1}.ObjectMeta"));
        let meta = &schema.messages[id.expect("ObjectMeta is in the schema")];
        let creation = meta.fields.iter().find(|f| f.json == "creationTimestamp");
        assert!(creation.is_some_and(|f| f.omitzero && f.omitempty && !f.pointer));
        let deletion = meta.fields.iter().find(|f| f.json == "deletionTimestamp");
        assert!(deletion.is_some_and(|f| f.pointer));
        let labels = meta.fields.iter().find(|f| f.json == "labels");
        assert!(labels.is_some_and(|f| f.cardinality == Cardinality::Map && f.ty == Type::String));
        // Go declaration order puts managedFields last although its number (17) is not.
        assert_eq!(meta.fields.last().map(|f| f.json), Some("managedFields"));
    }
}
