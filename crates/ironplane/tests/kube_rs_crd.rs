//! kube-rs and a custom resource (issue 8): a `#[derive(CustomResource)]` type's CRD installed
//! through `Api<CustomResourceDefinition>`, then the custom resource driven through `Api<T>`
//! while a `watcher` sees every change. Everything goes through the public API.

use std::time::Duration;

use futures_util::StreamExt;
use ironplane::testing::TestServer;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kube::{Client, Config, CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(20);

#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "kubers.example.com",
    version = "v1",
    kind = "Gizmo",
    namespaced,
    status = "GizmoStatus",
    shortname = "gz"
)]
pub struct GizmoSpec {
    size: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    color: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct GizmoStatus {
    ready: bool,
}

async fn client(server: &TestServer) -> Client {
    let kubeconfig = Kubeconfig::read_from(&server.kubeconfig).expect("the admin kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kube-rs accepts the admin kubeconfig");
    Client::try_from(config).expect("a kube-rs client")
}

#[derive(Debug, PartialEq)]
enum Seen {
    Apply(String, i32, Option<bool>),
    Delete(String),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn derived_custom_resource_round_trips_and_is_watched() {
    let server = TestServer::start().await;
    let client = client(&server).await;

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Gizmo::crd())
        .await
        .expect("the derived CRD is accepted");
    tokio::time::timeout(TIMEOUT, async {
        loop {
            let crd = crds
                .get("gizmos.kubers.example.com")
                .await
                .expect("the CRD");
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the CRD is established");

    let gizmos: Api<Gizmo> = Api::namespaced(client.clone(), "default");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let stream = watcher(gizmos.clone(), watcher::Config::default());
    let forward = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            if tx.send(item).is_err() {
                break;
            }
        }
    });
    tokio::time::timeout(TIMEOUT, async {
        loop {
            match rx.recv().await.expect("the watcher runs") {
                Ok(watcher::Event::InitDone) => break,
                Ok(watcher::Event::Init) => {}
                other => panic!("unexpected item during the initial list: {other:?}"),
            }
        }
    })
    .await
    .expect("the initial list completes");

    let created = gizmos
        .create(
            &PostParams::default(),
            &Gizmo::new(
                "g1",
                GizmoSpec {
                    size: 1,
                    color: None,
                },
            ),
        )
        .await
        .expect("the Gizmo is created");
    assert_eq!(
        created.spec,
        GizmoSpec {
            size: 1,
            color: None
        }
    );
    assert_eq!(created.metadata.generation, Some(1));

    let patched = gizmos
        .patch(
            "g1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2, "color": "red"}})),
        )
        .await
        .expect("a merge patch applies");
    assert_eq!(patched.spec.color.as_deref(), Some("red"));
    assert_eq!(patched.metadata.generation, Some(2));

    let with_status = gizmos
        .patch_status(
            "g1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .expect("the status subresource takes a patch");
    assert_eq!(with_status.status, Some(GizmoStatus { ready: true }));
    // A status write leaves the generation alone.
    assert_eq!(with_status.metadata.generation, Some(2));

    let list = gizmos.list(&Default::default()).await.expect("a list");
    assert_eq!(list.items.len(), 1);
    gizmos
        .delete("g1", &DeleteParams::default())
        .await
        .expect("the Gizmo is deleted");

    let expected = vec![
        Seen::Apply("g1".into(), 1, None),
        Seen::Apply("g1".into(), 2, None),
        Seen::Apply("g1".into(), 2, Some(true)),
        Seen::Delete("g1".into()),
    ];
    let mut seen = Vec::new();
    let waited = tokio::time::timeout(TIMEOUT, async {
        while seen.len() < expected.len() {
            match rx.recv().await {
                Some(Ok(watcher::Event::Apply(g))) => seen.push(Seen::Apply(
                    g.name_any(),
                    g.spec.size,
                    g.status.map(|s| s.ready),
                )),
                Some(Ok(watcher::Event::Delete(g))) => seen.push(Seen::Delete(g.name_any())),
                other => panic!("unexpected watch item: {other:?}"),
            }
        }
    })
    .await;
    forward.abort();
    assert!(waited.is_ok(), "seen only {seen:?}");
    assert_eq!(seen, expected);
    server.stop().await;
}
