//! JSON as kube-apiserver writes it, end to end: a built-in object's members in its Go
//! struct's declaration order (kind and apiVersion first, `resourceVersion` after `uid`,
//! `labels` before `managedFields`) and Go's escapes in strings, in what a GET, a LIST, a watch
//! (a deletion's event included, whose resourceVersion is replaced), a Table and curl's indented
//! form answer, whichever media type the store keeps. Byte-for-byte comparisons with upstream's
//! recordings are the protobuf crate's unit tests; this one holds the plumbing.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use common::Server;
use serde_json::Value;

const CONFIGMAP: &str = "/api/v1/namespaces/default/configmaps/demo";

fn raw(s: &Server, path: &str) -> String {
    s.kubectl(&["get", "--raw", path])
}

/// A watch of the demo ConfigMap from `rv` for `seconds`, started now; its output once it ends.
fn watch(s: &Server, rv: &str, seconds: u32) -> std::process::Child {
    s.kubectl_cmd(&[
        "get",
        "--raw",
        &format!(
            "/api/v1/namespaces/default/configmaps?watch=1&fieldSelector=metadata.name=demo&resourceVersion={rv}&timeoutSeconds={seconds}"
        ),
    ])
    .stdout(Stdio::piped())
    .spawn()
    .expect("kubectl runs")
}

/// The bearer token of a `system:masters` user, for the requests kubectl cannot make.
const TOKEN: &str = "go-json-token";

fn check(flags: &[&str]) {
    let tokens = tempfile::tempdir().expect("tempdir");
    let file = tokens.path().join("tokens.csv");
    std::fs::write(&file, format!("{TOKEN},admin,uid-0,\"system:masters\"\n"))
        .expect("write the token file");
    let file = file.to_string_lossy().into_owned();
    let mut args = flags.to_vec();
    args.extend(["--token-auth-file", &file]);
    let s = Server::start_with(&args);
    s.kubectl(&["create", "configmap", "demo", "--from-literal=a=<b>&"]);
    s.kubectl(&["label", "configmap", "demo", "x=y"]);
    let body = raw(&s, CONFIGMAP);
    let obj: Value = serde_json::from_str(&body).expect("JSON");
    let (uid, rv, created) = (
        obj["metadata"]["uid"].as_str().expect("uid"),
        obj["metadata"]["resourceVersion"].as_str().expect("rv"),
        obj["metadata"]["creationTimestamp"].as_str().expect("time"),
    );
    let head = format!(
        r#"{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"name":"demo","namespace":"default","uid":"{uid}","resourceVersion":"{rv}","creationTimestamp":"{created}","labels":{{"x":"y"}},"managedFields":["#
    );
    assert!(body.starts_with(&head), "{flags:?}: {body}");
    assert!(
        body.ends_with(r#"]},"data":{"a":"\u003cb\u003e\u0026"}}"#),
        "{flags:?}: {body}"
    );

    // A list: the list's own fields in Go's order, items without their type.
    let list = raw(
        &s,
        "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name=demo",
    );
    assert!(
        list.starts_with(
            r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":""#
        ),
        "{list}"
    );
    let item = &head[r#"{"kind":"ConfigMap","apiVersion":"v1","#.len()..];
    assert!(list.contains(&format!(r#""items":[{{{item}"#)), "{list}");

    // A watch from before the label: the label's event, then the deletion's, whose object
    // carries the deletion's resourceVersion where the stored one stood.
    let created_rv = (rv.parse::<u64>().expect("a number") - 1).to_string();
    // Read as it streams: the label's event is replayed at once, the deletion follows it.
    let mut watcher = watch(&s, &created_rv, 60);
    let mut stream = BufReader::new(watcher.stdout.take().expect("piped stdout")).lines();
    let mut next = || {
        stream
            .next()
            .expect("an event before the watch ends")
            .expect("readable")
    };
    let first = next();
    s.kubectl(&["delete", "configmap", "demo"]);
    let second = next();
    let _ = watcher.kill();
    let _ = watcher.wait();
    let events = format!("{first}\n{second}");
    let lines = [first.as_str(), second.as_str()];
    assert!(
        lines[0].starts_with(&format!(r#"{{"type":"MODIFIED","object":{head}"#)),
        "{events}"
    );
    let deleted: Value = serde_json::from_str(lines[1]).expect("an event");
    let deleted_rv = deleted["object"]["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv");
    assert_ne!(deleted_rv, rv);
    let deleted_head = head.replace(
        &format!(r#""resourceVersion":"{rv}""#),
        &format!(r#""resourceVersion":"{deleted_rv}""#),
    );
    assert!(
        lines[1].starts_with(&format!(r#"{{"type":"DELETED","object":{deleted_head}"#)),
        "{events}"
    );

    // A Table, as kubectl asks for one, and curl's indented answer.
    s.kubectl(&["create", "configmap", "demo"]);
    let url = format!("{}{CONFIGMAP}", s.url);
    let bearer = format!("Bearer {TOKEN}");
    let table = common::raw_https(
        &url,
        "GET",
        &[
            ("Authorization", &bearer),
            ("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"),
        ],
        None,
    );
    assert!(
        table.starts_with(
            r#"200 {"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"#
        ),
        "{table}"
    );
    assert!(
        table.contains(
            r#""columnDefinitions":[{"name":"Name","type":"string","format":"name","description":"#
        ),
        "{table}"
    );
    assert!(table.contains(r#""rows":[{"cells":["demo","#), "{table}");
    let indented = common::raw_https(
        &url,
        "GET",
        &[("Authorization", &bearer), ("User-Agent", "curl/8.0")],
        None,
    );
    assert!(
        indented.starts_with("200 {\n  \"kind\": \"ConfigMap\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {\n    \"name\": \"demo\",\n"),
        "{indented}"
    );
}

#[test]
fn built_in_objects_are_written_in_go_member_order_from_a_json_store() {
    check(&["--storage-media-type=application/json"]);
}

#[test]
fn built_in_objects_are_written_in_go_member_order_from_a_protobuf_store() {
    check(&["--storage-media-type=application/vnd.kubernetes.protobuf"]);
}
