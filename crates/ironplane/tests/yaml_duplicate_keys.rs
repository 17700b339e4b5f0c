//! Keys given twice in YAML bodies, answered per `fieldValidation` as kube-apiserver answers
//! them: server-side apply (`application/apply-patch+yaml`) and creates and updates in
//! `application/yaml`. The bodies and the expected answers are those of upstream's
//! test/integration/apiserver/field_validation_test.go (`applyInvalidBody`, `invalidBodyYAML`).

use crate::common;

use common::Server;
use serde_json::Value;

/// One request with the admin's client certificate (tests/python's `Raw`, so that no client
/// rewrites the body): the status, the `Warning` header values in order, and the body as JSON.
fn request(
    s: &Server,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, Vec<String>, Value) {
    const SCRIPT: &str = "import json,sys\n\
from common import Raw\n\
status,headers,body=Raw().request(sys.argv[1],sys.argv[2],sys.argv[4],sys.argv[3])\n\
print(json.dumps({'status':status,'warnings':headers.get_all('Warning') or [],'body':body.decode()}))\n";
    let out = std::process::Command::new("python3")
        .args(["-c", SCRIPT, method, path, content_type, body])
        .env("KUBECONFIG", s.kubeconfig())
        .env("PYTHONPATH", common::tests_dir().join("python"))
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).expect("the script prints JSON");
    let warnings = answer["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect();
    let body = serde_json::from_str(answer["body"].as_str().unwrap()).expect("a JSON answer");
    (answer["status"].as_u64().unwrap() as u16, warnings, body)
}

/// A warning as the `Warning` header carries it.
fn header(text: &str) -> String {
    format!(
        "299 - \"{}\"",
        text.replace('\\', "\\\\").replace('"', "\\\"")
    )
}

const APPLY: &str = "application/apply-patch+yaml";

/// upstream's `applyInvalidBody`: JSON (read as YAML) with `paused` and a container's
/// `imagePullPolicy` given twice, on its lines 10 and 27.
fn apply_body(name: &str) -> String {
    format!(
        "{{\n\t\t\"apiVersion\": \"apps/v1\",\n\t\t\"kind\": \"Deployment\",\n\t\t\"metadata\": {{\n\t\t\t\"name\": \"{name}\",\n\t\t\t\"labels\": {{\"app\": \"nginx\"}}\n\t\t}},\n\t\t\"spec\": {{\n\t\t\t\"paused\": false,\n\t\t\t\"paused\": true,\n\t\t\t\"selector\": {{\n\t\t\t\t\"matchLabels\": {{\n\t\t\t\t\t\"app\": \"nginx\"\n\t\t\t\t}}\n\t\t\t}},\n\t\t\t\"template\": {{\n\t\t\t\t\"metadata\": {{\n\t\t\t\t\t\"labels\": {{\n\t\t\t\t\t\t\"app\": \"nginx\"\n\t\t\t\t\t}}\n\t\t\t\t}},\n\t\t\t\t\"spec\": {{\n\t\t\t\t\t\"containers\": [{{\n\t\t\t\t\t\t\"name\":  \"nginx\",\n\t\t\t\t\t\t\"image\": \"nginx:latest\",\n\t\t\t\t\t\t\"imagePullPolicy\": \"Never\",\n\t\t\t\t\t\t\"imagePullPolicy\": \"Always\"\n\t\t\t\t\t}}]\n\t\t\t\t}}\n\t\t\t}}\n\t\t}}\n\t}}"
    )
}

const APPLY_DUPLICATES: [&str; 2] = [
    r#"line 10: key "paused" already set in map"#,
    r#"line 27: key "imagePullPolicy" already set in map"#,
];

#[test]
fn apply_with_duplicate_keys_answers_per_field_validation() {
    let s = Server::start();
    let path = |name: &str, query: &str| {
        format!("/apis/apps/v1/namespaces/default/deployments/{name}?fieldManager=mgr{query}")
    };

    // Strict: upstream's 400 once the apply ran, and nothing is stored.
    let (status, warnings, answer) = request(
        &s,
        "PATCH",
        &path("apply-strict", "&fieldValidation=Strict"),
        APPLY,
        &apply_body("apply-strict"),
    );
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["reason"], "BadRequest");
    assert_eq!(
        answer["message"],
        format!(
            "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  {}\n  {}",
            APPLY_DUPLICATES[0], APPLY_DUPLICATES[1]
        )
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    let (status, _, _) = request(
        &s,
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/apply-strict",
        "",
        "",
    );
    assert_eq!(status, 404);

    // Warn, and no fieldValidation (Warn is the default): created with the last values, one
    // warning per duplicate.
    for (name, query) in [
        ("apply-warn", "&fieldValidation=Warn"),
        ("apply-default", ""),
    ] {
        let (status, warnings, created) =
            request(&s, "PATCH", &path(name, query), APPLY, &apply_body(name));
        assert_eq!(status, 201, "{created}");
        assert_eq!(
            warnings,
            APPLY_DUPLICATES.map(header),
            "fieldValidation {query:?}"
        );
        assert_eq!(created["spec"]["paused"], true);
        assert_eq!(
            created["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "Always"
        );
    }

    // Ignore: nothing said, the last values kept.
    let (status, warnings, created) = request(
        &s,
        "PATCH",
        &path("apply-ignore", "&fieldValidation=Ignore"),
        APPLY,
        &apply_body("apply-ignore"),
    );
    assert_eq!(status, 201, "{created}");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(created["spec"]["paused"], true);

    // The apply's own error comes first: another manager's conflicting apply is a 409 even
    // under Strict with keys given twice.
    let conflicting = apply_body("apply-ignore").replace(
        "\"paused\": false,\n\t\t\t\"paused\": true",
        "\"paused\": true,\n\t\t\t\"paused\": false",
    );
    let (status, _, answer) = request(
        &s,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/apply-ignore?fieldManager=other&fieldValidation=Strict",
        APPLY,
        &conflicting,
    );
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["reason"], "Conflict");
}

/// upstream's `invalidBodyYAML`: `metadata.name`, `spec.unknownDupe`, `spec.paused` and a
/// container's `imagePullPolicy` given twice (lines 5, 12, 14, 28), and unknown fields.
fn create_body(name: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: dupename\n  name: {name}\n  unknownMeta: metaVal\n  labels:\n    app: nginx\nspec:\n  unknown1: val1\n  unknownDupe: valDupe\n  unknownDupe: valDupe2\n  paused: true\n  paused: false\n  selector:\n    matchLabels:\n      app: nginx\n  template:\n    metadata:\n      labels:\n        app: nginx\n    spec:\n      containers:\n      - name: nginx\n        image: nginx:latest\n        unknownNested: val1\n        imagePullPolicy: Always\n        imagePullPolicy: Never"
    )
}

const CREATE_FINDINGS: [&str; 8] = [
    r#"line 5: key "name" already set in map"#,
    r#"line 12: key "unknownDupe" already set in map"#,
    r#"line 14: key "paused" already set in map"#,
    r#"line 28: key "imagePullPolicy" already set in map"#,
    r#"unknown field "metadata.unknownMeta""#,
    r#"unknown field "spec.template.spec.containers[0].unknownNested""#,
    r#"unknown field "spec.unknown1""#,
    r#"unknown field "spec.unknownDupe""#,
];

#[test]
fn yaml_create_and_update_with_duplicate_keys_answer_per_field_validation() {
    let s = Server::start();
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let yaml = "application/yaml";

    // Strict: upstream's strict decoding error, go-yaml's text first, then the unknown fields.
    let strict = format!(
        "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: yaml: unmarshal errors:\n  {}\n  {}\n  {}\n  {}, {}",
        CREATE_FINDINGS[0],
        CREATE_FINDINGS[1],
        CREATE_FINDINGS[2],
        CREATE_FINDINGS[3],
        CREATE_FINDINGS[4..].join(", ")
    );
    let (status, _, answer) = request(
        &s,
        "POST",
        &format!("{deployments}?fieldValidation=Strict"),
        yaml,
        &create_body("yaml-strict"),
    );
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["message"], strict);

    // Warn and the default: created with the last values, a warning per finding in order.
    for (name, query) in [("yaml-warn", "?fieldValidation=Warn"), ("yaml-default", "")] {
        let (status, warnings, created) = request(
            &s,
            "POST",
            &format!("{deployments}{query}"),
            yaml,
            &create_body(name),
        );
        assert_eq!(status, 201, "{created}");
        assert_eq!(
            warnings,
            CREATE_FINDINGS.map(header),
            "fieldValidation {query:?}"
        );
        assert_eq!(created["metadata"]["name"], name);
        // `paused: false` won over `true`, and Go omits a false `paused`.
        assert_eq!(created["spec"].get("paused"), None);
        assert_eq!(
            created["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "Never"
        );
    }

    // Ignore: nothing said.
    let (status, warnings, created) = request(
        &s,
        "POST",
        &format!("{deployments}?fieldValidation=Ignore"),
        yaml,
        &create_body("yaml-ignore"),
    );
    assert_eq!(status, 201, "{created}");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(created["metadata"]["name"], "yaml-ignore");

    // An update reads its body alike.
    let update = |query: &str| {
        request(
            &s,
            "PUT",
            &format!("{deployments}/yaml-ignore{query}"),
            yaml,
            &create_body("yaml-ignore"),
        )
    };
    let (status, _, answer) = update("?fieldValidation=Strict");
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["message"], strict);
    let (status, warnings, _) = update("");
    assert_eq!(status, 200);
    assert_eq!(warnings, CREATE_FINDINGS.map(header));
}
