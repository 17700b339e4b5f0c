//! Go's `encoding/json` rendering of a value of a named Go struct, for messages that print a bad
//! value as upstream's validation does.
//!
//! Upstream validates *internal* types, which carry no JSON tags: `field.Invalid(path, taint,
//! ...)` prints `{"Key":"k","Value":"b","Effect":"NoSchedule","TimeAdded":null}` — Go field
//! names, in declaration order, every field present (no `omitempty`), nil pointers and slices as
//! `null`, zero structs filled in. Types of `meta/v1` are shared by internal and versioned code
//! and keep their JSON tags (an `OwnerReference` prints as `{"apiVersion":"v1","kind":"Pod",...}`
//! in declaration order, empty `omitempty` fields left out). [`GoStyle::Versioned`] renders
//! every type the tagged way.
//!
//! The shapes come from the same Go facts as the transcoder; this module reads them, never
//! client input beyond the value it is asked to print, and it does not fail: a value that does
//! not fit its Go type is printed as it is.
//!
//! Internal types mostly mirror their versioned message field for field. Where they do not
//! (upstream's pkg/apis/core/types.go against k8s.io/api/core/v1), [`INTERNAL_LAYOUTS`] says
//! how: its rows give the internal declaration order, the embedded structs whose fields Go
//! promotes, the fields a parent moves into a child struct, and the fields that are values
//! rather than pointers. Only the types that messages print are listed.

use std::fmt::Write;

use serde_json::Value;

use crate::schema::{Cardinality, Field, MessageId, Schema, Special, Type, schema};

/// How struct fields are named and which are left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoStyle {
    /// Internal types: Go field names, every field (except in `meta/v1` types, which are tagged).
    Internal,
    /// Versioned types: JSON names, `omitempty` honoured.
    Versioned,
}

const META_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.";

/// The full message name for a short Go type name: `core.v1.Taint`, `rbac.v1.RoleRef`,
/// `meta.v1.OwnerReference`, `apiextensions.v1.JSONSchemaProps`, `apiregistration.v1.APIService`.
fn full_name(short: &str) -> String {
    if let Some(rest) = short.strip_prefix("meta.") {
        format!("k8s.io.apimachinery.pkg.apis.meta.{rest}")
    } else if short.starts_with("apiextensions.") {
        format!("k8s.io.apiextensions_apiserver.pkg.apis.{short}")
    } else if short.starts_with("apiregistration.") {
        format!("k8s.io.kube_aggregator.pkg.apis.{short}")
    } else {
        format!("k8s.io.api.{short}")
    }
}

/// Renders `value` as Go would marshal the struct `go_type` (a short name, see [`full_name`])
/// holding it; `None` when the type is unknown.
pub fn go_struct_json(go_type: &str, value: &Value, style: GoStyle) -> Option<String> {
    let schema = schema();
    let id = schema.message_named(&full_name(go_type))?;
    let mut out = String::new();
    Renderer { schema, style }.message(id, Some(value), &mut out);
    Some(out)
}

/// Renders a list of `go_type` values, as Go prints a slice (`[]core.Taint`).
pub fn go_slice_json(go_type: &str, values: &[Value], style: GoStyle) -> Option<String> {
    let schema = schema();
    let id = schema.message_named(&full_name(go_type))?;
    let r = Renderer { schema, style };
    let mut out = String::from("[");
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        r.message(id, Some(v), &mut out);
    }
    out.push(']');
    Some(out)
}

/// How an internal type lays out the fields of its versioned message (see the module doc).
/// Fields are named by their versioned JSON name; the Go name printed is the versioned field's.
struct InternalLayout {
    /// The versioned message, as [`go_struct_json`] names it.
    message: &'static str,
    /// The internal struct's fields in declaration order. A versioned field not listed is not in
    /// the internal type (it prints nowhere); a listed field the message lacks is looked up in
    /// `borrowed_from`.
    order: &'static [&'static str],
    /// Fields that are embedded structs internally: their own fields are printed in place, as
    /// Go promotes them (an internal `PodTemplateSpec` embeds `ObjectMeta`).
    embedded: &'static [&'static str],
    /// Fields of this type's versioned value that the internal type keeps in a child struct:
    /// (the child field, the moved fields). Conversion always allocates that child.
    moves: &'static [(&'static str, &'static [&'static str])],
    /// The message that defines the fields moved here from a parent.
    borrowed_from: Option<&'static str>,
    /// Fields that are pointers in the versioned message but values internally (printed as
    /// their zero value when unset, not `null`).
    values: &'static [&'static str],
}

/// The internal layouts that differ from their versioned messages.
const INTERNAL_LAYOUTS: &[InternalLayout] = &[
    // core.PodTemplateSpec embeds metav1.ObjectMeta (tagged, so `labels`, `annotations`, ...).
    InternalLayout {
        message: "core.v1.PodTemplateSpec",
        order: &["metadata", "spec"],
        embedded: &["metadata"],
        moves: &[],
        borrowed_from: None,
        values: &[],
    },
    // core.PodSpec: no deprecated `serviceAccount`; the host namespace fields live in the
    // security context; setHostnameAsFQDN, preemptionPolicy and overhead sit elsewhere.
    InternalLayout {
        message: "core.v1.PodSpec",
        order: &[
            "volumes",
            "initContainers",
            "containers",
            "ephemeralContainers",
            "restartPolicy",
            "terminationGracePeriodSeconds",
            "activeDeadlineSeconds",
            "dnsPolicy",
            "nodeSelector",
            "serviceAccountName",
            "automountServiceAccountToken",
            "nodeName",
            "securityContext",
            "imagePullSecrets",
            "hostname",
            "subdomain",
            "setHostnameAsFQDN",
            "affinity",
            "schedulerName",
            "tolerations",
            "hostAliases",
            "priorityClassName",
            "priority",
            "preemptionPolicy",
            "dnsConfig",
            "readinessGates",
            "runtimeClassName",
            "overhead",
            "enableServiceLinks",
            "topologySpreadConstraints",
            "os",
            "schedulingGates",
            "resourceClaims",
            "resources",
            "hostnameOverride",
            "schedulingGroup",
        ],
        embedded: &[],
        moves: &[(
            "securityContext",
            &[
                "hostNetwork",
                "hostPID",
                "hostIPC",
                "shareProcessNamespace",
                "hostUsers",
            ],
        )],
        borrowed_from: None,
        values: &[],
    },
    // core.PodSecurityContext: the host namespace fields first, then fsGroupChangePolicy
    // before sysctls.
    InternalLayout {
        message: "core.v1.PodSecurityContext",
        order: &[
            "hostNetwork",
            "hostPID",
            "hostIPC",
            "shareProcessNamespace",
            "hostUsers",
            "seLinuxOptions",
            "windowsOptions",
            "runAsUser",
            "runAsGroup",
            "runAsNonRoot",
            "supplementalGroups",
            "supplementalGroupsPolicy",
            "fsGroup",
            "fsGroupChangePolicy",
            "sysctls",
            "seccompProfile",
            "appArmorProfile",
            "seLinuxChangePolicy",
        ],
        embedded: &[],
        moves: &[],
        borrowed_from: Some("core.v1.PodSpec"),
        values: &[],
    },
    // core.PersistentVolumeSource (embedded in a PersistentVolumeSpec, e.g. a VolumeAttachment's
    // inline volume spec): the internal declaration order of the sources.
    InternalLayout {
        message: "core.v1.PersistentVolumeSource",
        order: &[
            "gcePersistentDisk",
            "awsElasticBlockStore",
            "hostPath",
            "glusterfs",
            "nfs",
            "rbd",
            "quobyte",
            "iscsi",
            "flexVolume",
            "cinder",
            "cephfs",
            "fc",
            "flocker",
            "azureFile",
            "vsphereVolume",
            "azureDisk",
            "photonPersistentDisk",
            "portworxVolume",
            "scaleIO",
            "local",
            "storageos",
            "csi",
        ],
        embedded: &[],
        moves: &[],
        borrowed_from: None,
        values: &[],
    },
    // apps.RollingUpdateStatefulSetStrategy: `Partition int32`.
    InternalLayout {
        message: "apps.v1.RollingUpdateStatefulSetStrategy",
        order: &["partition", "maxUnavailable"],
        embedded: &[],
        moves: &[],
        borrowed_from: None,
        values: &["partition"],
    },
];

fn internal_layout(message_name: &str) -> Option<&'static InternalLayout> {
    INTERNAL_LAYOUTS
        .iter()
        .find(|l| full_name(l.message) == message_name)
}

struct Renderer<'s> {
    schema: &'s Schema,
    style: GoStyle,
}

impl Renderer<'_> {
    /// Whether fields of this message print under their Go names, all of them.
    fn untagged(&self, id: MessageId) -> bool {
        self.style == GoStyle::Internal && !self.schema.messages[id].name.starts_with(META_V1)
    }

    fn message(&self, id: MessageId, value: Option<&Value>, out: &mut String) {
        let message = &self.schema.messages[id];
        let value = value.filter(|v| !v.is_null());
        match message.special {
            Special::None => {}
            Special::Time | Special::MicroTime => return json_or(value, "null", out),
            Special::Duration => return json_or(value, "\"0s\"", out),
            Special::Quantity => return json_or(value, "\"0\"", out),
            Special::IntOrString => return json_or(value, "0", out),
            _ => return json_or(value, "null", out),
        }
        out.push('{');
        let mut first = true;
        self.fields(id, value.and_then(Value::as_object), &mut first, out);
        out.push('}');
    }

    fn fields(
        &self,
        id: MessageId,
        object: Option<&serde_json::Map<String, Value>>,
        first: &mut bool,
        out: &mut String,
    ) {
        let untagged = self.untagged(id);
        if untagged && let Some(layout) = internal_layout(self.schema.messages[id].name) {
            return self.internal_fields(id, layout, object, first, out);
        }
        for field in &self.schema.messages[id].fields {
            if field.inline {
                // An embedded struct's fields are promoted into this object, as Go does.
                if let Type::Message(inner) = field.ty {
                    self.fields(inner, object, first, out);
                }
                continue;
            }
            let value = object.and_then(|o| o.get(&*field.json));
            if !untagged && field.omitempty && is_empty(field, value) {
                continue;
            }
            if !*first {
                out.push(',');
            }
            *first = false;
            let key = if untagged && !field.go_name.is_empty() {
                field.go_name
            } else {
                field.json
            };
            write_string(key, out);
            out.push(':');
            self.field(field, value, out);
        }
    }

    /// The fields of an internal type whose layout differs from the message's (a row of
    /// [`INTERNAL_LAYOUTS`]).
    fn internal_fields(
        &self,
        id: MessageId,
        layout: &InternalLayout,
        object: Option<&serde_json::Map<String, Value>>,
        first: &mut bool,
        out: &mut String,
    ) {
        let own = &self.schema.messages[id];
        let borrowed = layout
            .borrowed_from
            .and_then(|b| self.schema.message_named(&full_name(b)))
            .map(|b| &self.schema.messages[b]);
        for json in layout.order {
            let Some(field) = own
                .fields
                .iter()
                .chain(borrowed.into_iter().flat_map(|b| b.fields.iter()))
                .find(|f| f.json == *json)
            else {
                continue;
            };
            let mut value = object.and_then(|o| o.get(*json)).cloned();
            if layout.embedded.contains(json) {
                if let Type::Message(inner) = field.ty {
                    self.fields(inner, value.as_ref().and_then(Value::as_object), first, out);
                }
                continue;
            }
            if let Some((_, moved)) = layout.moves.iter().find(|(child, _)| child == json) {
                let mut child = value
                    .and_then(|v| v.as_object().cloned())
                    .unwrap_or_default();
                for m in *moved {
                    if let Some(v) = object.and_then(|o| o.get(*m)) {
                        child.insert((*m).to_string(), v.clone());
                    }
                }
                value = Some(Value::Object(child));
            }
            if !*first {
                out.push(',');
            }
            *first = false;
            write_string(field.go_name, out);
            out.push(':');
            if layout.values.contains(json) && value.as_ref().is_none_or(Value::is_null) {
                // A value, not a pointer, internally: unset is its zero value.
                self.element(field.ty, None, out);
            } else {
                self.field(field, value.as_ref(), out);
            }
        }
    }

    fn field(&self, field: &Field, value: Option<&Value>, out: &mut String) {
        let value = value.filter(|v| !v.is_null());
        match field.cardinality {
            Cardinality::Single if field.pointer && value.is_none() => out.push_str("null"),
            Cardinality::Single => self.element(field.ty, value, out),
            Cardinality::Repeated if field.ty == Type::Bytes => json_or(value, "null", out),
            Cardinality::Repeated => match value {
                Some(Value::Array(items)) => {
                    out.push('[');
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        self.element(field.ty, Some(item), out);
                    }
                    out.push(']');
                }
                Some(other) => json_or(Some(other), "null", out),
                None => out.push_str("null"),
            },
            Cardinality::Map => match value {
                Some(Value::Object(entries)) => {
                    // Go writes map keys sorted.
                    let mut keys: Vec<&String> = entries.keys().collect();
                    keys.sort();
                    out.push('{');
                    for (i, k) in keys.into_iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        write_string(k, out);
                        out.push(':');
                        self.element(field.ty, entries.get(k), out);
                    }
                    out.push('}');
                }
                Some(other) => json_or(Some(other), "null", out),
                None => out.push_str("null"),
            },
        }
    }

    fn element(&self, ty: Type, value: Option<&Value>, out: &mut String) {
        match ty {
            Type::Message(id) => self.message(id, value, out),
            Type::String => json_or(value, "\"\"", out),
            Type::Bool => json_or(value, "false", out),
            Type::Int32 | Type::Int64 | Type::Double => json_or(value, "0", out),
            Type::Bytes => json_or(value, "null", out),
        }
    }
}

/// Go's `omitempty`: false, 0, "", nil pointers and empty slices and maps are left out; structs
/// never are.
fn is_empty(field: &Field, value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => !b,
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::String(s)) => s.is_empty() && !matches!(field.ty, Type::Message(_)),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty() && field.cardinality == Cardinality::Map,
    }
}

/// `value` as Go's encoder writes it, or `zero` when there is none.
fn json_or(value: Option<&Value>, zero: &str, out: &mut String) {
    match value {
        None | Some(Value::Null) => out.push_str(zero),
        Some(v) => write_json(v, out),
    }
}

fn write_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_json(&map[k], out);
            }
            out.push('}');
        }
    }
}

/// A JSON string as Go's encoder escapes it (HTML-safe: `<`, `>`, `&`, U+2028, U+2029).
fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn internal(ty: &str, v: Value) -> String {
        go_struct_json(ty, &v, GoStyle::Internal).expect("a known type")
    }

    #[test]
    fn internal_types_print_go_names_and_every_field() {
        assert_eq!(
            internal(
                "core.v1.Taint",
                json!({"key": "k", "value": "b", "effect": "NoSchedule"})
            ),
            r#"{"Key":"k","Value":"b","Effect":"NoSchedule","TimeAdded":null}"#
        );
        assert_eq!(
            internal(
                "rbac.v1.RoleRef",
                json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "w"})
            ),
            r#"{"APIGroup":"rbac.authorization.k8s.io","Kind":"Role","Name":"w"}"#
        );
        assert_eq!(
            internal("core.v1.SeccompProfile", json!({"type": "RuntimeDefault"})),
            r#"{"Type":"RuntimeDefault","LocalhostProfile":null}"#
        );
    }

    #[test]
    fn meta_types_keep_their_tags_in_declaration_order() {
        let owner =
            json!({"uid": "u", "name": "p", "kind": "Pod", "apiVersion": "v1", "controller": true});
        assert_eq!(
            internal("meta.v1.OwnerReference", owner),
            r#"{"apiVersion":"v1","kind":"Pod","name":"p","uid":"u","controller":true}"#
        );
    }

    #[test]
    fn internal_pod_templates_embed_metadata_and_move_host_fields() {
        let template = json!({
            "metadata": {"labels": {"app": "x"}},
            "spec": {"hostNetwork": true, "serviceAccount": "legacy", "containers": [{"name": "c", "image": "i"}]},
        });
        let s = internal("core.v1.PodTemplateSpec", template);
        // ObjectMeta's fields are promoted and keep their tags; empty ones are left out.
        assert!(
            s.starts_with(r#"{"labels":{"app":"x"},"Spec":{"Volumes":null,"#),
            "{s}"
        );
        // The deprecated serviceAccount is not in the internal type.
        assert!(
            !s.contains("DeprecatedServiceAccount") && !s.contains("legacy"),
            "{s}"
        );
        // The host namespace fields open the security context, allocated by conversion.
        assert!(
            s.contains(r#""NodeName":"","SecurityContext":{"HostNetwork":true,"HostPID":false,"HostIPC":false,"ShareProcessNamespace":null,"HostUsers":null,"SELinuxOptions":null,"#),
            "{s}"
        );
        assert!(
            s.contains(r#""FSGroup":null,"FSGroupChangePolicy":null,"Sysctls":null,"#),
            "{s}"
        );
        assert!(
            s.contains(r#""Subdomain":"","SetHostnameAsFQDN":null,"Affinity":null,"#),
            "{s}"
        );
        assert!(
            s.contains(r#""Priority":null,"PreemptionPolicy":null,"DNSConfig":null,"#),
            "{s}"
        );
        assert!(
            s.contains(r#""RuntimeClassName":null,"Overhead":null,"EnableServiceLinks":null,"#),
            "{s}"
        );
    }

    #[test]
    fn internal_values_print_their_zero_value() {
        assert_eq!(
            internal("apps.v1.RollingUpdateStatefulSetStrategy", json!({})),
            r#"{"Partition":0,"MaxUnavailable":null}"#
        );
        assert_eq!(
            internal(
                "apps.v1.RollingUpdateStatefulSetStrategy",
                json!({"partition": 1})
            ),
            r#"{"Partition":1,"MaxUnavailable":null}"#
        );
        // Versioned rendering is untouched by the internal layouts.
        assert_eq!(
            go_struct_json(
                "apps.v1.RollingUpdateStatefulSetStrategy",
                &json!({"partition": 1}),
                GoStyle::Versioned
            )
            .unwrap(),
            r#"{"partition":1}"#
        );
    }

    #[test]
    fn internal_persistent_volume_specs_list_sources_in_internal_order() {
        let out = internal(
            "core.v1.PersistentVolumeSpec",
            json!({"csi": {"driver": "d", "volumeHandle": "h"}}),
        );
        assert!(out.starts_with(
            "{\"Capacity\":null,\"GCEPersistentDisk\":null,\"AWSElasticBlockStore\":null,\"HostPath\":null,\"Glusterfs\":null,\"NFS\":null,\"RBD\":null,\"Quobyte\":null,\"ISCSI\":null,\"FlexVolume\":null,"
        ));
        assert!(
            out.contains("\"StorageOS\":null,\"CSI\":{\"Driver\":\"d\",\"VolumeHandle\":\"h\",")
        );
    }

    #[test]
    fn every_internal_layout_names_known_fields() {
        let schema = schema();
        for layout in INTERNAL_LAYOUTS {
            let id = schema
                .message_named(&full_name(layout.message))
                .unwrap_or_else(|| panic!("{} is unknown", layout.message));
            let borrowed = layout
                .borrowed_from
                .and_then(|b| schema.message_named(&full_name(b)));
            for json in layout
                .order
                .iter()
                .chain(layout.embedded)
                .chain(layout.values)
            {
                let known = [Some(id), borrowed]
                    .into_iter()
                    .flatten()
                    .any(|m| schema.messages[m].fields.iter().any(|f| f.json == *json));
                assert!(known, "{}: {json} is no field", layout.message);
            }
        }
    }

    #[test]
    fn unknown_types_are_none() {
        assert_eq!(
            go_struct_json("core.v1.Nope", &json!({}), GoStyle::Internal),
            None
        );
    }
}
