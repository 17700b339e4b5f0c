//! The codec against kube-apiserver's objects and recorded protobuf, and stores of protobuf
//! values read back through `KvStore` and the `Cacher`.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::object::ObjectExt;
use serde_json::{Value, json};
use storage::{
    Cacher, GetOptions, KvStore, ListOptions, ResourceVersion, SqliteKv, Store, WatchEvent,
    WatchOptions, WatchStream,
};

use super::*;

const PROTOBUF: StorageMediaType = StorageMediaType::Protobuf;

fn testdata(name: &str) -> Vec<u8> {
    let path = format!("{}/../protobuf/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Objects as kube-apiserver stored them (its dry-run answers), resourceVersion removed as the
/// store removes it before encoding.
fn stored_by_upstream() -> Vec<Value> {
    String::from_utf8(testdata("defaults.jsonl"))
        .expect("utf-8")
        .lines()
        .map(|line| {
            let mut obj: Value = serde_json::from_str(line).expect("a JSON object");
            obj.remove_meta("resourceVersion");
            obj
        })
        .collect()
}

fn encode(codec: &dyn StorageCodec, obj: &Value) -> Vec<u8> {
    codec
        .encode(obj)
        .expect("encodes")
        .expect("not stored as JSON")
}

fn secret() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "s", "namespace": "ns", "uid": "u-1",
                     "creationTimestamp": "2026-11-21T10:49:20Z"},
        "data": {"password": "c2VjcmV0", "empty": ""},
    })
}

#[test]
fn built_in_kinds_round_trip_through_protobuf_values() {
    let codec = BuiltinCodec::shared(PROTOBUF);
    let mut objects = stored_by_upstream();
    objects.push(secret());
    let mut kinds = std::collections::BTreeSet::new();
    let mut differ = Vec::new();
    for obj in &objects {
        let stored = encode(codec.as_ref(), obj);
        // The envelope: the magic, then runtime.Unknown's typeMeta {apiVersion, kind} of the
        // storage version (short strings: one-byte lengths).
        let (api_version, kind) = (obj.api_version().as_bytes(), obj.kind().as_bytes());
        let type_meta = [
            &[0x0a, api_version.len() as u8][..],
            api_version,
            &[0x12, kind.len() as u8],
            kind,
        ]
        .concat();
        let envelope = [b"k8s\0", &[0x0a, type_meta.len() as u8][..], &type_meta].concat();
        assert!(stored.starts_with(&envelope), "{}", obj.kind());
        let decoded = codec.decode(&stored).expect("decodes");
        if &decoded != obj {
            differ.push(format!("{}: {decoded}", obj.kind()));
        }
        assert_eq!(decoded.resource_version(), "");
        kinds.insert(obj.kind().to_string());
    }
    assert!(differ.is_empty(), "decoded differently: {differ:#?}");
    for kind in [
        "Pod",
        "Deployment",
        "ConfigMap",
        "Secret",
        "Service",
        "Namespace",
    ] {
        assert!(kinds.contains(kind), "{kind} is among the objects");
    }
}

#[test]
fn json_and_custom_resources_are_stored_as_json() {
    let cr = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                    "metadata": {"name": "w"}, "spec": {"size": 3}});
    assert_eq!(BuiltinCodec::shared(PROTOBUF).encode(&cr), Ok(None));
    assert_eq!(
        BuiltinCodec::shared(StorageMediaType::Json).encode(&secret()),
        Ok(None)
    );
}

#[test]
fn yaml_values_round_trip() {
    let codec = BuiltinCodec::shared(StorageMediaType::Yaml);
    let stored = encode(codec.as_ref(), &secret());
    assert!(stored.starts_with(b"apiVersion: v1\n"), "{stored:?}");
    assert_eq!(codec.decode(&stored), Ok(secret()));
}

/// What kube-apiserver's protobuf serializer wrote for a ConfigMap (recorded as a GET answer:
/// the same serializer the storage codec uses, with the resourceVersion set) and what this codec
/// stores for the same object differ by the resourceVersion's characters only.
#[test]
fn stored_values_are_kube_apiservers_bytes_without_the_resource_version() {
    let recorded = testdata("configmap.pb");
    let mut obj: Value = serde_json::from_slice(&testdata("configmap.json")).expect("JSON");
    let resource_version = obj.resource_version().to_string();
    assert!(!resource_version.is_empty());
    obj.remove_meta("resourceVersion");
    let stored = encode(BuiltinCodec::shared(PROTOBUF).as_ref(), &obj);
    assert_eq!(stored.len(), recorded.len() - resource_version.len());
    // Go writes the empty string: ObjectMeta's field 6 with length 0 is on the wire.
    let at = stored
        .windows(2)
        .position(|w| w == [0x32, 0x00])
        .expect("an empty resourceVersion field");
    let rv_field = [
        &[0x32, resource_version.len() as u8][..],
        resource_version.as_bytes(),
    ]
    .concat();
    let recorded_at = recorded
        .windows(rv_field.len())
        .position(|w| w == rv_field.as_slice())
        .expect("the recorded resourceVersion field");
    assert_eq!(at, recorded_at);
    assert_eq!(
        stored[at + 2..],
        recorded[recorded_at + rv_field.len()..],
        "the bytes after the field"
    );
    // And the recorded bytes, read as kube-apiserver's stored value, give the object.
    let decoded = BuiltinCodec::shared(PROTOBUF)
        .decode(&recorded)
        .expect("decodes");
    let expected: Value = serde_json::from_slice(&testdata("configmap.json")).expect("JSON");
    assert_eq!(decoded, expected);
}

fn open_kv() -> (Arc<SqliteKv>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let kv = SqliteKv::open(&dir.path().join("state.db")).expect("open sqlite");
    (kv, dir)
}

fn store(kv: &Arc<SqliteKv>, media_type: StorageMediaType) -> Arc<dyn Store> {
    store_with(kv, media_type, &[])
}

/// [`store`] with the codec's stored-version rows.
fn store_with(
    kv: &Arc<SqliteKv>,
    media_type: StorageMediaType,
    stored_versions: &'static [StoredVersion],
) -> Arc<dyn Store> {
    Arc::new(KvStore::with_codec(
        kv.clone(),
        storage::default_attrs(),
        BuiltinCodec::shared_with(media_type, stored_versions),
    ))
}

const PREFIX: &str = "/registry/configmaps/";

fn configmap(name: &str, label: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "ns", "labels": {"app": label},
                        "uid": format!("uid-{name}"),
                        "creationTimestamp": "2026-11-21T10:49:20Z"},
           "data": {"k": name}})
}

fn key(name: &str) -> String {
    format!("{PREFIX}ns/{name}")
}

/// The object as a client reads it at `rv`.
fn at(mut obj: Value, rv: i64) -> Value {
    obj.set_meta("resourceVersion", rv.to_string());
    obj
}

async fn raw(kv: &Arc<SqliteKv>, key: &str) -> Vec<u8> {
    use storage::Kv;
    kv.get(key)
        .await
        .expect("get")
        .0
        .expect("present")
        .value
        .to_vec()
}

async fn next(stream: &mut WatchStream) -> WatchEvent {
    tokio::time::timeout(Duration::from_secs(5), stream.recv())
        .await
        .expect("an event within 5s")
        .expect("the stream is open")
}

fn event(event: &WatchEvent) -> (&'static str, Value) {
    let (kind, obj) = match event {
        WatchEvent::Added(o) => ("ADDED", o),
        WatchEvent::Modified(o) => ("MODIFIED", o),
        WatchEvent::Deleted(o) => ("DELETED", o),
        other => panic!("unexpected {other:?}"),
    };
    (kind, obj.value().expect("JSON"))
}

fn app_is(value: &'static str) -> storage::Predicate {
    Some(Arc::new(move |attrs: &storage::Attrs| {
        attrs.labels.get("app").map(String::as_str) == Some(value)
    }))
}

/// Writes through `store`, watching it with a predicate from the start: a create, an update
/// that leaves the predicate (a DELETED carrying the previous content, decoded from the stored
/// previous value), an update that comes back, and a delete; then reads everything back.
async fn exercise(store: Arc<dyn Store>, kv: &Arc<SqliteKv>, expect_protobuf: bool) {
    let start = store.current_revision().await.expect("revision");
    let mut watch = store
        .watch(
            PREFIX,
            &WatchOptions {
                resource_version: ResourceVersion::Exact(start),
                predicate: app_is("a"),
                ..Default::default()
            },
        )
        .await
        .expect("watch");
    let created = store
        .create(&key("one"), configmap("one", "a"))
        .await
        .expect("create");
    let stored = raw(kv, &key("one")).await;
    assert_eq!(stored.starts_with(b"k8s\0"), expect_protobuf, "{stored:?}");
    let other = store
        .create(&key("two"), configmap("two", "b"))
        .await
        .expect("create");
    let moved = store
        .update(&key("one"), configmap("one", "b"), created.resource_version)
        .await
        .expect("update");
    // An update that changes nothing writes nothing (the encoded values are equal).
    let same = store
        .update(&key("one"), configmap("one", "b"), moved.resource_version)
        .await
        .expect("no-op update");
    assert_eq!(same.resource_version, moved.resource_version);
    let back = store
        .update(&key("one"), configmap("one", "a"), moved.resource_version)
        .await
        .expect("update");

    let got = store
        .get(&key("one"), &GetOptions::default())
        .await
        .expect("get");
    assert_eq!(
        got.value().expect("JSON"),
        at(configmap("one", "a"), back.resource_version)
    );
    let list = store
        .list(PREFIX, &ListOptions::default())
        .await
        .expect("list");
    let items: Vec<Value> = list
        .items
        .iter()
        .map(|o| o.value().expect("JSON"))
        .collect();
    assert_eq!(
        items,
        vec![
            at(configmap("one", "a"), back.resource_version),
            at(configmap("two", "b"), other.resource_version)
        ]
    );
    let deleted = store.delete(&key("one"), None).await.expect("delete");
    assert_eq!(
        deleted.value().expect("JSON"),
        at(configmap("one", "a"), deleted.resource_version)
    );

    let expected = [
        ("ADDED", at(configmap("one", "a"), created.resource_version)),
        // The object left the predicate: its previous content at the event's version.
        ("DELETED", at(configmap("one", "a"), moved.resource_version)),
        ("ADDED", at(configmap("one", "a"), back.resource_version)),
        (
            "DELETED",
            at(configmap("one", "a"), deleted.resource_version),
        ),
    ];
    for (kind, obj) in expected {
        assert_eq!(event(&next(&mut watch).await), (kind, obj));
    }
}

#[tokio::test]
async fn protobuf_values_read_back_through_the_store() {
    let (kv, _dir) = open_kv();
    exercise(store(&kv, PROTOBUF), &kv, true).await;
}

#[tokio::test]
async fn protobuf_values_read_back_through_the_cacher() {
    let (kv, _dir) = open_kv();
    let cacher: Arc<dyn Store> =
        Cacher::new(store(&kv, PROTOBUF), PREFIX, storage::default_attrs());
    exercise(cacher.clone(), &kv, true).await;
    // What the cache holds answers as the store does, from memory.
    let two = cacher
        .get(
            &key("two"),
            &GetOptions {
                resource_version: ResourceVersion::Any,
            },
        )
        .await
        .expect("get from the cache");
    assert_eq!(
        two.value().expect("JSON"),
        at(configmap("two", "b"), two.resource_version)
    );
}

#[tokio::test]
async fn json_values_still_splice_and_read_back() {
    let (kv, _dir) = open_kv();
    exercise(store(&kv, StorageMediaType::Json), &kv, false).await;
}

/// Values written as JSON, then as protobuf by a server started with the other media type (and
/// the reverse), all read back through one store and one cache.
#[tokio::test]
async fn a_store_holding_json_and_protobuf_reads_both() {
    let (kv, _dir) = open_kv();
    let json_store = store(&kv, StorageMediaType::Json);
    let proto_store = store(&kv, PROTOBUF);
    let one = json_store
        .create(&key("one"), configmap("one", "a"))
        .await
        .expect("create");
    let two = proto_store
        .create(&key("two"), configmap("two", "a"))
        .await
        .expect("create");
    assert!(raw(&kv, &key("one")).await.starts_with(b"{"));
    assert!(raw(&kv, &key("two")).await.starts_with(b"k8s\0"));
    // A JSON value updated by the protobuf store, with the watch seeing the JSON previous value.
    let mut watch = proto_store
        .watch(
            PREFIX,
            &WatchOptions {
                resource_version: ResourceVersion::Exact(two.resource_version),
                predicate: app_is("a"),
                ..Default::default()
            },
        )
        .await
        .expect("watch");
    let moved = proto_store
        .update(&key("one"), configmap("one", "b"), one.resource_version)
        .await
        .expect("update");
    assert!(raw(&kv, &key("one")).await.starts_with(b"k8s\0"));
    assert_eq!(
        event(&next(&mut watch).await),
        ("DELETED", at(configmap("one", "a"), moved.resource_version))
    );
    // And a protobuf value updated by the JSON store.
    let two_json = json_store
        .update(&key("two"), configmap("two", "c"), two.resource_version)
        .await
        .expect("update");
    assert!(raw(&kv, &key("two")).await.starts_with(b"{"));
    for reader in [json_store, proto_store] {
        let cache: Arc<dyn Store> = Cacher::new(reader.clone(), PREFIX, storage::default_attrs());
        for store in [reader, cache] {
            let list = store
                .list(PREFIX, &ListOptions::default())
                .await
                .expect("list");
            let items: Vec<Value> = list
                .items
                .iter()
                .map(|o| o.value().expect("JSON"))
                .collect();
            assert_eq!(
                items,
                vec![
                    at(configmap("one", "b"), moved.resource_version),
                    at(configmap("two", "c"), two_json.resource_version)
                ]
            );
        }
    }
}

/// A value kube-apiserver wrote (its protobuf serializer's bytes, recorded) reads back through
/// the store, with the store's revision as the resourceVersion.
#[tokio::test]
async fn a_value_written_by_kube_apiserver_reads_back() {
    use storage::Kv;
    let (kv, _dir) = open_kv();
    let key = "/registry/configmaps/pbgolden/cm1";
    kv.create(key, testdata("configmap.pb").into())
        .await
        .expect("put the recorded value");
    for media_type in [StorageMediaType::Json, PROTOBUF] {
        let got = store(&kv, media_type)
            .get(key, &GetOptions::default())
            .await
            .expect("get");
        let mut expected: Value =
            serde_json::from_slice(&testdata("configmap.json")).expect("JSON");
        expected.set_meta("resourceVersion", got.resource_version.to_string());
        assert_eq!(got.value().expect("JSON"), expected);
    }
}

/// An object stored in a version the store does not keep is converted on every read — get,
/// list and watch — and other objects are not. (Such values are JSON: kube-apiserver stores
/// CustomResourceDefinitions, the one kind concerned, as JSON.)
#[tokio::test]
async fn objects_of_another_stored_version_are_upgraded_on_read() {
    use storage::Kv;
    fn to_v1(obj: &mut Value) -> Result<(), String> {
        obj["apiVersion"] = json!("v1");
        obj["data"]["upgraded"] = json!("yes");
        Ok(())
    }
    const OLD: &[StoredVersion] = &[StoredVersion {
        api_version: "v0",
        kind: "ConfigMap",
        upgrade: to_v1,
        write: None,
    }];
    let (kv, _dir) = open_kv();
    let mut old = configmap("old", "a");
    old["apiVersion"] = json!("v0");
    kv.create(&key("old"), old.to_string().into_bytes().into())
        .await
        .expect("put");
    let store = store_with(&kv, PROTOBUF, OLD);
    let current = store
        .create(&key("current"), configmap("current", "a"))
        .await
        .expect("create");
    let got = store
        .get(&key("old"), &GetOptions::default())
        .await
        .expect("get")
        .value()
        .expect("JSON");
    let mut expected = configmap("old", "a");
    expected["data"]["upgraded"] = json!("yes");
    assert_eq!(got, at(expected.clone(), current.resource_version - 1));
    let listed = store
        .list(PREFIX, &ListOptions::default())
        .await
        .expect("list");
    let names: Vec<Value> = listed
        .items
        .iter()
        .map(|o| o.value().expect("JSON"))
        .map(|v| json!([v["apiVersion"], v["data"]["upgraded"]]))
        .collect();
    // In key order: `current`, then `old`.
    assert_eq!(names, [json!(["v1", null]), json!(["v1", "yes"])]);

    // A watch event of a value of the old version.
    let mut watch = store
        .watch(
            PREFIX,
            &WatchOptions {
                resource_version: ResourceVersion::Exact(current.resource_version),
                ..Default::default()
            },
        )
        .await
        .expect("watch");
    let mut later = configmap("later", "a");
    later["apiVersion"] = json!("v0");
    kv.create(&key("later"), later.to_string().into_bytes().into())
        .await
        .expect("put");
    let (kind, obj) = event(&next(&mut watch).await);
    assert_eq!(kind, "ADDED");
    assert_eq!(obj["apiVersion"], "v1");
    assert_eq!(obj["data"]["upgraded"], "yes");
}

/// A kind whose row says Ironplane stores it as kube-apiserver does: written in the stored
/// version as JSON whatever the media type, read back in the version the store keeps, its own
/// watch event too.
#[tokio::test]
async fn objects_are_written_in_upstreams_stored_version_when_a_row_says_so() {
    fn to_v1(obj: &mut Value) -> Result<(), String> {
        obj["apiVersion"] = json!("v1");
        if let Some(data) = obj["data"].as_object_mut() {
            data.remove("stored-as");
        }
        Ok(())
    }
    fn to_v0(obj: &mut Value) -> Result<(), String> {
        obj["apiVersion"] = json!("v0");
        obj["data"]["stored-as"] = json!("v0");
        Ok(())
    }
    const STORED_AS_V0: &[StoredVersion] = &[StoredVersion {
        api_version: "v0",
        kind: "ConfigMap",
        upgrade: to_v1,
        write: Some(("v1", to_v0)),
    }];
    let (kv, _dir) = open_kv();
    let store = store_with(&kv, PROTOBUF, STORED_AS_V0);
    let start = store.current_revision().await.expect("revision");
    let mut watch = store
        .watch(
            PREFIX,
            &WatchOptions {
                resource_version: ResourceVersion::Exact(start),
                ..Default::default()
            },
        )
        .await
        .expect("watch");
    let created = store
        .create(&key("one"), configmap("one", "a"))
        .await
        .expect("create");
    let stored: Value = serde_json::from_slice(&raw(&kv, &key("one")).await).expect("JSON");
    assert_eq!(stored["apiVersion"], "v0");
    assert_eq!(stored["data"]["stored-as"], "v0");
    let expected = at(configmap("one", "a"), created.resource_version);
    assert_eq!(created.value().expect("JSON"), expected);
    let got = store
        .get(&key("one"), &GetOptions::default())
        .await
        .expect("get");
    assert_eq!(got.value().expect("JSON"), expected);
    assert_eq!(event(&next(&mut watch).await), ("ADDED", expected));
}
