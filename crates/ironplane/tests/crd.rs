//! CustomResourceDefinitions end to end with kubectl (issue 8): a CRD is served as soon as it is
//! Established, its custom resources are defaulted and pruned by its schema, printed with its
//! columns, scaled and status-updated through their subresources, listed in discovery, and
//! removed with their namespace or their CRD.

use crate::common;

use std::time::{Duration, Instant};

use common::Server;
use serde_json::Value;

const CRD_YAML: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, kind: Widget, shortNames: [wd], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    selectableFields:
    - {jsonPath: .spec.mode}
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
    additionalPrinterColumns:
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Mode, type: string, jsonPath: .spec.mode, priority: 1}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - {rule: "self.replicas <= 50 || self.mode == 'slow'", message: fast widgets run at most 50}
            properties:
              replicas: {type: integer, default: 1, minimum: 0, maximum: 100, description: How many widgets run.}
              mode: {type: string, default: fast, enum: [fast, slow]}
              free: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

fn established(s: &Server, name: &str) {
    s.kubectl(&[
        "wait",
        "--for=condition=Established",
        &format!("crd/{name}"),
        "--timeout=10s",
    ]);
}

#[test]
fn custom_resources_are_served_from_their_definition() {
    let s = Server::start();
    let started = Instant::now();
    s.kubectl_stdin(&["create", "-f", "-"], CRD_YAML);
    established(&s, "widgets.example.com");
    // Upstream takes seconds; the brief asks for well under 100 ms from the create's answer
    // (measured here with kubectl's own start-up included, so the bound is loose).
    assert!(started.elapsed() < Duration::from_secs(5));

    let crd = json(&s.kubectl(&["get", "crd", "widgets.example.com", "-o", "json"]));
    let status = &crd["status"];
    assert_eq!(status["acceptedNames"]["plural"], "widgets");
    assert_eq!(status["acceptedNames"]["singular"], "widget");
    assert_eq!(status["acceptedNames"]["listKind"], "WidgetList");
    assert_eq!(status["storedVersions"], serde_json::json!(["v1"]));
    let conditions: Vec<(String, String, String)> = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let f = |k: &str| c[k].as_str().unwrap_or("").to_string();
            (f("type"), f("status"), f("reason"))
        })
        .collect();
    assert_eq!(
        conditions,
        [
            ("NamesAccepted".into(), "True".into(), "NoConflicts".into()),
            (
                "Established".into(),
                "True".into(),
                "InitialNamesAccepted".into()
            ),
        ]
    );

    // Discovery: the resource, its short name and category, both versions, v1 preferred.
    let resources = s.kubectl(&["api-resources", "--api-group=example.com"]);
    assert!(
        resources.contains("widgets") && resources.contains(" wd ") && resources.contains("Widget"),
        "{resources}"
    );
    let group = json(&s.kubectl(&["get", "--raw", "/apis/example.com"]));
    assert_eq!(group["preferredVersion"]["version"], "v1");
    assert_eq!(group["versions"].as_array().unwrap().len(), 2);

    // kubectl explain reads the CRD's OpenAPI v3 document.
    let explained = s.kubectl(&["explain", "widgets.spec.replicas"]);
    assert!(
        explained.contains("KIND:       Widget") && explained.contains("How many widgets run."),
        "{explained}"
    );
    // ...and the OpenAPI v2 document (in protobuf), where the CRD is merged in.
    let explained = s.kubectl(&["explain", "widgets.spec", "--output", "plaintext-openapiv2"]);
    assert!(
        explained.contains("KIND:     Widget")
            && explained.contains("replicas\t<integer>")
            && explained.contains("How many widgets run."),
        "{explained}"
    );
    // Defaults from the schema; unknown fields pruned (kubectl's default is Strict: refused).
    s.kubectl(&["create", "namespace", "crs"]);
    let err = s.kubectl_stdin_output(
        &["create", "-n", "crs", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: bad}\nspec: {junk: 1}\n",
    );
    let err = String::from_utf8_lossy(&err.stderr);
    assert!(
        err.contains(r#"strict decoding error: unknown field "spec.junk""#),
        "{err}"
    );
    s.kubectl_stdin(
        &["create", "-n", "crs", "--validate=false", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {replicas: 3, junk: 1, free: {any: {thing: true}}}\n",
    );
    // Schema violations: every cause of the request, in upstream's words.
    let out = s.kubectl_stdin_output(
        &["create", "-n", "crs", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: bad}\nspec: {replicas: 101, mode: warp}\n",
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim(),
        "The Widget \"bad\" is invalid: \n* spec.mode: Unsupported value: \"warp\": supported values: \"fast\", \"slow\"\n* spec.replicas: Invalid value: 101: spec.replicas in body should be less than or equal to 100\n* <nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
    );
    let w1 = json(&s.kubectl(&["get", "-n", "crs", "wd", "w1", "-o", "json"]));
    assert_eq!(
        w1["spec"],
        serde_json::json!({"replicas": 3, "mode": "fast", "free": {"any": {"thing": true}}})
    );
    assert_eq!(w1["metadata"]["generation"], 1);

    let strategic = s.kubectl_fails(&[
        "patch",
        "-n",
        "crs",
        "widget",
        "w1",
        "--type=strategic",
        "-p",
        "{}",
    ]);
    assert!(
        strategic.contains("accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"),
        "{strategic}"
    );

    // A CEL rule (x-kubernetes-validations) refuses with its message; schema errors that make
    // the object unfit for the rules keep them from running, as upstream does.
    let cel = s.kubectl_stdin_output(
        &["create", "-n", "crs", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: cel}\nspec: {replicas: 60}\n",
    );
    assert_eq!(
        String::from_utf8_lossy(&cel.stderr).trim(),
        r#"The Widget "cel" is invalid: spec: Invalid value: "object": fast widgets run at most 50"#
    );
    s.kubectl_stdin(
        &["create", "-n", "crs", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: cel}\nspec: {replicas: 60, mode: slow}\n",
    );
    s.kubectl(&["delete", "-n", "crs", "widget", "cel"]);

    // Status only through /status; the scale subresource reads and writes the CRD's paths.
    s.kubectl(&[
        "patch",
        "-n",
        "crs",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":9}}"#,
    ]);
    s.kubectl(&[
        "patch", "-n", "crs", "widget", "w1", "--subresource=status", "--type=merge", "-p",
        r#"{"spec":{"replicas":7},"status":{"replicas":2,"selector":"app=w","conditions":[{"type":"Ready","status":"True"}]}}"#,
    ]);
    s.kubectl(&["scale", "-n", "crs", "widget", "w1", "--replicas=4"]);
    let scale = json(&s.kubectl(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/crs/widgets/w1/scale",
    ]));
    assert_eq!(scale["spec"]["replicas"], 4);
    assert_eq!(scale["status"]["replicas"], 2);
    assert_eq!(scale["status"]["selector"], "app=w");
    let w1 = json(&s.kubectl(&["get", "-n", "crs", "widget", "w1", "-o", "json"]));
    assert_eq!(w1["spec"]["replicas"], 4);
    assert_eq!(w1["metadata"]["generation"], 2);

    // Printer columns, the priority-1 column only with -o wide.
    let table = s.kubectl(&["get", "-n", "crs", "widgets"]);
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["NAME", "REPLICAS", "READY"], "{table}");
    assert_eq!(lines[1], ["w1", "4", "True"], "{table}");
    let wide = s.kubectl(&["get", "-n", "crs", "widgets", "-o", "wide"]);
    assert!(wide.lines().next().unwrap().contains("MODE"), "{wide}");
    assert!(
        s.kubectl(&["get", "all", "-n", "crs"])
            .contains("widget.example.com/w1")
    );

    // Another served version reads the same object.
    let beta = json(&s.kubectl(&[
        "get",
        "--raw",
        "/apis/example.com/v1beta1/namespaces/crs/widgets/w1",
    ]));
    assert_eq!(beta["apiVersion"], "example.com/v1beta1");
    assert_eq!(beta["spec"]["replicas"], 4);

    // The URL's version only, even another served version of the CRD (the request scope's
    // AcceptsGroupVersion; checked against kube-apiserver v1.36.2); another kind is refused by
    // the kind's rules, the 422 naming the body's kind.
    let raw = "/apis/example.com/v1/namespaces/crs/widgets";
    let beta_body = s.kubectl_stdin_output(
        &["create", "--raw", raw, "-f", "-"],
        r#"{"apiVersion":"example.com/v1beta1","kind":"Widget","metadata":{"name":"w9"}}"#,
    );
    let beta_body = String::from_utf8_lossy(&beta_body.stderr);
    assert!(
        beta_body.contains("the API version in the data (example.com/v1beta1) does not match the expected API version (example.com/v1)"),
        "{beta_body}"
    );
    let other = s.kubectl_stdin_output(
        &["create", "--raw", raw, "-f", "-"],
        r#"{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g"}}"#,
    );
    let other = String::from_utf8_lossy(&other.stderr);
    assert!(
        other.contains(
            r#"The Gadget "g" is invalid: kind: Invalid value: "Gadget": must be Widget"#
        ),
        "{other}"
    );

    // A deprecated version says so; selectable fields select.
    let out = s.kubectl_output(&["get", "widgets.v1beta1.example.com", "-n", "crs"]);
    let warned = String::from_utf8_lossy(&out.stderr);
    // That version has no printer columns: upstream's default Name and Age.
    let header = String::from_utf8_lossy(&out.stdout);
    let header: Vec<&str> = header
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "AGE"]);
    assert!(
        warned.contains("Warning: example.com/v1beta1 Widget is deprecated"),
        "{warned}"
    );
    let fast = s.kubectl(&[
        "get",
        "widgets",
        "-n",
        "crs",
        "--field-selector=spec.mode=fast",
        "-o",
        "name",
    ]);
    assert_eq!(fast.trim(), "widget.example.com/w1");
    let slow = s.kubectl(&[
        "get",
        "widgets",
        "-n",
        "crs",
        "--field-selector=spec.mode=slow",
        "-o",
        "name",
    ]);
    assert_eq!(slow.trim(), "");

    // A schema change shows on objects stored before it: a new default, a field removed.
    s.kubectl(&[
        "patch", "crd", "widgets.example.com", "--type=json", "-p",
        r#"[{"op":"add","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/color","value":{"type":"string","default":"blue"}},{"op":"remove","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/free"}]"#,
    ]);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let w = json(&s.kubectl(&["get", "-n", "crs", "widget", "w1", "-o", "json"]));
        if w["spec"]["color"] == "blue" && w["spec"].get("free").is_none() {
            break;
        }
        assert!(Instant::now() < deadline, "schema change not applied: {w}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // A CRD asking for names another CRD of the group holds is not served.
    s.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gadgets.example.com}\nspec:\n  group: example.com\n  scope: Cluster\n  names: {plural: gadgets, kind: Gadget, shortNames: [wd]}\n  versions:\n  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}\n",
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let gadgets = loop {
        let c = json(&s.kubectl(&["get", "crd", "gadgets.example.com", "-o", "json"]));
        if c["status"]["conditions"].is_array() || Instant::now() > deadline {
            break c;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let names = &gadgets["status"]["conditions"][0];
    assert_eq!(names["type"], "NamesAccepted");
    assert_eq!(names["status"], "False");
    assert_eq!(names["reason"], "ShortNamesConflict");
    assert_eq!(names["message"], r#""wd" is already in use"#);
    assert!(!s.kubectl(&["api-resources"]).contains("gadgets"));
    // Cluster-scoped resources have no route under a namespace.
    let err = s.kubectl_fails(&["get", "--raw", "/api/v1/namespaces/crs/nodes"]);
    assert!(err.contains("NotFound"), "{err}");

    // Deleting a namespace deletes its custom resources.
    s.kubectl(&["create", "namespace", "gone"]);
    s.kubectl_stdin(
        &["create", "-n", "gone", "-f", "-"],
        "apiVersion: example.com/v1beta1\nkind: Widget\nmetadata: {name: w2}\nspec: {replicas: 1}\n",
    );
    s.kubectl(&["delete", "namespace", "gone", "--timeout=10s"]);
    let left = s.kubectl(&["get", "widgets", "-A", "-o", "name"]);
    assert_eq!(left.trim(), "widget.example.com/w1");

    // Deleting the CRD deletes its custom resources first, then stops serving them.
    s.kubectl(&["delete", "crd", "widgets.example.com", "--timeout=10s"]);
    // kubectl may still hold the resource in its discovery cache: then the list is NotFound.
    let gone = s.kubectl_fails(&["get", "widgets", "-A"]);
    assert!(
        gone.contains("the server doesn't have a resource type")
            || gone.contains("the server could not find the requested resource"),
        "{gone}"
    );
    let raw = s.kubectl_fails(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/crs/widgets",
    ]);
    assert!(raw.contains("NotFound"), "{raw}");
}

#[test]
fn stored_definitions_are_served_once_ready_after_a_restart() {
    let s = Server::start();
    s.kubectl_stdin(&["create", "-f", "-"], CRD_YAML);
    established(&s, "widgets.example.com");
    s.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: kept, namespace: default}\nspec: {replicas: 2}\n",
    );
    let dir = s.stop();
    // `start_in` waits for /readyz; from then on the stored CRD's resources are served, as
    // upstream's crd-informer-synced readiness check promises.
    let s = Server::start_in(dir);
    let kept = json(&s.kubectl(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/default/widgets/kept",
    ]));
    assert_eq!(kept["spec"]["replicas"], 2);
    let ready = s.kubectl(&["get", "--raw", "/readyz?verbose"]);
    for hook in [
        "start-apiextensions-informers",
        "start-apiextensions-controllers",
        "crd-informer-synced",
    ] {
        assert!(
            ready.contains(&format!("[+]poststarthook/{hook} ok")),
            "{ready}"
        );
    }
}

#[test]
fn unserved_versions_and_oversized_bodies_are_refused() {
    let s = Server::start();
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.bad.example.com}
spec:
  group: bad.example.com
  scope: Namespaced
  names: {plural: things, kind: Thing}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
  - {name: v0, served: false, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
"#,
    );
    established(&s, "things.bad.example.com");
    // A version that is not served is not there at all.
    let out = s.kubectl_output(&[
        "get",
        "--raw",
        "/apis/bad.example.com/v0/namespaces/default/things",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("NotFound") || err.contains("404"), "{err}");
    // A body over the 3 MiB limit: 413 and nothing written.
    let big = format!(
        r#"{{"apiVersion":"bad.example.com/v1","kind":"Thing","metadata":{{"name":"big"}},"data":"{}"}}"#,
        "x".repeat(3 * 1024 * 1024 + 10)
    );
    let out = s.kubectl_stdin_output(
        &[
            "create",
            "--raw",
            "/apis/bad.example.com/v1/namespaces/default/things",
            "-f",
            "-",
        ],
        &big,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Request entity too large: limit is 3145728"),
        "{}",
        &err[..err.len().min(500)]
    );
    let names = s.kubectl(&["get", "things.bad.example.com", "-A", "-o", "name"]);
    assert_eq!(names.trim(), "");
}

#[test]
fn metadata_is_object_meta_at_the_top_and_in_embedded_resources() {
    // Upstream decodes a custom resource's metadata, and that of every
    // x-kubernetes-embedded-resource, into ObjectMeta (schemaobjectmeta): unknown fields go
    // (reported under Strict/Warn), empty ones are omitted, and what Go cannot hold is a 400.
    let s = Server::start();
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: embeds.e.example.com}
spec:
  group: e.example.com
  scope: Namespaced
  names: {plural: embeds, kind: Embed}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              template: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}
              items:
                type: array
                items: {type: object, x-kubernetes-embedded-resource: true, properties: {data: {type: string}}}
"#,
    );
    established(&s, "embeds.e.example.com");
    let path = "/apis/e.example.com/v1/namespaces/default/embeds";
    let body = |name: &str| {
        format!(
            r#"{{"apiVersion":"e.example.com/v1","kind":"Embed","metadata":{{"name":"{name}","labels":{{}},"foo":1}},
            "spec":{{"template":{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"x","foo":"bar","labels":{{"a":"b"}},"annotations":{{}},"creationTimestamp":null}},"spec":{{"z":1}}}},
            "items":[{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"bar":1,"name":"c"}},"data":"d","x":1}}]}}}}"#
        )
    };
    let created = json(&s.kubectl_stdin(
        &[
            "create",
            "--raw",
            &format!("{path}?fieldValidation=Ignore"),
            "-f",
            "-",
        ],
        &body("plain"),
    ));
    assert!(
        created["metadata"].get("foo").is_none() && created["metadata"].get("labels").is_none()
    );
    assert_eq!(
        created["spec"]["template"]["metadata"],
        json(r#"{"labels":{"a":"b"},"name":"x"}"#)
    );
    assert_eq!(
        created["spec"]["items"],
        json(r#"[{"apiVersion":"v1","data":"d","kind":"ConfigMap","metadata":{"name":"c"}}]"#)
    );
    // Strict names every unknown field in the decoder's order: the top-level metadata, the
    // schema's pruning, then the embedded resources' metadata; upstream's strictDecodingError
    // joins them with ", " (its field_validation_test.go expects no brackets).
    let out = s.kubectl_stdin_output(
        &[
            "create",
            "--raw",
            &format!("{path}?fieldValidation=Strict"),
            "-f",
            "-",
        ],
        &body("strict"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"Embed in version "v1" cannot be handled as a Embed: strict decoding error: unknown field "metadata.foo", unknown field "spec.items[0].x", unknown field "spec.items[0].metadata.bar", unknown field "spec.template.metadata.foo""#),
        "{err}"
    );
    let refused = |body: &str| {
        let out = s.kubectl_stdin_output(&["create", "--raw", path, "-f", "-"], body);
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = refused(
        r#"{"apiVersion":"e.example.com/v1","kind":"Embed","metadata":{"name":"bad","labels":"oops"}}"#,
    );
    assert!(err.contains(r#"Error from server (BadRequest): Embed in version "v1" cannot be handled as a Embed: json: cannot unmarshal string into Go struct field ObjectMeta.labels of type map[string]string"#), "{err}");
    let err = refused(
        r#"{"apiVersion":"e.example.com/v1","kind":"Embed","metadata":{"name":"bad"},"spec":{"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","labels":"oops"}}}}"#,
    );
    assert!(err.contains(r#"cannot be handled as a Embed: spec.template.metadata: Invalid value: {"labels":"oops","name":"x"}: json: cannot unmarshal string into Go struct field ObjectMeta.labels of type map[string]string"#), "{err}");
    let err = refused(
        r#"{"apiVersion":"e.example.com/v1","kind":"Embed","metadata":{"name":"bad"},"spec":{"template":{"apiVersion":1,"kind":"Pod"}}}"#,
    );
    assert!(err.contains("cannot be handled as a Embed: spec.template.apiVersion: Invalid value: 1: must be a string"), "{err}");
    // A patch that breaks metadata is refused the same way, and nothing is written.
    let err = s.kubectl_fails(&[
        "patch",
        "embed",
        "plain",
        "--type=merge",
        "-p",
        r#"{"metadata":{"generation":"x"}}"#,
    ]);
    assert!(
        err.contains(
            "json: cannot unmarshal string into Go struct field ObjectMeta.generation of type int64"
        ),
        "{err}"
    );
    let names = s.kubectl(&["get", "embeds", "-o", "name"]);
    assert_eq!(names.trim(), "embed.e.example.com/plain");
}

#[test]
fn rules_are_costed_when_written_and_when_they_run() {
    let s = Server::start();
    // Unbounded, the rule could cost more than a CRD may; bounded, it is accepted.
    let crd = |max_items: &str| {
        format!(
            r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: lists.c.example.com}}
spec:
  group: c.example.com
  scope: Namespaced
  names: {{plural: lists, kind: List2}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              names: {{type: array, {max_items} items: {{type: string, maxLength: 10}}}}
            x-kubernetes-validations:
            - {{rule: "self.names.all(x, self.names.exists(y, x == y))", message: names are their own}}
"#
        )
    };
    let out = s.kubectl_stdin_output(&["apply", "-f", "-"], &crd(""));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x"),
        "{err}"
    );
    s.kubectl_stdin(&["apply", "-f", "-"], &crd("maxItems: 900,"));
    established(&s, "lists.c.example.com");
    let cr = |n: usize| {
        let names: Vec<String> = (0..n).map(|i| format!("\"n{i}\"")).collect();
        format!(
            r#"{{"apiVersion":"c.example.com/v1","kind":"List2","metadata":{{"name":"l{n}"}},"spec":{{"names":[{}]}}}}"#,
            names.join(",")
        )
    };
    let path = "/apis/c.example.com/v1/namespaces/default/lists";
    s.kubectl_stdin(&["create", "--raw", path, "-f", "-"], &cr(10));
    // At full size one evaluation would cost more than upstream lets a call cost: refused, and
    // the rule never runs.
    let out = s.kubectl_stdin_output(&["create", "--raw", path, "-f", "-"], &cr(900));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"spec: Invalid value: "object": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: names are their own"#),
        "{err}"
    );
    assert_eq!(
        s.kubectl(&["get", "lists.c.example.com", "-o", "name"])
            .trim(),
        "list2.c.example.com/l10"
    );
}

/// A CRD that no longer serves any version is still deleted with its custom resources:
/// upstream's finalizer reaches them through the storage version, served or not.
#[test]
fn a_crd_serving_no_version_is_deleted_with_its_custom_resources() {
    let s = Server::start();
    let crd = |served: bool| {
        format!(
            r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: gadgets.off.example.com}}
spec:
  group: off.example.com
  scope: Namespaced
  names: {{plural: gadgets, kind: Gadget}}
  versions:
  - {{name: v1, served: {served}, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}
"#
        )
    };
    s.kubectl_stdin(&["apply", "-f", "-"], &crd(true));
    established(&s, "gadgets.off.example.com");
    s.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: off.example.com/v1\nkind: Gadget\nmetadata: {name: g, namespace: default}\n",
    );
    s.kubectl_stdin(&["apply", "-f", "-"], &crd(false));
    s.kubectl(&["delete", "crd", "gadgets.off.example.com", "--timeout=20s"]);
    // Served again under a new CRD of the same name: the old custom resource is gone.
    s.kubectl_stdin(&["apply", "-f", "-"], &crd(true));
    established(&s, "gadgets.off.example.com");
    let names = s.kubectl(&["get", "gadgets.off.example.com", "-A", "-o", "name"]);
    assert_eq!(
        names.trim(),
        "",
        "the custom resource was deleted with its CRD"
    );
}
