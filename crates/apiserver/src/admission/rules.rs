//! What webhooks and admission policies share to decide whether a request concerns them
//! (upstream: admission/plugin/webhook/predicates/rules and namespace/object matching): rules
//! over operations, groups, versions, `resource/subresource` and scope; label selectors read from
//! the API; the served versions of the request's resource, for `matchPolicy: Equivalent`.

use std::sync::{Arc, OnceLock};

use apimachinery::labels::Selector;
use apimachinery::{GroupResource, Status};
use serde_json::Value;
use storage::ResourceVersion;

use super::{Attributes, Operation, ServedResources};
use crate::registry::{RegistryStore, ResourceInfo};

/// A rule: which operations on which resources (`rules[]` of a webhook, `resourceRules[]` of a
/// policy's match resources, which may also name objects).
pub struct Rule {
    operations: Vec<String>,
    groups: Vec<String>,
    versions: Vec<String>,
    resources: Vec<String>,
    scope: String,
    /// `resourceNames` (policies): empty matches every name.
    pub resource_names: Vec<String>,
}

/// The strings of a JSON list (absent: none).
pub fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

pub fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or("")
}

/// A label selector from the API; absent selects everything.
pub fn selector(v: Option<&Value>) -> Result<Selector, String> {
    match v {
        None | Some(Value::Null) => Ok(Selector::everything()),
        Some(s) => Selector::from_label_selector(s),
    }
}

/// `MatchObjectSelector`: the new object's labels or the old one's.
pub fn object_selector_matches(
    selector: &Result<Selector, String>,
    obj: Option<&Value>,
    old: Option<&Value>,
) -> Result<bool, String> {
    let selector = selector.as_ref().map_err(Clone::clone)?;
    if selector.is_empty() {
        return Ok(true);
    }
    let labels = |o: Option<&Value>| {
        o.is_some_and(|o| {
            selector.matches_json(o.pointer("/metadata/labels").and_then(Value::as_object))
        })
    };
    Ok(labels(obj) || labels(old))
}

impl Rule {
    pub fn from_api(r: &Value) -> Rule {
        Rule {
            operations: strings(r.get("operations")),
            groups: strings(r.get("apiGroups")),
            versions: strings(r.get("apiVersions")),
            resources: strings(r.get("resources")),
            scope: match text(r, "scope") {
                "" => "*".into(),
                s => s.into(),
            },
            resource_names: strings(r.get("resourceNames")),
        }
    }

    /// The rules of a JSON list.
    pub fn list(v: Option<&Value>) -> Vec<Rule> {
        v.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(Rule::from_api)
            .collect()
    }

    /// Upstream's `rules.Matcher`: scope, operation, group, version and `resource/subresource`
    /// (either side may be `*`), for the request as addressed to `(group, version, resource)`.
    pub fn matches(
        &self,
        attrs: &Attributes<'_>,
        (group, version, resource): (&str, &str, &str),
    ) -> bool {
        let is_namespace_object = group.is_empty() && version == "v1" && resource == "namespaces";
        let scope = match self.scope.as_str() {
            "*" => true,
            "Namespaced" => !is_namespace_object && !attrs.namespace.is_empty(),
            "Cluster" => is_namespace_object || attrs.namespace.is_empty(),
            _ => false,
        };
        let operation = self
            .operations
            .iter()
            .any(|o| o == "*" || o == attrs.operation.as_str());
        scope
            && operation
            && exact_or_wildcard(&self.groups, group)
            && exact_or_wildcard(&self.versions, version)
            && self.resources.iter().any(|r| {
                let (res, sub) = r.split_once('/').unwrap_or((r, ""));
                (res == "*" || res == resource) && (sub == "*" || sub == attrs.subresource)
            })
    }

    /// A policy rule's names: none listed matches every request.
    pub fn names_match(&self, name: &str) -> bool {
        self.resource_names.is_empty() || self.resource_names.iter().any(|n| n == name)
    }
}

fn exact_or_wildcard(items: &[String], requested: &str) -> bool {
    items.iter().any(|i| i == "*" || i == requested)
}

/// Whether the request is for a cluster-scoped object, which namespace selectors do not filter
/// (the Namespace object itself counts as namespaced: its own labels are matched).
pub fn cluster_scoped(attrs: &Attributes<'_>) -> bool {
    let info = attrs.resource;
    attrs.namespace.is_empty() && !(info.group.is_empty() && info.resource == "namespaces")
}

/// The request's namespace (`GetNamespaceLabels`' source): a namespace being created or updated
/// is the request's own object, any other is read from `namespaces`. `None` when there is no
/// namespace store.
pub async fn request_namespace(
    namespaces: Option<&Arc<RegistryStore>>,
    attrs: &Attributes<'_>,
    obj: Option<&Value>,
) -> Result<Option<Value>, Status> {
    let is_namespace = attrs.resource.group.is_empty() && attrs.resource.resource == "namespaces";
    if is_namespace
        && attrs.subresource.is_empty()
        && matches!(attrs.operation, Operation::Create | Operation::Update)
    {
        return Ok(obj.cloned());
    }
    let name = if is_namespace {
        attrs.name
    } else {
        attrs.namespace
    };
    let Some(store) = namespaces else {
        return Ok(None);
    };
    read_namespace(store, name).await.map(Some)
}

/// A namespace read from the watch cache, or from storage when the cache does not have it yet.
pub async fn read_namespace(store: &Arc<RegistryStore>, name: &str) -> Result<Value, Status> {
    let found = match store.get("", name, ResourceVersion::Any).await {
        Ok(o) => o,
        Err(_) => store.get("", name, ResourceVersion::Unset).await?,
    };
    found.value().map_err(Status::internal)
}

/// The store of `(group, version, resource)` among the served ones.
pub fn find_store(
    resources: &dyn ServedResources,
    (group, version, resource): (&str, &str, &str),
) -> Option<Arc<RegistryStore>> {
    resources
        .stores()
        .into_iter()
        .find(|s| s.info.group == group && s.info.version == version && s.info.resource == resource)
}

/// The request's own store and those of its other versions.
type Found = (Option<Arc<RegistryStore>>, Vec<Arc<RegistryStore>>);

/// The served versions of the request's resource, its own and the others (upstream's
/// `EquivalentResourceMapper`), read from the served resources once per request and only when
/// needed (`matchPolicy: Equivalent` without a direct match, or a conversion).
pub struct Versions<'a> {
    resources: Option<&'a Arc<dyn ServedResources>>,
    info: &'a ResourceInfo,
    found: OnceLock<Found>,
    /// Conversions of objects that stay the same through one plugin's run, by which object and
    /// target version: upstream's `VersionedAttributes`, made once per kind and shared by the
    /// webhooks that ask for it (a conversion may be a call to a CRD's conversion webhook).
    kept: std::sync::Mutex<Vec<(Kept, String, Option<Value>)>>,
}

/// Which unchanging object a kept conversion is of.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// The object, in a plugin that does not change it (validating webhooks).
    Object,
    /// The request's `oldObject`.
    OldObject,
}

impl<'a> Versions<'a> {
    pub fn new(resources: Option<&'a Arc<dyn ServedResources>>, attrs: &Attributes<'a>) -> Self {
        Versions {
            resources,
            info: attrs.resource,
            found: OnceLock::new(),
            kept: Default::default(),
        }
    }

    /// `obj`, which does not change through this plugin's run, converted to `target`'s version
    /// once: later asks for that version get the same conversion.
    pub async fn convert_kept(
        &self,
        which: Kept,
        target: Option<&Arc<RegistryStore>>,
        obj: Option<&Value>,
    ) -> Result<Option<Value>, Status> {
        let Some(version) = target
            .map(|t| t.info.version.clone())
            .filter(|_| obj.is_some())
        else {
            return Ok(obj.cloned());
        };
        let lock = || self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, v)) = lock().iter().find(|(w, v, _)| *w == which && *v == version) {
            return Ok(v.clone());
        }
        let converted = self.convert(target, obj).await?;
        lock().push((which, version, converted.clone()));
        Ok(converted)
    }

    fn found(&self) -> &Found {
        self.found.get_or_init(|| {
            let info = self.info;
            let (mut own, mut others) = (None, Vec::new());
            let stores = self.resources.map(|r| r.stores());
            for s in stores.into_iter().flatten() {
                if s.info.group != info.group || s.info.resource != info.resource {
                    continue;
                }
                if s.info.version == info.version {
                    own = Some(s);
                } else {
                    others.push(s);
                }
            }
            (own, others)
        })
    }

    /// The request's own store (to convert from its version).
    pub fn own(&self) -> Option<&Arc<RegistryStore>> {
        self.found().0.as_ref()
    }

    /// The other served versions, for `matchPolicy: Equivalent`.
    pub fn others(&self) -> &[Arc<RegistryStore>] {
        &self.found().1
    }

    /// `obj` converted to `target`'s version (unchanged when there is no target: the request's
    /// own version).
    pub async fn convert(
        &self,
        target: Option<&Arc<RegistryStore>>,
        obj: Option<&Value>,
    ) -> Result<Option<Value>, Status> {
        let (Some(obj), Some(target)) = (obj, target) else {
            return Ok(obj.cloned());
        };
        let Some(own) = self.own() else {
            return Err(Status::internal(format!(
                "unable to convert to {}: no served version {}",
                target.info.version, self.info.version
            )));
        };
        own.convert_to(obj.clone(), target).await.map(Some)
    }
}

/// Whether the request is for an admission configuration object itself, which no webhook sees,
/// so that a broken webhook can always be removed (`IsExemptAdmissionConfigurationResource`).
pub fn exempt_from_webhooks(attrs: &Attributes<'_>) -> bool {
    let (group, _, kind) = attrs.kind();
    group == "admissionregistration.k8s.io"
        && matches!(
            kind,
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "MutatingAdmissionPolicy"
                | "MutatingAdmissionPolicyBinding"
        )
}

/// The 403 of a forbidden admission request (`admission.NewForbidden`), named by the request.
pub fn forbidden(attrs: &Attributes<'_>, why: impl std::fmt::Display) -> Status {
    Status::forbidden(
        &GroupResource::new(&attrs.resource.group, &attrs.resource.resource),
        attrs.name,
        why,
    )
}
