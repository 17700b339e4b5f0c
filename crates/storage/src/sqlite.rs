//! `SqliteKv`: the embedded `Kv` backend, one SQLite file with etcd's MVCC semantics.
//!
//! It owns the file's schema, the one writer thread, the pool of read connections, the fan-out of
//! committed events to watches, and compaction. It knows nothing of objects or JSON.
//!
//! # Layout (as k3s's kine does it)
//! Every write appends a row to `kv`: `id` is the revision (`INTEGER PRIMARY KEY AUTOINCREMENT`,
//! so revisions never repeat, even after compaction removed the highest rows), `name` the key,
//! `create_revision`, `prev_revision` (the id of the key's previous row, 0 for none), `deleted`
//! (1 for a delete's tombstone) and `value`. The key's state at revision `r` is its row with the
//! highest `id <= r`, absent if that row is a tombstone. So reads at older revisions keep working
//! until compaction removes the rows they need. The store's revision is `sqlite_sequence`'s value
//! for `kv`, read inside each read transaction so that a read and the revision it reports come from
//! one snapshot.
//!
//! # Writes: one writer with group commit
//! One thread owns the write connection. It takes every queued write request, runs them all in one
//! transaction (each request's own compare decides its own outcome, in queue order, and sees the
//! writes before it), commits once with `synchronous=FULL`, and only then answers: a write's future
//! resolves after its transaction is durable, so a 2xx answer survives `kill -9` and power loss.
//! After the commit it publishes the batch to the watches (see below).
//!
//! # Reads
//! A few read connections (WAL lets them read while the writer writes) used from
//! `spawn_blocking`. Each read runs in its own read transaction, i.e. on one snapshot. A read
//! waits for a pooled connection rather than open another: a new connection parses the schema
//! and prepares its statements again.
//!
//! # Watches
//! Committed batches go out on broadcast channels, one per resource (the keys' first three
//! segments, `/registry/pods/`), and one for watches whose prefix spans resources: a write wakes
//! only the watches of its resource, not one watch per cached resource. A watch subscribes to
//! its channel *before* it reads history, replays the history rows after its start revision from
//! SQLite (nothing to read when it starts at the newest revision), then serves live batches,
//! skipping every event at or below the last revision it delivered: no gap, no duplicate. A watch
//! that falls behind its channel (lagged) goes back to reading history from SQLite. When a batch
//! holds nothing for the watch's prefix, the watch sends a `KvEvent::Progress` (coalesced while
//! batches are queued), as etcd's progress notifications do, so that caches know they are up to
//! date. A watch hears nothing of other resources' writes, so a cache that needs to know it is
//! fresh asks ([`Kv::request_progress`], etcd's `RequestWatchProgress`): every watch then
//! vouches for the last revision fanned out.
//!
//! # Compaction
//! `compact(r)` removes every row superseded by a row at or below `r` and every tombstone at or
//! below `r`: reads at `r` and later are unchanged, reads before `r` fail with `Compacted`, and
//! watches must start at `r` or later. The writer also compacts on its own: every
//! [`SqliteOptions::compaction_interval`] (5 minutes, kube-apiserver's `--etcd-compaction-interval`)
//! it compacts to the revision that was current at the previous tick, as upstream's compactor
//! does with etcd: nothing on the first tick, then history older than one to two intervals goes,
//! and continue tokens and resourceVersions that old get upstream's 410 answers. A zero interval
//! turns automatic compaction off. [`SqliteOptions::keep_revisions`] can keep a number of recent
//! revisions besides (0 by default, as upstream keeps none). Compaction runs in chunks between
//! write batches so that it never holds writes back for long.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use tokio::sync::{Semaphore, broadcast, mpsc, oneshot, watch};

use crate::kv::{
    KeyValue, Kv, KvError, KvEvent, Precondition, RangeResponse, TxnOutcome, prefix_end,
};

/// Tunables of [`SqliteKv`]; `Default` gives the production values.
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// How often the writer compacts on its own (and how much history it keeps at least).
    pub compaction_interval: Duration,
    /// How many recent revisions automatic compaction always keeps.
    pub keep_revisions: i64,
    /// How many read connections are kept open.
    pub read_connections: usize,
    /// The most write requests committed in one transaction.
    pub max_batch: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            compaction_interval: Duration::from_secs(300),
            keep_revisions: 0,
            read_connections: 4,
            max_batch: 1000,
        }
    }
}

/// How many revisions one compaction transaction covers, so that writes queued meanwhile wait
/// for one chunk at most.
const COMPACTION_CHUNK: i64 = 5_000;
/// How many history rows a watch reads from SQLite per query while it replays.
const REPLAY_PAGE: i64 = 500;
/// Capacity of the broadcast of committed batches to watches spanning resources; a watch more
/// batches behind reads SQLite.
const BROADCAST_CAPACITY: usize = 1024;
/// Capacity of one resource's broadcast: smaller, since it carries only that resource's batches
/// and every resource watched has one (a broadcast allocates all its slots when made; at 256
/// the sixty-odd resources' channels added 0.6 MiB to an idle server).
const RESOURCE_BROADCAST_CAPACITY: usize = 128;
/// Capacity of each watch's channel.
const WATCH_CHANNEL: usize = 1024;

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS kv (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name BLOB NOT NULL,
        create_revision INTEGER NOT NULL,
        prev_revision INTEGER NOT NULL,
        deleted INTEGER NOT NULL,
        value BLOB NOT NULL
    );
    -- (name, id) serves key ranges and per-key history; `deleted` makes it covering, so that
    -- counting a range (remainingItemCount) never reads the values. Replaces the earlier
    -- (name, id) index of databases made before it.
    CREATE INDEX IF NOT EXISTS kv_name_id_deleted ON kv (name, id, deleted);
    DROP INDEX IF EXISTS kv_name_id;
    CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
    INSERT OR IGNORE INTO meta (name, value) VALUES ('compact_revision', 0);
";

/// The store's revision and compacted revision as one read snapshot sees them. Keys are stored as
/// BLOBs so that SQLite compares them byte-wise, as etcd does, NUL bytes included (continue
/// tokens start right after a key, at `key + "\0"`).
const SNAPSHOT_SQL: &str = "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'kv'), 0), \
     (SELECT value FROM meta WHERE name = 'compact_revision')";

/// The embedded SQLite backend. See the module documentation.
pub struct SqliteKv {
    shared: Arc<Shared>,
    /// `None` only while dropping: dropping the sender is what tells the writer to stop.
    requests: Option<std_mpsc::Sender<Request>>,
    fanout: Arc<Fanout>,
    writer: Option<JoinHandle<()>>,
}

/// The channels that carry committed batches to watches: one per resource watched, and one for
/// watches whose prefix spans resources.
struct Fanout {
    spanning: broadcast::Sender<Arc<Commit>>,
    resources: Mutex<HashMap<String, broadcast::Sender<Arc<Commit>>>>,
    /// Every batch up to this revision has been sent. The writer publishes a revision before it
    /// sends its batch (see [`SqliteKv::watch`]), so a watch vouches only for this one.
    sent: AtomicI64,
    /// Bumped to ask every watch for a progress notification.
    progress_wanted: watch::Sender<u64>,
}

/// The resource a key, or every key under a prefix, belongs to: up to its third `/`
/// (`/registry/pods/` of `/registry/pods/ns/name`). `None` when there is no third `/`: such a
/// prefix may span resources.
fn resource_of(key: &str) -> Option<&str> {
    let (third, _) = key.match_indices('/').nth(2)?;
    Some(&key[..=third])
}

impl Fanout {
    fn new(revision: i64) -> Fanout {
        Fanout {
            spanning: broadcast::channel(BROADCAST_CAPACITY).0,
            resources: Mutex::new(HashMap::new()),
            sent: AtomicI64::new(revision),
            progress_wanted: watch::channel(0).0,
        }
    }

    fn subscribe(&self, prefix: &str) -> broadcast::Receiver<Arc<Commit>> {
        match resource_of(prefix) {
            None => self.spanning.subscribe(),
            Some(resource) => self
                .resources
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(resource.to_string())
                .or_insert_with(|| broadcast::channel(RESOURCE_BROADCAST_CAPACITY).0)
                .subscribe(),
        }
    }

    /// Sends a committed batch to the watches of the resources it touched and to the watches
    /// spanning resources. No subscriber is not an error: nobody watches.
    fn send(&self, commit: Commit) {
        let revision = commit.revision;
        let commit = Arc::new(commit);
        if self.spanning.receiver_count() > 0 {
            let _ = self.spanning.send(commit.clone());
        }
        let resources = self.resources.lock().unwrap_or_else(|e| e.into_inner());
        let mut sent_to: Vec<&str> = Vec::new();
        for event in &commit.events {
            let Some(resource) = event.key().and_then(resource_of) else {
                continue;
            };
            if sent_to.contains(&resource) {
                continue;
            }
            sent_to.push(resource);
            if let Some(channel) = resources.get(resource) {
                let _ = channel.send(commit.clone());
            }
        }
        drop(resources);
        self.sent.store(revision, Ordering::Release);
    }
}

/// What the writer, the readers and the watches share.
struct Shared {
    path: PathBuf,
    readers: Mutex<Vec<Connection>>,
    max_readers: usize,
    /// One permit per read connection: a read waits for a pooled connection rather than open
    /// one more, because a new connection parses the schema and prepares every statement again
    /// (at start-up, when every cache lists and every watch starts at once, that was a fifth of
    /// the CPU).
    read_permits: Arc<Semaphore>,
    /// The last committed revision, kept in memory so that `current_revision` costs nothing.
    revision: AtomicI64,
}

/// One committed transaction's events, published to watches.
struct Commit {
    /// The last revision the transaction wrote.
    revision: i64,
    events: Vec<KvEvent>,
}

enum Op {
    Create {
        key: String,
        value: Bytes,
    },
    Update {
        key: String,
        value: Bytes,
        expected: i64,
    },
    Delete {
        key: String,
        expected: Option<i64>,
    },
}

/// Where a write's outcome goes.
type WriteReply = oneshot::Sender<Result<TxnOutcome, KvError>>;

enum Request {
    Write {
        op: Op,
        reply: WriteReply,
    },
    Compact {
        revision: i64,
        reply: oneshot::Sender<Result<(), KvError>>,
    },
}

fn backend(err: rusqlite::Error) -> KvError {
    KvError::Backend(err.to_string())
}

fn open_connection(path: &Path) -> Result<Connection, KvError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(backend)?;
    conn.busy_timeout(Duration::from_secs(10))
        .map_err(backend)?;
    // Plans never depend on the values bound: otherwise SQLite compiles a statement again
    // whenever a parameter its planner looked at is bound anew (every key of every write).
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(backend)?;
    Ok(conn)
}

impl SqliteKv {
    /// Opens (creating if needed) the database file at `path` with the default options.
    pub fn open(path: &Path) -> Result<Arc<SqliteKv>, KvError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens the database file at `path` with `options`.
    pub fn open_with(path: &Path, options: SqliteOptions) -> Result<Arc<SqliteKv>, KvError> {
        let conn = open_connection(path)?;
        // WAL lets readers run beside the writer; FULL makes every commit durable before the
        // writer answers (in WAL mode NORMAL could lose the last commits on power loss).
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;")
            .map_err(backend)?;
        conn.execute_batch(SCHEMA).map_err(backend)?;
        let (revision, _compacted): (i64, i64) = conn
            .query_row(SNAPSHOT_SQL, [], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(backend)?;

        let shared = Arc::new(Shared {
            path: path.to_path_buf(),
            readers: Mutex::new(Vec::new()),
            max_readers: options.read_connections.max(1),
            read_permits: Arc::new(Semaphore::new(options.read_connections.max(1))),
            revision: AtomicI64::new(revision),
        });
        let fanout = Arc::new(Fanout::new(revision));
        let (requests, queue) = std_mpsc::channel();
        let writer = Writer {
            conn,
            queue,
            shared: shared.clone(),
            fanout: fanout.clone(),
            options,
            next_revision: revision + 1,
            compaction: None,
        };
        let handle = std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| KvError::Backend(format!("cannot start the SQLite writer thread: {e}")))?;
        Ok(Arc::new(SqliteKv {
            shared,
            requests: Some(requests),
            fanout,
            writer: Some(handle),
        }))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The revision up to which history has been compacted.
    pub async fn compacted_revision(&self) -> Result<i64, KvError> {
        self.shared.read(|conn| Ok(snapshot(conn)?.1)).await
    }

    async fn write(&self, op: Op) -> Result<TxnOutcome, KvError> {
        let (reply, answer) = oneshot::channel();
        let requests = self.requests.as_ref().ok_or(KvError::Closed)?;
        requests
            .send(Request::Write { op, reply })
            .map_err(|_| KvError::Closed)?;
        answer.await.map_err(|_| KvError::Closed)?
    }
}

impl Drop for SqliteKv {
    fn drop(&mut self) {
        // Closing the queue stops the writer once it has committed what is queued; waiting for it
        // releases the write connection, so that the file can be opened again right away.
        self.requests.take();
        if let Some(handle) = self.writer.take() {
            let _ = handle.join();
        }
    }
}

/// Runs a statement without parameters or rows from the connection's statement cache
/// (`execute_batch` would parse it on every call).
fn run_cached(conn: &Connection, sql: &str) -> Result<(), KvError> {
    conn.prepare_cached(sql)
        .and_then(|mut stmt| stmt.execute([]))
        .map(drop)
        .map_err(backend)
}

/// The store revision and compacted revision of the current read snapshot.
fn snapshot(conn: &Connection) -> Result<(i64, i64), KvError> {
    conn.prepare_cached(SNAPSHOT_SQL)
        .and_then(|mut stmt| stmt.query_row([], |row| Ok((row.get(0)?, row.get(1)?))))
        .map_err(backend)
}

fn key_string(raw: Vec<u8>) -> Result<String, KvError> {
    String::from_utf8(raw).map_err(|e| KvError::Backend(format!("stored key is not UTF-8: {e}")))
}

impl Shared {
    /// Runs `f` on a pooled read connection inside one read transaction, on a blocking thread.
    async fn read<T, F>(self: &Arc<Self>, f: F) -> Result<T, KvError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, KvError> + Send + 'static,
    {
        let shared = self.clone();
        let permit = self
            .read_permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| KvError::Closed)?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let pooled = shared.readers.lock().ok().and_then(|mut pool| pool.pop());
            let conn = match pooled {
                Some(conn) => conn,
                None => {
                    let conn = open_connection(&shared.path)?;
                    conn.execute_batch("PRAGMA query_only = ON;")
                        .map_err(backend)?;
                    conn
                }
            };
            // A deferred transaction pins one snapshot from its first read to its end.
            let result = run_cached(&conn, "BEGIN").and_then(|()| {
                let out = f(&conn);
                run_cached(&conn, "COMMIT")?;
                out
            });
            if result.is_err() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            if let Ok(mut pool) = shared.readers.lock()
                && pool.len() < shared.max_readers
            {
                pool.push(conn);
            }
            result
        })
        .await
        .map_err(|e| {
            // The runtime cancels blocking tasks not yet started when it shuts down.
            if e.is_cancelled() {
                KvError::Closed
            } else {
                KvError::Backend(format!("read task failed: {e}"))
            }
        })?
    }
}

/// A key's newest row.
struct LatestRow {
    id: i64,
    create_revision: i64,
    deleted: bool,
    value: Vec<u8>,
}

impl LatestRow {
    /// The key's value, unless the row is a tombstone.
    fn into_kv(self, key: &str) -> Option<KeyValue> {
        (!self.deleted).then(|| KeyValue {
            key: key.to_string(),
            value: Bytes::from(self.value),
            create_revision: self.create_revision,
            mod_revision: self.id,
        })
    }
}

fn latest_row(conn: &Connection, key: &str) -> Result<Option<LatestRow>, KvError> {
    conn.prepare_cached(
        "SELECT id, create_revision, deleted, value FROM kv WHERE name = ?1 ORDER BY id DESC LIMIT 1",
    )
    .and_then(|mut stmt| {
        stmt.query_row(params![key.as_bytes()], |row| {
            Ok(LatestRow {
                id: row.get(0)?,
                create_revision: row.get(1)?,
                deleted: row.get::<_, i64>(2)? != 0,
                value: row.get(3)?,
            })
        })
        .optional()
    })
    .map_err(backend)
}

fn current_kv(conn: &Connection, key: &str) -> Result<Option<KeyValue>, KvError> {
    Ok(latest_row(conn, key)?.and_then(|row| row.into_kv(key)))
}

#[async_trait]
impl Kv for SqliteKv {
    async fn get(&self, key: &str) -> Result<(Option<KeyValue>, i64), KvError> {
        let key = key.to_string();
        self.shared
            .read(move |conn| {
                let (revision, _) = snapshot(conn)?;
                Ok((current_kv(conn, &key)?, revision))
            })
            .await
    }

    async fn range(
        &self,
        start: &str,
        end: &str,
        revision: i64,
        limit: i64,
    ) -> Result<RangeResponse, KvError> {
        let (start, end) = (start.to_string(), end.to_string());
        self.shared
            .read(move |conn| range_at(conn, &start, &end, revision, limit))
            .await
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<TxnOutcome, KvError> {
        self.write(Op::Create {
            key: key.to_string(),
            value,
        })
        .await
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: i64,
    ) -> Result<TxnOutcome, KvError> {
        self.write(Op::Update {
            key: key.to_string(),
            value,
            expected: expected_mod_revision,
        })
        .await
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<i64>,
    ) -> Result<TxnOutcome, KvError> {
        self.write(Op::Delete {
            key: key.to_string(),
            expected: expected_mod_revision,
        })
        .await
    }

    async fn watch(
        &self,
        prefix: &str,
        after_revision: i64,
    ) -> Result<mpsc::Receiver<Result<KvEvent, KvError>>, KvError> {
        // Subscribe before reading anything: every commit after this point reaches the
        // subscription, every commit before it is in the file.
        let live = self.fanout.subscribe(prefix);
        let progress_wanted = self.fanout.progress_wanted.subscribe();
        // A watch from the newest revision has no history to read: the writer publishes a
        // revision before broadcasting its commit, so a commit this load does not see is one the
        // subscription above receives. Most watches start so (a cache watches from its list).
        let caught_up = after_revision >= self.shared.revision.load(Ordering::SeqCst);
        if !caught_up {
            let compacted = self.compacted_revision().await?;
            if after_revision < compacted {
                return Err(KvError::Compacted {
                    requested: after_revision,
                    compact_revision: compacted,
                });
            }
        }
        let (tx, rx) = mpsc::channel(WATCH_CHANNEL);
        let watch = Watch {
            shared: self.shared.clone(),
            fanout: self.fanout.clone(),
            progress_wanted,
            prefix: prefix.to_string(),
            end: prefix_end(prefix),
            last: after_revision,
            last_sent: after_revision,
            tx,
        };
        tokio::spawn(watch.run(live, !caught_up));
        Ok(rx)
    }

    async fn current_revision(&self) -> Result<i64, KvError> {
        Ok(self.shared.revision.load(Ordering::Acquire))
    }

    fn request_progress(&self) {
        self.fanout
            .progress_wanted
            .send_modify(|n| *n = n.wrapping_add(1));
    }

    async fn compact(&self, revision: i64) -> Result<(), KvError> {
        let (reply, answer) = oneshot::channel();
        let requests = self.requests.as_ref().ok_or(KvError::Closed)?;
        requests
            .send(Request::Compact { revision, reply })
            .map_err(|_| KvError::Closed)?;
        answer.await.map_err(|_| KvError::Closed)?
    }
}

/// `Kv::range` on one read snapshot.
fn range_at(
    conn: &Connection,
    start: &str,
    end: &str,
    revision: i64,
    limit: i64,
) -> Result<RangeResponse, KvError> {
    let (current, compacted) = snapshot(conn)?;
    if revision > current {
        return Err(KvError::FutureRevision {
            requested: revision,
            current,
        });
    }
    if revision > 0 && revision < compacted {
        return Err(KvError::Compacted {
            requested: revision,
            compact_revision: compacted,
        });
    }
    let at = if revision > 0 { revision } else { current };
    // The newest row of each key at or below `at`, kept when it is not a tombstone. Rows are
    // walked in (name, id, deleted) index order and a row is kept when no newer row of its key exists
    // at `at`, so the walk stops as soon as `limit` rows are found: a page costs its own size,
    // not the size of everything after it (a GROUP BY over the range would).
    let upper = if end.is_empty() {
        ""
    } else {
        "AND k.name < ?2"
    };
    let newest = format!(
        "FROM kv k WHERE k.name >= ?1 {upper} AND k.id <= ?3 AND k.deleted = 0 \
         AND NOT EXISTS (SELECT 1 FROM kv n WHERE n.name = k.name AND n.id > k.id AND n.id <= ?3)"
    );
    let rows_sql = format!(
        "SELECT k.id, k.name, k.create_revision, k.value {newest} ORDER BY k.name LIMIT ?4"
    );
    let sql_limit = if limit > 0 { limit } else { -1 };
    let mut stmt = conn.prepare_cached(&rows_sql).map_err(backend)?;
    let mut rows = stmt
        .query(params![start.as_bytes(), end.as_bytes(), at, sql_limit])
        .map_err(backend)?;
    let mut kvs = Vec::new();
    while let Some(row) = rows.next().map_err(backend)? {
        let mod_revision: i64 = row.get(0).map_err(backend)?;
        let key = key_string(row.get(1).map_err(backend)?)?;
        let create_revision: i64 = row.get(2).map_err(backend)?;
        let value: Vec<u8> = row.get(3).map_err(backend)?;
        kvs.push(KeyValue {
            key,
            value: Bytes::from(value),
            create_revision,
            mod_revision,
        });
    }
    drop(rows);
    let count = if limit > 0 && kvs.len() as i64 >= limit {
        let count_sql = format!("SELECT COUNT(*) {newest} AND ?4 = ?4");
        conn.prepare_cached(&count_sql)
            .and_then(|mut stmt| {
                stmt.query_row(params![start.as_bytes(), end.as_bytes(), at, 0], |row| {
                    row.get(0)
                })
            })
            .map_err(backend)?
    } else {
        kvs.len() as i64
    };
    Ok(RangeResponse {
        more: count > kvs.len() as i64,
        kvs,
        count,
        revision: at,
    })
}

/// A compaction in progress: the revision it goes to and who waits for it.
struct Compaction {
    target: i64,
    replies: Vec<oneshot::Sender<Result<(), KvError>>>,
}

struct Writer {
    conn: Connection,
    queue: std_mpsc::Receiver<Request>,
    shared: Arc<Shared>,
    fanout: Arc<Fanout>,
    options: SqliteOptions,
    next_revision: i64,
    compaction: Option<Compaction>,
}

impl Writer {
    fn run(mut self) {
        // A zero interval turns automatic compaction off: the next tick never comes.
        let interval = match self.options.compaction_interval {
            d if d.is_zero() => Duration::from_secs(100 * 365 * 24 * 3600),
            d => d,
        };
        let mut next_auto = Instant::now() + interval;
        // The revision that was current at the previous automatic compaction tick; none before
        // the first tick, which only records it (upstream does not compact on bootstrap).
        let mut revision_one_interval_ago = 0;
        loop {
            // Block for the next request unless a compaction has chunks left to do.
            let first = if self.compaction.is_some() {
                match self.queue.try_recv() {
                    Ok(request) => Some(request),
                    Err(std_mpsc::TryRecvError::Empty) => None,
                    Err(std_mpsc::TryRecvError::Disconnected) => break,
                }
            } else {
                match self
                    .queue
                    .recv_timeout(next_auto.saturating_duration_since(Instant::now()))
                {
                    Ok(request) => Some(request),
                    Err(std_mpsc::RecvTimeoutError::Timeout) => None,
                    Err(std_mpsc::RecvTimeoutError::Disconnected) => break,
                }
            };
            let mut batch = Vec::new();
            let mut next = first;
            while let Some(request) = next {
                match request {
                    Request::Write { op, reply } => batch.push((op, reply)),
                    Request::Compact { revision, reply } => self.queue_compaction(revision, reply),
                }
                next = if batch.len() < self.options.max_batch {
                    self.queue.try_recv().ok()
                } else {
                    None
                };
            }
            if !batch.is_empty() {
                self.commit_batch(batch);
            }
            if Instant::now() >= next_auto {
                let current = self.next_revision - 1;
                let target = revision_one_interval_ago.min(current - self.options.keep_revisions);
                if target > 0 && self.compaction.is_none() {
                    self.start_compaction(target);
                }
                revision_one_interval_ago = current;
                next_auto = Instant::now() + interval;
            }
            if self.compaction.is_some() {
                self.compact_chunk();
            }
        }
    }

    fn compacted_revision(&self) -> Result<i64, KvError> {
        Ok(snapshot(&self.conn)?.1)
    }

    fn queue_compaction(&mut self, revision: i64, reply: oneshot::Sender<Result<(), KvError>>) {
        let current = self.next_revision - 1;
        let compacted = match self.compacted_revision() {
            Ok(c) => c,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let pending = self.compaction.as_ref().map_or(compacted, |c| c.target);
        if revision > current {
            let _ = reply.send(Err(KvError::FutureRevision {
                requested: revision,
                current,
            }));
        } else if revision <= compacted {
            let _ = reply.send(Err(KvError::Compacted {
                requested: revision,
                compact_revision: compacted,
            }));
        } else {
            let compaction = self.compaction.get_or_insert(Compaction {
                target: pending,
                replies: Vec::new(),
            });
            compaction.target = compaction.target.max(revision);
            compaction.replies.push(reply);
        }
    }

    fn start_compaction(&mut self, target: i64) {
        if let Ok(compacted) = self.compacted_revision()
            && target > compacted
        {
            self.compaction = Some(Compaction {
                target,
                replies: Vec::new(),
            });
        }
    }

    /// Compacts up to one chunk of revisions; answers the waiters when the target is reached.
    fn compact_chunk(&mut self) {
        let Some(target) = self.compaction.as_ref().map(|c| c.target) else {
            return;
        };
        let result = (|| -> Result<bool, KvError> {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(backend)?;
            let (_, from) = snapshot(&tx)?;
            let to = target.min(from + COMPACTION_CHUNK);
            if to > from {
                // A row is superseded at `to` when a newer row of its key is at or below `to`:
                // every such newer row names it in `prev_revision`.
                tx.execute(
                    "DELETE FROM kv WHERE id IN \
                     (SELECT prev_revision FROM kv WHERE id > ?1 AND id <= ?2 AND prev_revision > 0)",
                    params![from, to],
                )
                .map_err(backend)?;
                // A tombstone at or below `to` is needed by no read at `to` or later.
                tx.execute(
                    "DELETE FROM kv WHERE deleted = 1 AND id > ?1 AND id <= ?2",
                    params![from, to],
                )
                .map_err(backend)?;
                tx.execute(
                    "UPDATE meta SET value = ?1 WHERE name = 'compact_revision'",
                    params![to],
                )
                .map_err(backend)?;
            }
            tx.commit().map_err(backend)?;
            Ok(to >= target)
        })();
        match result {
            Ok(false) => {}
            Ok(true) => {
                if let Some(done) = self.compaction.take() {
                    tracing::debug!(revision = target, "compacted SQLite history");
                    for reply in done.replies {
                        let _ = reply.send(Ok(()));
                    }
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "SQLite compaction failed");
                if let Some(failed) = self.compaction.take() {
                    for reply in failed.replies {
                        let _ = reply.send(Err(err.clone()));
                    }
                }
            }
        }
    }

    /// Runs every write of `batch` in one transaction, commits once, then answers and publishes.
    fn commit_batch(&mut self, batch: Vec<(Op, WriteReply)>) {
        let first_revision = self.next_revision;
        let mut next_revision = first_revision;
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut events = Vec::new();
        let result = (|| -> Result<(), KvError> {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(backend)?;
            for (op, _) in &batch {
                let outcome = apply(&tx, op, next_revision, &mut events)?;
                if let TxnOutcome::Succeeded { .. } = outcome {
                    next_revision += 1;
                }
                outcomes.push(outcome);
            }
            tx.commit().map_err(backend)
        })();
        match result {
            Ok(()) => {
                self.next_revision = next_revision;
                let last = next_revision - 1;
                self.shared.revision.store(last, Ordering::Release);
                if events.is_empty() {
                    self.fanout.sent.store(last, Ordering::Release);
                } else {
                    self.fanout.send(Commit {
                        revision: last,
                        events,
                    });
                }
                for ((_, reply), outcome) in batch.into_iter().zip(outcomes) {
                    let _ = reply.send(Ok(outcome));
                }
            }
            Err(err) => {
                // The transaction rolled back (dropping it does), so no revision was used.
                tracing::error!(error = %err, "SQLite write transaction failed");
                for (_, reply) in batch {
                    let _ = reply.send(Err(err.clone()));
                }
            }
        }
    }
}

/// Applies one write inside the batch transaction at `revision` (used only if it succeeds).
fn apply(
    conn: &Connection,
    op: &Op,
    revision: i64,
    events: &mut Vec<KvEvent>,
) -> Result<TxnOutcome, KvError> {
    let key = match op {
        Op::Create { key, .. } | Op::Update { key, .. } | Op::Delete { key, .. } => key,
    };
    let latest = latest_row(conn, key)?;
    let prev_revision = latest.as_ref().map_or(0, |row| row.id);
    let current = latest.and_then(|row| row.into_kv(key));
    let insert = |create_revision: i64, deleted: bool, value: &[u8]| {
        conn.prepare_cached(
            "INSERT INTO kv (id, name, create_revision, prev_revision, deleted, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .and_then(|mut stmt| stmt.execute(params![revision, key.as_bytes(), create_revision, prev_revision, deleted as i64, value]))
        .map_err(backend)
    };
    let precondition = match op {
        Op::Create { .. } => Precondition::Absent,
        Op::Update { expected, .. } => Precondition::Exists {
            mod_revision: Some(*expected),
        },
        Op::Delete { expected, .. } => Precondition::Exists {
            mod_revision: *expected,
        },
    };
    if !precondition.holds(current.as_ref()) {
        return Ok(TxnOutcome::Failed { current });
    }
    match (op, current) {
        (Op::Create { value, .. }, _) => {
            insert(revision, false, value)?;
            let kv = KeyValue {
                key: key.clone(),
                value: value.clone(),
                create_revision: revision,
                mod_revision: revision,
            };
            events.push(KvEvent::Put { kv, prev: None });
            Ok(TxnOutcome::Succeeded {
                revision,
                prev: None,
            })
        }
        (Op::Update { value, .. }, Some(prev)) => {
            insert(prev.create_revision, false, value)?;
            let kv = KeyValue {
                key: key.clone(),
                value: value.clone(),
                create_revision: prev.create_revision,
                mod_revision: revision,
            };
            events.push(KvEvent::Put {
                kv,
                prev: Some(prev.clone()),
            });
            Ok(TxnOutcome::Succeeded {
                revision,
                prev: Some(prev),
            })
        }
        (Op::Delete { .. }, Some(prev)) => {
            insert(prev.create_revision, true, &[])?;
            events.push(KvEvent::Delete {
                key: key.clone(),
                mod_revision: revision,
                prev: Some(prev.clone()),
            });
            Ok(TxnOutcome::Succeeded {
                revision,
                prev: Some(prev),
            })
        }
        // The precondition holds only for a present key.
        (Op::Update { .. } | Op::Delete { .. }, None) => Ok(TxnOutcome::Failed { current: None }),
    }
}

/// One history page for a watch: the events after `after` for keys in `[start, end)`, and the
/// revision the page is complete up to.
fn history_page(
    conn: &Connection,
    start: &str,
    end: &str,
    after: i64,
) -> Result<(Vec<KvEvent>, i64), KvError> {
    let (current, compacted) = snapshot(conn)?;
    if after < compacted {
        return Err(KvError::Compacted {
            requested: after,
            compact_revision: compacted,
        });
    }
    let upper = if end.is_empty() {
        ""
    } else {
        "AND k.name < ?3"
    };
    let sql = format!(
        "SELECT k.id, k.name, k.create_revision, k.deleted, k.value, p.id, p.create_revision, p.deleted, p.value \
         FROM kv k LEFT JOIN kv p ON p.id = k.prev_revision \
         WHERE k.id > ?1 AND k.id <= ?4 AND k.name >= ?2 {upper} ORDER BY k.id LIMIT ?5"
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(backend)?;
    let mut rows = stmt
        .query(params![
            after,
            start.as_bytes(),
            end.as_bytes(),
            current,
            REPLAY_PAGE
        ])
        .map_err(backend)?;
    let mut events = Vec::new();
    while let Some(row) = rows.next().map_err(backend)? {
        let id: i64 = row.get(0).map_err(backend)?;
        let key = key_string(row.get(1).map_err(backend)?)?;
        let create_revision: i64 = row.get(2).map_err(backend)?;
        let deleted = row.get::<_, i64>(3).map_err(backend)? != 0;
        let value: Vec<u8> = row.get(4).map_err(backend)?;
        let prev_id: Option<i64> = row.get(5).map_err(backend)?;
        let prev = match prev_id {
            Some(prev_id) if row.get::<_, Option<i64>>(7).map_err(backend)? == Some(0) => {
                Some(KeyValue {
                    key: key.clone(),
                    value: Bytes::from(row.get::<_, Vec<u8>>(8).map_err(backend)?),
                    create_revision: row.get(6).map_err(backend)?,
                    mod_revision: prev_id,
                })
            }
            _ => None,
        };
        events.push(if deleted {
            KvEvent::Delete {
                key,
                mod_revision: id,
                prev,
            }
        } else {
            KvEvent::Put {
                kv: KeyValue {
                    key,
                    value: Bytes::from(value),
                    create_revision,
                    mod_revision: id,
                },
                prev,
            }
        });
    }
    let complete_to = if (events.len() as i64) < REPLAY_PAGE {
        current
    } else {
        events.last().map_or(current, KvEvent::revision)
    };
    Ok((events, complete_to))
}

/// One watch's task: history from SQLite, then live batches from the broadcast.
struct Watch {
    shared: Arc<Shared>,
    fanout: Arc<Fanout>,
    /// Changes when someone asks every watch for a progress notification.
    progress_wanted: watch::Receiver<u64>,
    prefix: String,
    end: String,
    /// Every event for the prefix up to `last` has been sent.
    last: i64,
    /// The revision of the last event or progress notification sent.
    last_sent: i64,
    tx: mpsc::Sender<Result<KvEvent, KvError>>,
}

impl Watch {
    /// `replay_first` is false when the watch starts at the newest revision, which needs no
    /// history; after a lag the history is always read.
    async fn run(mut self, mut live: broadcast::Receiver<Arc<Commit>>, mut replay_first: bool) {
        loop {
            if replay_first && self.replay().await.is_err() {
                return;
            }
            replay_first = true;
            // Vouch for the revision the replay caught up to, even if nothing under the prefix
            // changed: a cache waiting for that revision learns it has it.
            if self.send_progress().await.is_err() {
                return;
            }
            // Live: serve batches until the receiver lags (then read history again) or ends.
            loop {
                let received = tokio::select! {
                    _ = self.tx.closed() => return,
                    received = live.recv() => received,
                    wanted = self.progress_wanted.changed() => {
                        if wanted.is_err() {
                            return;
                        }
                        match self.vouch(&mut live).await {
                            Ok(true) => continue,
                            Ok(false) => break,
                            Err(()) => return,
                        }
                    }
                };
                match received {
                    Ok(commit) => {
                        if self.deliver(&commit).await.is_err() {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => break,
                    Err(broadcast::error::RecvError::Closed) => return,
                }
                if live.is_empty() && self.send_progress().await.is_err() {
                    return;
                }
            }
        }
    }

    /// Sends history after `last` from SQLite until it has caught up with the file.
    async fn replay(&mut self) -> Result<(), ()> {
        loop {
            let (start, end, after) = (self.prefix.clone(), self.end.clone(), self.last);
            let page = self
                .shared
                .read(move |conn| history_page(conn, &start, &end, after))
                .await;
            let (events, complete_to) = match page {
                Ok(page) => page,
                Err(err) => {
                    let _ = self.tx.send(Err(err)).await;
                    return Err(());
                }
            };
            let full = events.len() as i64 >= REPLAY_PAGE;
            for event in events {
                self.last_sent = event.revision();
                self.tx.send(Ok(event)).await.map_err(|_| ())?;
            }
            self.last = self.last.max(complete_to);
            if !full {
                return Ok(());
            }
        }
    }

    /// Answers a progress request: takes every batch already sent to this watch's channel, then
    /// vouches for the last revision fanned out when the request came (a batch being sent at
    /// that moment is waited for, since the reader may already know its revision). `Ok(false)`
    /// when the watch lagged and must read history.
    async fn vouch(&mut self, live: &mut broadcast::Receiver<Arc<Commit>>) -> Result<bool, ()> {
        let published = self.shared.revision.load(Ordering::Acquire);
        let mut sent = self.fanout.sent.load(Ordering::Acquire);
        // The writer sends right after it publishes; this waits only across those few steps.
        while sent < published {
            tokio::task::yield_now().await;
            sent = self.fanout.sent.load(Ordering::Acquire);
        }
        loop {
            match live.try_recv() {
                Ok(commit) => self.deliver(&commit).await?,
                Err(broadcast::error::TryRecvError::Empty) => break,
                Err(broadcast::error::TryRecvError::Lagged(_)) => return Ok(false),
                Err(broadcast::error::TryRecvError::Closed) => return Err(()),
            }
        }
        // Every batch up to `sent` that touched this watch's resource is delivered now.
        self.last = self.last.max(sent);
        self.send_progress().await?;
        Ok(true)
    }

    /// Vouches for `last` when nothing sent yet has: a progress notification at it.
    async fn send_progress(&mut self) -> Result<(), ()> {
        if self.last > self.last_sent {
            self.tx
                .send(Ok(KvEvent::Progress {
                    revision: self.last,
                }))
                .await
                .map_err(|_| ())?;
            self.last_sent = self.last;
        }
        Ok(())
    }

    async fn deliver(&mut self, commit: &Commit) -> Result<(), ()> {
        if commit.revision <= self.last {
            return Ok(());
        }
        for event in &commit.events {
            let Some(key) = event.key() else { continue };
            if event.revision() > self.last && key.starts_with(&self.prefix) {
                self.last_sent = event.revision();
                self.tx.send(Ok(event.clone())).await.map_err(|_| ())?;
            }
        }
        self.last = commit.revision;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &tempfile::TempDir) -> Arc<SqliteKv> {
        SqliteKv::open(&dir.path().join("state.db")).expect("open")
    }

    fn succeeded(outcome: TxnOutcome) -> i64 {
        match outcome {
            TxnOutcome::Succeeded { revision, .. } => revision,
            TxnOutcome::Failed { current } => panic!("write failed, current {current:?}"),
        }
    }

    #[tokio::test]
    async fn compare_rules_follow_etcd() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kv = open(&dir);
        let r1 = succeeded(
            kv.create("/a", Bytes::from_static(b"1"))
                .await
                .expect("create"),
        );
        assert_eq!(r1, 1);
        // A second create fails and reports the current value without using a revision.
        match kv
            .create("/a", Bytes::from_static(b"x"))
            .await
            .expect("create")
        {
            TxnOutcome::Failed { current: Some(cur) } => assert_eq!(cur.mod_revision, 1),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            kv.update("/a", Bytes::from_static(b"2"), 7).await,
            Ok(TxnOutcome::Failed { .. })
        ));
        let r2 = succeeded(
            kv.update("/a", Bytes::from_static(b"2"), r1)
                .await
                .expect("update"),
        );
        assert_eq!(r2, 2);
        let (got, rev) = kv.get("/a").await.expect("get");
        let got = got.expect("present");
        assert_eq!((got.create_revision, got.mod_revision, rev), (1, 2, 2));
        assert!(matches!(
            kv.delete("/a", Some(1)).await,
            Ok(TxnOutcome::Failed { current: Some(_) })
        ));
        match kv.delete("/a", None).await.expect("delete") {
            TxnOutcome::Succeeded {
                revision,
                prev: Some(prev),
            } => {
                assert_eq!((revision, prev.value.as_ref()), (3, b"2".as_ref()));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            kv.delete("/a", None).await,
            Ok(TxnOutcome::Failed { current: None })
        ));
        // Re-creating starts a new create revision.
        let r4 = succeeded(
            kv.create("/a", Bytes::from_static(b"3"))
                .await
                .expect("create"),
        );
        let (got, _) = kv.get("/a").await.expect("get");
        assert_eq!(got.map(|g| g.create_revision), Some(r4));
        assert_eq!(kv.current_revision().await.expect("rev"), 4);
    }

    #[tokio::test]
    async fn reopen_keeps_every_committed_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kv = open(&dir);
        for i in 0..20 {
            kv.create(&format!("/k/{i:02}"), Bytes::from(format!("v{i}")))
                .await
                .expect("create");
        }
        kv.delete("/k/05", None).await.expect("delete");
        drop(kv);
        let kv = open(&dir);
        assert_eq!(kv.current_revision().await.expect("rev"), 21);
        let listed = kv
            .range("/k/", &prefix_end("/k/"), 0, 0)
            .await
            .expect("range");
        assert_eq!(listed.kvs.len(), 19);
        assert_eq!(listed.revision, 21);
        // New writes continue the revision sequence.
        assert_eq!(
            succeeded(kv.create("/k/new", Bytes::new()).await.expect("create")),
            22
        );
    }

    #[tokio::test]
    async fn range_reads_history_and_paginates() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kv = open(&dir);
        let end = prefix_end("/p/");
        for name in ["c", "a", "b"] {
            kv.create(&format!("/p/{name}"), Bytes::from(name))
                .await
                .expect("create");
        }
        kv.create("/q/outside", Bytes::new()).await.expect("create");
        let at3 = kv.range("/p/", &end, 0, 0).await.expect("range").revision;
        assert_eq!(at3, 4);
        kv.update("/p/a", Bytes::from_static(b"a2"), 2)
            .await
            .expect("update");
        kv.delete("/p/b", None).await.expect("delete");

        let old = kv.range("/p/", &end, 3, 0).await.expect("range at 3");
        let keys: Vec<_> = old.kvs.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(keys, ["/p/a", "/p/b", "/p/c"]);
        assert_eq!(old.kvs[0].value.as_ref(), b"a");
        assert_eq!(old.revision, 3);

        let now = kv.range("/p/", &end, 0, 1).await.expect("range now");
        assert_eq!((now.kvs.len(), now.more, now.count), (1, true, 2));
        assert_eq!(now.kvs[0].value.as_ref(), b"a2");
        let next = kv
            .range("/p/a\0", &end, now.revision, 1)
            .await
            .expect("next page");
        assert_eq!(next.kvs[0].key, "/p/c");
        assert!(!next.more);

        assert!(matches!(
            kv.range("/p/", &end, 99, 0).await,
            Err(KvError::FutureRevision { .. })
        ));
    }

    #[tokio::test]
    async fn compaction_removes_old_revisions_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kv = open(&dir);
        let end = prefix_end("/c/");
        kv.create("/c/a", Bytes::from_static(b"1"))
            .await
            .expect("create"); // 1
        kv.update("/c/a", Bytes::from_static(b"2"), 1)
            .await
            .expect("update"); // 2
        kv.create("/c/b", Bytes::from_static(b"x"))
            .await
            .expect("create"); // 3
        kv.delete("/c/b", None).await.expect("delete"); // 4
        kv.update("/c/a", Bytes::from_static(b"3"), 2)
            .await
            .expect("update"); // 5
        let before = kv.range("/c/", &end, 4, 0).await.expect("range at 4");

        kv.compact(4).await.expect("compact");
        assert_eq!(kv.compacted_revision().await.expect("compacted"), 4);
        assert_eq!(
            kv.range("/c/", &end, 4, 0).await.expect("range at 4").kvs,
            before.kvs
        );
        assert!(matches!(
            kv.range("/c/", &end, 3, 0).await,
            Err(KvError::Compacted {
                compact_revision: 4,
                ..
            })
        ));
        assert!(matches!(
            kv.compact(2).await,
            Err(KvError::Compacted { .. })
        ));
        assert!(matches!(
            kv.watch("/c/", 3).await,
            Err(KvError::Compacted { .. })
        ));
        // History after the compacted revision still replays, with the previous value.
        let mut events = kv.watch("/c/", 4).await.expect("watch");
        match events.recv().await {
            Some(Ok(KvEvent::Put {
                kv: put,
                prev: Some(prev),
            })) => {
                assert_eq!(
                    (put.mod_revision, prev.mod_revision, prev.value.as_ref()),
                    (5, 2, b"2".as_ref())
                );
            }
            other => panic!("{other:?}"),
        }
        // Only the rows needed at revision 4 and later remain.
        let rows: i64 = kv
            .shared
            .read(|c| {
                c.query_row("SELECT COUNT(*) FROM kv", [], |r| r.get(0))
                    .map_err(backend)
            })
            .await
            .expect("count");
        assert_eq!(rows, 2);
    }

    /// Watches that start at the newest revision skip reading history; started while another
    /// task writes as fast as it can, each must still see every later write, in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn watches_from_the_newest_revision_miss_nothing_under_concurrent_writes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kv = open(&dir);
        const WRITES: i64 = 400;
        let writer = {
            let kv = kv.clone();
            tokio::spawn(async move {
                for i in 0..WRITES {
                    kv.create(&format!("/r/{i:04}"), Bytes::new())
                        .await
                        .map(succeeded)
                        .expect("create");
                }
            })
        };
        let mut watches = Vec::new();
        while !writer.is_finished() && watches.len() < 100 {
            let from = kv.current_revision().await.expect("revision");
            watches.push((from, kv.watch("/r/", from).await.expect("watch")));
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
        writer.await.expect("writer");
        assert!(watches.len() > 1, "no watch started during the writes");
        for (from, mut events) in watches {
            let mut next = from + 1;
            while next <= WRITES {
                let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
                    .await
                    .unwrap_or_else(|_| panic!("watch from {from} never saw revision {next}"));
                match event.expect("open") {
                    Ok(KvEvent::Put { kv: put, .. }) => {
                        assert_eq!(put.mod_revision, next, "watch from {from}");
                        next += 1;
                    }
                    Ok(KvEvent::Progress { .. }) => {}
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    #[tokio::test]
    async fn watch_replays_history_then_goes_live_without_gaps() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kv = open(&dir);
        for i in 0..1200 {
            kv.create(&format!("/w/{i:04}"), Bytes::new())
                .await
                .map(succeeded)
                .expect("create");
        }
        let mut events = kv.watch("/w/", 100).await.expect("watch");
        let writer = {
            let kv = kv.clone();
            tokio::spawn(async move {
                for i in 0..50 {
                    kv.create(&format!("/w/live{i}"), Bytes::new())
                        .await
                        .expect("create");
                    kv.create(&format!("/other/{i}"), Bytes::new())
                        .await
                        .expect("create");
                }
            })
        };
        // History after 100, then the live writes under the prefix; the writes under another
        // prefix in between are not events of this watch.
        let expected: Vec<i64> = (101..=1200).chain((0..50).map(|i| 1201 + 2 * i)).collect();
        let mut seen = Vec::new();
        while seen.len() < expected.len() {
            match events.recv().await.expect("open") {
                Ok(KvEvent::Put { kv: put, .. }) => seen.push(put.mod_revision),
                Ok(KvEvent::Progress { revision }) => {
                    assert!(
                        revision >= seen.last().copied().unwrap_or(100),
                        "progress never goes back"
                    );
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(seen, expected);
        writer.await.expect("writer");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_resource_watch_hears_its_resource_and_vouches_for_the_rest_when_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kv = open(&dir);
        let start = kv.current_revision().await.expect("revision");
        let mut pods = kv.watch("/registry/pods/", start).await.expect("watch");
        let mut all = kv.watch("/registry/", start).await.expect("watch");
        let pod = kv
            .create("/registry/pods/ns/a", Bytes::new())
            .await
            .map(succeeded)
            .expect("create");
        for i in 0..5 {
            kv.create(&format!("/registry/configmaps/ns/{i}"), Bytes::new())
                .await
                .map(succeeded)
                .expect("create");
        }
        let last = kv.current_revision().await.expect("revision");
        async fn next(rx: &mut mpsc::Receiver<Result<KvEvent, KvError>>) -> KvEvent {
            let event = tokio::time::timeout(Duration::from_secs(10), rx.recv());
            event.await.expect("in time").expect("open").expect("event")
        }
        // The pods watch gets its pod, then at most a progress at the pod's own revision: the
        // ConfigMaps' batches never reach it.
        match next(&mut pods).await {
            KvEvent::Put { kv: put, .. } => assert_eq!(put.mod_revision, pod),
            other => panic!("{other:?}"),
        }
        // Asked, it vouches for everything written since.
        kv.request_progress();
        loop {
            match next(&mut pods).await {
                KvEvent::Progress { revision } if revision == last => break,
                KvEvent::Progress { revision } => assert!(revision < last, "{revision}"),
                other => panic!("a ConfigMap reached the pods watch: {other:?}"),
            }
        }
        // A watch spanning resources hears every batch.
        let mut puts = Vec::new();
        while puts.len() < 6 {
            if let KvEvent::Put { kv: put, .. } = next(&mut all).await {
                puts.push(put.key);
            }
        }
        assert_eq!(puts[0], "/registry/pods/ns/a");
        assert_eq!(puts[5], "/registry/configmaps/ns/4");
    }

    #[test]
    fn resources_are_the_first_three_segments() {
        assert_eq!(resource_of("/registry/pods/ns/a"), Some("/registry/pods/"));
        assert_eq!(resource_of("/registry/pods/"), Some("/registry/pods/"));
        assert_eq!(resource_of("/registry/pods"), None);
        assert_eq!(resource_of("/w/0001"), None);
    }

    /// Writes keys in a child process, printing each key once its write is acknowledged, until
    /// the parent kills it with SIGKILL. Run only by `survives_kill_9`.
    #[test]
    #[ignore = "child process of survives_kill_9"]
    fn kill_9_child() {
        let Some(path) = std::env::var_os("IRONPLANE_KILL9_DB") else {
            return;
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let kv = SqliteKv::open(Path::new(&path)).expect("open");
            let mut i = 0u64;
            loop {
                let batch: Vec<_> = (0..8)
                    .map(|j| {
                        let kv = kv.clone();
                        let key = format!("/crash/{i}-{j}");
                        tokio::spawn(async move {
                            kv.create(&key, Bytes::from_static(b"v")).await.map(|_| key)
                        })
                    })
                    .collect();
                for task in batch {
                    if let Ok(Ok(key)) = task.await {
                        println!("{key}");
                    }
                }
                i += 1;
            }
        });
    }

    #[test]
    fn survives_kill_9() {
        use std::io::{BufRead, BufReader};
        use std::process::{Command, Stdio};
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("crash.db");
        let exe = std::env::current_exe().expect("test binary");
        let mut child = Command::new(exe)
            .args([
                "--ignored",
                "--exact",
                "sqlite::tests::kill_9_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("IRONPLANE_KILL9_DB", &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("stdout");
        let mut acknowledged = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let line = line.expect("line");
            if line.starts_with("/crash/") {
                acknowledged.push(line);
            }
            if acknowledged.len() >= 300 {
                break;
            }
        }
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        assert!(
            acknowledged.len() >= 300,
            "child acknowledged only {} writes",
            acknowledged.len()
        );

        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let kv = SqliteKv::open(&path).expect("reopen");
            for key in &acknowledged {
                assert!(kv.get(key).await.expect("get").0.is_some(), "{key} lost");
            }
        });
    }
}
