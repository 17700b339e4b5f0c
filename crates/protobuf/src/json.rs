//! Go's key order: the JSON of a built-in object with its members in the order Go's
//! `encoding/json` writes them, which is the Go struct's declaration order (an inline struct's
//! members at the inline field's place), where serde writes a `Value`'s members sorted.
//!
//! kube-apiserver's answers read `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":...,
//! "namespace":...,"uid":...,"resourceVersion":...,"creationTimestamp":...},"data":...}`; a
//! client that reads JSON as a stream, a test that compares bytes, or a person reading a
//! `curl` answer sees the same here.
//!
//! The object is expected in Go's form already (see [`crate::go_form`]); values are written as
//! Go writes them, strings with Go's escapes (`apimachinery::gojson::write`). Go maps are
//! written sorted by key, as Go sorts them, which is the order a `Value`'s object already has.
//! What the schema does not describe keeps the sorted order: members a struct does not have,
//! objects of kinds the schema lacks (custom resources, which upstream writes from a map,
//! sorted, too), and embedded JSON (apiextensions `JSON`, `FieldsV1`), which Go writes as the
//! bytes it was given and which a `Value` no longer knows the order of. An embedded object
//! (`RawExtension`) is written as its own kind writes it.

use apimachinery::gojson::{write_array, write_object};
use serde_json::{Map, Value};
use smallvec::SmallVec;

use crate::schema::{Cardinality, Field, MemberField, MessageId, Schema, Special, Type};

/// Appends `value`, an object of message `id`, to `out` in Go's key order.
pub(crate) fn write_message(schema: &Schema, id: MessageId, value: &Value, out: &mut Vec<u8>) {
    Writer { schema }.message(id, value, out);
}

struct Writer<'s> {
    schema: &'s Schema,
}

/// One member to write: its place (see [`place`]), then its name, value and field.
type Member<'a> = (u32, &'a String, &'a Value, Option<&'a Field>);

/// Where a member goes among its object's: `kind` and `apiVersion` first when the struct does not
/// declare them (they are the inline `TypeMeta`, which every kind declares first and the schema
/// leaves out), then the struct's members by rank, then what the struct lacks.
fn place(name: &str, member: Option<MemberField>) -> u32 {
    match (member, name) {
        (Some(member), _) => 2 + u32::from(member.rank),
        (None, "kind") => 0,
        (None, "apiVersion") => 1,
        (None, _) => u32::MAX,
    }
}

impl Writer<'_> {
    fn message(&self, id: MessageId, value: &Value, out: &mut Vec<u8>) {
        let message = &self.schema.messages[id];
        match (message.special, value) {
            (Special::None, Value::Object(object)) => self.members(id, object, out),
            // An embedded object: Go writes the bytes it holds, which for an object a server
            // embeds (a Table row's, an admission review's) are that object's Go encoding.
            (Special::RawExtension, Value::Object(_)) => crate::write_json(value, out),
            // The schema forms of apiextensions hold a `JSONSchemaProps` or a list of them.
            (
                Special::SchemaOrBool | Special::SchemaOrArray | Special::SchemaOrStringArray,
                Value::Object(_) | Value::Array(_),
            ) => match schema_props(self.schema, id) {
                Some(props) => match value {
                    Value::Array(items) => self.array(props, items, out),
                    _ => self.message(props, value, out),
                },
                None => plain(value, out),
            },
            _ => plain(value, out),
        }
    }

    fn members(&self, id: MessageId, object: &Map<String, Value>, out: &mut Vec<u8>) {
        let schema = self.schema;
        let known = &schema.messages[id].members;
        let field_of = |m: &MemberField| &schema.messages[m.message()].fields[usize::from(m.index)];
        let mut ordered: SmallVec<[Member<'_>; 16]> = SmallVec::with_capacity(object.len());
        // Both lists are sorted by name, so each search starts past the last member found.
        let mut from = 0;
        let mut in_order = true;
        for (name, value) in object {
            match known[from..].binary_search_by(|m| field_of(m).json.cmp(name.as_str())) {
                Ok(at) => {
                    let member = known[from + at];
                    from += at + 1;
                    let place = place(name, Some(member));
                    in_order &= ordered.last().is_none_or(|last| last.0 < place);
                    ordered.push((place, name, value, Some(field_of(&member))));
                }
                Err(at) => {
                    from += at;
                    let place = place(name, None);
                    in_order &= ordered.last().is_none_or(|last| last.0 <= place);
                    ordered.push((place, name, value, None));
                }
            }
        }
        if !in_order {
            // Stable, so that members the struct lacks keep their name order.
            ordered.sort_by_key(|member| member.0);
        }
        let members = ordered
            .into_iter()
            .map(|(_, name, value, field)| (name, (value, field)));
        write_object(members, out, |(value, field), out| match field {
            Some(field) => self.field(field, value, out),
            None => plain(value, out),
        });
    }

    fn field(&self, field: &Field, value: &Value, out: &mut Vec<u8>) {
        let Type::Message(id) = field.ty else {
            return plain(value, out);
        };
        match (field.cardinality, value) {
            (Cardinality::Single, _) => self.message(id, value, out),
            (Cardinality::Repeated, Value::Array(items)) => self.array(id, items, out),
            (Cardinality::Map, Value::Object(entries)) => {
                write_object(entries, out, |item, out| self.message(id, item, out))
            }
            _ => plain(value, out),
        }
    }

    fn array(&self, id: MessageId, items: &[Value], out: &mut Vec<u8>) {
        write_array(items, out, |item, out| self.message(id, item, out));
    }
}

/// `meta.k8s.io` `Table`, which has no protobuf message and so no row in the schema: its
/// members in Go's order, its list metadata and its rows' objects as their types write them.
pub(crate) fn write_table(schema: &Schema, table: &Map<String, Value>, out: &mut Vec<u8>) {
    const TABLE: &[&str] = &[
        "kind",
        "apiVersion",
        "metadata",
        "columnDefinitions",
        "rows",
    ];
    const COLUMN: &[&str] = &["name", "type", "format", "description", "priority"];
    const ROW: &[&str] = &["cells", "conditions", "object"];
    const CONDITION: &[&str] = &["type", "status", "reason", "message"];
    let writer = Writer { schema };
    let each = |items: &Value,
                order: &'static [&'static str],
                out: &mut Vec<u8>,
                inner: &dyn Fn(&str, &Value, &mut Vec<u8>)| {
        let Value::Array(items) = items else {
            return plain(items, out);
        };
        write_array(items, out, |item, out| match item {
            Value::Object(item) => apimachinery::gojson::write_in_order(item, order, out, inner),
            other => plain(other, out),
        });
    };
    let list_meta = schema.message_named(LIST_META);
    apimachinery::gojson::write_in_order(table, TABLE, out, &|name, value, out| match name {
        "metadata" => match list_meta {
            Some(id) => writer.message(id, value, out),
            None => plain(value, out),
        },
        "columnDefinitions" => each(value, COLUMN, out, &|_, v, out| plain(v, out)),
        "rows" => each(value, ROW, out, &|name, v, out| match name {
            "object" => crate::write_json(v, out),
            "conditions" => each(v, CONDITION, out, &|_, v, out| plain(v, out)),
            _ => plain(v, out),
        }),
        _ => plain(value, out),
    });
}

const LIST_META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta";

/// The `JSONSchemaProps` message a schema form (`JSONSchemaPropsOrBool`, ...) holds.
fn schema_props(schema: &Schema, id: MessageId) -> Option<MessageId> {
    schema.messages[id].fields.iter().find_map(|f| match f.ty {
        Type::Message(props) if schema.messages[props].special == Special::None => Some(props),
        _ => None,
    })
}

/// A value the schema says nothing more of: members sorted (as Go writes maps), strings with
/// Go's escapes.
pub(crate) fn plain(value: &Value, out: &mut Vec<u8>) {
    apimachinery::gojson::write(value, out);
}
