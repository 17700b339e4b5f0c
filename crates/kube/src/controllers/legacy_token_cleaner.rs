//! The legacy service account token cleaner (upstream: pkg/controller/serviceaccount/
//! legacy_serviceaccount_token_cleaner.go, kube-controller-manager's
//! `legacy-serviceaccount-token-cleaner-controller`): auto-generated legacy token Secrets nobody
//! uses are first marked invalid, then deleted.
//!
//! At every sync (upstream: once a day), once legacy tokens have been tracked for longer than
//! the clean-up period (the day after the `since` of `kube-system/kube-apiserver-legacy-service-
//! account-token-tracking`, plus the period), a Secret is looked at when it is of type
//! `kubernetes.io/service-account-token`, older than the period and not being deleted; its
//! `kubernetes.io/legacy-token-last-used` day (a Secret without it has not been used since
//! tracking began; one whose day does not parse is skipped) must be before the day the period
//! began; its ServiceAccount (the `kubernetes.io/service-account.name` annotation, the uid
//! annotation matching when present) must list it in `secrets` — only then is it known to be
//! auto-generated — and no Pod of its namespace may name it (`VisitPodSecretNames`). Such a
//! Secret is labelled `kubernetes.io/legacy-token-invalid-since` with today's day (a label that
//! does not parse is replaced), which makes the authenticator (`serviceaccount::check_legacy`)
//! refuse its token; one labelled before the day the period began is deleted on its
//! resourceVersion. Days are UTC days in Go's `2006-01-02` form and compared as strings, as
//! upstream compares them, so with a period shorter than a day a Secret labelled today is
//! deleted no sooner than tomorrow's sync; a use of the token, even refused, moves its last-used
//! day to today and so keeps it another period.
//!
//! Writes are upstream's: the label is added as `kube-controller-manager` to the Secret as it
//! now is, on the condition only that its uid is still the one judged (upstream's merge patch
//! names the uid, not the resourceVersion); the deletion is made on the resourceVersion that
//! was judged. Either failing leaves the Secret to the next sync.
//!
//! Ironplane's one difference: syncs come every `min(24h, period)` (and no more often than
//! every second) rather than every 24 h, so a period shorter than a day (for tests) is judged
//! at that pace; with any period of a day or more, the default a year, it syncs daily as
//! upstream.
//!
//! What it must not do: touch Secrets it cannot prove auto-generated (not listed by their
//! account), or Secrets a Pod of their namespace names.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{DeleteOptions, RegistryStore, Requester, UpdateOptions};
use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use serde_json::Value;
use storage::{ListOptions, ResourceVersion};

use super::serviceaccount_tokens::{NAME_ANNOTATION, SECRET_TYPE, UID_ANNOTATION};
use crate::serviceaccount::{INVALID_SINCE_LABEL, LAST_USED_LABEL};

/// kube-controller-manager's default `--legacy-service-account-token-clean-up-period`.
pub const DEFAULT_CLEAN_UP_PERIOD: Duration = Duration::from_secs(365 * 24 * 3600);
/// `DefaultCleanerSyncInterval`.
const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(24 * 3600);
/// The shortest pause between syncs, whatever the period (Ironplane's; see the module's notes).
const MIN_SYNC_INTERVAL: Duration = Duration::from_secs(1);
/// The ConfigMap in `kube-system` where the API server wrote when it began tracking the use
/// of legacy tokens (`legacytokentracking.ConfigMapName`, key `since`).
const TRACKING_CONFIGMAP: &str = "kube-apiserver-legacy-service-account-token-tracking";
const TRACKING_KEY: &str = "since";

/// `NewLegacySATokenCleaner`'s check of the period, in kube-controller-manager's words when
/// the controller cannot start.
pub fn check_period(period: Duration) -> Result<(), String> {
    if period.is_zero() {
        return Err(
            "failed to init the legacy service account token cleaner: invalid CleanUpPeriod: 0s"
                .into(),
        );
    }
    Ok(())
}

/// A day as Go's `time.Parse("2006-01-02", s)` reads it: exactly four, two and two digits,
/// a real date.
fn parse_day(s: &str) -> Option<NaiveDate> {
    let b = s.as_bytes();
    let shape = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        });
    if !shape {
        return None;
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()
}

fn day(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d").to_string()
}

/// `latestPossibleTrackedSinceTime` passed the period: tracking began (00:00 of the day after
/// `since`) more than `period` ago.
fn tracked_long_enough(since: &str, now: DateTime<Utc>, period: TimeDelta) -> Result<bool, String> {
    let date =
        parse_day(since).ok_or_else(|| format!("error parsing trackedSince time: {since:?}"))?;
    let tracked = date
        .succ_opt()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .ok_or("error parsing trackedSince time")?;
    Ok(tracked
        .checked_add_signed(period)
        .is_some_and(|limit| now >= limit))
}

/// What one sync does with a Secret.
#[derive(Debug, PartialEq)]
enum Verdict {
    Keep,
    /// Label it invalid since this day.
    Invalidate(String),
    Delete,
}

/// What a sync knows besides the Secret: the accounts and which Secrets pods name.
struct World {
    /// (namespace, name) → ServiceAccount.
    accounts: HashMap<(String, String), Value>,
    /// (namespace, secret) named by a pod.
    mounted: BTreeSet<(String, String)>,
}

/// `evaluateSATokens` for one Secret. `preserve_created` is `now - period`.
fn judge(
    secret: &Value,
    now: DateTime<Utc>,
    preserve_created: DateTime<Utc>,
    world: &World,
) -> Verdict {
    if secret.get("type").and_then(Value::as_str) != Some(SECRET_TYPE) {
        return Verdict::Keep;
    }
    let created = secret
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(super::expiry::parse_time);
    // Go's zero time is before everything: a Secret without a creation time is old.
    if created.is_some_and(|c| c >= preserve_created) || secret.deletion_timestamp().is_some() {
        return Verdict::Keep;
    }
    let preserve_used = day(preserve_created);
    let label = |k: &str| {
        secret
            .labels()
            .and_then(|l| l.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    if let Some(last_used) = label(LAST_USED_LABEL) {
        // A day that does not parse cannot be judged.
        if parse_day(&last_used).is_none() || last_used >= preserve_used {
            return Verdict::Keep;
        }
    }
    let (ns, name) = (secret.namespace(), secret.name());
    let annotation = |k: &str| {
        secret
            .annotations()
            .and_then(|a| a.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let account_name = annotation(NAME_ANNOTATION);
    if account_name.is_empty() {
        return Verdict::Keep;
    }
    let Some(account) = world
        .accounts
        .get(&(ns.to_string(), account_name.to_string()))
    else {
        return Verdict::Keep;
    };
    let uid = annotation(UID_ANNOTATION);
    if !uid.is_empty() && uid != account.uid() {
        return Verdict::Keep;
    }
    let listed = account
        .get("secrets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|r| r.get("name").and_then(Value::as_str) == Some(name));
    if !listed {
        // Not known to be auto-generated.
        return Verdict::Keep;
    }
    if world.mounted.contains(&(ns.to_string(), name.to_string())) {
        return Verdict::Keep;
    }
    match label(INVALID_SINCE_LABEL).filter(|d| parse_day(d).is_some()) {
        None => Verdict::Invalidate(day(now)),
        Some(since) if since >= preserve_used => Verdict::Keep,
        Some(_) => Verdict::Delete,
    }
}

/// `VisitPodSecretNames`: the Secrets a pod names — image pull secrets, its containers' (init
/// and ephemeral too) `envFrom` and `env`, and the secret references of its volumes.
fn pod_secret_names(pod: &Value) -> Vec<String> {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let at = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
    let mut names = Vec::new();
    let list = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for r in list(spec, "imagePullSecrets") {
        names.extend(at(&r, "/name"));
    }
    for kind in ["initContainers", "containers", "ephemeralContainers"] {
        for c in list(spec, kind) {
            for e in list(&c, "envFrom") {
                names.extend(at(&e, "/secretRef/name"));
            }
            for e in list(&c, "env") {
                names.extend(at(&e, "/valueFrom/secretKeyRef/name"));
            }
        }
    }
    for v in list(spec, "volumes") {
        names.extend(at(&v, "/azureFile/secretName"));
        for source in [
            "cephfs",
            "cinder",
            "flexVolume",
            "rbd",
            "scaleIO",
            "iscsi",
            "storageos",
        ] {
            names.extend(at(&v, &format!("/{source}/secretRef/name")));
        }
        names.extend(at(&v, "/secret/secretName"));
        names.extend(at(&v, "/csi/nodePublishSecretRef/name"));
        for s in v
            .pointer("/projected/sources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            names.extend(at(s, "/secret/name"));
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

struct Stores {
    secrets: Arc<RegistryStore>,
    accounts: Arc<RegistryStore>,
    pods: Arc<RegistryStore>,
    configmaps: Arc<RegistryStore>,
}

/// Runs until the process ends; `period` is `--legacy-service-account-token-clean-up-period`
/// (checked by [`check_period`]).
pub async fn run(api: Arc<ApiResources>, period: Duration) {
    let store = |r: &str| api.get("", "v1", r).cloned();
    let (Some(secrets), Some(accounts), Some(pods), Some(configmaps)) = (
        store("secrets"),
        store("serviceaccounts"),
        store("pods"),
        store("configmaps"),
    ) else {
        return;
    };
    let stores = Stores {
        secrets,
        accounts,
        pods,
        configmaps,
    };
    let interval = period.clamp(MIN_SYNC_INTERVAL, DEFAULT_SYNC_INTERVAL);
    let period = TimeDelta::from_std(period).unwrap_or(TimeDelta::MAX);
    loop {
        if let Err(e) = evaluate(&api, &stores, period).await {
            tracing::debug!(error = %e, "legacy service account token cleaning failed");
        }
        tokio::time::sleep(interval).await;
    }
}

async fn list(store: &RegistryStore) -> Result<Vec<Value>, String> {
    let listed = store
        .list("", &ListOptions::default())
        .await
        .map_err(|s| s.message)?;
    Ok(listed.items.iter().filter_map(|o| o.value().ok()).collect())
}

/// `evaluateSATokens`: one pass over every Secret.
async fn evaluate(api: &ApiResources, stores: &Stores, period: TimeDelta) -> Result<(), String> {
    let now = Utc::now();
    let tracking = stores
        .configmaps
        .get("kube-system", TRACKING_CONFIGMAP, ResourceVersion::Unset)
        .await
        .map_err(|s| s.message)?
        .value()
        .map_err(|e| e.to_string())?;
    let since = tracking
        .pointer(&format!("/data/{TRACKING_KEY}"))
        .and_then(Value::as_str)
        .ok_or("configMap does not have since label")?;
    if !tracked_long_enough(since, now, period)? {
        return Ok(());
    }
    let Some(preserve_created) = now.checked_sub_signed(period) else {
        return Ok(());
    };
    let world = World {
        accounts: list(&stores.accounts)
            .await?
            .into_iter()
            .map(|a| ((a.namespace().to_string(), a.name().to_string()), a))
            .collect(),
        mounted: list(&stores.pods)
            .await?
            .iter()
            .flat_map(|p| {
                let ns = p.namespace().to_string();
                pod_secret_names(p)
                    .into_iter()
                    .map(move |n| (ns.clone(), n))
            })
            .collect(),
    };
    let user = super::kube_system_account("legacy-service-account-token-cleaner");
    let requester = Requester { user: &user };
    for secret in list(&stores.secrets).await? {
        let (ns, name) = (secret.namespace(), secret.name());
        let outcome = match judge(&secret, now, preserve_created, &world) {
            Verdict::Keep => continue,
            Verdict::Invalidate(day) => {
                tracing::info!(secret = %format!("{ns}/{name}"), invalid_since = %day, "marking the auto-generated service account token as invalid");
                invalidate(api, &stores.secrets, &requester, &secret, &day).await
            }
            Verdict::Delete => {
                tracing::info!(secret = %format!("{ns}/{name}"), "deleting the auto-generated service account token");
                let opts = DeleteOptions {
                    precondition_resource_version: Some(secret.resource_version().to_string()),
                    ..DeleteOptions::default()
                };
                stores
                    .secrets
                    .delete(&requester, ns, name, &opts)
                    .await
                    .map(|_| ())
            }
        };
        // A Secret gone or replaced since it was read, or changed before its deletion (the
        // delete's precondition), is judged again at the next sync, as upstream skips it.
        if let Err(s) = outcome
            && !matches!(s.code, 404 | 409 | 410)
        {
            tracing::warn!(secret = %format!("{ns}/{name}"), error = %s.message, "legacy service account token cleaning failed");
        }
    }
    Ok(())
}

/// Labels the Secret invalid since `day` as upstream's merge patch naming its uid does: on the
/// Secret as it now is, whatever its resourceVersion, unless it was replaced since it was read.
async fn invalidate(
    api: &ApiResources,
    store: &RegistryStore,
    requester: &Requester<'_>,
    secret: &Value,
    day: &str,
) -> Result<(), Status> {
    let mut updater =
        crate::serviceaccount::label_token_secret(secret.uid(), INVALID_SINCE_LABEL, day);
    let opts = UpdateOptions {
        write: api.internal_write(store, super::CONTROLLER_MANAGER),
        ..UpdateOptions::default()
    };
    store
        .update(
            requester,
            secret.namespace(),
            secret.name(),
            &mut updater,
            &opts,
        )
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: &str) -> DateTime<Utc> {
        super::super::expiry::parse_time(s).unwrap()
    }

    fn secret(labels: Value) -> Value {
        json!({
            "type": SECRET_TYPE,
            "metadata": {
                "name": "tok", "namespace": "ns",
                "creationTimestamp": "2025-01-01T00:00:00Z",
                "annotations": {NAME_ANNOTATION: "sa", UID_ANNOTATION: "u1"},
                "labels": labels,
            },
        })
    }

    fn world(secrets: &[&str], mounted: &[&str]) -> World {
        let account = json!({"metadata": {"name": "sa", "namespace": "ns", "uid": "u1"},
            "secrets": secrets.iter().map(|s| json!({"name": s})).collect::<Vec<_>>()});
        World {
            accounts: HashMap::from([(("ns".into(), "sa".into()), account)]),
            mounted: mounted
                .iter()
                .map(|m| ("ns".to_string(), m.to_string()))
                .collect(),
        }
    }

    /// Now is 2026-03-10 noon; the period is 30 days, so the period began 2026-02-08.
    fn verdict(s: &Value, w: &World) -> Verdict {
        let now = t("2026-03-10T12:00:00Z");
        judge(s, now, now - TimeDelta::days(30), w)
    }

    #[test]
    fn an_unused_listed_unmounted_token_is_invalidated_then_deleted() {
        let w = world(&["tok"], &[]);
        assert_eq!(
            verdict(&secret(json!({})), &w),
            Verdict::Invalidate("2026-03-10".into()),
            "never used since tracking began"
        );
        assert_eq!(
            verdict(&secret(json!({LAST_USED_LABEL: "2026-02-07"})), &w),
            Verdict::Invalidate("2026-03-10".into())
        );
        assert_eq!(
            verdict(&secret(json!({LAST_USED_LABEL: "2026-02-08"})), &w),
            Verdict::Keep,
            "used on the day the period began"
        );
        assert_eq!(
            verdict(&secret(json!({LAST_USED_LABEL: "2026-2-07"})), &w),
            Verdict::Keep,
            "a last-used day Go cannot parse"
        );
        assert_eq!(
            verdict(&secret(json!({INVALID_SINCE_LABEL: "2026-03-01"})), &w),
            Verdict::Keep,
            "invalid for less than the period"
        );
        assert_eq!(
            verdict(&secret(json!({INVALID_SINCE_LABEL: "2026-02-07"})), &w),
            Verdict::Delete
        );
        assert_eq!(
            verdict(&secret(json!({INVALID_SINCE_LABEL: "yesterday"})), &w),
            Verdict::Invalidate("2026-03-10".into()),
            "a label that does not parse is replaced"
        );
    }

    #[test]
    fn tokens_not_proven_auto_generated_or_still_mounted_stay() {
        let s = secret(json!({INVALID_SINCE_LABEL: "2025-01-01"}));
        assert_eq!(verdict(&s, &world(&[], &[])), Verdict::Keep, "not listed");
        assert_eq!(
            verdict(&s, &world(&["tok"], &["tok"])),
            Verdict::Keep,
            "mounted"
        );
        let mut other_uid = s.clone();
        other_uid["metadata"]["annotations"][UID_ANNOTATION] = json!("u2");
        assert_eq!(verdict(&other_uid, &world(&["tok"], &[])), Verdict::Keep);
        let mut no_uid = s.clone();
        no_uid["metadata"]["annotations"][UID_ANNOTATION] = json!("");
        assert_eq!(verdict(&no_uid, &world(&["tok"], &[])), Verdict::Delete);
        let mut young = s.clone();
        young["metadata"]["creationTimestamp"] = json!("2026-03-01T00:00:00Z");
        assert_eq!(verdict(&young, &world(&["tok"], &[])), Verdict::Keep);
        let mut deleting = s.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-03-01T00:00:00Z");
        assert_eq!(verdict(&deleting, &world(&["tok"], &[])), Verdict::Keep);
        let mut opaque = s;
        opaque["type"] = json!("Opaque");
        assert_eq!(verdict(&opaque, &world(&["tok"], &[])), Verdict::Keep);
    }

    #[test]
    fn pods_name_secrets_as_visit_pod_secret_names_does() {
        let pod = json!({"spec": {
            "imagePullSecrets": [{"name": "pull"}],
            "initContainers": [{"name": "i", "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "env", "key": "k"}}}]}],
            "containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "envfrom"}}]}],
            "ephemeralContainers": [{"name": "e", "envFrom": [{"secretRef": {"name": "debug"}}]}],
            "volumes": [
                {"name": "a", "secret": {"secretName": "vol"}},
                {"name": "b", "projected": {"sources": [{"secret": {"name": "proj"}}, {"configMap": {"name": "cm"}}]}},
                {"name": "c", "cinder": {"volumeID": "x", "secretRef": {"name": "cinder"}}},
                {"name": "d", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi"}}},
                {"name": "e", "azureFile": {"secretName": "azure", "shareName": "s"}},
            ],
        }});
        let mut names = pod_secret_names(&pod);
        names.sort();
        assert_eq!(
            names,
            [
                "azure", "cinder", "csi", "debug", "env", "envfrom", "proj", "pull", "vol"
            ]
        );
    }

    #[test]
    fn nothing_happens_before_tracking_has_lasted_the_period() {
        let period = TimeDelta::seconds(5);
        // Tracking counts from the day after `since`.
        assert!(!tracked_long_enough("2026-03-10", t("2026-03-10T23:00:00Z"), period).unwrap());
        assert!(!tracked_long_enough("2026-03-10", t("2026-03-11T00:00:04Z"), period).unwrap());
        assert!(tracked_long_enough("2026-03-10", t("2026-03-11T00:00:05Z"), period).unwrap());
        assert!(
            tracked_long_enough("2026-03-10", t("2026-03-11T00:00:05Z"), TimeDelta::MAX)
                .is_ok_and(|ok| !ok)
        );
        assert!(tracked_long_enough("March", t("2026-03-11T00:00:05Z"), period).is_err());
    }

    #[test]
    fn a_zero_period_is_refused_in_upstream_words() {
        assert_eq!(
            check_period(Duration::ZERO).unwrap_err(),
            "failed to init the legacy service account token cleaner: invalid CleanUpPeriod: 0s"
        );
        assert!(check_period(DEFAULT_CLEAN_UP_PERIOD).is_ok());
    }
}
