//! The admission check of one request against the quotas of its namespace (upstream:
//! `CheckRequest` of plugin/pkg/admission/resourcequota/controller.go): which quotas cover the
//! object, what it adds to their usage (on an update, only what grew), and either the quotas'
//! new `status.used` or the refusal in upstream's words.

use apimachinery::object::ObjectExt;
use apiserver::admission::Operation;
use serde_json::Value;

use super::evaluators::Evaluator;
use super::{
    ResourceList, ScopeSelector, add, exceeding, from_json, mask, pretty, remove_zeros,
    scope_selectors,
};

/// What is checked.
pub struct Request<'a> {
    pub operation: Operation,
    /// The request's group and resource.
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub object: &'a Value,
    pub old_object: Option<&'a Value>,
    pub now: chrono::DateTime<chrono::Utc>,
    /// The plugin's `limitedResources` (none unless configured).
    pub limited: &'a [LimitedResource],
    /// What the owners of `object` and `old_object` already count (see `Evaluator::usage`).
    pub owner_usage: Option<&'a ResourceList>,
    pub old_owner_usage: Option<&'a ResourceList>,
}

/// One `limitedResources` entry of the plugin's configuration: what may only be consumed where
/// a quota covers it (upstream's `LimitedResource`). Usage names of objects of `resource` that
/// contain one of `match_contains` need a quota that limits them; objects in one of
/// `match_scopes` need a quota with that scope.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LimitedResource {
    pub api_group: String,
    pub resource: String,
    pub match_contains: Vec<String>,
    pub match_scopes: Vec<ScopeSelector>,
}

/// Go's `%v` of a `ScopedResourceSelectorRequirement`: `{PriorityClass In [a b]}`.
fn go_scope(s: &ScopeSelector) -> String {
    format!("{{{} {} [{}]}}", s.scope, s.operator, s.values.join(" "))
}

/// `MatchingScopes`: the selectors the object falls in.
fn matching_scopes<'s>(
    evaluator: &Evaluator,
    obj: &Value,
    selectors: impl IntoIterator<Item = &'s ScopeSelector>,
) -> Result<Vec<&'s ScopeSelector>, String> {
    let mut out = Vec::new();
    for s in selectors {
        if evaluator.matches_scope(s, obj)? {
            out.push(s);
        }
    }
    Ok(out)
}

/// Why a request is refused: a 403 with this reason, or an error of the server's.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Forbidden(String),
    Internal(String),
}

/// `quota.ResourceNames` of `status.hard`.
fn hard(quota: &Value) -> ResourceList {
    from_json(quota.pointer("/status/hard"))
}

/// Checks the request against `quotas`: the `status.used` each quota would have once the object
/// is stored (unchanged for the quotas it does not touch).
pub fn check_request(
    quotas: &[Value],
    evaluator: &Evaluator,
    req: &Request<'_>,
) -> Result<Vec<ResourceList>, Refusal> {
    let mut used: Vec<ResourceList> = quotas
        .iter()
        .map(|q| from_json(q.pointer("/status/used")))
        .collect();
    // What the configuration limits to covered consumption. A scope that cannot be matched
    // lets the request through uncharged, as upstream's `CheckRequest` returns early then.
    let Ok(limited_scopes) = matching_scopes(
        evaluator,
        req.object,
        req.limited.iter().flat_map(|l| &l.match_scopes),
    ) else {
        return Ok(used);
    };
    let mut limited_names = std::collections::BTreeSet::new();
    let own: Vec<&LimitedResource> = req
        .limited
        .iter()
        .filter(|l| l.api_group == req.group && l.resource == req.resource)
        .collect();
    if !own.is_empty() {
        let usage = evaluator.usage(req.object, req.now, req.owner_usage);
        for l in &own {
            for (name, q) in &usage {
                if q.sign() > 0 && l.match_contains.iter().any(|m| name.contains(m.as_str())) {
                    limited_names.insert(name.clone());
                }
            }
        }
    }
    let mut restricted_names = std::collections::BTreeSet::new();
    let mut restricted_scopes = Vec::new();
    let mut interesting = Vec::new();
    for (i, quota) in quotas.iter().enumerate() {
        let selectors = scope_selectors(quota);
        let scopes = matching_scopes(evaluator, req.object, &selectors).map_err(|e| {
            Refusal::Internal(format!(
                "error matching scopes of quota {}, err: {e}",
                quota.name()
            ))
        })?;
        restricted_scopes.extend(scopes.into_iter().map(|s| s.scope.clone()));
        if !evaluator
            .matches(quota, req.object)
            .map_err(Refusal::Internal)?
        {
            continue;
        }
        let hard = hard(quota);
        let restricted = evaluator.matching_resources(hard.keys());
        if let Err(why) = evaluator.constraints(&restricted, req.object) {
            return Err(Refusal::Forbidden(format!(
                "failed quota: {}: {why}",
                quota.name()
            )));
        }
        // `hasUsageStats`: the controller has counted every limited resource.
        if restricted.iter().any(|r| !used[i].contains_key(r)) {
            return Err(Refusal::Forbidden(format!(
                "status unknown for quota: {}, resources: {}",
                quota.name(),
                restricted.join(",")
            )));
        }
        interesting.push(i);
        restricted_names.extend(restricted);
    }
    let uncovered: Vec<&str> = limited_names
        .iter()
        .filter(|n| !restricted_names.contains(*n))
        .map(String::as_str)
        .collect();
    if !uncovered.is_empty() {
        return Err(Refusal::Forbidden(format!(
            "insufficient quota to consume: {}",
            uncovered.join(",")
        )));
    }
    // `UncoveredQuotaScopes`: a limited scope is covered by any quota with a scope of that name.
    let uncovered: Vec<String> = limited_scopes
        .iter()
        .filter(|s| !restricted_scopes.contains(&s.scope))
        .map(|s| go_scope(s))
        .collect();
    if !uncovered.is_empty() {
        return Err(Refusal::Internal(format!(
            "insufficient quota to match these scopes: [{}]",
            uncovered.join(" ")
        )));
    }
    let input = evaluator.usage(req.object, req.now, req.owner_usage);
    let negative: Vec<&str> = input
        .iter()
        .filter(|(_, q)| q.sign() < 0)
        .map(|(k, _)| k.as_str())
        .collect();
    if !negative.is_empty() {
        return Err(Refusal::Forbidden(format!(
            "quota usage is negative for resource(s): {}",
            negative.join(",")
        )));
    }
    let mut deltas: Vec<(usize, ResourceList)> =
        interesting.iter().map(|i| (*i, input.clone())).collect();
    if req.operation == Operation::Update {
        let Some(old) = req.old_object else {
            return Err(Refusal::Forbidden(
                "unable to get previous usage since prior version of object was not found".into(),
            ));
        };
        if !old.resource_version().is_empty() {
            let previous = evaluator.usage(old, req.now, req.old_owner_usage);
            let delta = super::subtract_non_negative(&input, &previous);
            for (i, d) in deltas.iter_mut() {
                if evaluator
                    .matches(&quotas[*i], old)
                    .map_err(Refusal::Internal)?
                {
                    *d = delta.clone();
                }
            }
        }
    }
    for (i, delta) in deltas {
        let delta = remove_zeros(&delta);
        if delta.is_empty() {
            continue;
        }
        let quota = &quotas[i];
        let hard = hard(quota);
        let requested = mask(&delta, hard.keys());
        let new_used = add(&used[i], &requested);
        if req.subresource != "status" {
            let over = exceeding(&mask(&new_used, requested.keys()), &hard);
            if !over.is_empty() {
                return Err(Refusal::Forbidden(format!(
                    "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                    quota.name(),
                    pretty(&mask(&requested, &over)),
                    pretty(&mask(&used[i], &over)),
                    pretty(&mask(&hard, &over)),
                )));
            }
        }
        used[i] = new_used;
    }
    Ok(used)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn for_resource(group: &str, resource: &str) -> Option<Evaluator> {
        crate::quota::Quotas::default().evaluator(group, resource)
    }
    use serde_json::json;

    fn quota(name: &str, hard: Value, used: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns"},
               "spec": {"hard": hard.clone()}, "status": {"hard": hard, "used": used}})
    }

    fn create(obj: &Value) -> Request<'_> {
        Request {
            operation: Operation::Create,
            group: "",
            resource: "",
            subresource: "",
            object: obj,
            old_object: None,
            now: chrono::Utc::now(),
            limited: &[],
            owner_usage: None,
            old_owner_usage: None,
        }
    }

    #[test]
    fn limited_resources_need_a_covering_quota() {
        let pods = for_resource("", "pods").unwrap();
        let limited = [LimitedResource {
            api_group: String::new(),
            resource: "pods".into(),
            match_contains: vec!["requests.cpu".into()],
            match_scopes: vec![ScopeSelector {
                scope: "PriorityClass".into(),
                operator: "In".into(),
                values: vec!["critical".into(), "high".into()],
            }],
        }];
        let pod = |class: &str, cpu: &str| {
            let mut c = json!({"name": "c"});
            if !cpu.is_empty() {
                c["resources"] = json!({"requests": {"cpu": cpu}});
            }
            json!({"spec": {"priorityClassName": class, "containers": [c]}})
        };
        let check = |quotas: &[Value], obj: &Value| {
            let mut req = create(obj);
            req.resource = "pods";
            req.limited = &limited;
            check_request(quotas, &pods, &req)
        };
        // No quota in the namespace: what is limited cannot be consumed.
        assert_eq!(
            check(&[], &pod("low", "100m")),
            Err(Refusal::Forbidden(
                "insufficient quota to consume: requests.cpu".into()
            ))
        );
        assert_eq!(check(&[], &pod("low", "")), Ok(vec![]));
        assert_eq!(
            check(&[], &pod("critical", "")),
            Err(Refusal::Internal(
                "insufficient quota to match these scopes: [{PriorityClass In [critical high]}]"
                    .into()
            ))
        );
        // A quota that limits the resource, or has the scope, covers it.
        let cpu = quota(
            "cpu",
            json!({"requests.cpu": "1"}),
            json!({"requests.cpu": "0"}),
        );
        let used = check(std::slice::from_ref(&cpu), &pod("low", "100m")).unwrap();
        assert_eq!(pretty(&used[0]), "requests.cpu=100m");
        let mut scoped = quota("scoped", json!({"pods": "3"}), json!({"pods": "0"}));
        scoped["spec"]["scopeSelector"] = json!({"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["critical"]}]});
        let used = check(std::slice::from_ref(&scoped), &pod("critical", "")).unwrap();
        assert_eq!(pretty(&used[0]), "pods=1");
        // Other resources are not limited by a pods entry's names.
        let cm = for_resource("", "configmaps").unwrap();
        let obj = json!({"metadata": {"name": "c"}});
        let mut req = create(&obj);
        req.resource = "configmaps";
        req.limited = &limited;
        assert_eq!(check_request(&[], &cm, &req), Ok(vec![]));
    }

    #[test]
    fn object_count_within_and_over_the_limit() {
        let cm = for_resource("", "configmaps").unwrap();
        let obj = json!({"metadata": {"name": "x"}});
        let q = quota(
            "q",
            json!({"count/configmaps": "2"}),
            json!({"count/configmaps": "1"}),
        );
        let used = check_request(std::slice::from_ref(&q), &cm, &create(&obj)).unwrap();
        assert_eq!(pretty(&used[0]), "count/configmaps=2");
        let full = quota(
            "q",
            json!({"count/configmaps": "2"}),
            json!({"count/configmaps": "2"}),
        );
        assert_eq!(
            check_request(&[full], &cm, &create(&obj)),
            Err(Refusal::Forbidden(
                "exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2".into()
            ))
        );
    }

    #[test]
    fn unknown_status_and_untouched_quotas() {
        let cm = for_resource("", "configmaps").unwrap();
        let obj = json!({});
        let q = quota(
            "q",
            json!({"configmaps": "2", "count/configmaps": "3"}),
            json!({}),
        );
        assert_eq!(
            check_request(&[q], &cm, &create(&obj)),
            Err(Refusal::Forbidden(
                "status unknown for quota: q, resources: configmaps,count/configmaps".into()
            ))
        );
        // A quota on other resources, or without a status yet, is left alone.
        let other = quota("o", json!({"secrets": "1"}), json!({"secrets": "1"}));
        let fresh = json!({"metadata": {"name": "f"}, "spec": {"hard": {"configmaps": "1"}}});
        let used = check_request(&[other, fresh], &cm, &create(&obj)).unwrap();
        assert_eq!(pretty(&used[0]), "secrets=1");
        assert!(used[1].is_empty());
    }

    #[test]
    fn pods_on_compute_resources() {
        let pods = for_resource("", "pods").unwrap();
        let q = quota(
            "compute",
            json!({"requests.cpu": "1", "pods": "5"}),
            json!({"requests.cpu": "800m", "pods": "1"}),
        );
        let bare = json!({"spec": {"containers": [{"name": "c"}]}});
        assert_eq!(
            check_request(std::slice::from_ref(&q), &pods, &create(&bare)),
            Err(Refusal::Forbidden(
                "failed quota: compute: must specify requests.cpu for: c".into()
            ))
        );
        let big = json!({"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "300m"}}}]}});
        assert_eq!(
            check_request(std::slice::from_ref(&q), &pods, &create(&big)),
            Err(Refusal::Forbidden(
                "exceeded quota: compute, requested: requests.cpu=300m, used: requests.cpu=800m, limited: requests.cpu=1".into()
            ))
        );
        let small = json!({"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "200m"}}}]}});
        let used = check_request(&[q], &pods, &create(&small)).unwrap();
        assert_eq!(pretty(&used[0]), "pods=2,requests.cpu=1");
    }

    #[test]
    fn updates_charge_only_growth() {
        let svc = for_resource("", "services").unwrap();
        let q = quota(
            "s",
            json!({"services.loadbalancers": "1", "services": "5"}),
            json!({"services.loadbalancers": "1", "services": "1"}),
        );
        let old = json!({"metadata": {"resourceVersion": "5"}, "spec": {"type": "ClusterIP"}});
        let new = json!({"metadata": {"resourceVersion": "5"}, "spec": {"type": "LoadBalancer"}});
        let req = Request {
            operation: Operation::Update,
            old_object: Some(&old),
            ..create(&new)
        };
        assert_eq!(
            check_request(std::slice::from_ref(&q), &svc, &req),
            Err(Refusal::Forbidden(
                "exceeded quota: s, requested: services.loadbalancers=1, used: services.loadbalancers=1, limited: services.loadbalancers=1".into()
            ))
        );
        let same = Request {
            old_object: Some(&new),
            ..req
        };
        let used = check_request(std::slice::from_ref(&q), &svc, &same).unwrap();
        assert!(crate::quota::equals(
            &used[0],
            &from_json(q.pointer("/status/used"))
        ));
    }
}
