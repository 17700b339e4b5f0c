//! JSON as kube-apiserver writes it, end to end: a built-in object's members in its Go
//! struct's declaration order (kind and apiVersion first, `resourceVersion` after `uid`,
//! `labels` before `managedFields`) and Go's escapes in strings, in what a GET, a LIST, a watch
//! (a deletion's event included, whose resourceVersion is replaced), a Table and curl's indented
//! form answer, whichever media type the store keeps. Byte-for-byte comparisons with upstream's
//! recordings are the protobuf crate's unit tests; this one holds the plumbing.

use crate::common;

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
        // Go's encoder ends a JSON answer with a newline.
        body.ends_with("]},\"data\":{\"a\":\"\\u003cb\\u003e\\u0026\"}}\n"),
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

/// A refused JSON or merge patch shows the patched object as kube-apiserver's patch library
/// (evanphx/json-patch v4.13) writes it: objects a patch went through sorted, the rest of the
/// stored object in Go's order, values from the patch as the patch wrote them; the strict
/// decoder's unknown fields come in that order. Expected texts are kube-apiserver v1.36.2's
/// answers to the same requests.
#[test]
fn a_refused_patch_shows_the_object_as_upstreams_patch_library_writes_it() {
    let tokens = tempfile::tempdir().expect("tempdir");
    let file = tokens.path().join("tokens.csv");
    std::fs::write(&file, format!("{TOKEN},admin,uid-0,\"system:masters\"\n"))
        .expect("write the token file");
    let s = Server::start_with(&["--token-auth-file", &file.to_string_lossy()]);
    s.kubectl(&[
        "create",
        "configmap",
        "demo",
        "--from-literal=z=1",
        "--from-literal=b=2",
    ]);
    s.kubectl(&["label", "configmap", "demo", "z=1", "a=2"]);
    let stored = raw(&s, CONFIGMAP);
    // The stored metadata as GET writes it, in Go's order.
    let metadata = &stored[stored.find(r#""metadata":"#).expect("metadata")
        ..stored.find(r#","data":"#).expect("data")];
    let bearer = format!("Bearer {TOKEN}");
    let patch = |content_type: &str, body: &str| -> (u16, String) {
        let answer = common::raw_https(
            &format!("{}{CONFIGMAP}?fieldValidation=Strict&dryRun=All", s.url),
            "PATCH",
            &[("Authorization", &bearer), ("Content-Type", content_type)],
            Some(body),
        );
        let (code, body) = answer.split_once(' ').expect("a status line");
        let status: Value = serde_json::from_str(body).expect("a Status");
        let message = status["message"].as_str().expect("a message").to_string();
        (code.parse().expect("a code"), message)
    };
    let shown = |json: &str| format!("{:?}", json);

    let (code, message) = patch(
        "application/json-patch+json",
        r#"[{"op":"add","path":"/data2","value":{"y":1,"x":2}}]"#,
    );
    let written = format!(
        r#"{{"apiVersion":"v1","data":{{"b":"2","z":"1"}},"data2":{{"y":1,"x":2}},"kind":"ConfigMap",{metadata}}}"#
    );
    assert_eq!(
        (code, message),
        (
            422,
            format!(
                // Upstream's message for an empty kind starts with a space.
                r#" "" is invalid: patch: Invalid value: {}: strict decoding error: unknown field "data2""#,
                shown(&written)
            )
        )
    );

    // Unknown fields inside a value from the patch come in the patch's order.
    let (code, message) = patch(
        "application/json-patch+json",
        r#"[{"op":"add","path":"/metadata/ownerReferences","value":[{"zeta":1,"apiVersion":"v1","alpha":2,"kind":"X","name":"n","uid":"u"}]}]"#,
    );
    assert_eq!(code, 422, "{message}");
    assert!(
        message.ends_with(r#"strict decoding error: unknown field "metadata.ownerReferences[0].zeta", unknown field "metadata.ownerReferences[0].alpha""#),
        "{message}"
    );
    // The metadata the patch went through is sorted (`creationTimestamp` first).
    assert!(
        message.contains(r#"\"kind\":\"ConfigMap\",\"metadata\":{\"creationTimestamp\":"#),
        "{message}"
    );

    // A merge patch sorts what it merges and prunes the nulls of the objects it adds.
    let (code, message) = patch(
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"q":"1"}},"zz":[{"b":1,"a":null}]}"#,
    );
    assert_eq!(code, 422, "{message}");
    assert!(
        message.contains(r#"\"labels\":{\"a\":\"2\",\"q\":\"1\",\"z\":\"1\"},\"managedFields\":"#)
            && message
                .ends_with(r#"\"zz\":[{\"b\":1}]}": strict decoding error: unknown field "zz""#),
        "{message}"
    );

    // A list a merge patch adds keeps its nulls, which decode as empty strings.
    let (code, message) = patch(
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":["example.com/a",null]}}"#,
    );
    assert_eq!(
        (code, message.as_str()),
        (
            422,
            r#"ConfigMap "demo" is invalid: [metadata.finalizers: Invalid value: "": name part must be non-empty, metadata.finalizers: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), metadata.finalizers[1]: Invalid value: "": name is neither a standard finalizer name nor is it fully qualified]"#
        )
    );
}
