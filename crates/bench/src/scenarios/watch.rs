//! The `watch` scenario: many watchers on the ConfigMaps of one namespace while a paced writer
//! updates them.
//!
//! It owns the delivery check: every watcher starts from the same resourceVersion (that of a
//! consistent LIST), every write's resourceVersion and the instant of its 2xx are recorded, and
//! each watch event is matched to its write by resourceVersion. The latency is from the write's
//! 2xx to the event's arrival; an event that arrives before the writer has read its 2xx counts as
//! 0 (and is counted in `events_before_2xx`). A watcher that misses a write counts it as lost:
//! the figure must be 0. Watchers share a few HTTP/2 connections (one stream each), never one
//! connection each. It must not re-watch from anything but the last resourceVersion it saw, so a
//! re-established watch neither skips nor repeats events.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use http::Method;
use http_body_util::BodyExt;
use serde::Deserialize;

use super::{
    ClientConfig, CommonOptions, MAX_CONNECTIONS, MAX_DURATION, MAX_RATE, MAX_WATCHERS, Meter,
    ObjectSpec, SET_LABEL, Tally, Workspace, check_common, check_duration, check_range,
    configmap_body, encode_query, resource_version,
};
use crate::client::ApiClient;
use crate::error::BenchError;
use crate::progress::{Counters, Progress, note};
use crate::protobuf::{Field, bytes_field, envelope_object, field};
use crate::report::{Row, ScenarioResult};
use crate::stats::{AtomicHistogram, Histogram};

/// The most events one run may expect (watchers × writes): the tool keeps a few bytes per early
/// event, and this bounds that memory.
pub const MAX_EXPECTED_EVENTS: u64 = 50_000_000;
/// How often one watcher may re-establish its watch after the server closed it.
const MAX_REWATCHES: u32 = 100;
const WRITE_SHARDS: usize = 64;

#[derive(Clone, Debug)]
pub struct WatchOptions {
    /// Concurrent watchers.
    pub watchers: usize,
    /// Writes per second.
    pub rate: u32,
    /// How long the writer writes.
    pub duration: Duration,
    /// ConfigMaps the writer updates in turn.
    pub objects: u64,
    /// Concurrent writer tasks (the pace is set by `rate`; more writers let it hold at high
    /// rates).
    pub writers: usize,
    /// Watch streams per HTTP/2 connection: connections = max(--connections,
    /// watchers / this). Servers limit concurrent streams per connection (kube-apiserver to
    /// 100), and the writers share the first connections with the watches.
    pub streams_per_connection: usize,
    /// How long to wait after the last write for the last events.
    pub grace: Duration,
    /// Watch in protobuf (`application/vnd.kubernetes.protobuf`), as client-go's informers of
    /// built-in kinds do, instead of JSON.
    pub protobuf: bool,
    pub common: CommonOptions,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            watchers: 100,
            rate: 50,
            duration: Duration::from_secs(10),
            objects: 10,
            writers: 4,
            streams_per_connection: 50,
            grace: Duration::from_secs(10),
            protobuf: false,
            common: CommonOptions::default(),
        }
    }
}

impl WatchOptions {
    pub fn validate(&self) -> Result<(), BenchError> {
        check_common(&self.common)?;
        check_range("watchers", self.watchers, 1, MAX_WATCHERS)?;
        check_range("rate", self.rate, 1, MAX_RATE)?;
        check_duration("duration", self.duration, MAX_DURATION)?;
        check_range("objects", self.objects, 1, 10_000)?;
        check_range("writers", self.writers, 1, 256)?;
        check_range(
            "streams per connection",
            self.streams_per_connection,
            1,
            100_000,
        )?;
        check_duration("grace", self.grace, Duration::from_secs(300))?;
        let connections = self.watchers.div_ceil(self.streams_per_connection);
        if connections > MAX_CONNECTIONS {
            return Err(BenchError::InvalidArgument(format!(
                "{} watchers at {} streams per connection need {connections} connections; at most {MAX_CONNECTIONS}",
                self.watchers, self.streams_per_connection
            )));
        }
        let expected = self.watchers as u64 * u64::from(self.rate) * self.duration.as_secs().max(1);
        if expected > MAX_EXPECTED_EVENTS {
            return Err(BenchError::InvalidArgument(format!(
                "watchers x rate x duration is {expected} events; at most {MAX_EXPECTED_EVENTS}"
            )));
        }
        Ok(())
    }
}

/// Maps a resourceVersion to a number: itself when numeric (etcd's and Ironplane's are), else a
/// hash of the string (resourceVersions are opaque to clients).
pub(super) fn rv_key(rv: &str) -> u64 {
    match rv.parse::<u64>() {
        Ok(n) => n,
        Err(_) => {
            use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
            BuildHasherDefault::<DefaultHasher>::default().hash_one(rv)
        }
    }
}

/// The write instants by resourceVersion, sharded so that thousands of watchers reading and a
/// few writers inserting do not queue on one lock.
pub(super) struct WriteLog {
    shards: Vec<RwLock<HashMap<u64, Instant>>>,
}

impl WriteLog {
    pub(super) fn new() -> WriteLog {
        WriteLog {
            shards: (0..WRITE_SHARDS)
                .map(|_| RwLock::new(HashMap::new()))
                .collect(),
        }
    }

    fn shard(&self, key: u64) -> &RwLock<HashMap<u64, Instant>> {
        &self.shards[(key % WRITE_SHARDS as u64) as usize]
    }

    pub(super) fn insert(&self, key: u64, at: Instant) {
        if let Ok(mut shard) = self.shard(key).write() {
            shard.insert(key, at);
        }
    }

    pub(super) fn get(&self, key: u64) -> Option<Instant> {
        self.shard(key).read().ok()?.get(&key).copied()
    }
}

/// What a watch event line says, as far as the tool needs.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum EventLine<'a> {
    /// ADDED, MODIFIED or DELETED, with the object's resourceVersion.
    Object(&'a str),
    Bookmark(&'a str),
    /// An ERROR event, with the Status code when it has one.
    Error(Option<u64>, String),
    Unknown,
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

/// Reads the quoted string that follows `key` in `line`, e.g. `"type":"` → `MODIFIED`.
fn quoted_after<'a>(line: &'a [u8], key: &[u8]) -> Option<&'a str> {
    let start = find(line, key)? + key.len();
    let end = start + memchr::memchr(b'"', &line[start..])?;
    std::str::from_utf8(&line[start..end]).ok()
}

/// Parses one line of a watch stream. The common case (compact JSON, as every API server writes)
/// is read without building the object: the event type is the line's first `"type":"`, and the
/// object's resourceVersion is the first `"resourceVersion":"` (a ConfigMap has no other field of
/// that name before its metadata's). Anything else falls back to a full parse.
pub(super) fn parse_event_line(line: &[u8]) -> EventLine<'_> {
    if line.starts_with(br#"{"type":""#) {
        let kind = quoted_after(line, br#"{"type":""#);
        let rv = quoted_after(line, br#""resourceVersion":""#);
        match (kind, rv) {
            (Some("ADDED" | "MODIFIED" | "DELETED"), Some(rv)) => return EventLine::Object(rv),
            (Some("BOOKMARK"), Some(rv)) => return EventLine::Bookmark(rv),
            _ => {}
        }
    }
    slow_parse(line)
}

fn slow_parse(line: &[u8]) -> EventLine<'_> {
    #[derive(Deserialize)]
    struct Meta<'a> {
        #[serde(rename = "resourceVersion", borrow, default)]
        resource_version: Option<&'a str>,
    }
    #[derive(Deserialize)]
    struct Object<'a> {
        #[serde(borrow, default)]
        metadata: Option<Meta<'a>>,
        #[serde(default)]
        code: Option<u64>,
        #[serde(default)]
        message: Option<String>,
    }
    #[derive(Deserialize)]
    struct Event<'a> {
        #[serde(rename = "type", borrow)]
        kind: &'a str,
        #[serde(borrow)]
        object: Object<'a>,
    }
    let Ok(event) = serde_json::from_slice::<Event>(line) else {
        return EventLine::Unknown;
    };
    let rv = event.object.metadata.and_then(|m| m.resource_version);
    match (event.kind, rv) {
        ("ADDED" | "MODIFIED" | "DELETED", Some(rv)) => EventLine::Object(rv),
        ("BOOKMARK", Some(rv)) => EventLine::Bookmark(rv),
        ("ERROR", _) => {
            EventLine::Error(event.object.code, event.object.message.unwrap_or_default())
        }
        _ => EventLine::Unknown,
    }
}

/// Parses one message of a protobuf watch stream (a frame without its 4-byte length): a
/// `meta/v1` `WatchEvent` whose object is an envelope (`k8s\0` and a `runtime.Unknown`). The
/// object's resourceVersion is its metadata's field 6, for every kind (and for a bookmark); an
/// ERROR's object is a `Status`, whose code is field 6 and message field 3.
pub(super) fn parse_event_message(message: &[u8]) -> EventLine<'_> {
    let event_type = bytes_field(message, 1).and_then(|t| std::str::from_utf8(t).ok());
    let object = bytes_field(message, 2)
        .and_then(|raw_extension| bytes_field(raw_extension, 1))
        .and_then(envelope_object);
    let (Some(event_type), Some(object)) = (event_type, object) else {
        return EventLine::Unknown;
    };
    let resource_version = || {
        bytes_field(object, 1)
            .and_then(|meta| bytes_field(meta, 6))
            .and_then(|rv| std::str::from_utf8(rv).ok())
    };
    match event_type {
        "ADDED" | "MODIFIED" | "DELETED" => {
            resource_version().map_or(EventLine::Unknown, EventLine::Object)
        }
        "BOOKMARK" => resource_version().map_or(EventLine::Unknown, EventLine::Bookmark),
        "ERROR" => {
            let code = match field(object, 6) {
                Some(Field::Varint(code)) => Some(code),
                _ => None,
            };
            let message = bytes_field(object, 3).map(String::from_utf8_lossy);
            EventLine::Error(code, message.unwrap_or_default().into_owned())
        }
        _ => EventLine::Unknown,
    }
}

/// Takes the complete events at the front of `buffer` (lines of JSON, or length-prefixed
/// protobuf messages) and hands each to `handle`; returns how many bytes they took.
pub(super) fn split_events(
    buffer: &[u8],
    protobuf: bool,
    mut handle: impl FnMut(&[u8], EventLine<'_>),
) -> usize {
    let mut consumed = 0;
    if protobuf {
        while let Some(header) = buffer.get(consumed..consumed + 4) {
            let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
            let Some(message) = buffer.get(consumed + 4..consumed + 4 + len) else {
                break;
            };
            consumed += 4 + len;
            handle(message, parse_event_message(message));
        }
        return consumed;
    }
    while let Some(newline) = memchr::memchr(b'\n', &buffer[consumed..]) {
        let line = &buffer[consumed..consumed + newline];
        consumed += newline + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        handle(line, parse_event_line(line));
    }
    consumed
}

/// A watch stream's bytes, read as they arrive. A DATA frame usually ends on an event's end,
/// so its events are read from the frame itself, and only a cut event's start is kept for the
/// next frame: the tool reads 200,000 events a second at 10,000 watchers, on the same cores as
/// the server it measures, and copying every frame into a buffer first was a tenth of its CPU.
#[derive(Default)]
pub(super) struct EventReader {
    /// The start of an event whose end has not arrived.
    partial: Vec<u8>,
}

impl EventReader {
    /// Forgets a cut event (a new stream starts).
    pub(super) fn reset(&mut self) {
        self.partial.clear();
    }

    /// Hands each complete event of what has arrived so far, `data` last, to `handle`.
    pub(super) fn feed(
        &mut self,
        data: &[u8],
        protobuf: bool,
        handle: impl FnMut(&[u8], EventLine<'_>),
    ) {
        if self.partial.is_empty() {
            let consumed = split_events(data, protobuf, handle);
            self.partial.extend_from_slice(&data[consumed..]);
        } else {
            self.partial.extend_from_slice(data);
            let consumed = split_events(&self.partial, protobuf, handle);
            self.partial.drain(..consumed);
        }
    }
}

/// What one watcher saw; read by the main task after the watcher stopped.
#[derive(Default)]
struct WatcherState {
    /// Events matched to a write at arrival.
    matched: AtomicU64,
    /// Keys of events that arrived before their write's 2xx was read; resolved at the end.
    pending: Mutex<Vec<u64>>,
}

struct Shared {
    client: Arc<ApiClient>,
    path: String,
    start_rv: String,
    writes: WriteLog,
    latency: AtomicHistogram,
    /// All object events received by all watchers.
    received: AtomicU64,
    established: AtomicUsize,
    failed: AtomicUsize,
    rewatches: AtomicU64,
    watch_errors: AtomicU64,
    tally: Tally,
    stop: AtomicBool,
    protobuf: bool,
}

impl Shared {
    fn watch_path(&self, rv: &str) -> String {
        format!("{}&resourceVersion={}", self.path, encode_query(rv))
    }
}

async fn watcher(shared: Arc<Shared>, index: usize, state: Arc<WatcherState>) {
    let mut rv = shared.start_rv.clone();
    let mut first = true;
    let mut reader = EventReader::default();
    for _attempt in 0..=MAX_REWATCHES {
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        let path = shared.watch_path(&rv);
        let accept = crate::protobuf::accept(shared.protobuf);
        let response = match shared
            .client
            .open_stream_accepting(index, &path, accept)
            .await
        {
            Ok(response) if response.status().is_success() => response,
            Ok(response) => {
                let status = response.status();
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map(|c| c.to_bytes())
                    .unwrap_or_default();
                let outcome = Ok(crate::client::ApiResponse { status, body });
                shared.tally.failed(&Method::GET, &path, &outcome);
                shared.watch_errors.fetch_add(1, Ordering::Relaxed);
                if first {
                    shared.failed.fetch_add(1, Ordering::Relaxed);
                }
                return;
            }
            Err(error) => {
                shared.tally.note(format!(
                    "watch: {error} (a server may allow only so many streams per HTTP/2 connection: try a lower --streams-per-connection)"
                ));
                shared.watch_errors.fetch_add(1, Ordering::Relaxed);
                if first {
                    shared.failed.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if first {
            first = false;
            shared.established.fetch_add(1, Ordering::Relaxed);
        }
        let mut body = response.into_body();
        reader.reset();
        loop {
            let frame = match body.frame().await {
                Some(Ok(frame)) => frame,
                Some(Err(error)) => {
                    if !shared.stop.load(Ordering::Relaxed) {
                        shared.tally.note(format!("watch stream broke: {error}"));
                        shared.watch_errors.fetch_add(1, Ordering::Relaxed);
                    }
                    break;
                }
                None => break,
            };
            let Some(data) = frame.data_ref() else {
                continue;
            };
            let arrived = Instant::now();
            let mut gone = false;
            reader.feed(data, shared.protobuf, |line, event| {
                if gone {
                    return;
                }
                match event {
                    EventLine::Object(event_rv) => {
                        let key = rv_key(event_rv);
                        rv.clear();
                        rv.push_str(event_rv);
                        shared.received.fetch_add(1, Ordering::Relaxed);
                        match shared.writes.get(key) {
                            Some(acked) => {
                                shared
                                    .latency
                                    .record_duration(arrived.saturating_duration_since(acked));
                                state.matched.fetch_add(1, Ordering::Relaxed);
                            }
                            None => {
                                if let Ok(mut pending) = state.pending.lock() {
                                    pending.push(key);
                                }
                            }
                        }
                    }
                    EventLine::Bookmark(event_rv) => {
                        rv.clear();
                        rv.push_str(event_rv);
                    }
                    EventLine::Error(code, message) => {
                        shared.watch_errors.fetch_add(1, Ordering::Relaxed);
                        shared.tally.note(format!(
                            "watch ERROR event {}: {message}",
                            code.unwrap_or(0)
                        ));
                        // 410 Gone: the events since `rv` are no longer available; a watcher
                        // cannot catch up without a new LIST, so it stops and its misses count
                        // as lost.
                        if code == Some(410) {
                            gone = true;
                        }
                    }
                    EventLine::Unknown => {
                        shared.watch_errors.fetch_add(1, Ordering::Relaxed);
                        shared.tally.note(format!(
                            "watch: unreadable event: {}",
                            String::from_utf8_lossy(&line[..line.len().min(120)])
                        ));
                    }
                }
            });
            if gone {
                return;
            }
        }
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        // The server ended the watch early (its own timeout, or a restart of its cache): watch
        // again from the last event seen, as client-go's reflector does.
        shared.rewatches.fetch_add(1, Ordering::Relaxed);
    }
}

pub(crate) async fn run(
    cfg: &ClientConfig,
    options: &WatchOptions,
) -> Result<ScenarioResult, BenchError> {
    let mut cfg = cfg.clone();
    cfg.connections = cfg
        .connections
        .max(options.watchers.div_ceil(options.streams_per_connection))
        .min(MAX_CONNECTIONS);
    let workspace = Workspace::open(&cfg, &options.common).await?;
    let outcome = measure(&workspace, options).await;
    workspace.close(outcome).await
}

async fn measure(
    workspace: &Workspace,
    options: &WatchOptions,
) -> Result<ScenarioResult, BenchError> {
    let client = workspace.client.clone();
    let setup_tally = Arc::new(Tally::new(client.server()));
    let value_bytes = options.common.value_bytes();
    let spec = ObjectSpec {
        name_prefix: Some("watch-".to_string()),
        generate_name: String::new(),
        count: options.objects,
        set: "watch".to_string(),
        groups: 0,
        value_bytes,
    };
    let (_, errors, _) = workspace
        .create_objects(spec, 8, false, &setup_tally)
        .await?;
    if errors > 0 {
        return Err(BenchError::Protocol(format!(
            "the objects to write could not be created: {}",
            setup_tally.samples().join("; ")
        )));
    }

    let base = workspace.configmaps_path();
    let selector = encode_query(&format!("{SET_LABEL}=watch"));
    let list_body = client
        .expect_success(
            Method::GET,
            &format!("{base}?labelSelector={selector}"),
            None,
        )
        .await?;
    let start_rv = resource_version(&list_body).ok_or_else(|| {
        BenchError::Protocol("the LIST answer has no resourceVersion".to_string())
    })?;
    // The server may end a watch at its own time limit; ask for one longer than the run.
    let timeout_seconds =
        (options.duration + options.grace + client.request_timeout()).as_secs() + 60;
    let shared = Arc::new(Shared {
        client: client.clone(),
        path: format!(
            "{base}?watch=1&allowWatchBookmarks=true&labelSelector={selector}&timeoutSeconds={timeout_seconds}"
        ),
        start_rv,
        writes: WriteLog::new(),
        latency: AtomicHistogram::new(),
        received: AtomicU64::new(0),
        established: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
        rewatches: AtomicU64::new(0),
        watch_errors: AtomicU64::new(0),
        tally: Tally::new(client.server()),
        stop: AtomicBool::new(false),
        protobuf: options.protobuf,
    });

    // Open every watch before the first write, so that each watcher must see every write.
    note(
        options.common.progress,
        &format!(
            "[watch] opening {} watches over {} connection(s){}",
            options.watchers,
            client.connections(),
            if client.http2() {
                " (HTTP/2)"
            } else {
                " (HTTP/1.1: one connection per watch)"
            }
        ),
    );
    let opening = Instant::now();
    let mut watchers = tokio::task::JoinSet::new();
    let mut states = Vec::with_capacity(options.watchers);
    for index in 0..options.watchers {
        let state = Arc::new(WatcherState::default());
        states.push(state.clone());
        watchers.spawn(watcher(shared.clone(), index, state));
    }
    let open_deadline = Instant::now() + client.request_timeout() + Duration::from_secs(5);
    loop {
        let ready =
            shared.established.load(Ordering::Relaxed) + shared.failed.load(Ordering::Relaxed);
        if ready >= options.watchers || Instant::now() >= open_deadline || shared.tally.stopped() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let established = shared.established.load(Ordering::Relaxed);
    if let Some(fatal) = shared.tally.take_fatal() {
        shared.stop.store(true, Ordering::Relaxed);
        watchers.shutdown().await;
        return Err(fatal);
    }
    if established < options.watchers {
        shared.stop.store(true, Ordering::Relaxed);
        watchers.shutdown().await;
        return Err(BenchError::Protocol(format!(
            "only {established} of {} watches could be opened: {}",
            options.watchers,
            shared.tally.samples().join("; ")
        )));
    }
    let open_seconds = opening.elapsed().as_secs_f64();

    // The write phase.
    let counters = Arc::new(Counters::default());
    let bar = Progress::start(
        options.common.progress,
        "watch",
        counters.clone(),
        None,
        Some(options.duration),
    );
    let meter = Meter::start(&options.common);
    let permits = Arc::new(tokio::sync::Semaphore::new(0));
    let sequence = Arc::new(AtomicU64::new(0));
    let acked = Arc::new(AtomicU64::new(0));
    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..options.writers {
        let shared = shared.clone();
        let permits = permits.clone();
        let sequence = sequence.clone();
        let acked = acked.clone();
        let counters = counters.clone();
        let base = base.clone();
        let objects = options.objects;
        writers.spawn(async move {
            let mut histogram = Histogram::new();
            let mut errors = 0u64;
            // The semaphore is closed when the phase ends; that ends the loop.
            while let Ok(permit) = permits.acquire().await {
                permit.forget();
                if shared.tally.stopped() {
                    break;
                }
                let n = sequence.fetch_add(1, Ordering::Relaxed);
                let name = format!("watch-{}", n % objects);
                let body = configmap_body(
                    Some(&name),
                    "",
                    "watch",
                    &[],
                    &format!("s{n}-"),
                    value_bytes,
                );
                let path = format!("{base}/{name}");
                let start = Instant::now();
                let outcome = shared
                    .client
                    .send_on(writer, Method::PUT, &path, Some(body))
                    .await;
                match &outcome {
                    Ok(r) if r.is_success() => {
                        let done = Instant::now();
                        match resource_version(&r.body) {
                            Some(rv) => {
                                shared.writes.insert(rv_key(&rv), done);
                                acked.fetch_add(1, Ordering::Relaxed);
                                histogram.record_duration(done - start);
                                counters.done.fetch_add(1, Ordering::Relaxed);
                            }
                            None => {
                                errors += 1;
                                shared
                                    .tally
                                    .note("PUT answer has no resourceVersion".to_string());
                            }
                        }
                    }
                    _ => {
                        errors += 1;
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                        shared.tally.failed(&Method::PUT, &path, &outcome);
                    }
                }
            }
            (histogram, errors)
        });
    }

    // Pace: release permits so that `rate` writes per second start, never building more than a
    // small backlog (writes the writers could not start in time are counted as skipped).
    let rate = f64::from(options.rate);
    let tick = Duration::from_secs_f64((1.0 / rate).max(0.001));
    let backlog_cap = options.writers * 2;
    let phase_start = Instant::now();
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut released = 0u64;
    let mut skipped = 0u64;
    loop {
        ticker.tick().await;
        let elapsed = phase_start.elapsed();
        if elapsed >= options.duration || shared.tally.stopped() {
            break;
        }
        let due = (elapsed.as_secs_f64() * rate).floor() as u64 + 1;
        let wanted = due.saturating_sub(released);
        let room = backlog_cap.saturating_sub(permits.available_permits()) as u64;
        let give = wanted.min(room);
        permits.add_permits(give as usize);
        skipped += wanted - give;
        released += wanted;
    }
    permits.close();
    let mut write_histogram = Histogram::new();
    let mut write_errors = 0;
    while let Some(joined) = writers.join_next().await {
        let (h, e) = joined.map_err(|e| BenchError::Protocol(format!("writer failed: {e}")))?;
        write_histogram.merge(&h);
        write_errors += e;
    }
    let write_phase = phase_start.elapsed();
    let writes = acked.load(Ordering::Relaxed);

    // Wait (bounded) until every watcher has received every acknowledged write.
    let expected = writes * options.watchers as u64;
    let grace_deadline = Instant::now() + options.grace;
    while shared.received.load(Ordering::Relaxed) < expected && Instant::now() < grace_deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    shared.stop.store(true, Ordering::Relaxed);
    watchers.shutdown().await;
    let delivery_phase = phase_start.elapsed();
    bar.finish();
    if let Some(fatal) = shared.tally.take_fatal() {
        return Err(fatal);
    }

    // Resolve the events that arrived before their write's 2xx.
    let mut delivery = shared.latency.snapshot();
    let mut delivered = 0u64;
    let mut early = 0u64;
    let mut unmatched = 0u64;
    let mut lost = 0u64;
    let mut incomplete = 0u64;
    for state in &states {
        let mut matched = state.matched.load(Ordering::Relaxed);
        let pending = state.pending.lock().map(|p| p.clone()).unwrap_or_default();
        for key in pending {
            if shared.writes.get(key).is_some() {
                matched += 1;
                early += 1;
                delivery.record(0);
            } else {
                unmatched += 1;
            }
        }
        delivered += matched;
        if matched < writes {
            lost += writes - matched;
            incomplete += 1;
        }
    }

    let mut result = ScenarioResult::new("watch", client.server(), client.http2());
    result.param("watchers", options.watchers);
    result.param("rate", options.rate);
    result.param("duration_s", options.duration.as_secs_f64());
    result.param("objects", options.objects);
    result.param("writers", options.writers);
    result.param("connections", client.connections());
    result.param("value_bytes", value_bytes);
    result.param("encoding", crate::protobuf::encoding(options.protobuf));
    let watch_errors = shared.watch_errors.load(Ordering::Relaxed);
    let mut delivery_row = Row::from_histogram("delivery", &delivery, watch_errors, delivery_phase);
    delivery_row.count = delivered;
    result.rows.push(delivery_row);
    result.rows.push(Row::from_histogram(
        "write",
        &write_histogram,
        write_errors,
        write_phase,
    ));
    result.figure("watches_open_seconds", open_seconds);
    result.figure("writes_acked", writes as f64);
    result.figure("writes_skipped", skipped as f64);
    result.figure("events_expected", expected as f64);
    result.figure("events_delivered", delivered as f64);
    result.figure("events_lost", lost as f64);
    result.figure("events_unmatched", unmatched as f64);
    result.figure("events_before_2xx", early as f64);
    result.figure("watchers_missing_events", incomplete as f64);
    result.figure("rewatches", shared.rewatches.load(Ordering::Relaxed) as f64);
    meter.finish(&mut result, writes + write_errors);
    for process in ["server", "etcd"] {
        if let Some(&cpu) = result.figures.get(&format!("{process}_cpu_seconds"))
            && delivered > 0
        {
            result.figure(
                &format!("{process}_cpu_us_per_event"),
                cpu * 1e6 / delivered as f64,
            );
        }
    }
    result.error_samples = shared.tally.samples();
    result.error_samples.extend(setup_tally.samples());
    if lost > 0 {
        result.error_samples.push(format!(
            "{lost} events lost: {incomplete} of {} watchers missed writes",
            options.watchers
        ));
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_path_reads_type_and_resource_version() {
        let line = br#"{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"watch-1","namespace":"n","uid":"u","resourceVersion":"1234","labels":{"a":"b"}},"data":{"value":"s1-xx"}}}"#;
        assert_eq!(parse_event_line(line), EventLine::Object("1234"));
        let bookmark = br#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"99","creationTimestamp":null}}}"#;
        assert_eq!(parse_event_line(bookmark), EventLine::Bookmark("99"));
    }

    #[test]
    fn slow_path_reads_spaced_json_and_errors() {
        let spaced = br#"{ "type": "ADDED", "object": {"metadata": {"resourceVersion": "7"}}}"#;
        assert_eq!(parse_event_line(spaced), EventLine::Object("7"));
        let error = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}"#;
        assert_eq!(
            parse_event_line(error),
            EventLine::Error(Some(410), "too old resource version: 1 (5)".to_string())
        );
        assert_eq!(parse_event_line(b"not json"), EventLine::Unknown);
    }

    /// Events as the server's own encoder writes them in protobuf, framed as a watch stream,
    /// split and read back: type and resourceVersion of objects and bookmarks, an ERROR's code
    /// and message, and a message cut short is waited for.
    #[test]
    fn protobuf_events_are_split_and_read() {
        let configmap = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "watch-1", "namespace": "n", "uid": "u",
                "resourceVersion": "1234", "labels": {"a": "b"}},
            "data": {"value": "s1-xx"},
        });
        let bookmark = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"resourceVersion": "99"},
        });
        let status = serde_json::json!({
            "apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
            "message": "too old resource version: 1 (5)", "reason": "Expired", "code": 410,
        });
        let mut stream = Vec::new();
        for (event_type, object) in [
            ("MODIFIED", &configmap),
            ("BOOKMARK", &bookmark),
            ("ERROR", &status),
        ] {
            stream.extend(ironplane_protobuf::encode_watch_event(event_type, object).unwrap());
        }
        let mut seen = Vec::new();
        let mut record = |_: &[u8], event: EventLine<'_>| seen.push(format!("{event:?}"));
        let whole = split_events(&stream, true, &mut record);
        assert_eq!(whole, stream.len());
        assert_eq!(
            seen,
            [
                "Object(\"1234\")",
                "Bookmark(\"99\")",
                "Error(Some(410), \"too old resource version: 1 (5)\")",
            ]
        );
        // A message whose end has not arrived is left in the buffer.
        seen.clear();
        let cut = stream.len() - 3;
        let mut record = |_: &[u8], event: EventLine<'_>| seen.push(format!("{event:?}"));
        let taken = split_events(&stream[..cut], true, &mut record);
        assert_eq!(seen.len(), 2);
        assert!(taken < cut);
        assert_eq!(parse_event_message(b"\x0a\x05ADDED"), EventLine::Unknown);
        assert_eq!(parse_event_message(b"\xff"), EventLine::Unknown);
    }

    /// A stream cut at every byte boundary: each event is handed over once, whole and in order,
    /// whether it arrived in one frame, across two, or inside a frame holding several.
    #[test]
    fn the_reader_hands_over_each_event_once_however_the_stream_is_cut() {
        let events: Vec<String> = (1..=4)
            .map(|i| {
                format!(
                    r#"{{"type":"MODIFIED","object":{{"kind":"ConfigMap","metadata":{{"name":"w","resourceVersion":"{i}"}}}}}}"#
                )
            })
            .collect();
        let stream = format!("{}\n\n", events.join("\n"));
        let stream = stream.as_bytes();
        let want = [
            "Object(\"1\")",
            "Object(\"2\")",
            "Object(\"3\")",
            "Object(\"4\")",
        ];
        for first in 0..=stream.len() {
            for second in first..=stream.len() {
                let mut reader = EventReader::default();
                let mut seen = Vec::new();
                for part in [&stream[..first], &stream[first..second], &stream[second..]] {
                    reader.feed(part, false, |line, event| {
                        assert!(line.starts_with(b"{") && line.ends_with(b"}"));
                        seen.push(format!("{event:?}"));
                    });
                }
                assert_eq!(seen, want, "cut at {first} and {second}");
                assert!(reader.partial.is_empty());
            }
        }
        // What is left of a cut event is dropped with `reset`, as when a stream ends.
        let mut reader = EventReader::default();
        reader.feed(&stream[..10], false, |_, _| panic!("no event is complete"));
        reader.reset();
        let mut seen = 0;
        reader.feed(stream, false, |_, _| seen += 1);
        assert_eq!(seen, 4);
        // Length-prefixed protobuf messages, as the server's own encoder frames them, cut at
        // every byte.
        let mut stream = Vec::new();
        for rv in ["1", "2", "3"] {
            let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "w", "namespace": "n", "resourceVersion": rv}});
            stream.extend(ironplane_protobuf::encode_watch_event("ADDED", &object).unwrap());
        }
        for cut in 0..=stream.len() {
            let mut reader = EventReader::default();
            let mut seen = Vec::new();
            for part in [&stream[..cut], &stream[cut..]] {
                reader.feed(part, true, |_, event| seen.push(format!("{event:?}")));
            }
            assert_eq!(seen, want[..3], "cut at {cut}");
            assert!(reader.partial.is_empty());
        }
    }

    #[test]
    fn resource_version_keys() {
        assert_eq!(rv_key("42"), 42);
        assert_eq!(rv_key("abc"), rv_key("abc"));
        assert_ne!(rv_key("abc"), rv_key("abd"));
    }

    #[test]
    fn limits() {
        let too_many = WatchOptions {
            watchers: 20_000,
            streams_per_connection: 1,
            ..Default::default()
        };
        assert!(too_many.validate().is_err());
        let too_much = WatchOptions {
            watchers: 20_000,
            rate: 10_000,
            duration: Duration::from_secs(600),
            ..Default::default()
        };
        assert!(too_much.validate().is_err());
        assert!(WatchOptions::default().validate().is_ok());
    }
}
