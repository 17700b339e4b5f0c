//! Local APIServices for the group versions this server serves itself (upstream:
//! pkg/controllers/autoregister with the table of kube-apiserver's aggregator.go, and
//! pkg/controlplane/controller/crdregistration). Built-in group versions are registered once at
//! start (label `onstart`); custom resources' served group versions are kept in step with the
//! CRDs (label `true`): created when one appears, deleted when none serves it any more, each at
//! once (the CRD handler and the APIService reflector wake it, as upstream's informers feed its
//! queue). An APIService without the label is the user's and is never touched; a custom group
//! version that a built-in one already covers is not registered twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use apimachinery::object::ObjectExt;
use apiserver::authentication::UserInfo;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{DeleteOptions, Requester, UpdateOptions};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::priorities::{CRD_GROUP_PRIORITY, CRD_VERSION_PRIORITY};
use crate::{AUTOMANAGED_LABEL, Aggregator};

const ON_START: &str = "onstart";
const CONTINUOUSLY: &str = "true";

/// When a pass that failed is run again.
const RETRY: Duration = Duration::from_secs(1);
/// When a pass runs with nothing changed (a safety net: changes of CRDs and APIServices wake it
/// at once).
const RESYNC: Duration = Duration::from_secs(30);

/// Names worked on at once (upstream's `autoRegistrationController.Run(5, ...)`).
const WORKERS: usize = 5;

/// An APIService autoregistration wants.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Desired {
    pub group: String,
    pub version: String,
    pub group_priority: i64,
    pub version_priority: i64,
    /// `onstart` or `true`.
    pub managed: &'static str,
}

impl Desired {
    fn name(&self) -> String {
        format!("{}.{}", self.version, self.group)
    }

    fn spec(&self) -> Value {
        json!({
            "group": self.group,
            "version": self.version,
            "groupPriorityMinimum": self.group_priority,
            "versionPriority": self.version_priority,
        })
    }

    fn object(&self) -> Value {
        json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": self.name(), "labels": {AUTOMANAGED_LABEL: self.managed}},
            "spec": self.spec(),
        })
    }
}

/// What should be registered: the built-in group versions upstream has priorities for, then
/// the custom ones no built-in one covers.
pub(crate) fn desired(
    builtin: &[(String, String)],
    custom: &[(String, String)],
) -> BTreeMap<String, Desired> {
    let mut out = BTreeMap::new();
    for (group, version) in builtin {
        if let Some((g, v)) = crate::priorities::builtin(group, version) {
            let d = Desired {
                group: group.clone(),
                version: version.clone(),
                group_priority: g,
                version_priority: v,
                managed: ON_START,
            };
            out.insert(d.name(), d);
        }
    }
    for (group, version) in custom {
        if builtin.iter().any(|(g, v)| g == group && v == version) {
            continue;
        }
        let d = Desired {
            group: group.clone(),
            version: version.clone(),
            group_priority: CRD_GROUP_PRIORITY,
            version_priority: CRD_VERSION_PRIORITY,
            managed: CONTINUOUSLY,
        };
        out.entry(d.name()).or_insert(d);
    }
    out
}

fn managed_label(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/labels")
        .and_then(|l| l.get(AUTOMANAGED_LABEL))
        .and_then(Value::as_str)
}

/// What to do with one APIService (upstream's `checkAPIService`, in its order of cases).
#[derive(Debug, PartialEq)]
pub(crate) enum Action {
    Nothing,
    Create,
    Delete,
    UpdateSpec,
}

pub(crate) fn action(
    desired: Option<&Desired>,
    current: Option<&Value>,
    synced_before: bool,
    existed_at_start: bool,
) -> Action {
    let Some(current) = current else {
        return match desired {
            None => Action::Nothing,
            Some(d) if d.managed == ON_START && synced_before => Action::Nothing,
            Some(_) => Action::Create,
        };
    };
    if desired.is_some_and(|d| d.managed == ON_START) && synced_before {
        return Action::Nothing;
    }
    let managed = managed_label(current);
    match (managed, desired) {
        (None, _) => Action::Nothing,
        (Some(m), _) if m != ON_START && m != CONTINUOUSLY => Action::Nothing,
        (Some(ON_START), _) if !existed_at_start => Action::Nothing,
        (Some(ON_START), _) if synced_before => Action::Nothing,
        (_, None) => Action::Delete,
        (_, Some(d)) if current.get("spec") == Some(&d.spec()) => Action::Nothing,
        _ => Action::UpdateSpec,
    }
}

fn user() -> UserInfo {
    UserInfo {
        name: "system:apiserver".into(),
        groups: vec!["system:masters".into()],
        ..Default::default()
    }
}

/// The group versions this server serves itself, each once, in its order.
pub(crate) fn builtin_group_versions(api: &ApiResources) -> Vec<(String, String)> {
    let mut seen = BTreeSet::new();
    api.infos()
        .filter(|i| seen.insert((i.group.clone(), i.version.clone())))
        .map(|i| (i.group.clone(), i.version.clone()))
        .collect()
}

/// Runs autoregistration until the process ends.
pub(crate) async fn run(agg: Arc<Aggregator>) {
    let Some(store) = agg
        .api
        .get("apiregistration.k8s.io", "v1", "apiservices")
        .cloned()
    else {
        return;
    };
    let builtin = builtin_group_versions(&agg.api);
    let at_start: BTreeSet<String> = agg.snapshot().iter().map(|s| s.name.clone()).collect();
    let mut synced: BTreeSet<String> = BTreeSet::new();
    let mut last: Option<(BTreeMap<String, Desired>, BTreeMap<String, String>)> = None;
    let mut crds_changed = agg.crd_versions.changed.clone();
    loop {
        let want = desired(&builtin, &(agg.crd_versions.list)());
        let snapshot = agg.snapshot();
        let current: BTreeMap<String, &Value> = snapshot
            .iter()
            .map(|s| (s.name.clone(), &s.object))
            .collect();
        let versions: BTreeMap<String, String> = current
            .iter()
            .map(|(n, o)| (n.clone(), o.resource_version().to_string()))
            .collect();
        // Only what changed since the last pass is looked at again (upstream's queue gets the
        // names its informer and its callers hand it).
        let names: BTreeSet<String> = match &last {
            None => want.keys().chain(current.keys()).cloned().collect(),
            Some((last_want, last_versions)) => want
                .iter()
                .filter(|(n, d)| last_want.get(*n) != Some(*d))
                .map(|(n, _)| n.clone())
                .chain(last_want.keys().filter(|n| !want.contains_key(*n)).cloned())
                .chain(
                    versions
                        .iter()
                        .filter(|(n, rv)| last_versions.get(*n) != Some(*rv))
                        .map(|(n, _)| n.clone()),
                )
                // Deleted since: put back if wanted.
                .chain(
                    last_versions
                        .keys()
                        .filter(|n| !versions.contains_key(*n))
                        .cloned(),
                )
                .collect(),
        };
        // The names side by side, as upstream's controller works its queue with five workers
        // (at a first start these are a create per group version, on the way to ready).
        let passes = names.into_iter().map(|name| {
            let d = want.get(&name);
            let cur = current.get(&name).copied();
            let act = action(d, cur, synced.contains(&name), at_start.contains(&name));
            let store = &store;
            let agg = &agg;
            async move {
                let result = match act {
                    Action::Nothing => Ok(()),
                    Action::Create => {
                        let obj = d.map(Desired::object).unwrap_or(Value::Null);
                        let write = agg.api.internal_write(store, "kube-apiserver");
                        match store
                            .create(&Requester { user: &user() }, "", obj, &write)
                            .await
                        {
                            Err(s) if s.code != 409 => Err(s.message),
                            _ => Ok(()),
                        }
                    }
                    Action::Delete => {
                        let opts = DeleteOptions {
                            precondition_uid: cur.map(|c| c.uid().to_string()),
                            ..Default::default()
                        };
                        match store
                            .delete(&Requester { user: &user() }, "", &name, &opts)
                            .await
                        {
                            Err(s) if s.code != 404 && s.code != 409 => Err(s.message),
                            _ => Ok(()),
                        }
                    }
                    Action::UpdateSpec => {
                        let spec = d.map(Desired::spec).unwrap_or(Value::Null);
                        let rv = cur
                            .map(|c| c.resource_version().to_string())
                            .unwrap_or_default();
                        let mut updater = |c: Option<&Value>| {
                            let mut obj = c.cloned().unwrap_or(Value::Null);
                            obj["spec"] = spec.clone();
                            obj.set_meta("resourceVersion", rv.as_str());
                            Ok(obj)
                        };
                        let opts = UpdateOptions {
                            write: agg.api.internal_write(store, "kube-apiserver"),
                            ..Default::default()
                        };
                        match store
                            .update(&Requester { user: &user() }, "", &name, &mut updater, &opts)
                            .await
                        {
                            Err(s) if s.code != 404 && s.code != 409 => Err(s.message),
                            _ => Ok(()),
                        }
                    }
                };
                (name, result)
            }
        });
        let mut all_done = true;
        let results: Vec<(String, Result<(), String>)> = futures_util::stream::iter(passes)
            .buffer_unordered(WORKERS)
            .collect()
            .await;
        for (name, result) in results {
            match result {
                Ok(()) => {
                    synced.insert(name);
                }
                Err(e) => {
                    all_done = false;
                    tracing::warn!(apiservice = %name, error = %e, "autoregistration failed; retrying");
                }
            }
        }
        // A failed pass is done again whole.
        last = all_done.then_some((want, versions));
        let wait = if all_done { RESYNC } else { RETRY };
        tokio::select! {
            _ = changed(&mut crds_changed) => {}
            _ = agg.apiservices_changed.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// Until the custom resources' group versions may have changed; never, when none are served.
async fn changed(rx: &mut Option<tokio::sync::watch::Receiver<()>>) {
    if let Some(r) = rx
        && r.changed().await.is_ok()
    {
        return;
    }
    *rx = None;
    std::future::pending::<()>().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gv(g: &str, v: &str) -> (String, String) {
        (g.to_string(), v.to_string())
    }

    #[test]
    fn built_in_and_custom_group_versions_get_upstreams_priorities() {
        let want = desired(
            &[
                gv("", "v1"),
                gv("apps", "v1"),
                gv("apiregistration.k8s.io", "v1"),
            ],
            &[gv("example.com", "v1"), gv("apps", "v1")],
        );
        let names: Vec<_> = want.keys().cloned().collect();
        assert_eq!(names, ["v1.", "v1.apps", "v1.example.com"]);
        assert_eq!(want["v1."].group_priority, 18000);
        assert_eq!(want["v1.apps"].managed, "onstart");
        assert_eq!(want["v1.example.com"].managed, "true");
        assert_eq!(want["v1.example.com"].group_priority, 1000);
        assert_eq!(want["v1.example.com"].version_priority, 100);
        assert_eq!(
            want["v1.example.com"].object()["metadata"]["labels"][AUTOMANAGED_LABEL],
            "true"
        );
    }

    #[test]
    fn the_cases_of_upstreams_check() {
        let crd = desired(&[], &[gv("example.com", "v1")]).remove("v1.example.com");
        let builtin = desired(&[gv("apps", "v1")], &[]).remove("v1.apps");
        let managed = |m: &str, spec: Value| json!({"metadata": {"labels": {AUTOMANAGED_LABEL: m}}, "spec": spec});
        // Missing: created, unless an on-start one was done already.
        assert_eq!(action(crd.as_ref(), None, false, false), Action::Create);
        assert_eq!(action(builtin.as_ref(), None, true, true), Action::Nothing);
        assert_eq!(action(None, None, false, false), Action::Nothing);
        // The user's own APIService is never touched.
        let users = json!({"metadata": {}, "spec": {}});
        assert_eq!(action(None, Some(&users), false, true), Action::Nothing);
        assert_eq!(
            action(crd.as_ref(), Some(&users), false, true),
            Action::Nothing
        );
        // A custom group version no CRD serves any more goes.
        let stale = managed("true", json!({}));
        assert_eq!(action(None, Some(&stale), true, false), Action::Delete);
        // Another server's on-start APIService is left alone.
        let other = managed("onstart", json!({}));
        assert_eq!(action(None, Some(&other), false, false), Action::Nothing);
        assert_eq!(action(None, Some(&other), false, true), Action::Delete);
        // A changed spec is put back; an equal one is left.
        let d = crd.clone().unwrap();
        assert_eq!(
            action(
                crd.as_ref(),
                Some(&managed("true", json!({"group": "x"}))),
                true,
                true
            ),
            Action::UpdateSpec
        );
        assert_eq!(
            action(crd.as_ref(), Some(&managed("true", d.spec())), true, true),
            Action::Nothing
        );
    }
}
