//! The storage backend the server keeps its state in: the embedded SQLite store in `--data-dir`
//! (the default, nothing to configure), or an etcd cluster with `--etcd-servers` (upstream's
//! flags and key layout, so that several servers can share it). It also owns the `etcd` check of
//! `/livez` and `/readyz` and the `etcd-readiness` check of `/readyz`, as upstream names them.
//!
//! `--etcd-servers-overrides` keeps chosen resources in other etcd clusters, each with its own
//! checks.
//!
//! Nothing above the `Kv` seam knows which backend it runs on, except where a watch cache may
//! serve consistent reads (`storage::cached`).

use std::sync::{Arc, Weak};
use std::time::Duration;

use apiserver::health::Check;
use storage::{EtcdKv, EtcdOptions, Kv, TxnOutcome, prefix_end};

use crate::Options;

/// How often the etcd checks probe etcd: upstream probes per request; a probe a second keeps a
/// flood of health requests off etcd while a failure shows within about a second.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// The store and its health checks.
pub struct Backend {
    pub kv: Arc<dyn Kv>,
    /// `etcd`: part of `/healthz`, `/livez` and `/readyz`.
    pub health: Check,
    /// `etcd-readiness`: part of `/readyz` only.
    pub readiness: Check,
    /// The etcd client, for what only etcd has (leases); `None` on the embedded store.
    pub etcd: Option<Arc<EtcdKv>>,
    /// The resources `--etcd-servers-overrides` keeps in other etcd clusters, each with the
    /// client of its cluster (one per distinct set of servers).
    pub overrides: Vec<ironplane_kube::KvOverride>,
    /// The etcd clusters `componentstatuses` probes, as upstream's `etcd-<n>`: `--etcd-servers`,
    /// then each override's.
    pub etcd_clusters: Vec<Arc<EtcdKv>>,
    /// `etcd-override-<n>` (as `etcd`) and `etcd-override-readiness-<n>` (as
    /// `etcd-readiness`), one of each per cluster, as upstream names them.
    pub override_health: Vec<Check>,
    pub override_readiness: Vec<Check>,
}

/// Opens the backend the options choose. With etcd, fails when etcd cannot be reached.
pub async fn open(opts: &Options) -> Result<Backend, String> {
    if opts.etcd_servers.is_empty() {
        if opts.etcd_cafile.is_some() || opts.etcd_certfile.is_some() || opts.etcd_keyfile.is_some()
        {
            return Err(
                "--etcd-cafile, --etcd-certfile and --etcd-keyfile need --etcd-servers".into(),
            );
        }
        let sqlite_options = storage::SqliteOptions {
            compaction_interval: opts.etcd_compaction_interval,
            ..Default::default()
        };
        let kv = storage::SqliteKv::open_with(&opts.data_dir.join("state.db"), sqlite_options)
            .map_err(|e| format!("opening the embedded store: {e}"))?;
        move_legacy_keys(kv.as_ref(), &opts.etcd_prefix).await?;
        // The embedded store lives and dies with the process: nothing to probe.
        return Ok(Backend {
            kv,
            health: Check::new("etcd", true),
            readiness: Check::new("etcd-readiness", true),
            etcd: None,
            overrides: Vec::new(),
            etcd_clusters: Vec::new(),
            override_health: Vec::new(),
            override_readiness: Vec::new(),
        });
    }
    let options = EtcdOptions {
        servers: opts.etcd_servers.clone(),
        ca_file: opts.etcd_cafile.clone(),
        cert_file: opts.etcd_certfile.clone(),
        key_file: opts.etcd_keyfile.clone(),
        compaction_interval: opts.etcd_compaction_interval,
    };
    let etcd = EtcdKv::connect(&options)
        .await
        .map_err(|e| format!("{e} (--etcd-servers={})", opts.etcd_servers.join(",")))?;
    let health = Check::new("etcd", true);
    let readiness = Check::new("etcd-readiness", true);
    tokio::spawn(probe(
        Arc::downgrade(&etcd),
        opts.etcd_prefix.clone(),
        (health.clone(), opts.etcd_healthcheck_timeout),
        (readiness.clone(), opts.etcd_readycheck_timeout),
    ));
    // Upstream opens one client per distinct set of servers, in the order first named.
    let mut clusters: Vec<(Vec<String>, Arc<EtcdKv>)> = Vec::new();
    let mut overrides = Vec::new();
    let (mut override_health, mut override_readiness) = (Vec::new(), Vec::new());
    let mut etcd_clusters = vec![etcd.clone()];
    for (group, resource, servers) in opts.etcd_servers_overrides()? {
        let mut sorted = servers.clone();
        sorted.sort();
        let kv = match clusters.iter().find(|(s, _)| *s == sorted) {
            Some((_, kv)) => kv.clone(),
            None => {
                let kv = EtcdKv::connect(&EtcdOptions {
                    servers: servers.clone(),
                    ..options.clone()
                })
                .await
                .map_err(|e| format!("{e} (--etcd-servers-overrides={group}/{resource})"))?;
                let n = clusters.len();
                let health = Check::grouped(format!("etcd-override-{n}"), "etcd", true);
                let readiness = Check::grouped(
                    format!("etcd-override-readiness-{n}"),
                    "etcd-readiness",
                    true,
                );
                tokio::spawn(probe(
                    Arc::downgrade(&kv),
                    opts.etcd_prefix.clone(),
                    (health.clone(), opts.etcd_healthcheck_timeout),
                    (readiness.clone(), opts.etcd_readycheck_timeout),
                ));
                override_health.push(health);
                override_readiness.push(readiness);
                clusters.push((sorted, kv.clone()));
                kv
            }
        };
        etcd_clusters.push(kv.clone());
        overrides.push(ironplane_kube::KvOverride {
            group,
            resource,
            kv,
        });
    }
    Ok(Backend {
        kv: etcd.clone(),
        health,
        readiness,
        etcd: Some(etcd),
        overrides,
        etcd_clusters,
        override_health,
        override_readiness,
    })
}

/// Probes etcd until the store is dropped, setting each check from a read with its timeout.
async fn probe(
    etcd: Weak<EtcdKv>,
    prefix: String,
    (health, health_timeout): (Check, Duration),
    (readiness, ready_timeout): (Check, Duration),
) {
    loop {
        tokio::time::sleep(PROBE_INTERVAL).await;
        let Some(etcd) = etcd.upgrade() else { return };
        for (check, timeout) in [(&health, health_timeout), (&readiness, ready_timeout)] {
            let result = etcd.check(&prefix, timeout).await;
            if let Err(err) = &result
                && check.is_ok()
            {
                tracing::warn!(check = %check.name, error = %err, "etcd check failed");
            }
            check.set(result.is_ok());
        }
    }
}

/// The resources whose keys earlier Ironplane versions kept under `<resource>` where upstream
/// keeps them under a special prefix (see `ironplane_kube::catalog::storage_key`), with how many
/// key segments follow the root (namespace and name, or name).
const LEGACY_ROOTS: [(&str, &str, usize); 5] = [
    ("services", "services/specs", 2),
    ("endpoints", "services/endpoints", 2),
    ("nodes", "minions", 1),
    ("replicationcontrollers", "controllers", 2),
    ("ingresses", "ingress", 2),
];

/// Moves objects an earlier version stored under the legacy roots of an embedded store to
/// upstream's keys, so that a data directory made before keeps its Services, Endpoints, Nodes,
/// ReplicationControllers and Ingresses. `/registry/services/` holds upstream's
/// `services/specs/` and `services/endpoints/` too: a legacy key is told by its segment count.
/// Each object moves by a create and a compare-and-delete, so a crash in between leaves both
/// keys and the next start finishes the move. Returns how many moved.
async fn move_legacy_keys(kv: &dyn Kv, prefix: &str) -> Result<usize, String> {
    let prefix = prefix.trim_end_matches('/');
    let mut moved = 0;
    for (old, new, segments) in LEGACY_ROOTS {
        let root = format!("{prefix}/{old}/");
        let found = kv
            .range(&root, &prefix_end(&root), 0, 0)
            .await
            .map_err(|e| format!("reading {root}: {e}"))?;
        for item in found.kvs {
            let rest = &item.key[root.len()..];
            if rest.split('/').count() != segments {
                continue;
            }
            let target = format!("{prefix}/{new}/{rest}");
            let created = kv
                .create(&target, item.value.clone())
                .await
                .map_err(|e| format!("moving {} to {target}: {e}", item.key))?;
            if let TxnOutcome::Failed { .. } = created {
                // Written by a start that stopped before its delete: the copy is there.
                tracing::info!(key = %item.key, %target, "legacy key already moved");
            }
            kv.delete(&item.key, Some(item.mod_revision))
                .await
                .map_err(|e| format!("removing {}: {e}", item.key))?;
            moved += 1;
        }
    }
    if moved > 0 {
        tracing::info!(moved, "moved objects to upstream's storage keys");
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[tokio::test]
    async fn legacy_keys_move_to_upstreams() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kv = storage::SqliteKv::open(&dir.path().join("state.db")).expect("open");
        let value = |v: &'static str| Bytes::from_static(v.as_bytes());
        for (key, v) in [
            ("/registry/services/default/kubernetes", "svc"),
            ("/registry/services/specs/default/already", "new-svc"),
            ("/registry/services/endpoints/default/ep-new", "new-ep"),
            ("/registry/endpoints/default/kubernetes", "ep"),
            ("/registry/nodes/n1", "node"),
            ("/registry/replicationcontrollers/ns/rc", "rc"),
            ("/registry/ingresses/ns/web", "ing"),
            ("/registry/configmaps/ns/cm", "cm"),
        ] {
            kv.create(key, value(v)).await.expect("write");
        }
        assert_eq!(move_legacy_keys(kv.as_ref(), "/registry").await, Ok(5));
        let all = kv.range("/", "", 0, 0).await.expect("range");
        let keys: Vec<(&str, &[u8])> = all
            .kvs
            .iter()
            .map(|kv| (kv.key.as_str(), kv.value.as_ref()))
            .collect();
        assert_eq!(
            keys,
            [
                ("/registry/configmaps/ns/cm", &b"cm"[..]),
                ("/registry/controllers/ns/rc", b"rc"),
                ("/registry/ingress/ns/web", b"ing"),
                ("/registry/minions/n1", b"node"),
                ("/registry/services/endpoints/default/ep-new", b"new-ep"),
                ("/registry/services/endpoints/default/kubernetes", b"ep"),
                ("/registry/services/specs/default/already", b"new-svc"),
                ("/registry/services/specs/default/kubernetes", b"svc"),
            ]
        );
        // Nothing left to move.
        assert_eq!(move_legacy_keys(kv.as_ref(), "/registry").await, Ok(0));
    }
}
