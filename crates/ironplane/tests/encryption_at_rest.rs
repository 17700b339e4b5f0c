//! Encryption at rest end to end (issue 13): `--encryption-provider-config` with aescbc and with
//! a KMS v2 plugin served over gRPC on a unix socket by the test, key rotation by rewriting
//! every Secret, the `kms-providers` health check, and the automatic reload of a changed file.
//! The raw values are read from the data directory's SQLite store, to see what is on disk.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Server, wait_until};
use prost::Message;
use storage::value::grpc::testing::TestPlugin;
use storage::value::kmsv2::EncryptedObject;

const KEY1: &str = "MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTI=";
const KEY2: &str = "YWJjZGVmZ2hpamtsbW5vcGFiY2RlZmdoaWprbG1ub3A=";
const HEAD: &str = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n";

/// An aescbc configuration for Secrets with `keys` (name, secret) in order, then identity.
fn aescbc(keys: &[(&str, &str)]) -> String {
    let keys: String = keys
        .iter()
        .map(|(n, s)| format!("      - name: {n}\n        secret: {s}\n"))
        .collect();
    format!(
        "{HEAD}resources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys:\n{keys}  - identity: {{}}\n"
    )
}

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("encryption.yaml");
    // Written whole then renamed, so a reload never reads half a file.
    let tmp = dir.join("encryption.yaml.tmp");
    std::fs::write(&tmp, text).expect("the config is written");
    std::fs::rename(&tmp, &path).expect("the config is in place");
    path
}

/// The newest stored value of `key`, as the backend holds it.
fn raw_value(data_dir: &Path, key: &str) -> Vec<u8> {
    let db = rusqlite::Connection::open_with_flags(
        data_dir.join("state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("the store opens read-only");
    db.query_row(
        "SELECT value FROM kv WHERE name = ?1 ORDER BY id DESC LIMIT 1",
        [key.as_bytes()],
        |row| row.get(0),
    )
    .unwrap_or_else(|e| panic!("{key} is stored: {e}"))
}

fn starts_with(value: &[u8], prefix: &str) -> bool {
    value.starts_with(prefix.as_bytes())
}

fn contains(value: &[u8], text: &str) -> bool {
    value.windows(text.len()).any(|w| w == text.as_bytes())
}

fn flags(config: &Path) -> Vec<String> {
    vec![
        "--encryption-provider-config".into(),
        config.display().to_string(),
    ]
}

fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

const SECRET: &str = "/registry/secrets/default/s1";

#[test]
fn secrets_are_stored_encrypted_and_a_rotation_rewrites_them() {
    let conf = tempfile::tempdir().expect("tempdir");
    let config = write_config(conf.path(), &aescbc(&[("key1", KEY1)]));
    let args = flags(&config);
    let s = Server::start_with(&as_strs(&args));
    s.kubectl(&[
        "create",
        "secret",
        "generic",
        "s1",
        "--from-literal=password=hunter2",
    ]);
    s.kubectl(&[
        "create",
        "configmap",
        "c1",
        "--from-literal=password=hunter2",
    ]);

    let raw = raw_value(s.dir.path(), SECRET);
    assert!(
        starts_with(&raw, "k8s:enc:aescbc:v1:key1:"),
        "{:?}",
        String::from_utf8_lossy(&raw)
    );
    assert!(!contains(&raw, "hunter2") && !contains(&raw, "aHVudGVyMg=="));
    assert!(
        !contains(&raw, "\"kind\""),
        "nothing of the object is readable"
    );
    let cm = raw_value(s.dir.path(), "/registry/configmaps/default/c1");
    assert!(
        !starts_with(&cm, "k8s:enc:"),
        "resources not configured stay plain"
    );
    assert_eq!(
        s.kubectl(&["get", "secret", "s1", "-o", "jsonpath={.data.password}"]),
        "aHVudGVyMg=="
    );

    // An unchanged replace before the rotation, so that the replace after it changes nothing
    // (kubectl's manager is already in managedFields): only staleness can make it write.
    let before = s.kubectl(&["get", "secrets", "-A", "-o", "json"]);
    s.kubectl_stdin(&["replace", "-f", "-"], &before);
    let rv_before = s.kubectl(&[
        "get",
        "secret",
        "s1",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    s.kubectl_stdin(
        &["replace", "-f", "-"],
        &s.kubectl(&["get", "secret", "s1", "-o", "json"]),
    );
    assert_eq!(
        s.kubectl(&[
            "get",
            "secret",
            "s1",
            "-o",
            "jsonpath={.metadata.resourceVersion}"
        ]),
        rv_before,
        "an unchanged replace under the current key writes nothing"
    );

    // Rotation, step 1: the new key goes first, the old one stays for reads; a restart loads it.
    write_config(conf.path(), &aescbc(&[("key2", KEY2), ("key1", KEY1)]));
    let dir = s.stop();
    let s = Server::start_in_with(dir, &as_strs(&args));
    assert!(starts_with(
        &raw_value(s.dir.path(), SECRET),
        "k8s:enc:aescbc:v1:key1:"
    ));
    // Step 2: rewrite every Secret unchanged; stale values are written again under key2.
    let all = s.kubectl(&["get", "secrets", "-A", "-o", "json"]);
    s.kubectl_stdin(&["replace", "-f", "-"], &all);
    let raw = raw_value(s.dir.path(), SECRET);
    assert!(
        starts_with(&raw, "k8s:enc:aescbc:v1:key2:"),
        "{:?}",
        String::from_utf8_lossy(&raw)
    );
    let rv = s.kubectl(&[
        "get",
        "secret",
        "s1",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    // A value under the current key is not rewritten by an unchanged replace.
    let all = s.kubectl(&["get", "secret", "s1", "-o", "json"]);
    s.kubectl_stdin(&["replace", "-f", "-"], &all);
    assert_eq!(
        s.kubectl(&[
            "get",
            "secret",
            "s1",
            "-o",
            "jsonpath={.metadata.resourceVersion}"
        ]),
        rv
    );

    // Step 3: the old key is removed; everything still reads.
    write_config(conf.path(), &aescbc(&[("key2", KEY2)]));
    let dir = s.stop();
    let s = Server::start_in_with(dir, &as_strs(&args));
    assert_eq!(
        s.kubectl(&["get", "secret", "s1", "-o", "jsonpath={.data.password}"]),
        "aHVudGVyMg=="
    );

    // A key that is gone: the value cannot be read, with upstream's error. The Secrets' watch
    // cache cannot be filled either, so readiness waits for it only as long as
    // --storage-initialization-timeout says, as upstream's storage-readiness hook does.
    write_config(conf.path(), &aescbc(&[("key3", KEY1)]));
    let dir = s.stop();
    let mut args = args;
    args.push("--storage-initialization-timeout=2s".into());
    let s = Server::start_in_with(dir, &as_strs(&args));
    assert!(
        s.log_lines()
            .iter()
            .any(|l| l.contains("Deadline exceeded while waiting for storage readiness")),
        "readiness did not give up waiting for the Secrets' cache"
    );
    let err = s.kubectl_fails(&["get", "secret", "s1"]);
    assert!(
        err.contains("no matching key was found for the provided AES transformer"),
        "{err}"
    );
}

#[test]
fn an_invalid_configuration_stops_the_server_with_upstreams_message() {
    let conf = tempfile::tempdir().expect("tempdir");
    let data = tempfile::tempdir().expect("tempdir");
    let config = write_config(
        conf.path(),
        &format!(
            "{HEAD}resources:\n- resources: [secrets]\n  providers:\n  - aesgcm:\n      keys:\n      - name: k\n        secret: YWJj\n"
        ),
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ironplane"))
        .args(["--secure-port", "0", "--data-dir"])
        .arg(data.path())
        .arg("--encryption-provider-config")
        .arg(&config)
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error while parsing file: resources[0].providers[0].aesgcm.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 3, expected one of [16 24 32]"),
        "{stderr}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ironplane"))
        .args(["--secure-port", "0", "--data-dir"])
        .arg(data.path())
        .arg("--encryption-provider-config-automatic-reload")
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "--encryption-provider-config-automatic-reload must be set with --encryption-provider-config"
        )
    );
}

fn kms_key_id(raw: &[u8], name: &str) -> String {
    let prefix = format!("k8s:enc:kms:v2:{name}:");
    assert!(
        starts_with(raw, &prefix),
        "{:?}",
        String::from_utf8_lossy(raw)
    );
    let object = EncryptedObject::decode(&raw[prefix.len()..]).expect("an EncryptedObject");
    object.key_id
}

fn health(s: &Server, path: &str) -> (bool, String) {
    let out = s.kubectl_output(&["get", "--raw", path]);
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn kms_v2_encrypts_with_the_plugin_and_follows_its_key_id() {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime for the plugin");
    let _guard = runtime.enter();
    let conf = tempfile::tempdir().expect("tempdir");
    let socket = conf.path().join("kms.sock");
    let plugin = TestPlugin::new("key-1");
    let _served = plugin.serve(&socket).expect("the plugin serves");
    let config = write_config(
        conf.path(),
        &format!(
            "{HEAD}resources:\n- resources: [secrets]\n  providers:\n  - kms:\n      apiVersion: v2\n      name: testkms\n      endpoint: unix://{}\n  - identity: {{}}\n",
            socket.display()
        ),
    );
    let args = flags(&config);
    let s = Server::start_with(&as_strs(&args));
    s.kubectl(&[
        "create",
        "secret",
        "generic",
        "s1",
        "--from-literal=password=hunter2",
    ]);
    let raw = raw_value(s.dir.path(), SECRET);
    assert_eq!(kms_key_id(&raw, "testkms"), "key-1");
    assert!(!contains(&raw, "aHVudGVyMg=="));
    assert_eq!(
        s.kubectl(&["get", "secret", "s1", "-o", "jsonpath={.data.password}"]),
        "aHVudGVyMg=="
    );
    let calls = plugin.calls();
    assert!(
        calls.starts_with(&["Status".to_string(), "Encrypt".to_string()]),
        "{calls:?}"
    );
    assert!(
        !calls.contains(&"Decrypt".to_string()),
        "the write DEK is cached: {calls:?}"
    );

    // Upstream's check: in /healthz and /readyz, not /livez.
    assert_eq!(health(&s, "/healthz/kms-providers"), (true, "ok".into()));
    assert!(health(&s, "/readyz/kms-providers").0);
    assert!(!health(&s, "/livez/kms-providers").0);

    // The plugin moves to another key: Status reports it (the health check asks at most every
    // 20 s), a new DEK is made, and an unchanged replace rewrites the now stale Secret.
    plugin.set_key_id("key-2");
    wait_until("the new key ID in use", 40, || {
        s.kubectl(&[
            "create",
            "secret",
            "generic",
            "probe-key",
            "--from-literal=a=b",
        ]);
        let id = kms_key_id(
            &raw_value(s.dir.path(), "/registry/secrets/default/probe-key"),
            "testkms",
        );
        s.kubectl(&["delete", "secret", "probe-key"]);
        if id != "key-2" {
            std::thread::sleep(Duration::from_secs(1));
        }
        id == "key-2"
    });
    let all = s.kubectl(&["get", "secrets", "-A", "-o", "json"]);
    s.kubectl_stdin(&["replace", "-f", "-"], &all);
    assert_eq!(
        kms_key_id(&raw_value(s.dir.path(), SECRET), "testkms"),
        "key-2"
    );

    // An unhealthy plugin fails the check.
    plugin.set_healthz("broken");
    wait_until("kms-providers failing", 40, || {
        !health(&s, "/readyz/kms-providers").0
    });
    assert!(!health(&s, "/healthz").0);
    assert!(
        health(&s, "/livez").0,
        "livez does not depend on the plugin"
    );

    // After a restart the server has no DEK in its cache: it asks the plugin to decrypt.
    plugin.set_healthz("ok");
    let dir = s.stop();
    let s = Server::start_in_with(dir, &as_strs(&args));
    assert_eq!(
        s.kubectl(&["get", "secret", "s1", "-o", "jsonpath={.data.password}"]),
        "aHVudGVyMg=="
    );
    assert!(plugin.calls().contains(&"Decrypt".to_string()));
}

#[test]
fn the_automatic_reload_puts_a_changed_configuration_in_force() {
    let conf = tempfile::tempdir().expect("tempdir");
    let config = write_config(conf.path(), &aescbc(&[("key1", KEY1)]));
    let mut args = flags(&config);
    args.extend([
        "--encryption-provider-config-automatic-reload".to_string(),
        "--encryption-provider-config-reload-interval=200ms".to_string(),
    ]);
    let s = Server::start_with(&as_strs(&args));
    // With reload on, the check exists even without KMS providers, and so does the hook.
    assert_eq!(health(&s, "/healthz/kms-providers"), (true, "ok".into()));
    assert!(
        health(
            &s,
            "/readyz/poststarthook/start-encryption-provider-config-automatic-reload"
        )
        .0
    );
    s.kubectl(&[
        "create",
        "secret",
        "generic",
        "s1",
        "--from-literal=password=hunter2",
    ]);
    assert!(starts_with(
        &raw_value(s.dir.path(), SECRET),
        "k8s:enc:aescbc:v1:key1:"
    ));

    write_config(
        conf.path(),
        &format!(
            "{HEAD}resources:\n- resources: [secrets]\n  providers:\n  - secretbox:\n      keys:\n      - name: box1\n        secret: {KEY2}\n  - aescbc:\n      keys:\n      - name: key1\n        secret: {KEY1}\n"
        ),
    );
    let mut n = 0;
    wait_until("secretbox in force", 30, || {
        n += 1;
        let name = format!("s{n}x");
        s.kubectl(&["create", "secret", "generic", &name, "--from-literal=a=b"]);
        let raw = raw_value(s.dir.path(), &format!("/registry/secrets/default/{name}"));
        starts_with(&raw, "k8s:enc:secretbox:v1:box1:")
    });
    // The Secret written under the old configuration still reads.
    assert_eq!(
        s.kubectl(&["get", "secret", "s1", "-o", "jsonpath={.data.password}"]),
        "aHVudGVyMg=="
    );

    // A broken file is refused and the configuration in force stays.
    write_config(conf.path(), &format!("{HEAD}resources: []\n"));
    std::thread::sleep(Duration::from_secs(2));
    s.kubectl(&[
        "create",
        "secret",
        "generic",
        "after-bad",
        "--from-literal=a=b",
    ]);
    assert!(starts_with(
        &raw_value(s.dir.path(), "/registry/secrets/default/after-bad"),
        "k8s:enc:secretbox:v1:box1:"
    ));
    assert!(
        s.log_lines()
            .iter()
            .any(|l| l.contains("error processing encryption config file")
                && l.contains("resources: Required value: at least one resources is required")),
        "the refusal is logged"
    );
}
