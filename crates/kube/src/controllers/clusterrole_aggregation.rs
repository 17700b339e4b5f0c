//! The clusterrole-aggregation controller (upstream: pkg/controller/clusterroleaggregation): a
//! ClusterRole with an `aggregationRule` holds the rules of every other ClusterRole its
//! selectors match — selectors in order, matching roles by name, each rule once — and is
//! updated whenever that union changes. This is how `admin`, `edit` and `view` gain the rules
//! of roles labelled `rbac.authorization.k8s.io/aggregate-to-*`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apimachinery::labels::Selector;
use apimachinery::status::Status;
use apiserver::authentication::UserInfo;
use apiserver::authorization::Authorizer;
use apiserver::endpoints::ApiResources;
use apiserver::registry::reflector::{self, Delta};
use apiserver::registry::{Requester, UpdateOptions};
use apiserver::request::RequestInfo;
use serde_json::{Map, Value};
use storage::Object;

use crate::rbac::rules::PolicyRule;

/// How long a failed update waits before the roles are looked at again.
const RETRY: Duration = Duration::from_secs(1);

/// How long the controller waits at most for its own permission to reach the authorizer.
const PERMISSION_WAIT: Duration = Duration::from_secs(10);

/// What aggregation reads of a ClusterRole: its name, labels, rules and aggregation rule. The
/// controller holds every ClusterRole of the cluster, so it keeps only these, not the whole
/// object with its annotations and managed fields, and the rules typed: as JSON values the
/// bootstrap roles' rules alone were 0.4 MiB of an idle server's heap.
#[derive(Debug, PartialEq)]
pub struct RoleView {
    pub name: String,
    pub labels: Option<Map<String, Value>>,
    pub rules: Vec<PolicyRule>,
    pub aggregation_rule: Option<Value>,
}

/// The members of a ClusterRole a [`RoleView`] keeps; serde skips the others unread (at
/// start-up every bootstrap role passes here).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ViewedRole {
    metadata: ViewedMeta,
    rules: Option<Vec<Value>>,
    aggregation_rule: Option<Value>,
}

#[derive(serde::Deserialize)]
struct ViewedMeta {
    name: String,
    labels: Option<Map<String, Value>>,
}

impl From<ViewedRole> for RoleView {
    fn from(role: ViewedRole) -> RoleView {
        RoleView {
            name: role.metadata.name,
            labels: role.metadata.labels,
            rules: role
                .rules
                .iter()
                .flatten()
                .map(PolicyRule::from_value)
                .collect(),
            aggregation_rule: role.aggregation_rule,
        }
    }
}

fn aggregation_view(object: &Object) -> Option<Arc<RoleView>> {
    let role: ViewedRole = serde_json::from_slice(&object.bytes).ok()?;
    Some(Arc::new(role.into()))
}

/// The rules an aggregated role should hold, given every ClusterRole by name; `None` when
/// `role` has no aggregation rule. Rules compare field by field, so a rule is added once
/// however its lists were written (upstream compares them with `equality.Semantic`).
pub fn aggregated_rules<V: std::borrow::Borrow<RoleView>>(
    role: &RoleView,
    all: &BTreeMap<String, V>,
) -> Option<Vec<PolicyRule>> {
    let selectors = role
        .aggregation_rule
        .as_ref()?
        .get("clusterRoleSelectors")
        .and_then(Value::as_array)?;
    let mut rules: Vec<PolicyRule> = Vec::new();
    for selector in selectors {
        // An invalid selector was refused when the role was written; it selects nothing.
        let Ok(selector) = Selector::from_label_selector(selector) else {
            continue;
        };
        for (name, other) in all {
            let other = other.borrow();
            if *name == role.name || !selector.matches_json(other.labels.as_ref()) {
                continue;
            }
            for rule in &other.rules {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    Some(rules)
}

/// Waits until `authorizer` lets `user` escalate cluster roles, for at most
/// [`PERMISSION_WAIT`]. The controller's writes pass RBAC's escalation check through that
/// permission, which the bootstrap policy grants; the policy being stored is not enough, since
/// the authorizer learns of it from its watch a moment later, and a write in between would be
/// refused. An authorizer that never grants it (another authorization mode) only delays the
/// start.
async fn wait_for_escalate(authorizer: &dyn Authorizer, user: &UserInfo) {
    let request = RequestInfo {
        is_resource_request: true,
        verb: "escalate".into(),
        api_group: "rbac.authorization.k8s.io".into(),
        api_version: "v1".into(),
        resource: "clusterroles".into(),
        ..Default::default()
    };
    let deadline = tokio::time::Instant::now() + PERMISSION_WAIT;
    while !authorizer.authorize(user, &request).await.is_allowed()
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Watches ClusterRoles and keeps every aggregated one up to date, once `authorizer` grants
/// the controller its permission. Runs until the process ends.
pub async fn run(api: Arc<ApiResources>, authorizer: Arc<dyn Authorizer>) {
    let Some(store) = api
        .get("rbac.authorization.k8s.io", "v1", "clusterroles")
        .cloned()
    else {
        return;
    };
    // Views behind `Arc`s: every change takes a snapshot of the whole map.
    let roles: Arc<Mutex<BTreeMap<String, Arc<RoleView>>>> = Arc::default();
    let changed = Arc::new(tokio::sync::Notify::new());
    {
        let (roles, changed, store) = (roles.clone(), changed.clone(), store.clone());
        tokio::spawn(reflector::run_decoded(
            store,
            aggregation_view,
            move |delta| {
                let mut map = roles.lock().unwrap_or_else(|e| e.into_inner());
                match delta {
                    Delta::Replace(items) => {
                        *map = items.into_iter().map(|v| (v.name.clone(), v)).collect();
                    }
                    Delta::Upsert(v) => {
                        map.insert(v.name.clone(), v);
                    }
                    Delta::Deleted(v) => {
                        map.remove(&v.name);
                    }
                }
                changed.notify_one();
            },
        ));
    }
    let user = super::kube_system_account("clusterrole-aggregation-controller");
    wait_for_escalate(authorizer.as_ref(), &user).await;
    loop {
        changed.notified().await;
        let snapshot = roles.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut failed = false;
        for (name, role) in &snapshot {
            let Some(want) = aggregated_rules(role.as_ref(), &snapshot) else {
                continue;
            };
            if want == role.rules {
                continue;
            }
            let want: Vec<Value> = want.iter().map(PolicyRule::to_value).collect();
            // The write starts from the stored role: the view above is not a whole object.
            let mut updater = |current: Option<&Value>| {
                let mut next = current
                    .cloned()
                    .ok_or_else(|| Status::internal(format!("cluster role {name} is gone")))?;
                next["rules"] = Value::Array(want.clone());
                Ok(next)
            };
            let requester = Requester { user: &user };
            if let Err(e) = store
                .update(
                    &requester,
                    "",
                    name,
                    &mut updater,
                    &UpdateOptions {
                        write: api.internal_write(&store, super::CONTROLLER_MANAGER),
                        ..UpdateOptions::default()
                    },
                )
                .await
            {
                tracing::warn!(role = %name, error = %e.message, "cannot aggregate cluster role");
                failed = true;
            }
        }
        if failed {
            tokio::time::sleep(RETRY).await;
            changed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apimachinery::object::ObjectExt;
    use serde::Deserialize;
    use serde_json::json;

    /// The view of a ClusterRole object, as the reflector makes it from the stored JSON.
    fn view(role: &Value) -> RoleView {
        ViewedRole::deserialize(role).unwrap().into()
    }

    /// The views of `roles` by name.
    fn views(roles: &[Value]) -> BTreeMap<String, RoleView> {
        roles
            .iter()
            .map(|v| (v.name().to_string(), view(v)))
            .collect()
    }

    /// The rules `name` should hold among `all`, as the API writes them.
    fn aggregated(name: &str, all: &BTreeMap<String, RoleView>) -> Vec<Value> {
        let rules = aggregated_rules(&all[name], all).unwrap();
        rules.iter().map(PolicyRule::to_value).collect()
    }

    #[test]
    fn a_rule_written_with_an_empty_list_is_the_same_rule() {
        let agg = json!({"metadata": {"name": "agg"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "1"}}]}});
        let all = views(&[
            agg,
            json!({"metadata": {"name": "a", "labels": {"x": "1"}},
                "rules": [{"verbs": ["get"], "resources": ["pods"]}]}),
            json!({"metadata": {"name": "b", "labels": {"x": "1"}},
                "rules": [{"verbs": ["get"], "resources": ["pods"], "resourceNames": []}]}),
        ]);
        assert_eq!(
            aggregated("agg", &all),
            vec![json!({"verbs": ["get"], "resources": ["pods"]})]
        );
    }

    #[test]
    fn the_view_keeps_what_aggregation_reads() {
        let role = json!({"metadata": {"name": "r", "labels": {"x": "1"}, "annotations": {"a": "b"}},
            "rules": [{"verbs": ["list"], "apiGroups": ["apps"], "resources": ["deployments"]}],
            "aggregationRule": {"clusterRoleSelectors": []}});
        let kept = view(&role);
        assert_eq!(kept.name, "r");
        assert_eq!(kept.labels, role["metadata"]["labels"].as_object().cloned());
        assert_eq!(kept.rules, PolicyRule::all_of(&role));
        assert_eq!(kept.aggregation_rule, Some(role["aggregationRule"].clone()));
        let object = Object::from_stored(
            "/r",
            role.to_string().as_bytes(),
            7,
            &storage::default_attrs(),
        )
        .unwrap();
        assert_eq!(aggregation_view(&object).as_deref(), Some(&kept));
    }

    #[test]
    fn aggregation_takes_matching_roles_in_name_order_each_rule_once() {
        let rule = |r: &str| json!({"verbs": ["get"], "apiGroups": [""], "resources": [r]});
        let agg = json!({"metadata": {"name": "agg", "labels": {"x": "1"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "1"}}]}});
        let all = views(&[
            agg,
            json!({"metadata": {"name": "b", "labels": {"x": "1"}}, "rules": [rule("pods"), rule("secrets")]}),
            json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "rules": [rule("secrets")]}),
            json!({"metadata": {"name": "c", "labels": {"x": "2"}}, "rules": [rule("nodes")]}),
        ]);
        assert_eq!(aggregated("agg", &all), vec![rule("secrets"), rule("pods")]);
        assert!(aggregated_rules(&all["a"], &all).is_none());
    }
}
