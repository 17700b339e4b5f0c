//! managedFields against etcd's size limit, end to end: the real binary on a real etcd started
//! here (missing etcd fails the test), driven by kubectl. etcd refuses a write past its
//! `--max-request-bytes` (1.5 MiB by default) or its gRPC limit (2 MiB); upstream's create,
//! update and patch handlers then write again without managedFields, while an apply fails with
//! etcd's message. What kube-apiserver v1.36.2 on etcd 3.6 answered to the same requests.

use crate::common;

use common::Server;
use serde_json::{Value, json};
use storage::testing::EtcdServer;

/// A ConfigMap of `keys` keys, each value `value`: under the kind's 1 MiB data limit, and large
/// in managedFields (one `f:<key>` per key).
fn config_map(name: &str, keys: usize, value: &str) -> Value {
    let data: serde_json::Map<String, Value> = (0..keys)
        .map(|i| (format!("k{i:05}yyyyyyyyyy"), Value::from(value)))
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// The stored object's managedFields (kubectl hides them unless asked) and its number of keys.
fn managed_fields(s: &Server, name: &str) -> (Option<Value>, usize) {
    let out = s.kubectl(&[
        "-n",
        "big",
        "get",
        "configmap",
        name,
        "--show-managed-fields",
        "-o",
        "json",
    ]);
    let obj: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    let keys = obj["data"].as_object().map_or(0, |d| d.len());
    (obj["metadata"].get("managedFields").cloned(), keys)
}

#[test]
fn writes_too_large_for_etcd_are_stored_without_managed_fields() {
    let etcd = EtcdServer::start().expect("a real etcd (apt-get install -y etcd-server)");
    let s = Server::start_with(&["--etcd-servers", &etcd.url]);
    s.wait_ready();
    s.kubectl(&["create", "namespace", "big"]);

    // 30000 keys: some 0.9 MB of data, and as much again in managedFields, past etcd's 1.5 MiB.
    let big = config_map("big", 30000, "vvvvvvvvvvvv");
    let out = s.kubectl_stdin(&["-n", "big", "create", "-f", "-"], &big.to_string());
    assert_eq!(out.trim(), "configmap/big created");
    assert_eq!(managed_fields(&s, "big"), (None, 30000));

    // A patch and a replace on the object that has none: the patcher would own every field,
    // too large again, so it is stored without them as well.
    s.kubectl(&[
        "-n",
        "big",
        "patch",
        "configmap",
        "big",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"p":"1"}}"#,
    ]);
    assert_eq!(managed_fields(&s, "big"), (None, 30001));
    let mut replaced = big.clone();
    replaced["data"]["replaced"] = json!("1");
    s.kubectl_stdin(&["-n", "big", "replace", "-f", "-"], &replaced.to_string());
    assert_eq!(managed_fields(&s, "big"), (None, 30001));

    // An apply is not tried again: its managed fields are what it does.
    let out = s.kubectl_stdin_output(
        &["-n", "big", "apply", "--server-side", "-f", "-"],
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"q":"1"}}"#,
    );
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "Error from server: etcdserver: request is too large"
    );
    assert_eq!(managed_fields(&s, "big").1, 30001);

    // Past etcd's gRPC limit (2 MiB) with managedFields, under 1.5 MiB without them.
    let huge = config_map("huge", 60000, "");
    s.kubectl_stdin(&["-n", "big", "create", "-f", "-"], &huge.to_string());
    assert_eq!(managed_fields(&s, "huge"), (None, 60000));

    // A write that fits keeps its managed fields.
    s.kubectl(&[
        "-n",
        "big",
        "create",
        "configmap",
        "small",
        "--from-literal=a=1",
    ]);
    let (small, _) = managed_fields(&s, "small");
    let small = small.expect("managedFields on a small object");
    assert_eq!(small[0]["manager"], "kubectl-create");
    assert_eq!(
        small[0]["fieldsV1"],
        json!({"f:data": {".": {}, "f:a": {}}})
    );
}
