//! The storage conformance suite (upstream: `pkg/storage/testing/store_tests.go`): every behaviour
//! the registry relies on, written once and run against every `Store` implementation: `KvStore`
//! and the `Cacher` wrapping it, each on SQLite and on a real etcd (started per test). A new
//! backend adds one fixture and its lines in the macro at the bottom.
//!
//! Behaviours specific to one implementation (SQLite durability, compaction, the cacher's slow
//! watchers) are tested next to that implementation, or at the end of this file.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::errors::{LIST_EXPIRED, WATCH_EXPIRED};
use crate::{
    Cacher, CacherOptions, GetOptions, Kv, KvStore, ListOptions, ListResult, Object,
    ResourceVersion, ResourceVersionMatch, SqliteKv, StorageError, Store, WatchEvent, WatchOptions,
    WatchStream, default_attrs,
};

const PREFIX: &str = "/registry/things/";
/// The cacher's window in tests: small, so that the suite can push versions out of it.
const TEST_WINDOW: usize = 32;

struct Fixture {
    store: Arc<dyn Store>,
    kv: Arc<dyn Kv>,
    cacher: Option<Arc<Cacher>>,
    _backend: Backend,
}

/// What keeps a fixture's backend alive: SQLite's directory, or the etcd server.
enum Backend {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Etcd(#[allow(dead_code)] crate::testing::EtcdServer),
}

impl Fixture {
    fn open_kv() -> (Arc<SqliteKv>, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let kv = SqliteKv::open(&dir.path().join("state.db")).expect("open sqlite");
        (kv, dir)
    }

    async fn open(etcd: bool) -> (Arc<dyn Kv>, Backend) {
        if !etcd {
            let (kv, dir) = Self::open_kv();
            return (kv, Backend::Sqlite(dir));
        }
        // Each test gets its own etcd: compaction is store-wide, and tests compact.
        let server = crate::testing::EtcdServer::start().expect("a real etcd for the etcd tests");
        let options = crate::EtcdOptions {
            servers: vec![server.url.clone()],
            ..Default::default()
        };
        let kv = crate::EtcdKv::connect(&options)
            .await
            .expect("connect to etcd");
        (kv, Backend::Etcd(server))
    }

    async fn kv_store(etcd: bool) -> Self {
        let (kv, backend) = Self::open(etcd).await;
        let store = Arc::new(KvStore::new(kv.clone(), default_attrs()));
        Fixture {
            store,
            kv,
            cacher: None,
            _backend: backend,
        }
    }

    async fn cacher(etcd: bool) -> Self {
        Self::cacher_with(
            etcd,
            CacherOptions {
                window_capacity: TEST_WINDOW,
                fresh_wait: Duration::from_millis(500),
                bookmark_interval: Duration::from_millis(200),
                watcher_buffer: 1000,
                // The suite runs with metrics on, so that recording is exercised everywhere.
                metrics: Some(crate::ResourceMetrics::new("conformance", "things")),
                ..CacherOptions::default()
            },
        )
        .await
    }

    async fn cacher_with(etcd: bool, options: CacherOptions) -> Self {
        let (kv, backend) = Self::open(etcd).await;
        let inner: Arc<dyn Store> = Arc::new(KvStore::new(kv.clone(), default_attrs()));
        let cacher = Cacher::with_options(inner.clone(), PREFIX, default_attrs(), options);
        for _ in 0..500 {
            if cacher.is_ready() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(cacher.is_ready(), "cacher did not initialize");
        // As the server builds it: consistent reads go to storage where the backend cannot tell
        // the cache when it has caught up.
        let store = crate::delegate::cached(kv.as_ref(), inner, cacher.clone());
        Fixture {
            store,
            kv,
            cacher: Some(cacher),
            _backend: backend,
        }
    }

    /// Makes every revision up to now too old to watch from: compaction for the store, the
    /// window's overflow for the cacher.
    async fn expire_history(&self) {
        match &self.cacher {
            None => {
                // One write more: etcd still serves a watch that starts right at the compacted
                // revision, so compacting at the last write would leave a watch from the one
                // before it valid there.
                self.kv
                    .create("/registry/other/filler", Bytes::from_static(b"{}"))
                    .await
                    .expect("filler");
                let current = self.kv.current_revision().await.expect("revision");
                self.kv.compact(current).await.expect("compact");
            }
            Some(_) => {
                let filler = key("zz", "filler");
                let mut rv = self
                    .store
                    .create(&filler, thing("zz", "filler", json!({})))
                    .await
                    .expect("create")
                    .resource_version;
                for i in 0..TEST_WINDOW {
                    let mut value = thing("zz", "filler", json!({}));
                    value["data"]["i"] = json!(i);
                    rv = self
                        .store
                        .update(&filler, value, rv)
                        .await
                        .expect("update")
                        .resource_version;
                }
                // The window moves when the cache has seen the writes.
                let get = GetOptions {
                    resource_version: ResourceVersion::Exact(rv),
                };
                self.store
                    .get(&filler, &get)
                    .await
                    .expect("cache caught up");
            }
        }
    }
}

fn key(namespace: &str, name: &str) -> String {
    format!("{PREFIX}{namespace}/{name}")
}

fn thing(namespace: &str, name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Thing",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {"n": name},
    })
}

fn label_is(label: &'static str, value: &'static str) -> crate::Predicate {
    Some(Arc::new(move |attrs: &crate::Attrs| {
        attrs.labels.get(label).map(String::as_str) == Some(value)
    }))
}

/// The next event that is not a periodic bookmark.
async fn next(stream: &mut WatchStream) -> WatchEvent {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(5), stream.recv())
            .await
            .expect("an event in time")
            .expect("the stream is open");
        if !matches!(
            event,
            WatchEvent::Bookmark {
                initial_events_end: false,
                ..
            }
        ) {
            return event;
        }
    }
}

/// `(type, key, resourceVersion)` of an object event.
fn summary(event: &WatchEvent) -> (&'static str, String, i64) {
    match event {
        WatchEvent::Added(o) => ("ADDED", o.key.to_string(), o.resource_version),
        WatchEvent::Modified(o) => ("MODIFIED", o.key.to_string(), o.resource_version),
        WatchEvent::Deleted(o) => ("DELETED", o.key.to_string(), o.resource_version),
        other => panic!("not an object event: {other:?}"),
    }
}

fn keys(items: &[crate::Object]) -> Vec<String> {
    items.iter().map(|o| o.key.to_string()).collect()
}

async fn create_and_get(f: &Fixture) {
    let store = &f.store;
    let mut obj = thing("ns", "a", json!({}));
    obj["metadata"]["resourceVersion"] = json!("999");
    let created = store.create(&key("ns", "a"), obj).await.expect("create");
    assert!(created.resource_version > 0);
    let value = created.value().expect("value");
    assert_eq!(
        value["metadata"]["resourceVersion"],
        json!(created.resource_version.to_string())
    );
    assert_eq!(value["data"]["n"], json!("a"));

    // The backend keeps the object without its resourceVersion, as upstream keeps it in etcd.
    let (stored, _) = f.kv.get(&key("ns", "a")).await.expect("kv get");
    let stored: Value = serde_json::from_slice(&stored.expect("stored").value).expect("json");
    assert!(stored["metadata"].get("resourceVersion").is_none());

    // Any may be served stale: ask for it after Exact has waited for the cache.
    for rv in [
        ResourceVersion::Unset,
        ResourceVersion::Exact(created.resource_version),
        ResourceVersion::Any,
    ] {
        let got = store
            .get(
                &key("ns", "a"),
                &GetOptions {
                    resource_version: rv,
                },
            )
            .await
            .expect("get");
        assert_eq!(got.bytes, created.bytes, "{rv:?}");
        assert_eq!(got.resource_version, created.resource_version);
    }
    assert!(matches!(
        store
            .get(&key("ns", "missing"), &GetOptions::default())
            .await,
        Err(StorageError::NotFound { .. })
    ));
    // A refused create gives its object back (for a retry under another generated name),
    // without the resourceVersion storage never keeps.
    let mut given = thing("ns", "a", json!({"x": 1}));
    given["metadata"]["resourceVersion"] = json!("7");
    match store.create(&key("ns", "a"), given.clone()).await {
        Err(mut e @ StorageError::AlreadyExists { .. }) => {
            given["metadata"]
                .as_object_mut()
                .map(|m| m.remove("resourceVersion"));
            assert_eq!(e.take_rejected(), Some(given));
        }
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
}

async fn update_with_conflicts(f: &Fixture) {
    let store = &f.store;
    let created = store
        .create(&key("ns", "a"), thing("ns", "a", json!({})))
        .await
        .expect("create");
    let mut changed = created.value().expect("value");
    changed["data"]["n"] = json!("changed");

    match store
        .update(
            &key("ns", "a"),
            changed.clone(),
            created.resource_version + 100,
        )
        .await
    {
        Err(StorageError::Conflict {
            current_resource_version,
            ..
        }) => {
            assert_eq!(current_resource_version, created.resource_version);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let updated = store
        .update(&key("ns", "a"), changed, created.resource_version)
        .await
        .expect("update");
    assert!(updated.resource_version > created.resource_version);
    assert_eq!(
        updated.value().expect("value")["data"]["n"],
        json!("changed")
    );

    // An update that changes nothing writes nothing, as upstream's GuaranteedUpdate.
    let same = store
        .update(
            &key("ns", "a"),
            updated.value().expect("value"),
            updated.resource_version,
        )
        .await
        .expect("no-op update");
    assert_eq!(same.resource_version, updated.resource_version);
    assert_eq!(
        f.store.current_revision().await.expect("revision"),
        updated.resource_version
    );

    assert!(matches!(
        store
            .update(&key("ns", "nope"), thing("ns", "nope", json!({})), 1)
            .await,
        Err(StorageError::NotFound { .. })
    ));
}

async fn delete_with_preconditions(f: &Fixture) {
    let store = &f.store;
    let created = store
        .create(&key("ns", "a"), thing("ns", "a", json!({})))
        .await
        .expect("create");
    assert!(matches!(
        store
            .delete(&key("ns", "a"), Some(created.resource_version + 5))
            .await,
        Err(StorageError::Conflict { .. })
    ));
    let deleted = store
        .delete(&key("ns", "a"), Some(created.resource_version))
        .await
        .expect("delete");
    assert!(deleted.resource_version > created.resource_version);
    let value = deleted.value().expect("value");
    assert_eq!(
        value["metadata"]["resourceVersion"],
        json!(deleted.resource_version.to_string())
    );
    assert_eq!(value["data"]["n"], json!("a"));
    assert!(matches!(
        store.get(&key("ns", "a"), &GetOptions::default()).await,
        Err(StorageError::NotFound { .. })
    ));
    assert!(matches!(
        store.delete(&key("ns", "a"), None).await,
        Err(StorageError::NotFound { .. })
    ));
    store
        .create(&key("ns", "a"), thing("ns", "a", json!({})))
        .await
        .expect("create again");
    store
        .delete(&key("ns", "a"), None)
        .await
        .expect("delete without precondition");
}

async fn list_with_predicate_and_pagination(f: &Fixture) {
    let store = &f.store;
    let mut all = Vec::new();
    for i in 0..10 {
        let namespace = if i % 2 == 0 { "even" } else { "odd" };
        let name = format!("t{i}");
        store
            .create(
                &key(namespace, &name),
                thing(namespace, &name, json!({"parity": namespace})),
            )
            .await
            .expect("create");
        all.push(key(namespace, &name));
    }
    all.sort();

    let listed = store
        .list(PREFIX, &ListOptions::default())
        .await
        .expect("list");
    assert_eq!(keys(&listed.items), all);
    assert_eq!(
        (
            listed.continue_token.as_deref(),
            listed.remaining_item_count
        ),
        (None, None)
    );
    let even = store
        .list(&format!("{PREFIX}even/"), &ListOptions::default())
        .await
        .expect("list namespace");
    assert_eq!(even.items.len(), 5);
    let odd = ListOptions {
        predicate: label_is("parity", "odd"),
        ..Default::default()
    };
    let odd = store.list(PREFIX, &odd).await.expect("list with predicate");
    assert_eq!(
        keys(&odd.items),
        all.iter()
            .filter(|k| k.contains("/odd/"))
            .cloned()
            .collect::<Vec<_>>()
    );

    // Pages read at the first page's revision: writes between pages do not show.
    let mut opts = ListOptions {
        limit: 3,
        ..Default::default()
    };
    let first = store.list(PREFIX, &opts).await.expect("page 1");
    assert_eq!(first.items.len(), 3);
    assert_eq!(first.remaining_item_count, Some(7));
    store
        .create(&key("even", "t99"), thing("even", "t99", json!({})))
        .await
        .expect("create between pages");
    store
        .delete(&all[9], None)
        .await
        .expect("delete between pages");
    let mut seen = keys(&first.items);
    let mut token = first.continue_token.clone();
    let mut remaining = vec![];
    while let Some(next) = token {
        opts.continue_token = Some(next);
        let page = store.list(PREFIX, &opts).await.expect("next page");
        assert_eq!(page.resource_version, first.resource_version);
        seen.extend(keys(&page.items));
        remaining.push(page.remaining_item_count);
        token = page.continue_token;
    }
    assert_eq!(seen, all);
    assert_eq!(remaining, [Some(4), Some(1), None]);

    // With a predicate, pages are filled by reading on, and no count is given.
    let mut opts = ListOptions {
        limit: 2,
        predicate: label_is("parity", "odd"),
        ..Default::default()
    };
    let mut odd_seen = Vec::new();
    loop {
        let page = store.list(PREFIX, &opts).await.expect("filtered page");
        assert!(page.items.len() <= 2);
        assert_eq!(page.remaining_item_count, None);
        odd_seen.extend(keys(&page.items));
        match page.continue_token {
            Some(token) => opts.continue_token = Some(token),
            None => break,
        }
    }
    assert_eq!(
        odd_seen,
        all[5..9].to_vec(),
        "the deleted t9 is gone, the list is current"
    );

    let bad = ListOptions {
        limit: 1,
        continue_token: Some("garbage".into()),
        ..Default::default()
    };
    assert_eq!(
        store
            .list(PREFIX, &bad)
            .await
            .expect_err("bad token")
            .to_string(),
        "invalid continue token: continue key is not valid: invalid character '\\u0081' looking for beginning of value"
    );
    let with_rv = ListOptions {
        limit: 3,
        continue_token: first.continue_token.clone(),
        resource_version: ResourceVersion::Exact(first.resource_version),
        ..Default::default()
    };
    assert_eq!(
        store
            .list(PREFIX, &with_rv)
            .await
            .expect_err("rv with continue"),
        StorageError::InvalidContinue(
            "specifying resource version is not allowed when using continue".into()
        )
    );
}

async fn resource_version_semantics(f: &Fixture) {
    let store = &f.store;
    let created = store
        .create(&key("ns", "a"), thing("ns", "a", json!({"v": "1"})))
        .await
        .expect("create");
    let r1 = created.resource_version;
    let updated = store
        .update(&key("ns", "a"), thing("ns", "a", json!({"v": "2"})), r1)
        .await
        .expect("update");
    let r2 = updated.resource_version;
    let future = r2 + 1000;

    let get = |rv| GetOptions {
        resource_version: rv,
    };
    match store
        .get(&key("ns", "a"), &get(ResourceVersion::Exact(future)))
        .await
    {
        Err(StorageError::TooLargeResourceVersion { requested, .. }) => {
            assert_eq!(requested, future)
        }
        other => panic!("expected too large, got {other:?}"),
    }
    // Not older than r1: the current object.
    let got = store
        .get(&key("ns", "a"), &get(ResourceVersion::Exact(r1)))
        .await
        .expect("get at r1");
    assert_eq!(got.resource_version, r2);

    let list = |rv, rv_match| ListOptions {
        resource_version: rv,
        resource_version_match: rv_match,
        ..Default::default()
    };
    let exact = store
        .list(
            PREFIX,
            &list(
                ResourceVersion::Exact(r1),
                Some(ResourceVersionMatch::Exact),
            ),
        )
        .await
        .expect("exact");
    assert_eq!(exact.resource_version, r1);
    assert_eq!(exact.items[0].resource_version, r1);
    assert_eq!(
        exact.items[0].value().expect("value")["metadata"]["labels"]["v"],
        json!("1")
    );

    let not_older = store
        .list(
            PREFIX,
            &list(
                ResourceVersion::Exact(r1),
                Some(ResourceVersionMatch::NotOlderThan),
            ),
        )
        .await
        .expect("not older than");
    assert!(not_older.resource_version >= r2);
    assert_eq!(not_older.items[0].resource_version, r2);
    let any = store
        .list(PREFIX, &list(ResourceVersion::Any, None))
        .await
        .expect("any");
    assert_eq!(any.items.len(), 1);
    let unset = store
        .list(PREFIX, &list(ResourceVersion::Unset, None))
        .await
        .expect("unset");
    assert!(unset.resource_version >= r2);

    for rv_match in [
        Some(ResourceVersionMatch::NotOlderThan),
        Some(ResourceVersionMatch::Exact),
        None,
    ] {
        assert!(
            matches!(
                store
                    .list(PREFIX, &list(ResourceVersion::Exact(future), rv_match))
                    .await,
                Err(StorageError::TooLargeResourceVersion { .. })
            ),
            "{rv_match:?}"
        );
    }

    // A compacted revision is gone for exact reads.
    f.kv.compact(r2).await.expect("compact");
    assert_eq!(
        store
            .list(
                PREFIX,
                &list(
                    ResourceVersion::Exact(r1),
                    Some(ResourceVersionMatch::Exact)
                )
            )
            .await
            .expect_err("compacted"),
        StorageError::Expired(LIST_EXPIRED.into())
    );
}

async fn watch_from_resource_version(f: &Fixture) {
    let store = &f.store;
    let a = store
        .create(&key("ns", "a"), thing("ns", "a", json!({})))
        .await
        .expect("create a");
    let a2 = store
        .update(
            &key("ns", "a"),
            thing("ns", "a", json!({"x": "y"})),
            a.resource_version,
        )
        .await
        .expect("update a");
    let b = store
        .create(&key("ns", "b"), thing("ns", "b", json!({})))
        .await
        .expect("create b");
    let gone = store.delete(&key("ns", "a"), None).await.expect("delete a");

    let opts = WatchOptions {
        resource_version: ResourceVersion::Exact(a.resource_version),
        ..Default::default()
    };
    let mut events = store.watch(PREFIX, &opts).await.expect("watch");
    assert_eq!(
        summary(&next(&mut events).await),
        ("MODIFIED", key("ns", "a"), a2.resource_version)
    );
    assert_eq!(
        summary(&next(&mut events).await),
        ("ADDED", key("ns", "b"), b.resource_version)
    );
    match next(&mut events).await {
        WatchEvent::Deleted(object) => {
            assert_eq!(object.resource_version, gone.resource_version);
            let value = object.value().expect("value");
            assert_eq!(
                value["metadata"]["labels"]["x"],
                json!("y"),
                "the last state"
            );
            assert_eq!(
                value["metadata"]["resourceVersion"],
                json!(gone.resource_version.to_string())
            );
        }
        other => panic!("expected DELETED, got {other:?}"),
    }
    let c = store
        .create(&key("ns", "c"), thing("ns", "c", json!({})))
        .await
        .expect("create c");
    assert_eq!(
        summary(&next(&mut events).await),
        ("ADDED", key("ns", "c"), c.resource_version)
    );

    // One key: only its own events, not those of keys it is a prefix of.
    let mut one = store
        .watch(&key("ns", "b"), &opts)
        .await
        .expect("watch one key");
    assert_eq!(
        summary(&next(&mut one).await),
        ("ADDED", key("ns", "b"), b.resource_version)
    );
    store
        .create(&key("ns", "bb"), thing("ns", "bb", json!({})))
        .await
        .expect("create bb");
    let b2 = store
        .update(
            &key("ns", "b"),
            thing("ns", "b", json!({"n": "2"})),
            b.resource_version,
        )
        .await
        .expect("update b");
    assert_eq!(
        summary(&next(&mut one).await),
        ("MODIFIED", key("ns", "b"), b2.resource_version)
    );
}

async fn watch_with_initial_events(f: &Fixture) {
    let store = &f.store;
    store
        .create(&key("ns", "b"), thing("ns", "b", json!({})))
        .await
        .expect("create b");
    let a = store
        .create(&key("ns", "a"), thing("ns", "a", json!({})))
        .await
        .expect("create a");

    let opts = WatchOptions {
        send_initial_events: Some(true),
        allow_bookmarks: true,
        ..Default::default()
    };
    let mut events = store.watch(PREFIX, &opts).await.expect("watch-list");
    let mut initial = BTreeSet::new();
    for _ in 0..2 {
        let (kind, key, _) = summary(&next(&mut events).await);
        assert_eq!(kind, "ADDED");
        initial.insert(key);
    }
    assert_eq!(initial, BTreeSet::from([key("ns", "a"), key("ns", "b")]));
    match next(&mut events).await {
        WatchEvent::Bookmark {
            resource_version,
            initial_events_end: true,
        } => {
            assert!(resource_version >= a.resource_version);
        }
        other => panic!("expected the initial-events-end bookmark, got {other:?}"),
    }
    let c = store
        .create(&key("ns", "c"), thing("ns", "c", json!({})))
        .await
        .expect("create c");
    assert_eq!(
        summary(&next(&mut events).await),
        ("ADDED", key("ns", "c"), c.resource_version)
    );

    // Legacy watch without a version: the current state as ADDED, no end bookmark.
    let mut legacy = store
        .watch(PREFIX, &WatchOptions::default())
        .await
        .expect("legacy watch");
    for _ in 0..3 {
        assert_eq!(summary(&next(&mut legacy).await).0, "ADDED");
    }
    let d = store
        .create(&key("ns", "d"), thing("ns", "d", json!({})))
        .await
        .expect("create d");
    assert_eq!(
        summary(&next(&mut legacy).await),
        ("ADDED", key("ns", "d"), d.resource_version)
    );

    // sendInitialEvents=false: only what happens next.
    let opts = WatchOptions {
        send_initial_events: Some(false),
        ..Default::default()
    };
    let mut fresh = store.watch(PREFIX, &opts).await.expect("watch from now");
    let e = store
        .create(&key("ns", "e"), thing("ns", "e", json!({})))
        .await
        .expect("create e");
    assert_eq!(
        summary(&next(&mut fresh).await),
        ("ADDED", key("ns", "e"), e.resource_version)
    );
}

async fn watch_too_old(f: &Fixture) {
    let store = &f.store;
    let a = store
        .create(&key("ns", "a"), thing("ns", "a", json!({})))
        .await
        .expect("create");
    store
        .update(
            &key("ns", "a"),
            thing("ns", "a", json!({"n": "1"})),
            a.resource_version,
        )
        .await
        .expect("update");
    f.expire_history().await;
    let opts = WatchOptions {
        resource_version: ResourceVersion::Exact(a.resource_version),
        ..Default::default()
    };
    let mut events = store
        .watch(PREFIX, &opts)
        .await
        .expect("the watch starts, then fails");
    match next(&mut events).await {
        WatchEvent::Error(StorageError::Expired(message)) => {
            if f.cacher.is_some() {
                assert!(
                    message.starts_with(&format!(
                        "too old resource version: {} (",
                        a.resource_version
                    )),
                    "{message}"
                );
            } else {
                assert_eq!(message, WATCH_EXPIRED);
            }
        }
        other => panic!("expected 410 Expired, got {other:?}"),
    }
    let end = tokio::time::timeout(Duration::from_secs(5), events.recv())
        .await
        .expect("ends in time");
    assert!(end.is_none(), "the stream ends after the error");
}

async fn watch_predicate_transitions(f: &Fixture) {
    let store = &f.store;
    let start = store.current_revision().await.expect("revision");
    let opts = WatchOptions {
        resource_version: ResourceVersion::Exact(start),
        predicate: label_is("app", "web"),
        ..Default::default()
    };
    let mut events = store.watch(PREFIX, &opts).await.expect("watch");
    let k = key("ns", "x");
    let x1 = store
        .create(&k, thing("ns", "x", json!({})))
        .await
        .expect("create");
    let x2 = store
        .update(
            &k,
            thing("ns", "x", json!({"app": "web"})),
            x1.resource_version,
        )
        .await
        .expect("label");
    let x3 = store
        .update(
            &k,
            thing("ns", "x", json!({"app": "web", "v": "2"})),
            x2.resource_version,
        )
        .await
        .expect("change");
    let x4 = store
        .update(&k, thing("ns", "x", json!({})), x3.resource_version)
        .await
        .expect("unlabel");
    store.delete(&k, None).await.expect("delete");
    let y = store
        .create(&key("ns", "y"), thing("ns", "y", json!({"app": "web"})))
        .await
        .expect("create y");
    let y_gone = store.delete(&key("ns", "y"), None).await.expect("delete y");

    assert_eq!(
        summary(&next(&mut events).await),
        ("ADDED", k.clone(), x2.resource_version)
    );
    assert_eq!(
        summary(&next(&mut events).await),
        ("MODIFIED", k.clone(), x3.resource_version)
    );
    match next(&mut events).await {
        // The object left the selection: DELETED with its previous content at this version.
        WatchEvent::Deleted(object) => {
            assert_eq!(object.resource_version, x4.resource_version);
            let value = object.value().expect("value");
            assert_eq!(value["metadata"]["labels"]["v"], json!("2"));
            assert_eq!(
                value["metadata"]["resourceVersion"],
                json!(x4.resource_version.to_string())
            );
        }
        other => panic!("expected DELETED, got {other:?}"),
    }
    assert_eq!(
        summary(&next(&mut events).await),
        ("ADDED", key("ns", "y"), y.resource_version)
    );
    assert_eq!(
        summary(&next(&mut events).await),
        ("DELETED", key("ns", "y"), y_gone.resource_version)
    );
}

async fn concurrent_creates(f: &Fixture) {
    let tasks: Vec<_> = (0..1000)
        .map(|i| {
            let store = f.store.clone();
            tokio::spawn(async move {
                let name = format!("c{i:04}");
                store
                    .create(&key("ns", &name), thing("ns", &name, json!({})))
                    .await
            })
        })
        .collect();
    let mut revisions = BTreeSet::new();
    for task in tasks {
        revisions.insert(task.await.expect("task").expect("create").resource_version);
    }
    assert_eq!(revisions.len(), 1000, "every create has its own revision");
    let listed = f
        .store
        .list(PREFIX, &ListOptions::default())
        .await
        .expect("list");
    assert_eq!(listed.items.len(), 1000);
    assert!(listed.resource_version >= revisions.last().copied().unwrap_or_default());
}

async fn list_is_consistent_after_writes_elsewhere(f: &Fixture) {
    let store = &f.store;
    store
        .create(&key("ns", "a"), thing("ns", "a", json!({})))
        .await
        .expect("create");
    // A write under another resource moves the store's revision.
    f.kv.create("/registry/other/x", Bytes::from_static(b"{}"))
        .await
        .expect("other write");
    let current = f.kv.current_revision().await.expect("revision");
    let listed = store
        .list(PREFIX, &ListOptions::default())
        .await
        .expect("list");
    assert!(listed.resource_version >= current);
    assert_eq!(listed.items.len(), 1);
}

/// A stored value that cannot be decoded (corrupted on disk, or written by an older version under
/// looser rules: serde_json reads at most 128 levels back) is left out of lists and watches, so
/// the rest of the collection stays readable; it can still be deleted.
async fn undecodable_objects_are_left_out(f: &Fixture) {
    let store = &f.store;
    let before = store
        .create(&key("ns", "a"), thing("ns", "a", json!({})))
        .await
        .expect("create a");
    let mut events = store
        .watch(
            PREFIX,
            &WatchOptions {
                resource_version: ResourceVersion::Exact(before.resource_version),
                ..Default::default()
            },
        )
        .await
        .expect("watch");
    let deep = format!(
        "{{\"metadata\":{{\"name\":\"deep\"}},\"x\":{}{}}}",
        "[".repeat(200),
        "]".repeat(200)
    );
    for (name, bytes) in [
        ("corrupt", b"{\"metadata\": tru".to_vec()),
        ("deep", deep.into_bytes()),
    ] {
        f.kv.create(&key("ns", name), Bytes::from(bytes))
            .await
            .expect("raw write");
    }
    let b = store
        .create(&key("ns", "b"), thing("ns", "b", json!({})))
        .await
        .expect("create b");
    // The watch goes on past the undecodable writes.
    assert_eq!(
        summary(&next(&mut events).await),
        ("ADDED", key("ns", "b"), b.resource_version)
    );
    let listed = store
        .list(PREFIX, &ListOptions::default())
        .await
        .expect("the list is served");
    assert_eq!(keys(&listed.items), vec![key("ns", "a"), key("ns", "b")]);
    let paged = store
        .list(
            PREFIX,
            &ListOptions {
                limit: 1,
                ..Default::default()
            },
        )
        .await
        .expect("a page is served");
    assert_eq!(keys(&paged.items), vec![key("ns", "a")]);
    for name in ["corrupt", "deep"] {
        assert!(
            store
                .get(&key("ns", name), &GetOptions::default())
                .await
                .is_err()
        );
        // Deleting removes the key even though the answer cannot carry the object.
        let _ = store.delete(&key("ns", name), None).await;
        let (left, _) = f.kv.get(&key("ns", name)).await.expect("kv get");
        assert!(left.is_none(), "{name} is deleted");
    }
}

macro_rules! conformance {
    ($($test:ident),* $(,)?) => {
        mod kv_store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(&super::Fixture::kv_store(false).await).await;
                }
            )*
        }
        mod cacher {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(&super::Fixture::cacher(false).await).await;
                }
            )*
        }
        /// The same suite on a real etcd (started per test; missing etcd fails the test).
        mod etcd_kv_store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(&super::Fixture::kv_store(true).await).await;
                }
            )*
        }
        mod etcd_cacher {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(&super::Fixture::cacher(true).await).await;
                }
            )*
        }
    };
}

conformance!(
    create_and_get,
    update_with_conflicts,
    delete_with_preconditions,
    list_with_predicate_and_pagination,
    resource_version_semantics,
    watch_from_resource_version,
    watch_with_initial_events,
    watch_too_old,
    watch_predicate_transitions,
    concurrent_creates,
    list_is_consistent_after_writes_elsewhere,
    undecodable_objects_are_left_out,
);

/// Behaviours only the cacher has.
mod cacher_only {
    use super::*;

    /// Counts the paginated reads (continue tokens) that reach the store under a cacher.
    struct CountingStore {
        inner: Arc<dyn Store>,
        continued: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Store for CountingStore {
        async fn get(&self, key: &str, opts: &GetOptions) -> Result<Object, StorageError> {
            self.inner.get(key, opts).await
        }
        async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
            if opts.continue_token.is_some() {
                self.continued
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            self.inner.list(prefix, opts).await
        }
        async fn create(&self, key: &str, obj: serde_json::Value) -> Result<Object, StorageError> {
            self.inner.create(key, obj).await
        }
        async fn update(
            &self,
            key: &str,
            obj: serde_json::Value,
            rv: i64,
        ) -> Result<Object, StorageError> {
            self.inner.update(key, obj, rv).await
        }
        async fn delete(&self, key: &str, rv: Option<i64>) -> Result<Object, StorageError> {
            self.inner.delete(key, rv).await
        }
        async fn watch(
            &self,
            prefix: &str,
            opts: &WatchOptions,
        ) -> Result<WatchStream, StorageError> {
            self.inner.watch(prefix, opts).await
        }
        async fn current_revision(&self) -> Result<i64, StorageError> {
            self.inner.current_revision().await
        }
        fn request_progress(&self) {
            self.inner.request_progress();
        }
    }

    async fn names_by_pages(
        store: &Arc<Cacher>,
        between_pages: impl Fn(usize) -> Option<(String, serde_json::Value)>,
        writer: &Arc<dyn Store>,
    ) -> Vec<String> {
        let mut names = Vec::new();
        let mut token = None;
        for page in 0.. {
            let opts = ListOptions {
                limit: 3,
                continue_token: token.clone(),
                ..Default::default()
            };
            let result = store.list(PREFIX, &opts).await.expect("page");
            names.extend(result.items.iter().map(|o| o.key.to_string()));
            token = result.continue_token;
            if token.is_none() {
                break;
            }
            if let Some((k, v)) = between_pages(page) {
                let written = writer.create(&k, v).await.expect("write between pages");
                // Wait until the cache has seen the write: until then it still holds the
                // snapshot and may rightly serve the next page itself.
                for _ in 0..500 {
                    if store.revision() >= written.resource_version {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                assert!(
                    store.revision() >= written.resource_version,
                    "the cache saw the write"
                );
            }
        }
        names
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn continuation_pages_come_from_memory_while_the_snapshot_holds() {
        let (kv, _dir) = Fixture::open_kv();
        let counting = Arc::new(CountingStore {
            inner: Arc::new(KvStore::new(kv.clone(), default_attrs())),
            continued: Default::default(),
        });
        let cacher = Cacher::new(counting.clone(), PREFIX, default_attrs());
        let writer: Arc<dyn Store> = counting.clone();
        for i in 0..10 {
            writer
                .create(
                    &key("ns", &format!("o{i}")),
                    thing("ns", &format!("o{i}"), json!({})),
                )
                .await
                .expect("create");
        }
        let current = kv.current_revision().await.expect("revision");
        cacher
            .get(
                &key("ns", "o9"),
                &GetOptions {
                    resource_version: ResourceVersion::Exact(current),
                },
            )
            .await
            .expect("cache caught up");
        // No writes between pages: every page is served from the cache's state.
        let names = names_by_pages(&cacher, |_| None, &writer).await;
        assert_eq!(names.len(), 10);
        assert_eq!(
            counting.continued.load(std::sync::atomic::Ordering::SeqCst),
            0
        );
        // A write between pages moves the cache: the rest of the snapshot comes from storage,
        // and the list still shows the state of its first page.
        let names = names_by_pages(
            &cacher,
            |page| (page == 0).then(|| (key("ns", "o5a"), thing("ns", "o5a", json!({})))),
            &writer,
        )
        .await;
        assert_eq!(names.len(), 10, "{names:?}");
        assert!(
            !names.iter().any(|n| n.ends_with("o5a")),
            "the new object is not in the old snapshot"
        );
        assert!(counting.continued.load(std::sync::atomic::Ordering::SeqCst) > 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn catches_up_through_progress_notifications() {
        let f = Fixture::cacher(false).await;
        let cacher = f.cacher.clone().expect("cacher");
        f.kv.create("/registry/other/x", Bytes::from_static(b"{}"))
            .await
            .expect("other write");
        let current = f.kv.current_revision().await.expect("revision");
        // No event of its own: a consistent read asks the backend for a progress notification,
        // and that moves the cache. Without one the read would give up waiting after
        // `fresh_wait` and answer from the store, with the cache still behind.
        cacher
            .list(PREFIX, &ListOptions::default())
            .await
            .expect("consistent list");
        assert!(
            cacher.revision() >= current,
            "cache stuck at {} < {current}",
            cacher.revision()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sends_periodic_bookmarks() {
        let f = Fixture::cacher(false).await;
        let a = f
            .store
            .create(&key("ns", "a"), thing("ns", "a", json!({})))
            .await
            .expect("create");
        let opts = WatchOptions {
            resource_version: ResourceVersion::Exact(a.resource_version),
            allow_bookmarks: true,
            ..Default::default()
        };
        let mut events = f.store.watch(PREFIX, &opts).await.expect("watch");
        let event = tokio::time::timeout(Duration::from_secs(5), events.recv())
            .await
            .expect("in time");
        match event {
            Some(WatchEvent::Bookmark {
                resource_version,
                initial_events_end: false,
            }) => {
                assert!(resource_version >= a.resource_version);
            }
            other => panic!("expected a bookmark, got {other:?}"),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_watcher_is_closed_without_holding_back_others() {
        let f = Fixture::cacher_with(
            false,
            CacherOptions {
                window_capacity: 1000,
                fresh_wait: Duration::from_millis(500),
                bookmark_interval: Duration::from_secs(60),
                watcher_buffer: 8,
                metrics: Some(crate::ResourceMetrics::new("conformance", "slowwatchers")),
                ..CacherOptions::default()
            },
        )
        .await;
        let start = f.store.current_revision().await.expect("revision");
        let opts = WatchOptions {
            resource_version: ResourceVersion::Exact(start),
            ..Default::default()
        };
        let mut slow = f.store.watch(PREFIX, &opts).await.expect("slow watch");
        let mut fast = f.store.watch(PREFIX, &opts).await.expect("fast watch");
        let total = 300;
        // The fast watcher reads each event before the next write, so only the slow one's
        // queue overflows, however the machine schedules the tasks.
        for i in 0..total {
            let name = format!("o{i:03}");
            let created = f
                .store
                .create(&key("ns", &name), thing("ns", &name, json!({})))
                .await
                .expect("create");
            assert_eq!(
                summary(&next(&mut fast).await),
                ("ADDED", created.key.to_string(), created.resource_version)
            );
        }
        let mut received = 0;
        while let Ok(Some(_)) = tokio::time::timeout(Duration::from_secs(5), slow.recv()).await {
            received += 1;
        }
        assert!(
            received < total,
            "the slow watcher was closed (it got {received})"
        );
        let terminated = prometheus::default_registry()
            .gather()
            .into_iter()
            .find(|f| f.name() == "apiserver_terminated_watchers_total")
            .and_then(|f| {
                f.get_metric()
                    .iter()
                    .find(|m| m.get_label().iter().any(|l| l.value() == "slowwatchers"))
                    .map(|m| m.get_counter().get_value())
            });
        assert_eq!(terminated, Some(1.0), "the closing is counted");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lists_pages_from_memory_with_a_continue_token() {
        let f = Fixture::cacher(false).await;
        let mut last = 0;
        for name in ["a", "b", "c"] {
            last = f
                .store
                .create(&key("ns", name), thing("ns", name, json!({})))
                .await
                .expect("create")
                .resource_version;
        }
        let opts = ListOptions {
            resource_version: ResourceVersion::Exact(last),
            resource_version_match: Some(ResourceVersionMatch::NotOlderThan),
            limit: 2,
            ..Default::default()
        };
        let first = f.store.list(PREFIX, &opts).await.expect("first page");
        assert_eq!(keys(&first.items), [key("ns", "a"), key("ns", "b")]);
        assert_eq!(first.remaining_item_count, Some(1));
        let rest = ListOptions {
            limit: 2,
            continue_token: first.continue_token,
            ..Default::default()
        };
        let second = f.store.list(PREFIX, &rest).await.expect("second page");
        assert_eq!(keys(&second.items), [key("ns", "c")]);
        assert_eq!(second.continue_token, None);
    }
}
