//! `--storage-media-type`: built-in objects stored as kube-apiserver stores them (protobuf in
//! the `k8s\0` envelope) in the embedded store, served to kubectl as before, and a data
//! directory holding both formats read back after a restart with the other media type.

use crate::common;

use std::path::Path;

use common::Server;
use serde_json::Value;
use storage::StorageCodec;

const PROTOBUF: &str = "--storage-media-type=application/vnd.kubernetes.protobuf";

/// The latest value of `key` in the embedded store (`None`: deleted or absent), read with SQLite
/// itself rather than through Ironplane's store.
fn raw_value(data_dir: &Path, key: &str) -> Option<Vec<u8>> {
    let db = rusqlite::Connection::open_with_flags(
        data_dir.join("state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open state.db");
    let (deleted, value): (i64, Vec<u8>) = db
        .query_row(
            "SELECT deleted, value FROM kv WHERE name = ?1 ORDER BY id DESC LIMIT 1",
            [key.as_bytes()],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .ok()?;
    (deleted == 0).then_some(value)
}

fn protobuf_codec() -> std::sync::Arc<dyn StorageCodec> {
    ironplane_kube::storage_codec::BuiltinCodec::shared(storage::StorageMediaType::Protobuf)
}

fn get(s: &Server, what: &str) -> Value {
    serde_json::from_str(&s.kubectl(&["get", what, "-o", "json", "--show-managed-fields"]))
        .expect("kubectl's JSON")
}

/// The object as served, without what the store sets on the way out.
fn without_resource_version(mut obj: Value) -> Value {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    obj
}

#[test]
fn protobuf_storage_serves_kubectl_and_stores_kube_apiservers_bytes() {
    let s = Server::start_with(&[PROTOBUF]);
    s.kubectl(&["create", "configmap", "pb", "--from-literal=a=1"]);
    s.kubectl(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=2",
    ]);
    s.kubectl(&[
        "patch",
        "configmap",
        "pb",
        "--type=merge",
        "-p",
        r#"{"data":{"b":"2"},"metadata":{"labels":{"x":"y"}}}"#,
    ]);
    let cm = get(&s, "configmap/pb");
    assert_eq!(cm["data"]["a"], "1");
    assert_eq!(cm["data"]["b"], "2");
    assert_eq!(cm["metadata"]["labels"]["x"], "y");
    // A label selector reads the attributes the store computed from the decoded object.
    let selected = s.kubectl(&["get", "configmap", "-l", "x=y", "-o", "name"]);
    assert_eq!(selected.trim(), "configmap/pb");
    let deployment = get(&s, "deployment/web");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let served = [
        ("/registry/configmaps/default/pb", cm.clone()),
        ("/registry/deployments/default/web", deployment.clone()),
    ];

    let dir = s.stop();
    for (key, served) in &served {
        let stored = raw_value(dir.path(), key).expect("stored");
        assert!(stored.starts_with(b"k8s\0"), "{key}: {stored:?}");
        let decoded = protobuf_codec().decode(&stored).expect("decodes");
        // The stored value has no resourceVersion; otherwise it is what kubectl was served.
        assert_eq!(decoded["metadata"].get("resourceVersion"), None, "{key}");
        assert_eq!(decoded, without_resource_version(served.clone()), "{key}");
    }
    // A namespace the server made itself is stored the same way.
    let namespace = raw_value(dir.path(), "/registry/namespaces/default").expect("stored");
    assert!(namespace.starts_with(b"k8s\0"));

    // Restarted with the embedded store's default (JSON), the protobuf values read back, a
    // write stores JSON, and a delete of a protobuf value works.
    let s = Server::start_in(dir);
    assert_eq!(
        without_resource_version(get(&s, "configmap/pb")),
        without_resource_version(cm)
    );
    s.kubectl(&["label", "configmap", "pb", "z=1"]);
    s.kubectl(&["delete", "deployment", "web"]);
    let cm = get(&s, "configmap/pb");
    assert_eq!(cm["metadata"]["labels"]["z"], "1");
    let dir = s.stop();
    let stored = raw_value(dir.path(), "/registry/configmaps/default/pb").expect("stored");
    assert!(stored.starts_with(b"{"), "{stored:?}");
    assert_eq!(
        raw_value(dir.path(), "/registry/deployments/default/web"),
        None
    );

    // And back on protobuf: the JSON value reads back, deletes work.
    let s = Server::start_in_with(dir, &[PROTOBUF]);
    assert_eq!(get(&s, "configmap/pb")["metadata"]["labels"]["z"], "1");
    s.kubectl(&["delete", "configmap", "pb"]);
    s.kubectl_fails(&["get", "configmap", "pb"]);
}

#[test]
fn custom_resources_stay_json_under_protobuf_storage() {
    let s = Server::start_with(&[PROTOBUF]);
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#,
    );
    common::wait_until("the Widget CRD to be served", 30, || {
        s.kubectl_output(&["get", "widgets"]).status.success()
    });
    s.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 3}\n",
    );
    assert_eq!(get(&s, "widget/w")["spec"]["size"], 3);
    let dir = s.stop();
    let widget = raw_value(dir.path(), "/registry/example.com/widgets/default/w").expect("stored");
    assert!(widget.starts_with(b"{"), "{widget:?}");
    // The CRD itself is stored as kube-apiserver stores it whatever the media type: v1beta1
    // JSON.
    let crd = raw_value(
        dir.path(),
        "/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com",
    )
    .expect("stored");
    let crd: serde_json::Value = serde_json::from_slice(&crd).expect("JSON");
    assert_eq!(crd["apiVersion"], "apiextensions.k8s.io/v1beta1");
}

#[test]
fn an_unknown_storage_media_type_is_refused_with_upstreams_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ironplane"))
        .args(["--secure-port", "0", "--data-dir"])
        .arg(dir.path())
        .arg("--storage-media-type=application/cbor")
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "--storage-media-type \"application/cbor\" invalid, allowed values: \
             application/json, application/vnd.kubernetes.protobuf, application/yaml"
        ),
        "{stderr}"
    );
}
