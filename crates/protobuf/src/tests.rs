//! Golden tests against kube-apiserver v1.36.2's protobuf answers (testdata/, copied from the
//! recordings: each `.pb` was fetched beside the `.json` of the same object), and round trips
//! through every special type.

use serde_json::{Value, json};

use super::*;

fn golden(name: &str) -> Vec<u8> {
    let path = format!("{}/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn golden_json(name: &str) -> Value {
    serde_json::from_slice(&golden(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

const PAIRS: &[&str] = &[
    "configmap",
    "deployment",
    "service",
    "configmap-list",
    "status-notfound",
];

#[test]
fn recorded_protobuf_decodes_to_the_recorded_json() {
    for name in PAIRS {
        let decoded =
            decode(&golden(&format!("{name}.pb"))).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(decoded, golden_json(&format!("{name}.json")), "{name}");
    }
}

#[test]
fn recorded_json_encodes_to_the_recorded_bytes() {
    for name in PAIRS {
        let encoded =
            encode(&golden_json(&format!("{name}.json"))).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(encoded, golden(&format!("{name}.pb")), "{name}");
    }
}

/// A list built item by item gives upstream's recorded bytes, and leaves out an item that has
/// no protobuf form instead of failing.
#[test]
fn a_list_built_item_by_item_is_the_recorded_list() {
    let list = golden_json("configmap-list.json");
    let items = list["items"].as_array().expect("items");
    assert!(!items.is_empty(), "the recording lists a ConfigMap");
    let never = |item: &Value, e: &ProtobufError| panic!("{item}: {e}");
    let built = encode_list("v1", "ConfigMapList", &list["metadata"], items, never).unwrap();
    assert_eq!(built, golden("configmap-list.pb"));

    let mut with_bad = items.clone();
    with_bad.insert(0, json!({"metadata": {"name": "bad"}, "data": {"k": 5}}));
    with_bad.push(json!({"metadata": {"name": "worse"}, "binaryData": {"k": "not base64!"}}));
    let mut left_out = Vec::new();
    let built = encode_list(
        "v1",
        "ConfigMapList",
        &list["metadata"],
        &with_bad,
        |item, _| left_out.push(item["metadata"]["name"].clone()),
    )
    .unwrap();
    assert_eq!(built, golden("configmap-list.pb"));
    assert_eq!(left_out, [json!("bad"), json!("worse")]);
    // Several items, as a list of them encoded whole gives.
    let several = [items[0].clone(), items[0].clone(), items[0].clone()];
    let whole = json!({"apiVersion": "v1", "kind": "ConfigMapList",
        "metadata": {"resourceVersion": "5", "continue": "c", "remainingItemCount": 2},
        "items": several});
    let built = encode_list("v1", "ConfigMapList", &whole["metadata"], &several, never).unwrap();
    assert_eq!(built, encode(&whole).unwrap());
    assert!(encode_list("v1", "ConfigMap", &json!({}), items, never).is_err());
}

/// The depth limit counts an item of a list built item by item from the list, as it does in a
/// list encoded whole: at every depth around the limit the two agree on whether it fits.
#[test]
fn a_list_built_item_by_item_has_the_whole_lists_depth_limit() {
    let crd = |depth: usize| {
        let mut schema = json!({"type": "object"});
        for _ in 0..depth {
            schema = json!({"not": schema});
        }
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "a"},
            "spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]}})
    };
    let mut fits = Vec::new();
    for depth in (MAX_DEPTH - 12)..MAX_DEPTH {
        let item = crd(depth);
        let whole = json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinitionList", "metadata": {}, "items": [item]});
        let mut left_out = 0;
        let built = encode_list(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinitionList",
            &whole["metadata"],
            whole["items"].as_array().unwrap(),
            |_, e| {
                assert_eq!(*e, ProtobufError::TooDeep);
                left_out += 1;
            },
        )
        .unwrap();
        let encoded_whole = encode(&whole);
        assert_eq!(encoded_whole.is_ok(), left_out == 0, "depth {depth}");
        if let Ok(bytes) = encoded_whole {
            assert_eq!(built, bytes, "depth {depth}");
        }
        fits.push(left_out == 0);
    }
    // The range crosses the limit.
    assert!(
        fits.first() == Some(&true) && fits.last() == Some(&false),
        "{fits:?}"
    );
}

/// Splits a `;stream=watch` body into its length-prefixed frames.
fn frames(mut stream: &[u8]) -> Vec<&[u8]> {
    let mut frames = Vec::new();
    while let Some((len, rest)) = stream.split_first_chunk::<4>() {
        let len = u32::from_be_bytes(*len) as usize;
        assert!(rest.len() >= len, "truncated frame");
        frames.push(&rest[..len]);
        stream = &rest[len..];
    }
    frames
}

#[test]
fn recorded_watch_stream_decodes_and_reencodes() {
    let stream = golden("configmap-watch.pbstream");
    let jsonstream = String::from_utf8(golden("configmap-watch.jsonstream")).unwrap_or_default();
    let json_events: Vec<Value> = jsonstream
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or(Value::Null))
        .collect();
    let frames = frames(&stream);
    assert_eq!(frames.len(), json_events.len());
    let mut reencoded = Vec::new();
    for (frame, expected) in frames.iter().zip(&json_events) {
        let event = decode_watch_event(frame).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&event, expected);
        let event_type = event["type"].as_str().unwrap_or_default();
        reencoded.extend(
            encode_watch_event(event_type, &event["object"]).unwrap_or_else(|e| panic!("{e}")),
        );
    }
    assert_eq!(reencoded, stream);
}

fn round_trip(object: &Value) -> Value {
    let bytes = encode(object).unwrap_or_else(|e| panic!("encode: {e}"));
    assert!(bytes.starts_with(b"k8s\0"));
    decode(&bytes).unwrap_or_else(|e| panic!("decode: {e}"))
}

#[test]
fn pod_with_quantities_int_or_strings_and_times_round_trips() {
    let pod = json!({
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": "p",
            "namespace": "default",
            "creationTimestamp": "2026-11-21T10:49:20Z",
            "deletionTimestamp": "2026-11-21T10:50:00Z",
            "deletionGracePeriodSeconds": 30,
            "labels": {"b": "2", "a": "1"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true}]
        },
        "spec": {
            "containers": [{
                "name": "c",
                "image": "nginx",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m"}},
                "livenessProbe": {
                    "httpGet": {"path": "/", "port": "http", "scheme": "HTTP"},
                    "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3
                },
                "readinessProbe": {
                    "tcpSocket": {"port": 8080},
                    "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3
                }
            }],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "overhead": {"cpu": "1"}
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-21T10:49:21Z"}],
            "startTime": "2026-11-21T10:49:20Z"
        }
    });
    let decoded = round_trip(&pod);
    // The probe's IntOrString ports keep their JSON type.
    let container = &decoded["spec"]["containers"][0];
    assert_eq!(container["livenessProbe"]["httpGet"]["port"], json!("http"));
    assert_eq!(
        container["readinessProbe"]["tcpSocket"]["port"],
        json!(8080)
    );
    assert_eq!(
        container["resources"]["limits"],
        json!({"cpu": "500m", "memory": "128Mi"})
    );
    assert_eq!(
        decoded["metadata"]["deletionTimestamp"],
        json!("2026-11-21T10:50:00Z")
    );
    assert_eq!(decoded["metadata"]["labels"], json!({"a": "1", "b": "2"}));
    // Go's JSON encoder writes the zero lastProbeTime as null (not omitempty), and every
    // non-omitempty field of a struct it decoded from protobuf.
    assert_eq!(
        decoded["status"]["conditions"][0]["lastProbeTime"],
        Value::Null
    );
    assert_eq!(
        decoded["spec"]["containers"][0]["ports"][0],
        json!({"containerPort": 80, "protocol": "TCP"})
    );
    assert_eq!(decoded["spec"]["overhead"], json!({"cpu": "1"}));
    assert_eq!(
        decoded["status"]["startTime"],
        json!("2026-11-21T10:49:20Z")
    );
    assert_eq!(
        round_trip(&decoded),
        decoded,
        "a second round trip changes nothing"
    );
}

#[test]
fn decoded_objects_follow_go_json_rules() {
    let decoded =
        round_trip(&json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}}));
    assert_eq!(
        decoded,
        json!({
            "kind": "Pod",
            "apiVersion": "v1",
            // creationTimestamp is omitzero; the empty strings are omitempty.
            "metadata": {"name": "p"},
            // Non-pointer structs are always written; `containers` is not omitempty, so a nil
            // slice is null.
            "spec": {"containers": null},
            "status": {}
        })
    );
}

#[test]
fn event_micro_time_and_series_round_trip() {
    let event = json!({
        "kind": "Event",
        "apiVersion": "events.k8s.io/v1",
        "metadata": {"name": "e", "namespace": "default", "creationTimestamp": "2026-11-21T10:49:20Z"},
        "eventTime": "2026-11-21T10:49:20.123456Z",
        "series": {"count": 2, "lastObservedTime": "2026-11-21T10:49:21.000001Z"},
        "reportingController": "c",
        "reportingInstance": "i",
        "action": "Pull",
        "reason": "Pulled",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
        "note": "pulled",
        "type": "Normal",
        "deprecatedFirstTimestamp": "2026-11-21T10:49:20Z",
        "deprecatedCount": 1
    });
    let decoded = round_trip(&event);
    assert_eq!(decoded["eventTime"], json!("2026-11-21T10:49:20.123456Z"));
    assert_eq!(
        decoded["series"]["lastObservedTime"],
        json!("2026-11-21T10:49:21.000001Z")
    );
    // Zero metav1.Time fields without omitzero marshal as null, and a non-pointer struct is
    // written even when empty.
    assert_eq!(decoded["deprecatedLastTimestamp"], Value::Null);
    let mut expected = event.clone();
    expected["deprecatedLastTimestamp"] = Value::Null;
    expected["deprecatedSource"] = json!({});
    assert_eq!(decoded, expected);

    // A core/v1 Event's MicroTime and a time with an offset normalise to UTC.
    let core = round_trip(&json!({
        "kind": "Event", "apiVersion": "v1",
        "metadata": {"name": "e"},
        "involvedObject": {},
        "firstTimestamp": "2026-11-21T11:49:20+01:00",
        "eventTime": "2026-11-21T10:49:20.5Z"
    }));
    assert_eq!(core["firstTimestamp"], json!("2026-11-21T10:49:20Z"));
    assert_eq!(core["eventTime"], json!("2026-11-21T10:49:20.500000Z"));
}

#[test]
fn controller_revision_raw_extension_round_trips() {
    let revision = json!({
        "kind": "ControllerRevision",
        "apiVersion": "apps/v1",
        "metadata": {"name": "r", "namespace": "default"},
        "data": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}},
        "revision": 3
    });
    assert_eq!(round_trip(&revision), revision);
    let mut empty = revision.clone();
    empty["data"] = Value::Null;
    assert_eq!(round_trip(&empty), empty, "a nil RawExtension is null");
}

#[test]
fn secret_bytes_are_base64() {
    let secret = json!({
        "kind": "Secret",
        "apiVersion": "v1",
        "metadata": {"name": "s"},
        "data": {"password": "aHVudGVyMg==", "empty": ""},
        "stringData": {"plain": "text"},
        "type": "Opaque",
        "immutable": false
    });
    let bytes = encode(&secret).unwrap_or_default();
    let needle = b"hunter2";
    assert!(
        bytes.windows(needle.len()).any(|w| w == needle),
        "bytes travel decoded"
    );
    assert_eq!(round_trip(&secret), secret);
    let bad = json!({"kind": "Secret", "apiVersion": "v1", "data": {"k": "not base64!"}});
    assert!(matches!(encode(&bad), Err(ProtobufError::Invalid { path, .. }) if path == "data[k]"));
}

#[test]
fn crd_schema_props_round_trip() {
    let crd = json!({
        "kind": "CustomResourceDefinition",
        "apiVersion": "apiextensions.k8s.io/v1",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "listKind": "CronTabList"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["cronSpec"],
                            "properties": {
                                "cronSpec": {"type": "string", "pattern": "^\\d+$", "default": "5"},
                                "replicas": {"type": "integer", "minimum": 1, "maximum": 10.5, "enum": [1, 2, null]},
                                "tags": {"type": "array", "items": {"type": "string"}},
                                "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
                                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                "closed": {"type": "object", "additionalProperties": false},
                                "both": {"dependencies": {"a": ["b", "c"], "d": {"required": ["e"]}}},
                                "free": {"x-kubernetes-preserve-unknown-fields": true, "example": {"any": [1, "two"]}}
                            }
                        }
                    }
                }},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "additionalPrinterColumns": [{"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"}]
            }],
            "conversion": {"strategy": "None"}
        },
        "status": {
            "conditions": [{"type": "Established", "status": "True", "lastTransitionTime": "2026-11-21T10:49:20Z", "reason": "InitialNamesAccepted", "message": "ok"}],
            "acceptedNames": {"plural": "crontabs", "kind": "CronTab"},
            "storedVersions": ["v1"]
        }
    });
    let decoded = round_trip(&crd);
    let version = &decoded["spec"]["versions"][0];
    assert_eq!(version["schema"], crd["spec"]["versions"][0]["schema"]);
    assert_eq!(
        version["subresources"],
        crd["spec"]["versions"][0]["subresources"]
    );
    assert_eq!(decoded["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(round_trip(&decoded), decoded);
}

#[test]
fn extra_values_round_trip() {
    // UserInfo.extra is a map[string]ExtraValue, and ExtraValue a []string.
    let review = json!({
        "kind": "TokenReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {},
        "spec": {"token": "t"},
        "status": {
            "authenticated": true,
            "user": {"username": "u", "groups": ["g"], "extra": {"scopes": ["a", "b"], "none": []}}
        }
    });
    let decoded = round_trip(&review);
    assert_eq!(
        decoded["status"]["user"]["extra"],
        json!({"none": [], "scopes": ["a", "b"]})
    );
}

#[test]
fn duration_fields_use_go_strings() {
    // No served kind of v1.36 has a metav1.Duration field, so the codec is checked on the
    // message itself.
    let schema = schema();
    let id = schema
        .message_named("k8s.io.apimachinery.pkg.apis.meta.v1.Duration")
        .unwrap_or_else(|| panic!("no Duration"));
    let mut bytes = Vec::new();
    encode::Encoder {
        schema,
        depth: Default::default(),
    }
    .message(id, &json!("1h30m"), &mut bytes)
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bytes, [0x08, 0x80, 0xe0, 0xd3, 0xc8, 0x94, 0x9d, 0x01]);
    assert_eq!(
        decode::message_to_json(schema, id, &bytes),
        Ok(json!("1h30m0s"))
    );
}

#[test]
fn status_and_lists_of_any_group_resolve_meta_types() {
    assert!(supports("v1", "Status"));
    assert!(supports("apps/v1", "DeploymentList"));
    assert!(supports("meta.k8s.io/v1", "PartialObjectMetadata"));
    assert!(!supports("stable.example.com/v1", "CronTab"));
    assert!(!supports("meta.k8s.io/v1", "Table"));
    let list = json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": "5"},
        "items": [{"metadata": {"name": "a"}}]
    });
    assert_eq!(round_trip(&list), list);
}

#[test]
fn every_served_kind_resolves() {
    let served = String::from_utf8(golden("served-kinds.txt")).unwrap_or_default();
    let rows: Vec<Vec<&str>> = served
        .lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| line.split(' ').collect())
        .collect();
    assert!(rows.len() > 70);
    let mut missing = Vec::new();
    for row in &rows {
        let (api_version, kind) = (row[0], row[1]);
        if !supports(api_version, kind) {
            missing.push(format!("{api_version} {kind}"));
        }
        if row.get(2) == Some(&"list") && !supports(api_version, &format!("{kind}List")) {
            missing.push(format!("{api_version} {kind}List"));
        }
    }
    assert!(missing.is_empty(), "no protobuf message for {missing:?}");
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    assert_eq!(decode(b"{}"), Err(ProtobufError::MissingPrefix));
    let good = golden("deployment.pb");
    for len in 0..good.len() {
        let _ = decode(&good[..len]);
    }
    let mut flipped = good.clone();
    for i in 4..flipped.len() {
        flipped[i] ^= 0xff;
        let _ = decode(&flipped);
        flipped[i] ^= 0xff;
    }
    assert!(matches!(
        encode(&json!({"apiVersion": "v1", "kind": "Nope"})),
        Err(ProtobufError::UnknownKind { .. })
    ));
    let wrong =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": "three"}});
    let error = encode(&wrong)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert_eq!(
        error,
        "cannot encode as protobuf at spec.replicas: expected a number, got a string"
    );
}

/// Every object of testdata/defaults.jsonl (what kube-apiserver stored for the create requests
/// of `requests/objects.json`, with the volatile values fixed) survives JSON → protobuf → JSON.
#[test]
fn stored_objects_of_many_kinds_round_trip() {
    let text = String::from_utf8(golden("defaults.jsonl")).unwrap_or_default();
    let mut kinds = 0;
    for line in text.lines() {
        let mut object: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}"));
        let back = round_trip(&object);
        // Protobuf has no place for the TypeMeta of a nested object, here a StatefulSet's
        // PersistentVolumeClaim templates: Go's protobuf decoder leaves it empty too.
        if let Some(templates) = object
            .pointer_mut("/spec/volumeClaimTemplates")
            .and_then(Value::as_array_mut)
        {
            for template in templates.iter_mut().filter_map(Value::as_object_mut) {
                template.remove("apiVersion");
                template.remove("kind");
            }
        }
        assert_eq!(back, object, "{}", object["kind"]);
        kinds += 1;
    }
    assert!(kinds > 40);
}

/// `go_form` gives what the round trip gives, for every stored object, the recorded objects
/// and the special types' cases above.
#[test]
fn go_form_is_the_round_trip_without_the_wire() {
    let text = String::from_utf8(golden("defaults.jsonl")).unwrap_or_default();
    let mut objects: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    for name in PAIRS {
        objects.push(golden_json(&format!("{name}.json")));
    }
    // Go's forms the wire changes: zero and fractional times, quantities, empty collections,
    // nulls in lists and maps, integral floats, null scalars.
    objects.push(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "creationTimestamp": "2026-01-02T03:04:05.678Z",
                     "labels": {}, "finalizers": [], "annotations": {"a": null}},
        "spec": {"containers": [{"name": "c", "ports": [], "args": [null, "x"],
                                 "resources": {"limits": {"cpu": "1.5", "memory": "1024Mi"}},
                                 "livenessProbe": {"httpGet": {"port": "http"}, "periodSeconds": 3.0}}],
                 "priority": null, "hostNetwork": null, "activeDeadlineSeconds": null,
                 "overhead": {"cpu": 2}},
        "status": {"startTime": "0001-01-01T00:00:00Z", "phase": null}
    }));
    objects.push(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e", "namespace": "d"},
        "eventTime": "2026-01-02T03:04:05.123456789Z", "series": {"count": 2, "lastObservedTime": "2026-01-02T03:04:05.5Z"},
        "regarding": {}, "deprecatedFirstTimestamp": null
    }));
    objects.push(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "data": {"a": "aGk=", "b": null, "c": ""}, "immutable": null
    }));
    objects.push(json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": "f"}, "spec": {"priorityLevelConfiguration": {"name": "x"}, "rules": []}
    }));
    for object in objects {
        let walked = go_form(&object).unwrap_or_else(|e| panic!("{}: {e}", object["kind"]));
        assert_eq!(walked, round_trip(&object), "{}", object["kind"]);
        // The walk where the object lies gives the same, from the object and from its Go form
        // (which is not always a fixed point: a zero time under a pointer writes `null`, and
        // `null` reads back as no pointer at all).
        for start in [&object, &walked] {
            let mut in_place = start.clone();
            go_form_in_place(&mut in_place).unwrap_or_else(|e| panic!("{}: {e}", object["kind"]));
            assert_eq!(Ok(in_place), go_form(start), "{}", object["kind"]);
        }
    }
    // What the encoder refuses, the walk refuses.
    for bad in [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": 5}}),
        json!({"apiVersion": "v1", "kind": "Pod", "spec": {"priority": 1e12}}),
        json!({"apiVersion": "v1", "kind": "Secret", "data": {"a": "not base64!"}}),
        json!({"apiVersion": "v1", "kind": "Nothing"}),
    ] {
        assert!(go_form(&bad).is_err(), "{bad}");
        assert!(go_form_in_place(&mut bad.clone()).is_err(), "{bad}");
        assert!(encode(&bad).is_err(), "{bad}");
    }
}

/// The request's form keeps what Go's JSON decoder keeps: an empty list or map without
/// `omitempty` stays empty (a non-nil slice), where storage's form makes it `null`; empty ones
/// under `omitempty` go from both, and everything else is storage's form.
#[test]
fn the_request_form_keeps_empty_lists_that_storage_makes_null() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {}},
        "spec": {"containers": [], "volumes": [], "nodeSelector": {}, "restartPolicy": "Always"}
    });
    let mut request = pod.clone();
    request_form_in_place(&mut request).unwrap();
    let mut stored = pod.clone();
    go_form_in_place(&mut stored).unwrap();
    assert_eq!(stored["spec"]["containers"], Value::Null);
    assert_eq!(request["spec"]["containers"], json!([]));
    for form in [&request, &stored] {
        assert!(form["spec"].get("volumes").is_none(), "{form}");
        assert!(form["spec"].get("nodeSelector").is_none(), "{form}");
        assert!(form["metadata"].get("labels").is_none(), "{form}");
        assert_eq!(form["status"], json!({}));
    }
    // Apart from the empty list, the two forms agree, and the stored form of the request's is
    // the stored form.
    let mut differs = request.clone();
    differs["spec"]["containers"] = Value::Null;
    assert_eq!(differs, stored);
    go_form_in_place(&mut request).unwrap();
    assert_eq!(request, stored);
}

/// A CRD whose schema's `not` nests `depth` times, built on the wire by hand (JSON that deep could
/// not even be parsed to encode it).
fn crd_with_nested_not(depth: usize) -> Vec<u8> {
    use crate::wire::put_bytes;
    let mut props = Vec::new();
    for _ in 0..depth {
        let mut outer = Vec::new();
        put_bytes(&mut outer, 28, &props);
        props = outer;
    }
    let mut validation = Vec::new();
    put_bytes(&mut validation, 1, &props);
    let mut version = Vec::new();
    put_bytes(&mut version, 1, b"v1");
    put_bytes(&mut version, 4, &validation);
    let mut spec = Vec::new();
    put_bytes(&mut spec, 7, &version);
    let mut crd = Vec::new();
    put_bytes(&mut crd, 2, &spec);
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, b"apiextensions.k8s.io/v1");
    put_bytes(&mut type_meta, 2, b"CustomResourceDefinition");
    let mut envelope = b"k8s\0".to_vec();
    put_bytes(&mut envelope, 1, &type_meta);
    put_bytes(&mut envelope, 2, &crd);
    envelope
}

#[test]
fn nesting_past_the_limit_is_refused_before_the_stack_runs_out() {
    // 10,000 levels used to overflow the stack and abort the process.
    assert_eq!(
        decode(&crd_with_nested_not(10_000)),
        Err(ProtobufError::TooDeep)
    );
    assert_eq!(
        decode(&crd_with_nested_not(crate::MAX_DEPTH)),
        Err(ProtobufError::TooDeep)
    );
    let shallow = decode(&crd_with_nested_not(20)).expect("20 levels decode");
    let schema = &shallow["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    assert!(schema.pointer(&"/not".repeat(19)).is_some());
}

#[test]
fn encoding_nesting_past_the_limit_is_refused() {
    // Built by hand: no decoder accepts JSON this deep any more, but an object stored before the
    // limit existed must still fail cleanly rather than overflow the stack.
    // Each level is moved in, not passed through `json!`, which serializes a value it embeds:
    // that recursed through every level built so far (quadratic, and deep enough to overflow
    // a test thread's stack in a debug build).
    let mut schema = json!({"type": "object"});
    for _ in 0..3000 {
        schema = Value::Object(serde_json::Map::from_iter([("not".to_string(), schema)]));
    }
    let mut crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "spec": {"versions": [{"name": "v1", "schema": {}}]}});
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = schema;
    let result = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let result = encode(&crd);
            // Dropping a value this deep recurses too; leak it, as the test only asks for the
            // encoder's answer.
            std::mem::forget(crd);
            result
        })
        .expect("a thread")
        .join()
        .expect("no overflow");
    assert_eq!(result, Err(ProtobufError::TooDeep));
}

/// kube-apiserver's JSON answers, byte for byte: the recordings are its pretty-printed
/// answers (`json.Indent`), so Go's member order, indented the same way, must give them back.
#[test]
fn objects_are_written_in_go_member_order_as_upstream_wrote_them() {
    for name in PAIRS {
        let file = golden(&format!("{name}.json"));
        let recorded = String::from_utf8_lossy(&file);
        let written = to_json(&golden_json(&format!("{name}.json")));
        let indented = apimachinery::gojson::indent(&written, "  ").expect("balanced JSON");
        assert_eq!(
            String::from_utf8_lossy(&indented),
            recorded.trim_end(),
            "{name}"
        );
    }
}

#[test]
fn watch_events_are_written_as_upstream_streamed_them() {
    let stream = golden("configmap-watch.jsonstream");
    let lines: Vec<&[u8]> = stream
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert!(!lines.is_empty(), "the recording holds an event");
    for line in lines {
        let event: Value = serde_json::from_slice(line).expect("an event");
        let mut written = format!(r#"{{"type":{},"object":"#, event["type"]).into_bytes();
        write_json(&event["object"], &mut written);
        written.push(b'}');
        assert_eq!(
            String::from_utf8_lossy(&written),
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn go_order_places_inline_members_and_leaves_the_rest_sorted() {
    let pod = json!({
        "status": {"phase": "Pending"},
        "spec": {
            "restartPolicy": "Always",
            "containers": [{"ports": [{"protocol": "TCP", "containerPort": 80, "name": "http"}],
                            "name": "c", "image": "i"}],
            "volumes": [{"emptyDir": {}, "name": "v"}],
        },
        "metadata": {"labels": {"b": "1", "a": "2"}, "uid": "u", "name": "p"},
        "kind": "Pod",
        "apiVersion": "v1",
    });
    assert_eq!(
        String::from_utf8(to_json(&pod)).expect("utf-8"),
        r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","uid":"u","labels":{"a":"2","b":"1"}},"spec":{"volumes":[{"name":"v","emptyDir":{}}],"containers":[{"name":"c","image":"i","ports":[{"name":"http","containerPort":80,"protocol":"TCP"}]}],"restartPolicy":"Always"},"status":{"phase":"Pending"}}"#
    );
    // Members the struct lacks come last, sorted; strings take Go's escapes; kinds the schema
    // does not know (custom resources) are written sorted.
    let cm = json!({"kind": "ConfigMap", "apiVersion": "v1", "zz": 1, "aa": 2,
                    "data": {"k": "<a&b>\u{2028}"}, "immutable": true});
    assert_eq!(
        String::from_utf8(to_json(&cm)).expect("utf-8"),
        r#"{"kind":"ConfigMap","apiVersion":"v1","immutable":true,"data":{"k":"\u003ca\u0026b\u003e\u2028"},"aa":2,"zz":1}"#
    );
    let custom =
        json!({"kind": "Widget", "apiVersion": "example.com/v1", "spec": {"b": 1, "a": "<"}});
    assert_eq!(
        String::from_utf8(to_json(&custom)).expect("utf-8"),
        r#"{"apiVersion":"example.com/v1","kind":"Widget","spec":{"a":"\u003c","b":1}}"#
    );
    // Every written object parses back to itself.
    for value in [pod, cm, custom] {
        let back: Value = serde_json::from_slice(&to_json(&value)).expect("JSON");
        assert_eq!(back, value);
    }
}

#[test]
fn tables_are_written_in_go_member_order() {
    let table = json!({
        "rows": [{"object": {"metadata": {"uid": "u", "name": "a"}, "apiVersion": "meta.k8s.io/v1",
                             "kind": "PartialObjectMetadata"},
                  "cells": ["a", 1]}],
        "metadata": {"resourceVersion": "5", "continue": "c"},
        "columnDefinitions": [{"type": "string", "priority": 0, "name": "Name", "format": "name",
                               "description": "d"}],
        "apiVersion": "meta.k8s.io/v1",
        "kind": "Table",
    });
    assert_eq!(
        String::from_utf8(to_json(&table)).expect("utf-8"),
        r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"5","continue":"c"},"columnDefinitions":[{"name":"Name","type":"string","format":"name","description":"d","priority":0}],"rows":[{"cells":["a",1],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","uid":"u"}}}]}"#
    );
}
