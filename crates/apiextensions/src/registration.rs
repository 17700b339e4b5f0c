//! What one CustomResourceDefinition serves: for each served version a `ResourceInfo` row, the
//! custom resource strategy, a table of printer columns and the pruning schema, over one shared
//! storage in the storage version, read through each version's schema. Other versions convert
//! by `apiVersion` alone (upstream's `None` strategy) or through the CRD's conversion webhook.

use std::sync::Arc;

use apimachinery::schema::Schemas;
use apiserver::admission::Admission;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{
    Conversion, ConvertingStore, RegistryStore, ResourceInfo, ScalePaths, SelectableField,
    SubresourceInfo, SyncConversion,
};
use apiserver::util::webhook::{ClientConfig, ServiceResolver};
use base64::Engine;
use serde_json::Value;
use storage::Store;

use crate::conversion::{WebhookConversion, review_api_version};
use crate::schema::{apply_defaults, pruning_schemas};
use crate::strategy::CustomResourceStrategy;
use crate::table::CustomResourceTables;
use crate::version;

/// The verbs upstream lists for every custom resource, in its order.
const VERBS: &[&str] = &[
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];
const SUBRESOURCE_VERBS: &[&str] = &["get", "patch", "update"];

/// The strings of a JSON list (other items and values skipped).
pub(crate) fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Upstream's `storageVersionHash` for discovery: the first 8 bytes of the SHA-256 of
/// `group/version/kind`, in standard base64.
pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{group}/{version}/{kind}").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8])
}

/// The facts of a CRD the served table depends on.
pub struct CrdFacts {
    pub name: String,
    pub group: String,
    pub plural: String,
    pub kind: String,
    pub namespaced: bool,
    pub storage_version: String,
    /// Served versions, highest priority first, without their `schema` (held once in
    /// `schemas`: a CRD's schemas are most of its memory).
    pub versions: Vec<Value>,
    /// Each served version's `openAPIV3Schema`, shared by everything that reads it (strategy,
    /// rules, conversion, OpenAPI documents).
    pub schemas: Vec<Option<Arc<Value>>>,
}

impl CrdFacts {
    /// Reads a CRD that may be served: its accepted names, scope, served versions and storage
    /// version. `None` when it has no storage version (validation prevents that).
    pub fn of(crd: &Value) -> Option<CrdFacts> {
        let storage_version = crd
            .pointer("/spec/versions")?
            .as_array()?
            .iter()
            .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))?
            .get("name")?
            .as_str()?
            .to_string();
        let mut versions: Vec<Value> = crd
            .pointer("/spec/versions")?
            .as_array()?
            .iter()
            .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
            .cloned()
            .collect();
        versions.sort_by(|a, b| version::compare(text(a, "/name"), text(b, "/name")));
        let schemas = versions
            .iter_mut()
            .map(|v| {
                let schema = v
                    .as_object_mut()
                    .and_then(|m| m.remove("schema"))
                    .and_then(|mut s| s.get_mut("openAPIV3Schema").map(Value::take))
                    .filter(Value::is_object);
                schema.map(Arc::new)
            })
            .collect();
        Some(CrdFacts {
            name: text(crd, "/metadata/name").to_string(),
            group: text(crd, "/spec/group").to_string(),
            plural: text(crd, "/status/acceptedNames/plural").to_string(),
            kind: text(crd, "/status/acceptedNames/kind").to_string(),
            namespaced: text(crd, "/spec/scope") == "Namespaced",
            storage_version,
            versions,
            schemas,
        })
    }

    /// The storage key below the prefix: upstream keeps custom resources at
    /// `/registry/<group>/<plural>/...`.
    pub fn storage_key(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }
}

/// How a served version reads and writes the shared storage. Without a conversion webhook,
/// `apiVersion` is all that differs between versions (upstream's `None` strategy). On the way
/// out an object is also pruned and defaulted by the served version's schema, as upstream's
/// decoder does with every object it reads, so that a schema change (a field removed, a default
/// added) shows on objects stored before it.
struct SchemaConversion {
    served: String,
    stored: String,
    group: String,
    version: String,
    kind: String,
    schema: Option<Arc<Value>>,
    schemas: Arc<Schemas>,
}

impl SyncConversion for SchemaConversion {
    fn to_served(&self, mut obj: Value) -> Value {
        obj["apiVersion"] = Value::from(self.served.as_str());
        if let Some(root) = self
            .schemas
            .root_for(&self.group, &self.version, &self.kind)
        {
            self.schemas.prune_unknown(root, &mut obj);
        }
        if let Some(schema) = &self.schema {
            apply_defaults(schema, &mut obj);
        }
        obj
    }

    fn to_storage(&self, mut obj: Value) -> Value {
        obj["apiVersion"] = Value::from(self.stored.as_str());
        obj
    }
}

/// The `ResourceInfo` row of one served version.
pub fn resource_info(crd: &Value, facts: &CrdFacts, version: &Value) -> ResourceInfo {
    let name = text(version, "/name").to_string();
    let mut subresources = Vec::new();
    let subs = version.get("subresources");
    let has_status = subs.and_then(|s| s.get("status")).is_some();
    if has_status {
        subresources.push(SubresourceInfo {
            name: "status".into(),
            group: facts.group.clone(),
            version: name.clone(),
            kind: facts.kind.clone(),
            verbs: SUBRESOURCE_VERBS.iter().map(|v| v.to_string()).collect(),
        });
    }
    let scale = subs.and_then(|s| s.get("scale"));
    if scale.is_some() {
        subresources.push(SubresourceInfo {
            name: "scale".into(),
            group: "autoscaling".into(),
            version: "v1".into(),
            kind: "Scale".into(),
            verbs: SUBRESOURCE_VERBS.iter().map(|v| v.to_string()).collect(),
        });
    }
    // `.spec.replicas` → `/spec/replicas`; validation keeps these paths simple.
    let pointer = |path: &str| path.replace('.', "/");
    let scale_paths = scale.map(|s| ScalePaths {
        spec_replicas: pointer(text(s, "/specReplicasPath")),
        status_replicas: pointer(text(s, "/statusReplicasPath")),
        label_selector: s
            .get("labelSelectorPath")
            .and_then(Value::as_str)
            .map(pointer),
    });
    ResourceInfo {
        group: facts.group.clone(),
        version: name.clone(),
        resource: facts.plural.clone(),
        kind: facts.kind.clone(),
        singular: text(crd, "/status/acceptedNames/singular").to_string(),
        namespaced: facts.namespaced,
        short_names: strings(crd.pointer("/status/acceptedNames/shortNames")),
        categories: strings(crd.pointer("/status/acceptedNames/categories")),
        verbs: VERBS.iter().map(|v| v.to_string()).collect(),
        subresources,
        tracks_generation: true,
        // A custom resource's status write changes status only (its status strategy copies
        // the stored object and sets the status).
        status_keeps_metadata: apiserver::registry::STATUS_RESETS_METADATA,
        storage_key: facts.storage_key(),
        storage_version: (name != facts.storage_version).then(|| facts.storage_version.clone()),
        storage_version_hash: Some(storage_version_hash(
            &facts.group,
            &facts.storage_version,
            &facts.kind,
        )),
        scale_paths,
        field_label_message: None,
        unstructured: true,
        // The main strategy resets status when the version has the subresource; the status
        // strategy resets metadata and spec (upstream's custom resource strategies).
        reset_fields: if has_status {
            vec![
                (
                    "".into(),
                    apimachinery::managedfields::reset_set(&["status"]),
                ),
                (
                    "status".into(),
                    apimachinery::managedfields::reset_set(&["metadata", "spec"]),
                ),
            ]
        } else {
            Vec::new()
        },
        // `selectableFields` (`.spec.color` → field label `spec.color`).
        selectable_fields: version
            .get("selectableFields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
            .map(|path| {
                let name = path.trim_start_matches('.').to_string();
                SelectableField {
                    path: name.split('.').map(str::to_string).collect(),
                    name,
                    ..Default::default()
                }
            })
            .collect(),
        // A deprecated version warns on every request, in the CRD's words or upstream's.
        deprecation_warning: (version.get("deprecated").and_then(Value::as_bool) == Some(true))
            .then(
                || match version.get("deprecationWarning").and_then(Value::as_str) {
                    Some(w) => w.to_string(),
                    None => format!("{}/{name} {} is deprecated", facts.group, facts.kind),
                },
            ),
        ..Default::default()
    }
}

/// The REST of every served version of a CRD, over `storage` (the storage version's store).
pub fn build(
    crd: &Value,
    facts: &CrdFacts,
    storage: Arc<dyn Store>,
    admission: &Admission,
    prefix: &str,
    shutdown: &tokio::sync::watch::Sender<bool>,
    resolver: Option<Arc<dyn ServiceResolver>>,
) -> (Arc<ApiResources>, Vec<ResourceInfo>) {
    let webhook = crd
        .pointer("/spec/conversion")
        .filter(|c| c.get("strategy").and_then(Value::as_str) == Some("Webhook"))
        .and_then(|c| c.get("webhook"));
    // Each version prints its own columns.
    let table = CustomResourceTables::new(&facts.versions);
    let mut api = ApiResources::new(Arc::new(table));
    api.shutdown = shutdown.clone();
    let definitions: Vec<(String, Value)> = facts
        .versions
        .iter()
        .zip(&facts.schemas)
        .filter_map(|(v, schema)| Some((text(v, "/name").to_string(), schema.as_deref()?.clone())))
        .collect();
    let schemas = Arc::new(pruning_schemas(&facts.group, &facts.kind, &definitions));
    let mut infos = Vec::new();
    for (version, schema) in facts.versions.iter().zip(&facts.schemas) {
        let info = resource_info(crd, facts, version);
        // One copy of the schema, shared by the strategy, its rules and the conversion.
        let schema = schema.clone();
        let strategy = Arc::new(CustomResourceStrategy {
            api_version: info.api_version(),
            kind: facts.kind.clone(),
            rules: schema.as_ref().and_then(crate::cel::Rules::compile),
            schema: schema.clone(),
            status_enabled: info.has_status(),
            scale: info.scale_paths.clone(),
        });
        // Every version, the storage version's too, reads through its schema.
        let local = SchemaConversion {
            served: info.api_version(),
            stored: format!("{}/{}", facts.group, facts.storage_version),
            group: facts.group.clone(),
            version: info.version.clone(),
            kind: facts.kind.clone(),
            schema,
            schemas: schemas.clone(),
        };
        let conversion: Arc<dyn Conversion> = match webhook {
            Some(hook) => Arc::new(WebhookConversion {
                local,
                group: facts.group.clone(),
                served_version: info.version.clone(),
                storage_version: facts.storage_version.clone(),
                kind: facts.kind.clone(),
                list_kind: match text(crd, "/status/acceptedNames/listKind") {
                    "" => format!("{}List", facts.kind),
                    k => k.to_string(),
                },
                client: ClientConfig::from_api(hook.get("clientConfig").unwrap_or(&Value::Null)),
                review_api_version: review_api_version(&strings(
                    hook.get("conversionReviewVersions"),
                )),
                resolver: resolver.clone(),
            }),
            None => Arc::new(local),
        };
        let attrs_info = info.clone();
        let attrs: storage::AttrsFn = Arc::new(move |v| attrs_info.attrs(v));
        let store: Arc<dyn Store> = Arc::new(ConvertingStore::new(
            storage.clone(),
            conversion.clone(),
            attrs,
        ));
        infos.push(info.clone());
        api.add(Arc::new(
            RegistryStore::new(Arc::new(info), strategy, store, admission.clone(), prefix)
                .with_conversion(conversion),
        ));
    }
    // One pruning arena for the decoder and every version's read path.
    api.set_schemas(schemas);
    (Arc::new(api), infos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_version_hash_is_upstreams() {
        // Upstream's discovery lists apps/v1 Deployments with this hash.
        assert_eq!(
            storage_version_hash("apps", "v1", "Deployment"),
            "8aSe+NMegvE="
        );
    }
}
