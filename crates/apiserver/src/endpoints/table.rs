//! Server-side printing: `meta.k8s.io/v1 Table`. Which columns a kind has and how its cells are
//! filled is per kind and lives with the kinds (a `TableConvertor`); the generic default shows
//! Name and Created At, as upstream's default table does for kinds without printers.

use chrono::Utc;
use serde_json::{Value, json};

use super::ApiResources;
use super::negotiation::IncludeObject;
use crate::registry::ResourceInfo;

pub trait TableConvertor: Send + Sync {
    fn column_definitions(&self, info: &ResourceInfo) -> Value;
    fn cells(&self, info: &ResourceInfo, obj: &Value, now: chrono::DateTime<Utc>) -> Vec<Value>;
}

pub struct DefaultTableConvertor;

impl TableConvertor for DefaultTableConvertor {
    fn column_definitions(&self, _info: &ResourceInfo) -> Value {
        json!([
            {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names", "priority": 0},
            {"name": "Created At", "type": "date", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata", "priority": 0},
        ])
    }

    fn cells(&self, _info: &ResourceInfo, obj: &Value, _now: chrono::DateTime<Utc>) -> Vec<Value> {
        let meta = obj.get("metadata");
        vec![
            meta.and_then(|m| m.get("name"))
                .cloned()
                .unwrap_or(Value::from("")),
            meta.and_then(|m| m.get("creationTimestamp"))
                .cloned()
                .unwrap_or(Value::Null),
        ]
    }
}

/// What a row of a Table carries for `obj` (upstream's `asTable`): its metadata as
/// PartialObjectMetadata by default (which kubectl reads for namespaces and names), the whole
/// object for `includeObject=Object`, nothing for `None`.
pub fn row_object(obj: &Value, version: &str, include: IncludeObject) -> Value {
    match include {
        IncludeObject::Metadata => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": format!("meta.k8s.io/{version}"),
            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
        }),
        IncludeObject::Object => obj.clone(),
        IncludeObject::None => Value::Null,
    }
}

/// A Table of `objects`, their rows carrying what `include` says.
pub fn table(
    api: &ApiResources,
    info: &ResourceInfo,
    objects: &[Value],
    list_meta: Option<Value>,
    version: &str,
    with_columns: bool,
    include: IncludeObject,
) -> Value {
    let now = Utc::now();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            json!({
                "cells": api.tables.cells(info, o, now),
                "object": row_object(o, version, include),
            })
        })
        .collect();
    let mut t = json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": list_meta.unwrap_or_else(|| json!({})),
        "rows": rows,
    });
    if with_columns {
        t["columnDefinitions"] = api.tables.column_definitions(info);
    }
    t
}
