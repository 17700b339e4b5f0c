//! Whether a policy or a binding applies to a request (upstream: admission/plugin/policy/matching
//! and generic/policy_matcher.go): the namespace and object selectors, the excluded rules, then
//! the resource rules, with `matchPolicy: Equivalent` trying the other served versions of the
//! resource. A selector that cannot be read is an error only for a request the rules match.

use std::sync::Arc;

use apimachinery::labels::Selector;
use serde_json::Value;

use crate::admission::Attributes;
use crate::admission::rules::{self, Rule, Versions};
use crate::registry::RegistryStore;

/// `matchConstraints` of a policy or `matchResources` of a binding, read once.
pub struct MatchResources {
    /// `None`: the field is absent, which upstream refuses to match with.
    namespace_selector: Option<Result<Selector, String>>,
    object_selector: Option<Result<Selector, String>>,
    resource_rules: Vec<Rule>,
    exclude_rules: Vec<Rule>,
    equivalent: bool,
}

/// What a matching request is, as the policy sees it: its own resource, or an equivalent one in
/// another version (with that version's store, to convert the object into).
pub struct Matched {
    pub group: String,
    pub version: String,
    pub resource: String,
    /// The kind's group and version: a subresource's own kind may have others than the
    /// resource (`autoscaling/v1 Scale`).
    pub kind_group: String,
    pub kind_version: String,
    pub kind: String,
    pub target: Option<Arc<RegistryStore>>,
}

const NIL_SELECTOR: &str =
    "a nil {} selector was passed, please ensure selectors are initialized properly";

impl MatchResources {
    pub fn from_api(v: &Value) -> MatchResources {
        let sel = |field: &str| match v.get(field) {
            None | Some(Value::Null) => None,
            Some(s) => Some(Selector::from_label_selector(s)),
        };
        MatchResources {
            namespace_selector: sel("namespaceSelector"),
            object_selector: sel("objectSelector"),
            resource_rules: Rule::list(v.get("resourceRules")),
            exclude_rules: Rule::list(v.get("excludeResourceRules")),
            // Unset means Exact here (the API defaults it to Equivalent).
            equivalent: rules::text(v, "matchPolicy") == "Equivalent",
        }
    }

    /// `Matcher.Matches`: `Ok(None)` when the request is not for this policy or binding.
    pub async fn matches(
        &self,
        attrs: &Attributes<'_>,
        obj: Option<&Value>,
        namespace_labels: &mut NamespaceLabels<'_>,
        versions: &Versions<'_>,
    ) -> Result<Option<Matched>, String> {
        let (Some(ns_selector), Some(obj_selector)) =
            (&self.namespace_selector, &self.object_selector)
        else {
            let which = if self.namespace_selector.is_none() {
                "namespace"
            } else {
                "object"
            };
            return Err(NIL_SELECTOR.replace("{}", which));
        };
        let ns_match: Result<bool, String> = match ns_selector {
            _ if rules::cluster_scoped(attrs) => Ok(true),
            Ok(s) if s.is_empty() => Ok(true),
            Ok(s) => namespace_labels
                .get(attrs, obj)
                .await
                .map(|labels| s.matches_json(labels.as_ref())),
            Err(e) => Err(e.clone()),
        };
        if matches!(ns_match, Ok(false)) {
            return Ok(None);
        }
        let obj_match = rules::object_selector_matches(obj_selector, obj, attrs.old_object);
        if matches!(obj_match, Ok(false)) {
            return Ok(None);
        }
        if self
            .rules_match(&self.exclude_rules, attrs, versions)
            .is_some()
        {
            return Ok(None);
        }
        let matched = if self.resource_rules.is_empty() {
            Some(own(attrs))
        } else {
            self.rules_match(&self.resource_rules, attrs, versions)
        };
        let Some(matched) = matched else {
            return Ok(None);
        };
        ns_match?;
        obj_match?;
        Ok(Some(matched))
    }

    /// `matchesResourceRules`: a rule for the request's own resource first, then (Equivalent)
    /// one for another served version of it.
    fn rules_match(
        &self,
        rules: &[Rule],
        attrs: &Attributes<'_>,
        versions: &Versions<'_>,
    ) -> Option<Matched> {
        let info = attrs.resource;
        let addressed = (
            info.group.as_str(),
            info.version.as_str(),
            info.resource.as_str(),
        );
        if rules
            .iter()
            .any(|r| r.matches(attrs, addressed) && r.names_match(attrs.name))
        {
            return Some(own(attrs));
        }
        if !self.equivalent {
            return None;
        }
        for rule in rules {
            for s in versions.others() {
                let i = &s.info;
                if rule.matches(attrs, (&i.group, &i.version, &i.resource))
                    && rule.names_match(attrs.name)
                {
                    let (kind_group, kind_version, kind) =
                        crate::admission::kind_for(i, attrs.subresource);
                    return Some(Matched {
                        group: i.group.clone(),
                        version: i.version.clone(),
                        resource: i.resource.clone(),
                        kind_group: kind_group.to_string(),
                        kind_version: kind_version.to_string(),
                        kind: kind.to_string(),
                        target: Some(s.clone()),
                    });
                }
            }
        }
        None
    }
}

fn own(attrs: &Attributes<'_>) -> Matched {
    let info = attrs.resource;
    let (kind_group, kind_version, kind) = attrs.kind();
    Matched {
        group: info.group.clone(),
        version: info.version.clone(),
        resource: info.resource.clone(),
        kind_group: kind_group.to_string(),
        kind_version: kind_version.to_string(),
        kind: kind.to_string(),
        target: None,
    }
}

/// The labels of the request's namespace, read at most once per request.
pub struct NamespaceLabels<'a> {
    pub namespaces: Option<&'a Arc<RegistryStore>>,
    read: Option<Result<Option<serde_json::Map<String, Value>>, String>>,
}

impl<'a> NamespaceLabels<'a> {
    pub fn new(namespaces: Option<&'a Arc<RegistryStore>>) -> Self {
        NamespaceLabels {
            namespaces,
            read: None,
        }
    }

    async fn get(
        &mut self,
        attrs: &Attributes<'_>,
        obj: Option<&Value>,
    ) -> Result<Option<serde_json::Map<String, Value>>, String> {
        if self.read.is_none() {
            let read = rules::request_namespace(self.namespaces, attrs, obj)
                .await
                .map(|ns| {
                    ns.as_ref()
                        .and_then(|n| n.pointer("/metadata/labels"))
                        .and_then(Value::as_object)
                        .cloned()
                })
                .map_err(|s| s.message);
            self.read = Some(read);
        }
        self.read.clone().expect("read above")
    }
}
