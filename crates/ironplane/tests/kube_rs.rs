//! kube-rs against an in-process Ironplane: the runtime's watcher, every patch type through
//! `Api::patch`, and label-selected and paginated lists, each checked against what
//! kube-apiserver v1.36 answers.
//!
//! This file owns the kube-rs end-to-end checks only. It must not reach into server internals:
//! everything goes through the admin kubeconfig and the public API, as a kube-rs user would.
//! Waits are bounded by timeouts; nothing here sleeps and then asserts.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures_util::StreamExt;
use ironplane::testing::TestServer;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kube::{Client, Config, ResourceExt};
use serde_json::json;

/// How long a test waits for the watcher before it gives up and shows what it saw.
const WATCH_TIMEOUT: Duration = Duration::from_secs(20);

/// A kube-rs client built the way a user builds one from a kubeconfig file, so the test covers
/// kube-rs's own parsing of the admin kubeconfig (embedded CA, client certificate and key).
async fn client(server: &TestServer) -> Client {
    let kubeconfig =
        Kubeconfig::read_from(&server.kubeconfig).expect("kube-rs reads the admin kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kube-rs accepts the admin kubeconfig");
    assert_eq!(
        config.cluster_url.to_string().trim_end_matches('/'),
        server.url,
        "the kubeconfig points at the server"
    );
    Client::try_from(config).expect("a kube-rs client")
}

async fn create_namespace(client: &Client, name: &str) {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("the namespace is created");
}

/// The ConfigMap the root CA publisher puts in every namespace, as on any cluster.
const ROOT_CA: &str = "kube-root-ca.crt";

/// Waits until the root CA publisher has put `kube-root-ca.crt` in the namespace, so a test that
/// lists the namespace's ConfigMaps knows every object in it.
async fn wait_for_root_ca(cms: &Api<ConfigMap>) {
    tokio::time::timeout(WATCH_TIMEOUT, async {
        while cms
            .get_opt(ROOT_CA)
            .await
            .expect("the ConfigMap is read")
            .is_none()
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("kube-root-ca.crt is published in the new namespace");
}

fn config_map(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: (!labels.is_empty()).then(|| {
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

fn data_of(cm: &ConfigMap) -> BTreeMap<String, String> {
    cm.data.clone().unwrap_or_default()
}

/// One change as the watcher reports it. Applies carry the resourceVersion and data the write
/// returned, so an update that arrived with stale content does not count as seen.
#[derive(Debug, PartialEq)]
enum Seen {
    Apply {
        name: String,
        resource_version: String,
        data: BTreeMap<String, String>,
    },
    Delete {
        name: String,
    },
    /// Anything else after the initial list (a re-list, an error) is a failure: a watch that
    /// works never restarts during this test.
    Other(String),
}

fn applied(cm: &ConfigMap) -> Seen {
    Seen::Apply {
        name: cm.name_any(),
        resource_version: cm.resource_version().unwrap_or_default(),
        data: data_of(cm),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_sees_every_create_update_and_delete() {
    let server = TestServer::start().await;
    let client = client(&server).await;
    create_namespace(&client, "watched").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "watched");
    wait_for_root_ca(&cms).await;

    // The watcher runs in its own task so it keeps reading while this task writes; it forwards
    // every item, errors included, so the assertions below see exactly what kube-rs produced.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let stream = watcher(cms.clone(), watcher::Config::default());
    let forward = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            if tx.send(item).is_err() {
                break;
            }
        }
    });

    // Writes start only after the initial list is done, so every change must arrive as a watch
    // event rather than as part of a list. The list holds only the namespace's root CA
    // ConfigMap, published before the watcher started.
    let initial = tokio::time::timeout(WATCH_TIMEOUT, async {
        let mut initial = Vec::new();
        loop {
            match rx.recv().await.expect("the watcher keeps running") {
                Ok(watcher::Event::Init) => {}
                Ok(watcher::Event::InitApply(cm)) => initial.push(cm.name_any()),
                Ok(watcher::Event::InitDone) => break initial,
                other => panic!("unexpected item during the initial list: {other:?}"),
            }
        }
    })
    .await
    .expect("the watcher finishes its initial list in time");
    assert_eq!(initial, vec![ROOT_CA.to_string()]);

    // The writes are sequential, each awaited, so the watch must deliver them in this order.
    let mut expected = Vec::new();
    for i in 0..20 {
        let name = format!("cm-{i:02}");
        let created = cms
            .create(
                &PostParams::default(),
                &config_map(&name, &[], &[("n", &i.to_string())]),
            )
            .await
            .expect("the ConfigMap is created");
        expected.push(applied(&created));
    }
    for i in 0..10 {
        let name = format!("cm-{i:02}");
        let mut cm = cms.get(&name).await.expect("the ConfigMap is read");
        cm.data
            .get_or_insert_with(BTreeMap::new)
            .insert("updated".into(), "yes".into());
        let updated = cms
            .replace(&name, &PostParams::default(), &cm)
            .await
            .expect("the ConfigMap is replaced");
        assert_ne!(
            updated.resource_version(),
            cm.resource_version(),
            "an update moves the resourceVersion"
        );
        expected.push(applied(&updated));
    }
    // Deletes span updated (08, 09) and never-updated (10..12) objects.
    for i in 8..13 {
        let name = format!("cm-{i:02}");
        cms.delete(&name, &DeleteParams::default())
            .await
            .expect("the ConfigMap is deleted");
        expected.push(Seen::Delete { name });
    }

    let mut seen = Vec::new();
    let waited = tokio::time::timeout(WATCH_TIMEOUT, async {
        while seen.len() < expected.len() {
            let Some(item) = rx.recv().await else { break };
            seen.push(match item {
                Ok(watcher::Event::Apply(cm)) => applied(&cm),
                Ok(watcher::Event::Delete(cm)) => Seen::Delete {
                    name: cm.name_any(),
                },
                other => Seen::Other(format!("{other:?}")),
            });
        }
    })
    .await;
    forward.abort();

    let creates = seen
        .iter()
        .take(20)
        .filter(|s| matches!(s, Seen::Apply { .. }))
        .count();
    assert!(
        waited.is_ok(),
        "the watcher saw {} of {} changes within {WATCH_TIMEOUT:?} ({creates} of 20 creates); seen: {seen:#?}",
        seen.len(),
        expected.len(),
    );
    // Exactly the 20 creates, the 10 updates with their new resourceVersion and data, and the
    // 5 deletes, in write order: nothing missed, nothing doubled, no re-list.
    assert_eq!(seen, expected);
    let applied_names: BTreeSet<String> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Apply { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(applied_names.len(), 20);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_patch_type_through_api_patch() {
    let server = TestServer::start().await;
    let client = client(&server).await;
    create_namespace(&client, "patched").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "patched");
    let pp = PatchParams::default();

    // Strategic merge patch: `containers` merge by `name`, so patching one container's image
    // keeps the other container and the patched container's other fields. It comes first, right
    // after start-up, because a ready server must serve it at once, not only after some
    // background work (such as loading the OpenAPI schemas it merges by) has finished.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "patched");
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [
                    {"name": "app", "image": "nginx:1.27", "args": ["--port", "8080"]},
                    {"name": "sidecar", "image": "busybox:1.36", "command": ["sleep", "infinity"]},
                ]},
            },
        },
    }))
    .expect("a valid Deployment");
    let created = deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("the Deployment is created");
    assert_eq!(created.metadata.generation, Some(1));
    let strategic = deployments
        .patch(
            "web",
            &pp,
            &Patch::Strategic(json!({
                "spec": {"template": {"spec": {"containers": [
                    {"name": "app", "image": "nginx:1.28"},
                ]}}},
            })),
        )
        .await
        .expect("the strategic merge patch is applied");
    let read = deployments
        .get("web")
        .await
        .expect("the Deployment is read");
    assert_eq!(read.resource_version(), strategic.resource_version());
    // A change to the pod template is a spec change, so upstream bumps the generation.
    assert_eq!(read.metadata.generation, Some(2));
    let containers = read
        .spec
        .and_then(|s| s.template.spec)
        .map(|s| s.containers)
        .unwrap_or_default();
    let summary: Vec<ContainerSummary> = containers
        .into_iter()
        .map(|c| (c.name, c.image, c.args, c.command))
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "app".into(),
                Some("nginx:1.28".into()),
                Some(vec!["--port".into(), "8080".into()]),
                None,
            ),
            (
                "sidecar".into(),
                Some("busybox:1.36".into()),
                None,
                Some(vec!["sleep".into(), "infinity".into()]),
            ),
        ]
    );

    // JSON merge patch (RFC 7386): null removes a key, other keys are set, the rest is kept.
    cms.create(
        &PostParams::default(),
        &config_map("merged", &[("app", "demo")], &[("a", "1"), ("b", "2")]),
    )
    .await
    .expect("the ConfigMap is created");
    let merged = cms
        .patch(
            "merged",
            &pp,
            &Patch::Merge(json!({
                "metadata": {"labels": {"tier": "front"}},
                "data": {"b": null, "c": "3"},
            })),
        )
        .await
        .expect("the merge patch is applied");
    let read = cms.get("merged").await.expect("the ConfigMap is read");
    assert_eq!(read.resource_version(), merged.resource_version());
    assert_eq!(
        data_of(&read),
        BTreeMap::from([("a".into(), "1".into()), ("c".into(), "3".into())])
    );
    assert_eq!(
        read.labels(),
        &BTreeMap::from([
            ("app".into(), "demo".into()),
            ("tier".into(), "front".into())
        ])
    );

    // JSON patch (RFC 6902): the operations run in order, and a passing `test` lets them apply.
    cms.create(
        &PostParams::default(),
        &config_map("json-patched", &[], &[("a", "1"), ("b", "2"), ("c", "3")]),
    )
    .await
    .expect("the ConfigMap is created");
    let ops = serde_json::from_value(json!([
        {"op": "test", "path": "/data/a", "value": "1"},
        {"op": "replace", "path": "/data/a", "value": "10"},
        {"op": "remove", "path": "/data/b"},
        {"op": "add", "path": "/data/d", "value": "4"},
        {"op": "copy", "from": "/data/c", "path": "/data/e"},
        {"op": "add", "path": "/metadata/labels", "value": {"patched": "json"}},
    ]))
    .expect("a valid JSON patch");
    let json_patched = cms
        .patch("json-patched", &pp, &Patch::Json::<()>(ops))
        .await
        .expect("the JSON patch is applied");
    let read = cms
        .get("json-patched")
        .await
        .expect("the ConfigMap is read");
    assert_eq!(read.resource_version(), json_patched.resource_version());
    assert_eq!(
        data_of(&read),
        BTreeMap::from([
            ("a".into(), "10".into()),
            ("c".into(), "3".into()),
            ("d".into(), "4".into()),
            ("e".into(), "3".into()),
        ])
    );
    assert_eq!(
        read.labels(),
        &BTreeMap::from([("patched".into(), "json".into())])
    );

    // Server-side apply: `data.a` belongs to the client that created it, so an apply that
    // changes it conflicts (409, the field and its manager named) until it is forced.
    let config = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "merged"},
        "data": {"a": "applied"},
    });
    let applied = cms
        .patch(
            "merged",
            &PatchParams::apply("kube-rs-test"),
            &Patch::Apply(config.clone()),
        )
        .await;
    match applied {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 409, "{status:?}");
            assert_eq!(status.reason, "Conflict", "{status:?}");
            assert!(
                status
                    .message
                    .starts_with("Apply failed with 1 conflict: conflict with ")
                    && status.message.ends_with(": .data.a"),
                "{status:?}"
            );
        }
        other => panic!("the apply should conflict, got {other:?}"),
    }
    let read = cms.get("merged").await.expect("the ConfigMap is read");
    assert_eq!(
        read.resource_version(),
        merged.resource_version(),
        "the refused apply left the object alone"
    );
    let forced = cms
        .patch(
            "merged",
            &PatchParams::apply("kube-rs-test").force(),
            &Patch::Apply(config),
        )
        .await
        .expect("a forced apply wins");
    assert_eq!(
        data_of(&forced).get("a").map(String::as_str),
        Some("applied")
    );
    let managers = forced.metadata.managed_fields.clone().unwrap_or_default();
    let ours = managers
        .iter()
        .find(|m| m.manager.as_deref() == Some("kube-rs-test"))
        .expect("the applier is a manager");
    assert_eq!(ours.operation.as_deref(), Some("Apply"));
    assert_eq!(
        ours.fields_v1.as_ref().map(|f| f.0.clone()),
        Some(json!({"f:data": {"f:a": {}}}))
    );
    server.stop().await;
}

/// A container's name, image, args and command: the fields the strategic merge patch must keep.
type ContainerSummary = (
    String,
    Option<String>,
    Option<Vec<String>>,
    Option<Vec<String>>,
);

fn names(cms: &[ConfigMap]) -> BTreeSet<String> {
    cms.iter().map(|cm| cm.name_any()).collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_selected_and_paginated_lists() {
    let server = TestServer::start().await;
    let client = client(&server).await;
    create_namespace(&client, "listed").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "listed");
    wait_for_root_ca(&cms).await;
    let objects = [
        ("web-1", [("app", "web"), ("tier", "front")]),
        ("web-2", [("app", "web"), ("tier", "front")]),
        ("web-3", [("app", "web"), ("tier", "cache")]),
        ("web-4", [("app", "web"), ("tier", "back")]),
        ("web-5", [("app", "web"), ("tier", "back")]),
        ("db-1", [("app", "db"), ("tier", "back")]),
        ("db-2", [("app", "db"), ("tier", "back")]),
    ];
    for (name, labels) in objects {
        cms.create(&PostParams::default(), &config_map(name, &labels, &[]))
            .await
            .expect("the ConfigMap is created");
    }
    // An unselected list holds the namespace's root CA ConfigMap too.
    let all: BTreeSet<String> = objects
        .iter()
        .map(|(n, _)| n.to_string())
        .chain([ROOT_CA.to_string()])
        .collect();

    let web = cms
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("the labelled list");
    assert_eq!(
        names(&web.items),
        set(&["web-1", "web-2", "web-3", "web-4", "web-5"])
    );
    let back_not_db = cms
        .list(&ListParams::default().labels("tier in (back,cache),app!=db"))
        .await
        .expect("the set-based list");
    assert_eq!(names(&back_not_db.items), set(&["web-3", "web-4", "web-5"]));

    // Pages of two, following continue tokens until the server stops sending one. An object
    // created after the first page must not show up: upstream serves every page from the
    // resourceVersion of the first one.
    let mut pages = Vec::new();
    let mut lp = ListParams::default().limit(2);
    loop {
        let page = cms.list(&lp).await.expect("a page of the list");
        if pages.is_empty() {
            // Without a selector upstream can count what is left after the first page.
            assert_eq!(page.metadata.remaining_item_count, Some(6));
            cms.create(
                &PostParams::default(),
                &config_map("late", &[("app", "web")], &[]),
            )
            .await
            .expect("the late ConfigMap is created");
        }
        let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
        pages.push(page);
        match next {
            Some(token) => lp = ListParams::default().limit(2).continue_token(&token),
            None => break,
        }
        assert!(
            pages.len() <= all.len(),
            "the continue tokens never run out"
        );
    }
    let sizes: Vec<usize> = pages.iter().map(|p| p.items.len()).collect();
    assert_eq!(sizes, vec![2, 2, 2, 2]);
    let collected: Vec<String> = pages
        .iter()
        .flat_map(|p| p.items.iter().map(|cm| cm.name_any()))
        .collect();
    assert_eq!(collected.len(), all.len(), "no object twice: {collected:?}");
    assert_eq!(collected.iter().cloned().collect::<BTreeSet<_>>(), all);
    let versions: BTreeSet<Option<String>> = pages
        .iter()
        .map(|p| p.metadata.resource_version.clone())
        .collect();
    assert_eq!(
        versions.len(),
        1,
        "every page is one snapshot: {versions:?}"
    );

    // Pagination and a label selector together: the selector applies before the limit, so
    // each page holds matching objects and together they are all of them (now with "late").
    let mut selected = BTreeSet::new();
    let mut page_count = 0;
    let mut lp = ListParams::default().labels("app=web").limit(2);
    loop {
        let page = cms.list(&lp).await.expect("a page of the labelled list");
        page_count += 1;
        assert!(page.items.len() <= 2);
        for cm in &page.items {
            assert!(
                selected.insert(cm.name_any()),
                "{} came twice",
                cm.name_any()
            );
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => {
                lp = ListParams::default()
                    .labels("app=web")
                    .limit(2)
                    .continue_token(&token)
            }
            None => break,
        }
        assert!(page_count <= all.len(), "the continue tokens never run out");
    }
    assert_eq!(
        selected,
        set(&["web-1", "web-2", "web-3", "web-4", "web-5", "late"])
    );
    server.stop().await;
}
