//! `ironplane::testing` used as an operator's test uses it, as README's "Testing operators in
//! Rust" shows: start a server, install a CRD from YAML, run the controller under test with the
//! harness's kube-rs client, assert on what it does, stop. The first test is the README's example;
//! the others check the harness's own promises (flags, clear errors, stop and drop).
//!
//! Everything goes through the public API and the harness's public surface. Waits are bounded;
//! nothing here sleeps and then asserts.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use ironplane::testing::TestServer;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, CustomResource, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// ---- The README's example: an operator's test. ----

/// The operator's custom resource, as its crate defines it.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[kube(group = "example.com", version = "v1", kind = "Widget", namespaced)]
pub struct WidgetSpec {
    size: i64,
}

/// The operator's CRD, as its crate ships it (often `include_str!("../config/crd/widgets.yaml")`).
const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
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
            required: [size]
            properties:
              size: {type: integer}
"#;

/// The controller under test: every Widget gets a ConfigMap `<name>-size`, owned by the Widget,
/// holding its size.
async fn reconcile(widget: Arc<Widget>, client: Arc<Client>) -> Result<Action, kube::Error> {
    let name = format!("{}-size", widget.name_any());
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            owner_references: widget.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        data: Some([("size".to_string(), widget.spec.size.to_string())].into()),
        ..ConfigMap::default()
    };
    let namespace = widget.namespace().unwrap_or_default();
    Api::<ConfigMap>::namespaced(Client::clone(&client), &namespace)
        .patch(
            &name,
            &PatchParams::apply("widget-controller").force(),
            &Patch::Apply(&config_map),
        )
        .await?;
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Widget>, _: &kube::Error, _: Arc<Client>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

/// Asks `check` again until it gives `Some`, for at most 30 s.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Some(found) = check().await {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what} within 30 s"))
}

#[tokio::test]
async fn the_widget_controller_makes_a_config_map_that_goes_with_its_widget() {
    let server = TestServer::start().await;
    server.install_crds(WIDGET_CRD).await.unwrap();
    // A namespace in which pods could go: its `default` ServiceAccount exists.
    server.create_namespace("demo").await.unwrap();
    let client = server.client().await;
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), "demo");
    assert!(accounts.get_opt("default").await.unwrap().is_some());

    // Run the controller under test against the server.
    let controller = tokio::spawn(
        Controller::new(
            Api::<Widget>::all(client.clone()),
            watcher::Config::default(),
        )
        .owns(
            Api::<ConfigMap>::all(client.clone()),
            watcher::Config::default(),
        )
        .run(reconcile, error_policy, Arc::new(client.clone()))
        .for_each(|_| async {}),
    );

    let widgets = Api::<Widget>::namespaced(client.clone(), "demo");
    let widget = Widget::new("small", WidgetSpec { size: 3 });
    widgets
        .create(&PostParams::default(), &widget)
        .await
        .unwrap();

    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), "demo");
    let made = eventually("the controller makes small-size", || async {
        config_maps.get_opt("small-size").await.unwrap()
    })
    .await;
    assert_eq!(made.data.unwrap()["size"], "3");

    // The garbage collector runs in the server: the ConfigMap goes with its Widget.
    widgets
        .delete("small", &DeleteParams::default())
        .await
        .unwrap();
    eventually("small-size is collected with its Widget", || async {
        config_maps
            .get_opt("small-size")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;

    controller.abort();
    server.stop().await;
}

// ---- The harness's own promises. ----

#[tokio::test]
async fn flags_reach_the_server_and_a_namespace_that_never_becomes_usable_says_why() {
    let server = TestServer::builder()
        .flag("--controllers=*,-serviceaccount-controller")
        .wait_timeout(Duration::from_millis(300))
        .start()
        .await;
    let err = server.create_namespace("no-accounts").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "namespace no-accounts has no default ServiceAccount after 300ms: namespace phase \
         Active; is serviceaccount-controller on?"
    );
    let err = server.wait_for_namespace("missing").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "namespace missing has no default ServiceAccount after 300ms: the namespace does not \
         exist"
    );
    // The other controllers run: the root CA publisher fills the namespace.
    let config_maps = Api::<ConfigMap>::namespaced(server.client().await, "no-accounts");
    eventually("kube-root-ca.crt is published", || async {
        config_maps.get_opt("kube-root-ca.crt").await.unwrap()
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn bad_flags_are_an_error_not_a_hang() {
    let Err(err) = TestServer::builder()
        .flag("--controllers=no-such-controller")
        .try_start()
        .await
    else {
        panic!("an unknown controller is refused");
    };
    assert_eq!(
        err.to_string(),
        "the test server did not start: \"no-such-controller\" is not in the list of known \
         controllers"
    );
    let Err(err) = TestServer::builder()
        .flag("--no-such-flag")
        .try_start()
        .await
    else {
        panic!("an unknown flag is refused");
    };
    assert!(
        err.to_string()
            .starts_with("the test server's flags were refused: "),
        "{err}"
    );
}

#[tokio::test]
async fn several_crds_install_at_once_and_bad_ones_are_refused_clearly() {
    let server = TestServer::start().await;
    let crd = |plural: &str, kind: &str| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
             metadata: {{name: {plural}.example.com}}\n\
             spec:\n  group: example.com\n  names: {{kind: {kind}, plural: {plural}}}\n  \
             scope: Cluster\n  versions:\n  - {{name: v1beta1, served: true, storage: false, \
             schema: {{openAPIV3Schema: {{type: object}}}}}}\n  - {{name: v1, served: true, \
             storage: true, schema: {{openAPIV3Schema: {{type: object}}}}}}\n"
        )
    };
    let names = server
        .install_crds(&format!(
            "---\n{}---\n{}",
            crd("gears", "Gear"),
            crd("cogs", "Cog")
        ))
        .await
        .unwrap();
    assert_eq!(names, ["gears.example.com", "cogs.example.com"]);
    // Both versions of both are served the moment install_crds returns.
    let client = server.client().await;
    for (plural, kind) in [("gears", "Gear"), ("cogs", "Cog")] {
        for version in ["v1beta1", "v1"] {
            let resource = kube::core::ApiResource {
                group: "example.com".into(),
                version: version.into(),
                api_version: format!("example.com/{version}"),
                kind: kind.into(),
                plural: plural.into(),
            };
            let api = Api::<kube::core::DynamicObject>::all_with(client.clone(), &resource);
            let list = api.list(&Default::default()).await.unwrap();
            assert!(list.items.is_empty(), "{plural} {version}");
        }
    }

    // A kind another CRD of the group holds: the names are not accepted, and the error says so.
    let err = server
        .install_crds(&crd("sprockets", "Gear"))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.starts_with(
            "CustomResourceDefinition sprockets.example.com: NamesAccepted is False: "
        ),
        "{message}"
    );
    // Installing one again is the server's AlreadyExists.
    let err = server
        .install_crds(&crd("gears", "Gear"))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.starts_with("creating CustomResourceDefinition gears.example.com: ")
            && message.contains("already exists"),
        "{message}"
    );
    // A document that is not a CRD is refused before anything is created.
    let err = server
        .install_crds(&format!(
            "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\n",
            crd("wheels", "Wheel")
        ))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "YAML document 2 is a v1 ConfigMap named \"c\", not an apiextensions.k8s.io/v1 \
         CustomResourceDefinition with a name"
    );
    let crds = Api::<kube::core::DynamicObject>::all_with(
        client,
        &kube::core::ApiResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            plural: "customresourcedefinitions".into(),
        },
    );
    assert!(crds.get_opt("wheels.example.com").await.unwrap().is_none());
    server.stop().await;
}

#[tokio::test]
async fn stop_and_drop_remove_the_temporary_data_directory() {
    let server = TestServer::start().await;
    let dir = server.data_dir.clone();
    assert!(dir.join("kubeconfig").is_file());
    server.stop().await;
    assert!(!dir.exists(), "{} is removed by stop", dir.display());

    // Dropped without stop: the server stops in the background and the directory goes after it.
    let server = TestServer::start().await;
    let dir = server.data_dir.clone();
    drop(server);
    // The directory goes only once the store is closed, so this also says the server stopped.
    eventually("the dropped server's directory is removed", || async {
        (!dir.exists()).then_some(())
    })
    .await;
}
