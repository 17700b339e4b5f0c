//! An in-process Ironplane for tests, the way an operator's test wants a cluster: a fresh
//! temporary store, an ephemeral loopback port, the admin kubeconfig, a ready kube-rs client,
//! CustomResourceDefinitions installed from YAML and waited for, and one call to stop.
//!
//! `TestServer::start()` (or `TestServer::builder()` with extra flags) returns once the server is
//! ready: every post-start hook `/readyz` waits for has finished, so the system namespaces, the
//! `kubernetes` Service and upstream's RBAC roles and bindings exist, and the CRDs found in
//! storage are served.
//!
//! The controllers a cluster's kube-controller-manager would run for the API's sake already run
//! in-process, as in the binary (README's "Controllers" lists them): among them
//! `namespace-controller` (namespaces finish deleting, custom resources included),
//! `garbage-collector-controller` (owner references across built-in and custom resources:
//! background, foreground and orphan deletion), `serviceaccount-controller` (a `default`
//! ServiceAccount in every namespace), `serviceaccount-token-controller`,
//! `root-ca-certificate-publisher-controller` (`kube-root-ca.crt` in every namespace),
//! `resourcequota-controller` (`status.used`), the storage protection controllers,
//! `clusterrole-aggregation-controller` and `certificatesigningrequest-signing-controller`.
//! `--controllers` chooses them with kube-controller-manager's syntax:
//! `TestServer::builder().flag("--controllers=*,-garbagecollector")`. Workload controllers
//! (Deployments, ReplicaSets, Jobs, ...) and the scheduler are not the API server's: a test that
//! needs them runs them, or the controller under test is one of them.
//!
//! A namespace is usable for pods once its `default` ServiceAccount exists (the ServiceAccount
//! admission plugin refuses pods before that, as upstream's does): `create_namespace` creates one
//! and waits for it, `wait_for_namespace` waits for one created otherwise.
//!
//! The kube-rs half (`client`, `install_crds`, `create_namespace`, `wait_for_namespace`) is
//! behind the crate's `kube-client` feature, so that the `ironplane` binary never builds kube-rs.
//! An operator's crate turns it on in its dev-dependencies, and its own `kube` must be a 5.x
//! release, so that the client is the same type:
//!
//! ```toml
//! [dev-dependencies]
//! ironplane = { path = "../ironplane/crates/ironplane", features = ["kube-client"] }
//! ```
//!
//! ```no_run
//! use ironplane::testing::TestServer;
//! use kube::api::{Api, DynamicObject, PostParams};
//! use kube::core::ApiResource;
//!
//! const CRD: &str = r#"
//! apiVersion: apiextensions.k8s.io/v1
//! kind: CustomResourceDefinition
//! metadata: {name: widgets.example.com}
//! spec:
//!   group: example.com
//!   names: {kind: Widget, plural: widgets}
//!   scope: Namespaced
//!   versions:
//!   - name: v1
//!     served: true
//!     storage: true
//!     schema:
//!       openAPIV3Schema:
//!         type: object
//!         properties:
//!           spec: {type: object, properties: {size: {type: integer}}}
//! "#;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let server = TestServer::start().await;
//! server.install_crds(CRD).await?;
//! server.create_namespace("test").await?;
//!
//! let client = server.client().await;
//! let widgets = ApiResource {
//!     group: "example.com".into(),
//!     version: "v1".into(),
//!     api_version: "example.com/v1".into(),
//!     kind: "Widget".into(),
//!     plural: "widgets".into(),
//! };
//! let api: Api<DynamicObject> = Api::namespaced_with(client, "test", &widgets);
//! let widget: DynamicObject = serde_json::from_value(serde_json::json!({
//!     "apiVersion": "example.com/v1",
//!     "kind": "Widget",
//!     "metadata": {"name": "w"},
//!     "spec": {"size": 3},
//! }))?;
//! api.create(&PostParams::default(), &widget).await?;
//! // ... run the controller under test with the client, then assert on what it wrote ...
//! server.stop().await;
//! # Ok(())
//! # }
//! ```
//!
//! Start-up: the data directory is a fresh temporary directory, on memory-backed `/dev/shm` when
//! that exists with room to spare (at least 1 GiB free) and `TMPDIR` does not name another place.
//! The store is still SQLite with `synchronous=FULL`, exactly as in production; on a memory-backed
//! file system its flushes cost nothing, and a test's store has nothing to survive.
//! `cargo bench -p ironplane --bench test_server_start` measures how long `start()` takes.
//!
//! This module must not reach into the server's internals beyond what `crate::start` and
//! `Running` offer: a test server is the binary's server, flags and all.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::{Options, Running};

/// How long `start()` waits for the post-start hooks unless told otherwise.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `install_crds` and the namespace waits wait unless told otherwise.
#[cfg(feature = "kube-client")]
const WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// What went wrong starting a test server or waiting for something in it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the test server's flags were refused: {0}")]
    Flags(String),
    #[error("the test server did not start: {0}")]
    Start(String),
    #[error("creating the test server's temporary data directory: {0}")]
    TempDir(std::io::Error),
    #[error("the test server was not ready after {waited:?}; post-start hooks still running: {}", pending.join(", "))]
    NotReady {
        waited: Duration,
        pending: Vec<String>,
    },
    #[cfg(feature = "kube-client")]
    #[error("YAML document {document} is not valid: {source}")]
    Yaml {
        document: usize,
        source: serde_yaml_ng::Error,
    },
    #[cfg(feature = "kube-client")]
    #[error(
        "YAML document {document} is a {found}, not an apiextensions.k8s.io/v1 CustomResourceDefinition with a name"
    )]
    NotACrd { document: usize, found: String },
    #[cfg(feature = "kube-client")]
    #[error("{action}: {source}")]
    Api { action: String, source: kube::Error },
    #[cfg(feature = "kube-client")]
    #[error("{what} after {waited:?}: {last}")]
    Timeout {
        what: String,
        waited: Duration,
        last: String,
    },
    #[cfg(feature = "kube-client")]
    #[error("{0}")]
    Refused(String),
}

/// Flags and timeouts for a `TestServer`; `TestServer::builder()` makes one.
#[derive(Debug, Clone)]
pub struct Builder {
    flags: Vec<OsString>,
    ready_timeout: Duration,
    #[cfg(feature = "kube-client")]
    wait_timeout: Duration,
}

impl Builder {
    /// Adds one command-line flag, as the binary takes it (`"--controllers=*,-garbagecollector"`,
    /// or `"--controllers"` then the value with another call). The harness gives
    /// `--secure-port 0` and `--data-dir` (a temporary directory) unless these flags name their
    /// own; a `--data-dir` given here is used as it is and left behind at stop.
    pub fn flag(mut self, flag: impl Into<OsString>) -> Self {
        self.flags.push(flag.into());
        self
    }

    /// Adds several flags, in order.
    pub fn flags<I, S>(mut self, flags: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.flags.extend(flags.into_iter().map(Into::into));
        self
    }

    /// How long `start` waits for the post-start hooks (default 30 s).
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// How long `install_crds`, `create_namespace` and `wait_for_namespace` wait (default 30 s).
    #[cfg(feature = "kube-client")]
    pub fn wait_timeout(mut self, timeout: Duration) -> Self {
        self.wait_timeout = timeout;
        self
    }

    /// Starts the server and waits until it is ready; panics, saying why, if it cannot.
    pub async fn start(self) -> TestServer {
        match self.try_start().await {
            Ok(server) => server,
            Err(e) => panic!("{e}"),
        }
    }

    /// Starts the server and waits until it is ready.
    pub async fn try_start(self) -> Result<TestServer, Error> {
        let has = |name: &str| {
            self.flags.iter().any(|f| {
                let f = f.to_string_lossy();
                f == name || f.starts_with(&format!("{name}="))
            })
        };
        let mut args: Vec<OsString> = vec!["ironplane".into()];
        if !has("--secure-port") {
            args.extend(["--secure-port".into(), "0".into()]);
        }
        let dir = if has("--data-dir") {
            None
        } else {
            let dir = temp_dir().map_err(Error::TempDir)?;
            args.extend(["--data-dir".into(), dir.path().into()]);
            Some(dir)
        };
        args.extend(self.flags);
        let opts = Options::try_parse_from(args).map_err(|e| Error::Flags(e.to_string()))?;
        let data_dir = opts.data_dir.clone();
        let running = crate::start(opts).await.map_err(Error::Start)?;
        if tokio::time::timeout(self.ready_timeout, running.ready())
            .await
            .is_err()
        {
            let pending = running
                .hooks
                .iter()
                .filter(|h| !h.is_ok())
                .map(|h| h.name.clone())
                .collect();
            running.shutdown().await;
            return Err(Error::NotReady {
                waited: self.ready_timeout,
                pending,
            });
        }
        let url = if running.addr.ip().is_unspecified() {
            format!("https://127.0.0.1:{}", running.addr.port())
        } else {
            format!("https://{}", running.addr)
        };
        Ok(TestServer {
            kubeconfig: running.kubeconfig.clone(),
            url,
            data_dir,
            #[cfg(feature = "kube-client")]
            wait_timeout: self.wait_timeout,
            running: Some(running),
            dir,
            #[cfg(feature = "kube-client")]
            client: tokio::sync::OnceCell::new(),
        })
    }
}

/// A running in-process server. `stop().await` stops it and removes its temporary data
/// directory; dropping it without `stop` starts the same graceful stop in the background, and the
/// directory goes once the server has let go of it (or with the runtime, if that ends first).
pub struct TestServer {
    /// The admin kubeconfig (`system:masters`, client certificate), for kubectl or any client.
    pub kubeconfig: PathBuf,
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// The data directory: the store, the PKI and the kubeconfig.
    pub data_dir: PathBuf,
    #[cfg(feature = "kube-client")]
    wait_timeout: Duration,
    running: Option<Running>,
    dir: Option<tempfile::TempDir>,
    #[cfg(feature = "kube-client")]
    client: tokio::sync::OnceCell<kube::Client>,
}

impl TestServer {
    /// Starts a server with the binary's defaults and waits until it is ready (`/readyz`
    /// answers 200); panics, saying why, if it cannot.
    pub async fn start() -> TestServer {
        Self::builder().start().await
    }

    /// A server with extra flags or other timeouts.
    pub fn builder() -> Builder {
        Builder {
            flags: Vec::new(),
            ready_timeout: READY_TIMEOUT,
            #[cfg(feature = "kube-client")]
            wait_timeout: WAIT_TIMEOUT,
        }
    }

    /// Stops accepting, ends watches, drains in-flight requests, closes the store, then removes
    /// the temporary data directory.
    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
        drop(self.dir.take());
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let Some(running) = self.running.take() else {
            return;
        };
        let dir = self.dir.take();
        let (stop, done) = running.stop_handle();
        let _ = stop.send(());
        // Removing the directory under a store that is still open would be harmless on Unix, but
        // the store should close first where a runtime is there to wait on.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = done.await;
                drop(dir);
            });
        }
    }
}

/// The minimum free space on `/dev/shm` for test servers to put their stores there.
#[cfg(target_os = "linux")]
const SHM_MIN_FREE: u64 = 1 << 30;

/// A fresh temporary directory for a test server's data: in `TMPDIR` when that is set, else on
/// memory-backed `/dev/shm` when it has room, else in the system's temporary directory.
fn temp_dir() -> std::io::Result<tempfile::TempDir> {
    let prefix = "ironplane-test-";
    #[cfg(target_os = "linux")]
    if std::env::var_os("TMPDIR").is_none() {
        let shm = std::path::Path::new("/dev/shm");
        let roomy = rustix::fs::statvfs(shm)
            .map(|s| s.f_bavail.saturating_mul(s.f_frsize) >= SHM_MIN_FREE)
            .unwrap_or(false);
        if roomy && let Ok(dir) = tempfile::Builder::new().prefix(prefix).tempdir_in(shm) {
            return Ok(dir);
        }
    }
    tempfile::Builder::new().prefix(prefix).tempdir()
}

#[cfg(feature = "kube-client")]
mod kube_client {
    //! The kube-rs half of the harness: a client from the admin kubeconfig, CRDs installed from
    //! YAML and waited for, namespaces waited for until pods can go in them.

    use std::time::Duration;

    use kube::api::{Api, ListParams, PostParams};
    use kube::config::{KubeConfigOptions, Kubeconfig};
    use kube::core::{ApiResource, DynamicObject};
    use serde::Deserialize;
    use serde_json::Value;

    use super::{Error, TestServer};

    /// How often a wait asks again: custom resources are served and `default` ServiceAccounts
    /// created within milliseconds, so a short poll adds little to a test.
    const POLL: Duration = Duration::from_millis(5);

    fn core_v1(kind: &str, plural: &str) -> ApiResource {
        ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
        }
    }

    fn crd_resource() -> ApiResource {
        ApiResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            plural: "customresourcedefinitions".into(),
        }
    }

    fn api_error(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let action = action.into();
        move |source| Error::Api { action, source }
    }

    fn is_status(e: &kube::Error, code: u16) -> bool {
        matches!(e, kube::Error::Api(s) if s.code == code)
    }

    /// Asks `probe` every few milliseconds until it gives `Ok(Some(_))` or fails, for at most
    /// `timeout`; on timeout the error says what was awaited and what `probe` saw last.
    async fn poll<T, F, Fut>(what: String, timeout: Duration, mut probe: F) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Result<T, String>, Error>>,
    {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let last = match probe().await? {
                Ok(done) => return Ok(done),
                Err(last) => last,
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what,
                    waited: timeout,
                    last,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// A CRD read from YAML: its name and what a list of each served version needs.
    struct Crd {
        name: String,
        object: DynamicObject,
        served: Vec<ApiResource>,
    }

    fn parse_crds(yaml: &str) -> Result<Vec<Crd>, Error> {
        let mut crds = Vec::new();
        for (i, doc) in serde_yaml_ng::Deserializer::from_str(yaml).enumerate() {
            let document = i + 1;
            let value =
                Value::deserialize(doc).map_err(|source| Error::Yaml { document, source })?;
            if value.is_null() {
                continue;
            }
            let text = |p: &str| value.pointer(p).and_then(Value::as_str).unwrap_or_default();
            let name = text("/metadata/name");
            if text("/apiVersion") != "apiextensions.k8s.io/v1"
                || text("/kind") != "CustomResourceDefinition"
                || name.is_empty()
            {
                let found = match (text("/apiVersion"), text("/kind")) {
                    ("", "") => "document without apiVersion and kind".to_string(),
                    (v, k) => format!("{v} {k} named {name:?}"),
                };
                return Err(Error::NotACrd { document, found });
            }
            let (group, kind, plural) = (
                text("/spec/group"),
                text("/spec/names/kind"),
                text("/spec/names/plural"),
            );
            let served = value
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").and_then(Value::as_str))
                .map(|version| ApiResource {
                    group: group.into(),
                    version: version.into(),
                    api_version: format!("{group}/{version}"),
                    kind: kind.into(),
                    plural: plural.into(),
                })
                .collect();
            let name = name.to_string();
            // The server validates the rest and says what is wrong with it.
            let object = serde_json::from_value(value).map_err(|e| Error::NotACrd {
                document,
                found: format!("CustomResourceDefinition that is not an object ({e})"),
            })?;
            crds.push(Crd {
                name,
                object,
                served,
            });
        }
        Ok(crds)
    }

    /// What a CRD's conditions say: established, refused names (with the reason), or not yet.
    fn established(crd: &DynamicObject) -> Result<bool, String> {
        let conditions = crd
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let condition = |t: &str| {
            conditions
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(t))
        };
        if let Some(c) = condition("NamesAccepted")
            && c.get("status").and_then(Value::as_str) == Some("False")
        {
            return Err(format!(
                "NamesAccepted is False: {}",
                c.get("message").and_then(Value::as_str).unwrap_or_default()
            ));
        }
        Ok(condition("Established").and_then(|c| c.get("status")) == Some(&Value::from("True")))
    }

    impl TestServer {
        /// A kube-rs client for the admin user (`system:masters`), built from the admin
        /// kubeconfig as a user builds one; the server is ready, so it can be used at once.
        /// Every call gives a clone of the same client (one connection pool).
        pub async fn client(&self) -> kube::Client {
            self.client
                .get_or_init(|| async {
                    let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)
                        .expect("kube-rs reads the test server's admin kubeconfig");
                    let config = kube::Config::from_custom_kubeconfig(
                        kubeconfig,
                        &KubeConfigOptions::default(),
                    )
                    .await
                    .expect("kube-rs accepts the test server's admin kubeconfig");
                    kube::Client::try_from(config).expect("a kube-rs client")
                })
                .await
                .clone()
        }

        /// Creates the CustomResourceDefinitions of `yaml` (one or several `---`-separated
        /// `apiextensions.k8s.io/v1` documents), then waits until each is `Established` and a
        /// list of each served version answers, for at most the wait timeout. Returns their
        /// names. Fails at once on a document that is not a CRD, on a create the server refuses
        /// (an existing CRD of the same name included) and on names another CRD holds.
        pub async fn install_crds(&self, yaml: &str) -> Result<Vec<String>, Error> {
            let crds = parse_crds(yaml)?;
            let client = self.client().await;
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &crd_resource());
            for crd in &crds {
                api.create(&PostParams::default(), &crd.object)
                    .await
                    .map_err(api_error(format!(
                        "creating CustomResourceDefinition {}",
                        crd.name
                    )))?;
            }
            for crd in &crds {
                let name = &crd.name;
                poll(
                    format!("CustomResourceDefinition {name} is not Established"),
                    self.wait_timeout,
                    || async {
                        let object = api.get(name).await.map_err(api_error(format!(
                            "reading CustomResourceDefinition {name}"
                        )))?;
                        match established(&object) {
                            Ok(true) => Ok(Ok(())),
                            Ok(false) => Ok(Err(format!(
                                "status: {}",
                                object.data.get("status").unwrap_or(&Value::Null)
                            ))),
                            Err(refused) => Err(Error::Refused(format!(
                                "CustomResourceDefinition {name}: {refused}"
                            ))),
                        }
                    },
                )
                .await?;
                for resource in &crd.served {
                    let list: Api<DynamicObject> = Api::all_with(client.clone(), resource);
                    let path = format!("{}/{}", resource.api_version, resource.plural);
                    poll(
                        format!("{path} is not served"),
                        self.wait_timeout,
                        || async {
                            match list.list_metadata(&ListParams::default().limit(1)).await {
                                Ok(_) => Ok(Ok(())),
                                Err(e) if is_status(&e, 404) => Ok(Err(e.to_string())),
                                Err(e) => Err(api_error(format!("listing {path}"))(e)),
                            }
                        },
                    )
                    .await?;
                }
            }
            Ok(crds.into_iter().map(|c| c.name).collect())
        }

        /// Creates a namespace and waits until pods can go in it (`wait_for_namespace`).
        pub async fn create_namespace(&self, name: &str) -> Result<(), Error> {
            let api: Api<DynamicObject> =
                Api::all_with(self.client().await, &core_v1("Namespace", "namespaces"));
            let namespace = DynamicObject::new(name, &core_v1("Namespace", "namespaces"));
            api.create(&PostParams::default(), &namespace)
                .await
                .map_err(api_error(format!("creating namespace {name}")))?;
            self.wait_for_namespace(name).await
        }

        /// Waits until the namespace's `default` ServiceAccount exists (the ServiceAccount
        /// admission plugin refuses pods before that), for at most the wait timeout. The
        /// `serviceaccount-controller` creates it; with that controller turned off this waits
        /// for whoever else does.
        pub async fn wait_for_namespace(&self, name: &str) -> Result<(), Error> {
            let client = self.client().await;
            let accounts: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                name,
                &core_v1("ServiceAccount", "serviceaccounts"),
            );
            let namespaces: Api<DynamicObject> =
                Api::all_with(client, &core_v1("Namespace", "namespaces"));
            poll(
                format!("namespace {name} has no default ServiceAccount"),
                self.wait_timeout,
                || async {
                    let found = accounts
                        .get_opt("default")
                        .await
                        .map_err(api_error(format!("reading ServiceAccount {name}/default")))?;
                    if found.is_some() {
                        return Ok(Ok(()));
                    }
                    // Say why it may never come.
                    let namespace = namespaces
                        .get_opt(name)
                        .await
                        .map_err(api_error(format!("reading namespace {name}")))?;
                    Ok(Err(match namespace {
                        None => "the namespace does not exist".to_string(),
                        Some(ns) => format!(
                            "namespace phase {}; is serviceaccount-controller on?",
                            ns.data
                                .pointer("/status/phase")
                                .and_then(Value::as_str)
                                .unwrap_or("unknown")
                        ),
                    }))
                },
            )
            .await
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn several_crds_are_read_with_their_served_versions() {
            let crds = parse_crds(
                "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
                 metadata: {name: as.x.io}\nspec: {group: x.io, names: {kind: A, plural: as}, \
                 versions: [{name: v1, served: true}, {name: v2, served: false}]}\n---\n---\n\
                 apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
                 metadata: {name: bs.x.io}\nspec: {group: x.io, names: {kind: B, plural: bs}, \
                 versions: [{name: v1beta1, served: true}, {name: v1, served: true}]}\n",
            )
            .unwrap();
            let summary: Vec<(String, Vec<String>)> = crds
                .iter()
                .map(|c| {
                    (
                        c.name.clone(),
                        c.served
                            .iter()
                            .map(|r| format!("{} {} {}", r.api_version, r.plural, r.kind))
                            .collect(),
                    )
                })
                .collect();
            assert_eq!(
                summary,
                [
                    ("as.x.io".to_string(), vec!["x.io/v1 as A".to_string()]),
                    (
                        "bs.x.io".to_string(),
                        vec!["x.io/v1beta1 bs B".to_string(), "x.io/v1 bs B".to_string()]
                    ),
                ]
            );
        }

        #[test]
        fn a_document_that_is_not_a_crd_is_refused_with_its_number() {
            let err = parse_crds(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
                 metadata: {name: as.x.io}\n---\napiVersion: v1\nkind: ConfigMap\n\
                 metadata: {name: c}\n",
            )
            .err()
            .unwrap();
            assert_eq!(
                err.to_string(),
                "YAML document 2 is a v1 ConfigMap named \"c\", not an apiextensions.k8s.io/v1 \
                 CustomResourceDefinition with a name"
            );
            let err = parse_crds("a: [").err().unwrap();
            assert!(
                err.to_string().starts_with("YAML document 1 is not valid"),
                "{err}"
            );
        }

        #[test]
        fn refused_names_are_reported_and_established_is_read() {
            let crd = |conditions: Value| {
                serde_json::from_value::<DynamicObject>(serde_json::json!({
                    "metadata": {"name": "as.x.io"},
                    "status": {"conditions": conditions},
                }))
                .unwrap()
            };
            assert_eq!(established(&crd(serde_json::json!([]))), Ok(false));
            assert_eq!(
                established(&crd(serde_json::json!([
                    {"type": "NamesAccepted", "status": "True"},
                    {"type": "Established", "status": "True"},
                ]))),
                Ok(true)
            );
            assert_eq!(
                established(&crd(serde_json::json!([
                    {"type": "NamesAccepted", "status": "False", "message": "\"as\" is already in use"},
                ]))),
                Err("NamesAccepted is False: \"as\" is already in use".to_string())
            );
        }
    }
}
