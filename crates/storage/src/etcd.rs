//! `EtcdKv`: the `Kv` trait on an etcd v3 cluster (upstream: `k8s.io/apiserver/pkg/storage/etcd3`
//! and its compactor), so that several Ironplane processes, or Ironplane and kube-apiserver, can
//! share one etcd.
//!
//! It owns the client connection, the mapping of each `Kv` verb onto etcd's RPCs, the version
//! check that decides whether etcd's progress notifications can be requested, and the periodic
//! compaction that kube-apiserver runs against etcd. It knows nothing of objects: keys arrive
//! whole (`--etcd-prefix` is already in them) and values are stored as given.
//!
//! # Verbs
//! - create: a transaction `create_revision(key) == 0` → put, else get (upstream's `Create`);
//! - update and delete: `version(key) > 0` and `mod_revision(key) == expected` → put or delete
//!   with the previous value, else get (upstream's `GuaranteedUpdate` and `conditionalDelete`);
//!   a delete without an expected revision compares only the version, so that deleting an
//!   absent key reports it absent. Both are the shared [`Precondition`] sent as compares;
//! - range: etcd's range with `revision` and `limit`, whose `count` and `more` are the trait's;
//! - watch: one gRPC watch stream per watch, from `after_revision + 1`, with previous values and
//!   progress notifications. A response without events is a progress notification; a canceled
//!   watch with a compact revision is [`KvError::Compacted`]; any other end of the stream (etcd
//!   gone, leader lost, canceled) is reported as an error item, never a silent end, so that the
//!   layer above re-lists instead of waiting for events that will not come.
//!
//! # Progress notifications and consistent reads
//! A cache serves a consistent read once it knows it has seen every event up to the store's
//! current revision; for a resource without recent writes only a progress notification tells it.
//! Where etcd answers progress requests correctly (3.4.31+, 3.5.13+, 3.6: etcd issues 15220 and
//! 17507, the versions upstream checks for), every [`Kv::current_revision`] asks each open watch
//! for one (at most one outstanding per watch). Older etcd (Debian's 3.4.23) gets no requests, and
//! [`Kv::consistent_reads_from_cache`] says so, so that consistent reads go to etcd as upstream
//! does there; etcd's own periodic notifications (`--experimental-watch-progress-notify-interval`)
//! still pass through.
//!
//! # Unreachable etcd
//! Upstream's client waits for etcd (gRPC's `WaitForReady`, and a retry of reads, and of writes
//! that never reached a connection) until the request's deadline, where kube-apiserver answers
//! 504 `Timeout`. This client waits the same way, retrying what upstream retries, but only while
//! etcd is believed reachable: the server's `etcd` checks ([`EtcdKv::check`], a quorum read
//! within `--etcd-healthcheck-timeout`) decide that, and a member that answers at all, if only
//! to say it has no leader during an election, counts as reachable. Once a check fails with no
//! member answering, every request waiting on etcd and every new one fails with
//! [`KvError::Unreachable`] (the same 504) instead of holding its client until the deadline; the
//! next check that passes lets requests through again, on the same client, which reconnects by
//! itself. Without checks (a store used alone) requests wait as upstream's do. Watches are not
//! cut: a watch on a frozen etcd resumes when it thaws, and one that breaks ends with an error
//! that the watch cache follows by watching again from its last revision.
//!
//! # Compaction
//! With a non-zero interval, a task does what kube-apiserver's compactor does: every interval it
//! bumps `compact_rev_key` (outside the prefix, as upstream, so that every API server on the
//! cluster shares one schedule) with a compare on its version, and the winner compacts to the
//! revision it saw at the previous tick. Several servers on one etcd thus compact once per
//! interval between them, and history younger than one interval always survives.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, DeleteOptions, EventType, GetOptions,
    Identity, PutOptions, TlsOptions, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use tokio::sync::{mpsc, watch};

use crate::kv::{
    KeyValue, Kv, KvError, KvEvent, Precondition, RangeResponse, TxnOutcome, prefix_end,
};

/// The key kube-apiserver's compactor coordinates on (outside `--etcd-prefix`, as upstream).
const COMPACT_REV_KEY: &str = "compact_rev_key";
/// Events a watch may queue for its reader before the etcd stream is paused.
const WATCH_CHANNEL: usize = 1024;
/// Upstream's etcd client dial timeout.
const DIAL_TIMEOUT: Duration = Duration::from_secs(20);
/// The largest answer accepted, as upstream's client (`MaxCallRecvMsgSize`): a list of a large
/// collection in one range is far above gRPC's 4 MiB default.
const MAX_MESSAGE: usize = i32::MAX as usize;
/// Upstream's gRPC keepalive: a ping after 30s without traffic, dead after 10s without answer.
const KEEPALIVE_TIME: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// The first and the longest pause between retries of a request that found no connection
/// (upstream's client backs off 25-50 ms per retry, jittered).
const RETRY_BACKOFF: Duration = Duration::from_millis(50);
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// How to reach etcd (kube-apiserver's `--etcd-*` flags).
#[derive(Clone, Debug, Default)]
pub struct EtcdOptions {
    /// `--etcd-servers`: `http://host:port` or `https://host:port` URLs.
    pub servers: Vec<String>,
    /// `--etcd-cafile`: the CA that signed the servers' certificates (else the system's roots).
    pub ca_file: Option<PathBuf>,
    /// `--etcd-certfile` and `--etcd-keyfile`: the client certificate.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// `--etcd-compaction-interval`; zero turns compaction off.
    pub compaction_interval: Duration,
}

/// The etcd backend. See the module documentation.
pub struct EtcdKv {
    client: Client,
    /// etcd answers progress requests correctly (see the module documentation).
    progress_requests: bool,
    /// Bumped by `current_revision` to ask every open watch for a progress notification.
    progress_wanted: watch::Sender<u64>,
    /// Whether the last check reached etcd (see "Unreachable etcd" in the module documentation).
    reachable: watch::Sender<bool>,
    compactor: Option<tokio::task::JoinHandle<()>>,
}

/// Runs one request on etcd, sent again after a failure [`retriable`] says is safe to retry (the
/// balanced channel then picks a member again), until etcd answers. Callers bound the wait.
async fn retrying<T, F, Fut>(write: bool, mut request: F) -> Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, etcd_client::Error>>,
{
    let mut backoff = RETRY_BACKOFF;
    loop {
        match request().await {
            Err(err) if retriable(&err, write) => {
                tracing::debug!(error = %err, "etcd: retrying a request");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
            }
            answer => return answer,
        }
    }
}

/// Whether a request may be sent again after `err`. Reads may, whenever etcd or the connection
/// was unavailable; writes only when no connection could be made, so that a write is never
/// applied twice (upstream's `isSafeRetryImmutableRPC` and `isSafeRetryMutableRPC`).
fn retriable(err: &etcd_client::Error, write: bool) -> bool {
    let etcd_client::Error::GRpcStatus(status) = err else {
        return false;
    };
    if status.code() != tonic::Code::Unavailable {
        return false;
    }
    // tonic reports a connection that could not be made as Unavailable with the connector's
    // error ("tcp connect error", "error trying to connect"): the request was never sent.
    !write || status.message().contains("connect")
}

impl Drop for EtcdKv {
    fn drop(&mut self) {
        if let Some(compactor) = &self.compactor {
            compactor.abort();
        }
    }
}

impl EtcdKv {
    fn kv(&self) -> etcd_client::KvClient {
        self.client
            .kv_client()
            .max_decoding_message_size(MAX_MESSAGE)
    }

    /// Runs one request on etcd, retried as [`retrying`] does, and given up with
    /// [`KvError::Unreachable`] as soon as etcd is believed unreachable. The inner result is
    /// etcd's answer.
    async fn call<T, F, Fut>(
        &self,
        write: bool,
        request: F,
    ) -> Result<Result<T, etcd_client::Error>, KvError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let mut reachable = self.reachable.subscribe();
        tokio::select! {
            answer = retrying(write, request) => Ok(answer),
            _ = reachable.wait_for(|up| !*up) => Err(unreachable()),
        }
    }

    fn watches(&self) -> etcd_client::WatchClient {
        self.client
            .watch_client()
            .max_decoding_message_size(MAX_MESSAGE)
    }

    /// Connects to the cluster, reads its version, and starts the compactor. Fails when no
    /// endpoint answers within the dial timeout.
    pub async fn connect(options: &EtcdOptions) -> Result<Arc<EtcdKv>, KvError> {
        if options.servers.is_empty() {
            return Err(KvError::Backend("no etcd servers given".into()));
        }
        let mut connect = ConnectOptions::new()
            .with_connect_timeout(DIAL_TIMEOUT)
            .with_keep_alive(KEEPALIVE_TIME, KEEPALIVE_TIMEOUT)
            .with_keep_alive_while_idle(true)
            // As upstream's watches: a member cut off from the leader ends the watch instead of
            // leaving it silent.
            .with_require_leader(true);
        if options.servers.iter().any(|s| s.starts_with("https://")) {
            connect = connect.with_tls(tls_options(options)?);
        } else if options.ca_file.is_some() || options.cert_file.is_some() {
            return Err(KvError::Backend(
                "--etcd-cafile, --etcd-certfile and --etcd-keyfile need https:// etcd servers"
                    .into(),
            ));
        }
        let client = Client::connect(&options.servers, Some(connect))
            .await
            .map_err(|e| KvError::Backend(format!("connecting to etcd: {e}")))?;
        let version = {
            let mut maintenance = client.maintenance_client();
            let status = tokio::time::timeout(DIAL_TIMEOUT, maintenance.status())
                .await
                .map_err(|_| KvError::Backend("etcd did not answer its status in time".into()))?
                .map_err(|e| KvError::Backend(format!("reading etcd's status: {e}")))?;
            status.version().to_string()
        };
        let progress_requests = supports_progress_requests(&version);
        tracing::info!(
            servers = ?options.servers,
            %version,
            progress_requests,
            "connected to etcd"
        );
        let compactor = (!options.compaction_interval.is_zero())
            .then(|| tokio::spawn(compact_loop(client.clone(), options.compaction_interval)));
        Ok(Arc::new(EtcdKv {
            client,
            progress_requests,
            progress_wanted: watch::channel(0).0,
            reachable: watch::channel(true).0,
            compactor,
        }))
    }

    /// Upstream's etcd health and readiness probe: a linearizable read of
    /// `<prefix>/health` within `timeout`; etcd refusing it for permissions still proves it is up.
    /// Its outcome also decides whether requests wait for etcd or fail at once (see "Unreachable
    /// etcd" in the module documentation).
    pub async fn check(&self, prefix: &str, timeout: Duration) -> Result<(), String> {
        let key = format!("{}/health", prefix.trim_end_matches('/'));
        // Whether any member answered, even if only to refuse the read.
        let answered = std::sync::atomic::AtomicBool::new(false);
        // Retried within the timeout as any read is, so that one lost member of a cluster does
        // not fail the check while the others answer.
        let read = retrying(false, || {
            let mut kv = self.kv();
            let key = key.clone();
            let answered = &answered;
            async move {
                let answer = kv.get(key, None).await;
                if answered_by_etcd(&answer) {
                    answered.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                answer
            }
        });
        let result = match tokio::time::timeout(timeout, read).await {
            Err(_) => Err(format!("etcd did not answer within {timeout:?}")),
            Ok(Ok(_)) => Ok(()),
            // etcd's `ErrPermissionDenied`: it is up, the credentials lack the key.
            Ok(Err(err)) if err.to_string().contains("etcdserver: permission denied") => Ok(()),
            Ok(Err(err)) => Err(err.to_string()),
        };
        // A member that answers is reachable even while the check fails: one that has no
        // leader says so at once ("etcdserver: no leader", as the client requires a leader), and
        // the election that follows the loss of a cluster's leader can outlast the check's
        // timeout. Requests wait that out, as upstream's do; a cluster that lost its quorum for
        // good leaves them to their deadline, also as upstream's.
        let up = result.is_ok() || answered.load(std::sync::atomic::Ordering::Relaxed);
        if self
            .reachable
            .send_if_modified(|was| std::mem::replace(was, up) != up)
        {
            if up {
                tracing::info!("etcd answers again: requests go through");
            } else {
                tracing::warn!("etcd is unreachable: requests fail until it answers a check");
            }
        }
        result
    }

    /// Writes `key` attached to a new lease of `ttl`, so that etcd deletes it when nobody writes
    /// it again within that time (upstream's store writes with a TTL this way; the `kubernetes`
    /// Service's lease endpoint reconciler keeps `masterleases` keys alive with it). Not part of
    /// `Kv`: only etcd has leases.
    pub async fn put_with_ttl(
        &self,
        key: &str,
        value: Bytes,
        ttl: Duration,
    ) -> Result<(), KvError> {
        let seconds = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX).max(1);
        let lease = self
            .client
            .lease_client()
            .grant(seconds, None)
            .await
            .map_err(|e| KvError::Backend(format!("granting a lease: {e}")))?;
        self.kv()
            .put(
                key,
                value.to_vec(),
                Some(PutOptions::new().with_lease(lease.id())),
            )
            .await
            .map_err(|e| KvError::Backend(format!("writing {key}: {e}")))?;
        Ok(())
    }

    /// The revision etcd has compacted to, learned by watching from revision 1 (etcd names it in
    /// the canceled watch's answer); 0 when nothing was compacted.
    async fn compacted_revision(&self) -> i64 {
        let mut watches = self.watches();
        let options = WatchOptions::new().with_start_revision(1);
        let Ok(mut stream) = watches.watch(COMPACT_REV_KEY, Some(options)).await else {
            return 0;
        };
        let answer = tokio::time::timeout(Duration::from_secs(2), async {
            loop {
                match stream.message().await {
                    Ok(Some(resp)) if resp.canceled() => return resp.compact_revision(),
                    // Created, and history from revision 1 is there: nothing was compacted.
                    Ok(Some(resp)) if resp.created() => continue,
                    _ => return 0,
                }
            }
        })
        .await;
        // A live watch from revision 1 means etcd kept all history.
        answer.unwrap_or(0)
    }

    async fn error(&self, err: etcd_client::Error, requested: i64) -> KvError {
        let message = err.to_string();
        if message.contains("required revision has been compacted") {
            return KvError::Compacted {
                requested,
                compact_revision: self.compacted_revision().await,
            };
        }
        if message.contains("required revision is a future revision") {
            let current = self.current_revision_quietly().await.unwrap_or(0);
            return KvError::FutureRevision { requested, current };
        }
        backend(err)
    }

    async fn current_revision_quietly(&self) -> Result<i64, KvError> {
        let resp = self
            .call(false, || {
                let mut kv = self.kv();
                async move {
                    kv.get(COMPACT_REV_KEY, Some(GetOptions::new().with_count_only()))
                        .await
                }
            })
            .await?
            .map_err(backend)?;
        header_revision(resp.header())
    }

    /// Runs a write under `precondition` (as etcd compares) whose else branch reads the key.
    async fn txn(
        &self,
        key: &str,
        precondition: Precondition,
        then: TxnOp,
        payload: usize,
    ) -> Result<TxnOutcome, KvError> {
        let compare = match precondition {
            Precondition::Absent => vec![Compare::create_revision(key, CompareOp::Equal, 0)],
            Precondition::Exists { mod_revision } => {
                // An absent key has mod_revision 0: the version compare keeps an expected 0
                // from matching it.
                let mut compare = vec![Compare::version(key, CompareOp::Greater, 0)];
                if let Some(expected) = mod_revision {
                    compare.push(Compare::mod_revision(key, CompareOp::Equal, expected));
                }
                compare
            }
        };
        let txn = Txn::new()
            .when(compare)
            .and_then([then])
            .or_else([TxnOp::get(key, None)]);
        refuse_over_send_limit(&txn, key, payload)?;
        let resp = self
            .call(true, || {
                let mut kv = self.kv();
                let txn = txn.clone();
                async move { kv.txn(txn).await }
            })
            .await?
            .map_err(backend)?;
        let revision = header_revision(resp.header())?;
        let first = resp.op_responses().into_iter().next();
        if !resp.succeeded() {
            let current = match first {
                Some(TxnOpResponse::Get(get)) => get.kvs().first().map(convert),
                _ => None,
            };
            return Ok(TxnOutcome::Failed { current });
        }
        let prev = match first {
            Some(TxnOpResponse::Put(put)) => put.prev_key().map(convert),
            Some(TxnOpResponse::Delete(delete)) => delete.prev_kvs().first().map(convert),
            _ => None,
        };
        Ok(TxnOutcome::Succeeded { revision, prev })
    }
}

#[async_trait]
impl Kv for EtcdKv {
    async fn get(&self, key: &str) -> Result<(Option<KeyValue>, i64), KvError> {
        let resp = self
            .call(false, || {
                let mut kv = self.kv();
                async move { kv.get(key, None).await }
            })
            .await?
            .map_err(backend)?;
        Ok((
            resp.kvs().first().map(convert),
            header_revision(resp.header())?,
        ))
    }

    async fn range(
        &self,
        start: &str,
        end: &str,
        revision: i64,
        limit: i64,
    ) -> Result<RangeResponse, KvError> {
        // etcd spells "no upper bound" as the single byte 0.
        let end = if end.is_empty() { "\0" } else { end };
        let options = GetOptions::new()
            .with_range(end)
            .with_revision(revision.max(0))
            .with_limit(limit.max(0));
        let answer = self
            .call(false, || {
                let mut kv = self.kv();
                let options = options.clone();
                async move { kv.get(start, Some(options)).await }
            })
            .await?;
        let resp = match answer {
            Ok(resp) => resp,
            Err(err) => return Err(self.error(err, revision).await),
        };
        Ok(RangeResponse {
            kvs: resp.kvs().iter().map(convert).collect(),
            more: resp.more(),
            count: resp.count(),
            revision: header_revision(resp.header())?,
        })
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<TxnOutcome, KvError> {
        self.txn(
            key,
            Precondition::Absent,
            TxnOp::put(key, value.to_vec(), None),
            value.len(),
        )
        .await
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: i64,
    ) -> Result<TxnOutcome, KvError> {
        let precondition = Precondition::Exists {
            mod_revision: Some(expected_mod_revision),
        };
        self.txn(
            key,
            precondition,
            TxnOp::put(key, value.to_vec(), Some(PutOptions::new().with_prev_key())),
            value.len(),
        )
        .await
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<i64>,
    ) -> Result<TxnOutcome, KvError> {
        let precondition = Precondition::Exists {
            mod_revision: expected_mod_revision,
        };
        self.txn(
            key,
            precondition,
            TxnOp::delete(key, Some(DeleteOptions::new().with_prev_key())),
            0,
        )
        .await
    }

    async fn watch(
        &self,
        prefix: &str,
        after_revision: i64,
    ) -> Result<mpsc::Receiver<Result<KvEvent, KvError>>, KvError> {
        let end = prefix_end(prefix);
        let options = WatchOptions::new()
            .with_range(if end.is_empty() {
                "\0".to_string()
            } else {
                end
            })
            .with_start_revision(after_revision.max(0) + 1)
            .with_prev_key()
            .with_progress_notify();
        // etcd confirms the watch first (or cancels it at once when the start is compacted):
        // wait for that so that a watch that cannot start fails here.
        let (mut stream, first) = self
            .call(false, || {
                let mut watches = self.watches();
                let options = options.clone();
                async move {
                    let mut stream = watches.watch(prefix, Some(options)).await?;
                    let first = stream.message().await?;
                    Ok((stream, first))
                }
            })
            .await?
            .map_err(backend)?;
        let (tx, rx) = mpsc::channel(WATCH_CHANNEL);
        match first {
            Some(resp) if resp.canceled() => {
                return Err(cancel_error(&resp, after_revision));
            }
            Some(resp) if resp.created() => {}
            Some(resp) => {
                // Not the confirmation: treat it like any later answer.
                if forward(&tx, &resp, after_revision).await.is_err() {
                    return Ok(rx);
                }
            }
            None => return Err(KvError::Backend("etcd closed the watch at once".into())),
        }
        let mut wanted = self.progress_wanted.subscribe();
        let mut progress_requests = self.progress_requests;
        tokio::spawn(async move {
            // One progress request in flight at a time: etcd answers each one, and more would
            // only queue behind it.
            let mut outstanding = false;
            loop {
                let resp = tokio::select! {
                    _ = tx.closed() => return,
                    changed = wanted.changed(), if progress_requests => {
                        if changed.is_err() {
                            // The store was dropped: nobody asks any more, and the stream goes
                            // on until its reader leaves.
                            progress_requests = false;
                        } else if !outstanding {
                            outstanding = true;
                            if let Err(err) = stream.request_progress().await {
                                let _ = tx.send(Err(backend(err))).await;
                                return;
                            }
                        }
                        continue;
                    }
                    resp = stream.message() => resp,
                };
                match resp {
                    Ok(Some(resp)) => {
                        if resp.events().is_empty() {
                            outstanding = false;
                        }
                        if forward(&tx, &resp, after_revision).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) => {
                        let _ = tx
                            .send(Err(KvError::Backend("etcd ended the watch stream".into())))
                            .await;
                        return;
                    }
                    Err(err) => {
                        let _ = tx.send(Err(backend(err))).await;
                        return;
                    }
                }
            }
        });
        Ok(rx)
    }

    async fn current_revision(&self) -> Result<i64, KvError> {
        let revision = self.current_revision_quietly().await?;
        if self.progress_requests {
            // A cache that wants to serve a read at this revision learns that it has caught up
            // from the progress notifications this asks for.
            self.progress_wanted.send_modify(|n| *n = n.wrapping_add(1));
        }
        Ok(revision)
    }

    fn request_progress(&self) {
        if self.progress_requests {
            self.progress_wanted.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    async fn compact(&self, revision: i64) -> Result<(), KvError> {
        // Compacting twice to one revision is harmless: a retry is safe.
        let answer = self
            .call(false, || {
                let mut kv = self.kv();
                async move { kv.compact(revision, None).await }
            })
            .await?;
        match answer {
            Ok(_) => Ok(()),
            Err(err) => Err(self.error(err, revision).await),
        }
    }

    fn consistent_reads_from_cache(&self) -> bool {
        self.progress_requests
    }
}

/// Hands one watch answer to the reader: its events, or a progress notification, or the error
/// that ended it. `Err` when the watch is over (the reader left, or the answer ended it).
async fn forward(
    tx: &mpsc::Sender<Result<KvEvent, KvError>>,
    resp: &etcd_client::WatchResponse,
    after_revision: i64,
) -> Result<(), ()> {
    if resp.canceled() {
        let _ = tx.send(Err(cancel_error(resp, after_revision))).await;
        return Err(());
    }
    if resp.created() {
        return Ok(());
    }
    if resp.events().is_empty() {
        let revision = header_revision(resp.header()).map_err(|_| ())?;
        return tx
            .send(Ok(KvEvent::Progress { revision }))
            .await
            .map_err(|_| ());
    }
    for event in resp.events() {
        let Some(kv) = event.kv() else { continue };
        let prev = event.prev_kv().map(convert);
        let event = match event.event_type() {
            EventType::Put => KvEvent::Put {
                kv: convert(kv),
                prev,
            },
            EventType::Delete => KvEvent::Delete {
                key: String::from_utf8_lossy(kv.key()).into_owned(),
                mod_revision: kv.mod_revision(),
                prev,
            },
        };
        tx.send(Ok(event)).await.map_err(|_| ())?;
    }
    Ok(())
}

fn cancel_error(resp: &etcd_client::WatchResponse, after_revision: i64) -> KvError {
    if resp.compact_revision() > 0 {
        KvError::Compacted {
            requested: after_revision,
            compact_revision: resp.compact_revision(),
        }
    } else {
        KvError::Backend(format!("etcd canceled the watch: {}", resp.cancel_reason()))
    }
}

fn convert(kv: &etcd_client::KeyValue) -> KeyValue {
    KeyValue {
        key: String::from_utf8_lossy(kv.key()).into_owned(),
        value: Bytes::copy_from_slice(kv.value()),
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
    }
}

fn header_revision(header: Option<&etcd_client::ResponseHeader>) -> Result<i64, KvError> {
    header
        .map(|h| h.revision())
        .ok_or_else(|| KvError::Backend("etcd answered without a response header".into()))
}

/// Whether `answer` came from an etcd member, success or refusal (etcd's errors read
/// `etcdserver: ...`), rather than from a connection that failed or was never made.
fn answered_by_etcd<T>(answer: &Result<T, etcd_client::Error>) -> bool {
    match answer {
        Ok(_) => true,
        Err(etcd_client::Error::GRpcStatus(status)) => status.message().starts_with("etcdserver:"),
        Err(_) => false,
    }
}

fn unreachable() -> KvError {
    KvError::Unreachable("etcd did not answer the last health check".into())
}

/// What upstream's etcd client allows itself to send (clientv3's default `MaxCallSendMsgSize`):
/// it refuses a larger write before sending it.
const UPSTREAM_MAX_CALL_SEND_BYTES: u64 = 2 * 1024 * 1024;

/// Refuses a transaction upstream's client would not send (over `MaxCallSendMsgSize`, whatever
/// etcd's `--max-request-bytes`), in its client's words, with the message's encoded size. Only a
/// write whose value (`payload`) comes near the limit is measured: the rest of the message is
/// the key four times and a few dozen bytes of framing.
fn refuse_over_send_limit(txn: &Txn, key: &str, payload: usize) -> Result<(), KvError> {
    const FRAMING: usize = 256;
    if (payload + 4 * key.len() + FRAMING) as u64 <= UPSTREAM_MAX_CALL_SEND_BYTES {
        return Ok(());
    }
    let size = prost::Message::encoded_len(&etcd_client::proto::PbTxnRequest::from(txn.clone()));
    if size as u64 <= UPSTREAM_MAX_CALL_SEND_BYTES {
        return Ok(());
    }
    Err(KvError::RequestTooLarge(format!(
        "rpc error: code = ResourceExhausted desc = trying to send message larger than max ({size} vs. {UPSTREAM_MAX_CALL_SEND_BYTES})"
    )))
}

fn backend(err: etcd_client::Error) -> KvError {
    match err {
        // A write past etcd's `--max-request-bytes`: upstream's handlers know this answer by
        // its code and exact text and try again without managedFields.
        etcd_client::Error::GRpcStatus(status)
            if status.code() == tonic::Code::InvalidArgument
                && status.message() == "etcdserver: request is too large" =>
        {
            KvError::RequestTooLarge(status.message().to_string())
        }
        // Past etcd's gRPC limit (`--max-request-bytes` plus 512 KiB): etcd refuses the message
        // itself. `txn` refuses anything over 2 MiB before sending it, as upstream's client
        // does, so this is etcd's answer only under a `--max-request-bytes` below 1.5 MiB.
        // Upstream's handlers take either for "too large"; clients read its client's text, with
        // the size etcd counted.
        etcd_client::Error::GRpcStatus(status)
            if status.code() == tonic::Code::ResourceExhausted
                && status.message().contains("larger than max") =>
        {
            let size = message_size(status.message()).unwrap_or(0);
            KvError::RequestTooLarge(format!(
                "rpc error: code = ResourceExhausted desc = trying to send message larger than max ({size} vs. {UPSTREAM_MAX_CALL_SEND_BYTES})"
            ))
        }
        // etcd's own answer, e.g. `etcdserver: leader changed` while a member of a cluster is
        // lost: upstream passes it to the client as it is (a 500 with etcd's message).
        // Other gRPC failures (the connection's) are not etcd's answer and stay internal.
        etcd_client::Error::GRpcStatus(status)
            if ["etcdserver: ", "mvcc: ", "auth: "]
                .iter()
                .any(|p| status.message().starts_with(p)) =>
        {
            KvError::Etcd(status.message().to_string())
        }
        err => KvError::Backend(format!("etcd: {err}")),
    }
}

/// The message size in gRPC's "received message larger than max (N vs. M)": its first number.
fn message_size(message: &str) -> Option<u64> {
    let start = message.find(|c: char| c.is_ascii_digit())?;
    let digits: String = message[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn tls_options(options: &EtcdOptions) -> Result<TlsOptions, KvError> {
    let read = |path: &PathBuf| {
        std::fs::read(path)
            .map_err(|e| KvError::Backend(format!("reading {}: {e}", path.display())))
    };
    let mut tls = TlsOptions::new();
    tls = match &options.ca_file {
        Some(ca) => tls.ca_certificate(Certificate::from_pem(read(ca)?)),
        None => tls.with_native_roots(),
    };
    match (&options.cert_file, &options.key_file) {
        (Some(cert), Some(key)) => {
            tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        (None, None) => {}
        _ => {
            return Err(KvError::Backend(
                "--etcd-certfile and --etcd-keyfile go together".into(),
            ));
        }
    }
    Ok(tls)
}

/// Whether etcd `version` answers progress requests correctly: 3.4.31+, 3.5.13+, or 3.6 and
/// later (upstream's `endpointSupportsRequestWatchProgress`). A version that does not parse is
/// taken as not supporting them, as upstream does.
pub fn supports_progress_requests(version: &str) -> bool {
    let mut parts = version
        .split(['.', '-', '+'])
        .map(|p| p.parse::<u64>().ok());
    let (Some(Some(major)), Some(Some(minor)), Some(Some(patch))) =
        (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    match (major, minor) {
        (3, 4) => patch >= 31,
        (3, 5) => patch >= 13,
        (3, m) => m > 5,
        (m, _) => m > 3,
    }
}

/// kube-apiserver's compactor (see the module documentation). `compact_time` is the version of
/// `compact_rev_key` this server last saw, `last` the revision it saw then.
async fn compact_loop(client: Client, interval: Duration) {
    let mut compact_time = 0;
    let mut last = 0;
    loop {
        tokio::time::sleep(interval).await;
        match compact_once(&client, compact_time, last).await {
            Ok((time, revision)) => {
                compact_time = time;
                last = revision;
            }
            Err(err) => tracing::error!(error = %err, "etcd: compaction failed"),
        }
    }
}

/// One tick: bump `compact_rev_key` if nobody else did since `expected_time`, and if so compact
/// to `revision` (the store's revision one tick ago). Returns the key's version and the store's
/// revision now.
async fn compact_once(
    client: &Client,
    expected_time: i64,
    revision: i64,
) -> Result<(i64, i64), String> {
    let txn = Txn::new()
        .when([Compare::version(
            COMPACT_REV_KEY,
            CompareOp::Equal,
            expected_time,
        )])
        .and_then([TxnOp::put(COMPACT_REV_KEY, revision.to_string(), None)])
        .or_else([TxnOp::get(COMPACT_REV_KEY, None)]);
    let mut kv = client.kv_client();
    let resp = kv.txn(txn).await.map_err(|e| e.to_string())?;
    let current = header_revision(resp.header()).map_err(|e| e.to_string())?;
    if !resp.succeeded() {
        // Another server compacted since: follow its schedule.
        let time = match resp.op_responses().into_iter().next() {
            Some(TxnOpResponse::Get(get)) => get.kvs().first().map_or(0, |kv| kv.version()),
            _ => 0,
        };
        return Ok((time, current));
    }
    if revision > 0 {
        kv.compact(revision, None)
            .await
            .map_err(|e| e.to_string())?;
        tracing::debug!(revision, "etcd: compacted");
    }
    Ok((expected_time + 1, current))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real etcd started with `flags`, and this backend connected to it.
    async fn etcd_with(flags: &[&str]) -> (crate::testing::EtcdServer, Arc<EtcdKv>) {
        let server =
            crate::testing::EtcdServer::start_with(flags).expect("a real etcd for the etcd tests");
        let options = EtcdOptions {
            servers: vec![server.url.clone()],
            ..Default::default()
        };
        let kv = EtcdKv::connect(&options).await.expect("connect");
        (server, kv)
    }

    /// `answer` is the refusal of a message just over `value_len` bytes, in upstream's client's
    /// words (2 MiB its limit), with the message's own size.
    fn assert_refused_as_upstreams_client(answer: Result<TxnOutcome, KvError>, value_len: u64) {
        match answer {
            Err(KvError::RequestTooLarge(message)) => {
                let size = message_size(&message).expect("a size");
                assert!(size > value_len && size < value_len + 100, "{message}");
                assert_eq!(
                    message,
                    format!(
                        "rpc error: code = ResourceExhausted desc = trying to send message larger than max ({size} vs. 2097152)"
                    )
                );
            }
            other => panic!("expected RequestTooLarge, got {other:?}"),
        }
    }

    fn value(len: u64) -> Bytes {
        Bytes::from(vec![b'x'; len as usize])
    }

    /// A large write refused by etcd (past `--max-request-bytes`, 1.5 MiB by default) or by this
    /// client (past 2 MiB, as upstream's client refuses it) comes back as `RequestTooLarge` with
    /// the text upstream's client reports, which the write handlers recognize.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_etcd_refuses_as_too_large_are_request_too_large() {
        let (_server, kv) = etcd_with(&[]).await;
        match kv.create("/registry/things/a", value(1_700_000)).await {
            Err(KvError::RequestTooLarge(message)) => {
                assert_eq!(message, "etcdserver: request is too large");
            }
            other => panic!("expected RequestTooLarge, got {other:?}"),
        }
        let answer = kv.create("/registry/things/b", value(2_200_000)).await;
        assert_refused_as_upstreams_client(answer, 2_200_000);
        // Under both limits the write goes through.
        assert!(matches!(
            kv.create("/registry/things/c", value(1_000_000)).await,
            Ok(TxnOutcome::Succeeded { .. })
        ));
    }

    /// Past etcd's own gRPC limit (`--max-request-bytes` plus 512 KiB), which is under 2 MiB
    /// only with a small `--max-request-bytes`: etcd's refusal, in upstream's client's words
    /// with the size etcd counted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_past_etcds_grpc_limit_are_request_too_large() {
        let (_server, kv) = etcd_with(&["--max-request-bytes=1048576"]).await;
        let answer = kv.create("/registry/things/a", value(1_700_000)).await;
        assert_refused_as_upstreams_client(answer, 1_700_000);
    }

    /// With an etcd that takes 4 MiB, a write over 2 MiB is still refused, by this client, as
    /// upstream's client refuses it (its `MaxCallSendMsgSize`), with the same text; under
    /// 2 MiB it goes through where the default etcd would refuse it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_over_two_mib_are_refused_before_sending_whatever_etcd_takes() {
        let (_server, kv) = etcd_with(&["--max-request-bytes=4194304"]).await;
        assert!(matches!(
            kv.create("/registry/things/a", value(1_700_000)).await,
            Ok(TxnOutcome::Succeeded { .. })
        ));
        let answer = kv.create("/registry/things/b", value(2_200_000)).await;
        assert_refused_as_upstreams_client(answer, 2_200_000);
        let (written, _) = kv.get("/registry/things/b").await.expect("get");
        assert!(written.is_none(), "nothing written");
    }

    /// kube-apiserver's compactor protocol: the first tick only claims the schedule, the next
    /// compacts to the revision seen at the previous tick, and a server that lost the race
    /// follows the winner's schedule without compacting.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn compactor_compacts_one_interval_behind_and_once_per_cluster() {
        let server = crate::testing::EtcdServer::start().expect("a real etcd for the etcd tests");
        let options = EtcdOptions {
            servers: vec![server.url.clone()],
            ..Default::default()
        };
        let kv = EtcdKv::connect(&options).await.expect("connect");
        let write = |name: &'static str| {
            let kv = kv.clone();
            async move {
                match kv.create(name, Bytes::from_static(b"v")).await {
                    Ok(TxnOutcome::Succeeded { revision, .. }) => revision,
                    other => panic!("create {name}: {other:?}"),
                }
            }
        };
        let first = write("/registry/things/a").await;
        let (time, seen) = compact_once(&kv.client, 0, 0).await.expect("first tick");
        assert_eq!(time, 1);
        assert!(seen > first, "the tick's own write moved the revision");
        // Nothing compacted on the first tick.
        kv.range("/registry/", "", first, 0)
            .await
            .expect("history is kept");
        write("/registry/things/b").await;
        // Another server that has not seen the first tick loses the race and follows it.
        assert_eq!(
            compact_once(&kv.client, 0, 0).await.expect("lost race"),
            (1, kv.current_revision().await.expect("revision"))
        );
        kv.range("/registry/", "", first, 0)
            .await
            .expect("the loser compacted nothing");
        let (time, _) = compact_once(&kv.client, time, seen)
            .await
            .expect("second tick");
        assert_eq!(time, 2);
        match kv.range("/registry/", "", first, 0).await {
            Err(KvError::Compacted {
                requested,
                compact_revision,
            }) => assert_eq!((requested, compact_revision), (first, seen)),
            other => panic!("expected compacted, got {other:?}"),
        }
        kv.range("/registry/", "", seen, 0)
            .await
            .expect("the revision one tick back is kept");
        // A watch from before the compacted revision (etcd still serves one that starts at it).
        let watch = kv.watch("/registry/", first - 1).await;
        assert!(
            matches!(watch, Err(KvError::Compacted { .. })) || {
                let mut events = watch.expect("watch");
                matches!(events.recv().await, Some(Err(KvError::Compacted { .. })))
            }
        );
    }

    #[test]
    fn progress_requests_follow_upstreams_version_rules() {
        for (version, supported) in [
            ("3.4.23", false),
            ("3.4.30", false),
            ("3.4.31", true),
            ("3.5.12", false),
            ("3.5.13", true),
            ("3.5.21", true),
            ("3.6.0", true),
            ("3.6.0-rc.1", true),
            ("4.0.0", true),
            ("3.3.27", false),
            ("garbage", false),
            ("", false),
        ] {
            assert_eq!(supports_progress_requests(version), supported, "{version}");
        }
    }
}
