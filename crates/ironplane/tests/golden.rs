//! Golden tests: Ironplane's discovery documents and Table column definitions compared with
//! the answers kube-apiserver v1.36.2 gave to the same requests, recorded in `tests/golden/`
//! (`discovery/` and `tables/`, copied from the project's upstream recordings so that CI needs
//! nothing outside the repository).
//!
//! Every comparison goes through one helper, `check_golden`, which compares status, content type
//! and body with a recorded file. The only differences it tolerates are the ones written down
//! here: `NOT_SERVED_YET` (what Ironplane does not serve yet) and the server address in `/api`,
//! which is compared by shape. This file must not relax a comparison anywhere else: a difference
//! from upstream is a failure for the server to fix, not for the test to absorb.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use ironplane::testing::TestServer;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};

/// What kube-apiserver v1.36 lists in discovery and Ironplane does not serve yet, as
/// `(group, resource)` or `(group, "resource/subresource")`. Each entry is removed from the
/// upstream documents before they are compared. The list is explicit on purpose (rather than a
/// rule such as "every subresource but status, scale and finalize"): when the server starts
/// serving one of these, its discovery lists it, the comparison fails, and the entry has to be
/// removed here. Entries must exist in the recorded documents (`exclusions_are_recorded_upstream`).
const NOT_SERVED_YET: &[(&str, &str)] = &[
    ("", "nodes/proxy"),
    ("", "pods/attach"),
    ("", "pods/exec"),
    ("", "pods/log"),
    ("", "pods/portforward"),
    ("", "pods/proxy"),
    ("", "services/proxy"),
];

const JSON: &str = "application/json";
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

fn not_served_yet(group: &str, name: &str) -> bool {
    NOT_SERVED_YET.iter().any(|&(g, n)| g == group && n == name)
}

// ---------------------------------------------------------------------------------------------
// The client: HTTPS with the admin client certificate of the test server's kubeconfig.

struct Response {
    status: u16,
    content_type: String,
    /// The body as JSON, or as a JSON string holding the raw text when it is not JSON, so that
    /// the comparison reports it rather than the test stopping on a parse error.
    body: Value,
}

struct Client {
    http: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
    base: String,
}

fn kubeconfig_data(config: &serde_yaml_ng::Value, list: &str, item: &str, key: &str) -> Vec<u8> {
    let encoded = config[list][0][item][key]
        .as_str()
        .unwrap_or_else(|| panic!("the kubeconfig has {list}[0].{item}.{key}"));
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap_or_else(|e| panic!("{list}[0].{item}.{key} is base64: {e}"))
}

impl Client {
    fn new(server: &TestServer) -> Client {
        Client::with_protocols(server, false)
    }

    /// With `http2`, the client also offers h2 by ALPN, which the server then chooses, as
    /// kubectl's and client-go's connections do.
    fn with_protocols(server: &TestServer, http2: bool) -> Client {
        let text = std::fs::read_to_string(&server.kubeconfig).expect("the kubeconfig is readable");
        let config: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("kubeconfig YAML");
        let ca = kubeconfig_data(&config, "clusters", "cluster", "certificate-authority-data");
        let cert = kubeconfig_data(&config, "users", "user", "client-certificate-data");
        let key = kubeconfig_data(&config, "users", "user", "client-key-data");

        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&ca) {
            roots
                .add(c.expect("a CA certificate"))
                .expect("a usable CA");
        }
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert)
            .collect::<Result<_, _>>()
            .expect("the client certificate");
        let key = PrivateKeyDer::from_pem_slice(&key).expect("the client key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .expect("a client certificate rustls accepts");

        let mut http = HttpConnector::new();
        http.enforce_http(false);
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1();
        let connector = if http2 {
            builder.enable_http2().wrap_connector(http)
        } else {
            builder.wrap_connector(http)
        };
        Client {
            http: HyperClient::builder(TokioExecutor::new()).build(connector),
            base: server.url.clone(),
        }
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        accept: &str,
        body: Option<&Value>,
    ) -> Response {
        let mut req = Request::builder()
            .method(method.clone())
            .uri(format!("{}{}", self.base, path))
            .header("accept", accept);
        let payload = match body {
            Some(b) => {
                req = req.header("content-type", JSON);
                Bytes::from(b.to_string())
            }
            None => Bytes::new(),
        };
        let req = req.body(Full::new(payload)).expect("a well-formed request");
        let resp = self
            .http
            .request(req)
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: reading the body: {e}"))
            .to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Response {
            status,
            content_type,
            body,
        }
    }

    /// Waits for `/readyz`: `TestServer::start` returns before the post-start hooks have run,
    /// and the `default` namespace only exists once the bootstrap hook is done.
    async fn wait_ready(&self) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        while self.get("/readyz", "text/plain").await.status != 200 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "/readyz did not answer 200 within 30s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    async fn get(&self, path: &str, accept: &str) -> Response {
        self.request(Method::GET, path, accept, None).await
    }
}

// ---------------------------------------------------------------------------------------------
// The golden helper.

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn read_golden(file: &str) -> Value {
    let path = golden_dir().join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// Compares a response with the recorded upstream answer in `tests/golden/<file>`: status code,
/// content type, then body. `adjust` receives the upstream body and the actual body before the
/// body comparison; it is where a caller applies one of the documented differences (and nothing
/// else). Returns every difference found, so that one run shows them all.
fn check_golden(
    what: &str,
    actual: Response,
    file: &str,
    adjust: impl FnOnce(&mut Value, &mut Value),
) -> Result<(), String> {
    let golden = read_golden(file);
    let mut problems = Vec::new();
    if golden["status"] != json!(actual.status) {
        problems.push(format!(
            "status: upstream {}, ironplane {}",
            golden["status"], actual.status
        ));
    }
    let content_type = golden["contentType"].as_str().unwrap_or("");
    if content_type != actual.content_type {
        problems.push(format!(
            "content type: upstream {content_type:?}, ironplane {:?}",
            actual.content_type
        ));
    }
    let mut expected = golden["body"].clone();
    let mut body = actual.body;
    adjust(&mut expected, &mut body);
    diff("", &expected, &body, &mut problems);
    if problems.is_empty() {
        Ok(())
    } else {
        const SHOWN: usize = 25;
        let more = problems.len().saturating_sub(SHOWN);
        problems.truncate(SHOWN);
        if more > 0 {
            problems.push(format!("... and {more} more"));
        }
        Err(format!(
            "{what} (golden {file}):\n    {}",
            problems.join("\n    ")
        ))
    }
}

/// Lists the differences between two JSON values by JSON pointer; arrays are compared in order.
fn diff(at: &str, expected: &Value, actual: &Value, out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            let keys: BTreeSet<&String> = e.keys().chain(a.keys()).collect();
            for k in keys {
                let here = format!("{at}/{k}");
                match (e.get(k), a.get(k)) {
                    (Some(ev), Some(av)) => diff(&here, ev, av, out),
                    (Some(ev), None) => {
                        out.push(format!("{here}: missing, upstream has {}", short(ev)))
                    }
                    (None, Some(av)) => out.push(format!(
                        "{here}: not in upstream, ironplane has {}",
                        short(av)
                    )),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            // Arrays of named things are reported by name, which reads far better than an
            // index shift when one entry is missing or extra.
            let names = |v: &[Value]| v.iter().map(entry_name).collect::<Option<Vec<String>>>();
            if let (Some(en), Some(an)) = (names(e), names(a))
                && en != an
            {
                out.push(format!(
                    "{at}: names differ\n      upstream:  {en:?}\n      ironplane: {an:?}"
                ));
                for (i, name) in en.iter().enumerate() {
                    if let Some(j) = an.iter().position(|n| n == name) {
                        diff(&format!("{at}/{name}"), &e[i], &a[j], out);
                    }
                }
                return;
            }
            if e.len() != a.len() {
                out.push(format!(
                    "{at}: upstream has {} entries, ironplane {}",
                    e.len(),
                    a.len()
                ));
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                diff(&format!("{at}/{i}"), ev, av, out);
            }
        }
        _ if expected != actual => out.push(format!(
            "{at}: upstream {}, ironplane {}",
            short(expected),
            short(actual)
        )),
        _ => {}
    }
}

/// The name an entry of a discovery or table array goes by, if it has one.
fn entry_name(v: &Value) -> Option<String> {
    ["name", "resource", "subresource", "version"]
        .iter()
        .find_map(|k| v.get(k).and_then(Value::as_str))
        .or_else(|| {
            v.get("metadata")
                .map(|m| m.get("name").and_then(Value::as_str).unwrap_or(""))
        })
        .map(str::to_string)
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 200 {
        format!("{}...", &s[..s.floor_char_boundary(200)])
    } else {
        s
    }
}

fn report(problems: Vec<String>) {
    assert!(
        problems.is_empty(),
        "{} golden mismatch(es):\n{}",
        problems.len(),
        problems.join("\n\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Normalisations, each one a documented difference.

/// Removes `NOT_SERVED_YET` entries from an `APIResourceList` (legacy discovery).
fn drop_not_served_legacy(group: &str, list: &mut Value) {
    if let Some(resources) = list["resources"].as_array_mut() {
        resources.retain(|r| !not_served_yet(group, r["name"].as_str().unwrap_or("")));
    }
}

/// Removes `NOT_SERVED_YET` entries from an `APIGroupDiscoveryList` (aggregated discovery). A
/// resource left with no subresource loses the field, as upstream omits an empty one.
fn drop_not_served_aggregated(list: &mut Value) {
    for group in list["items"].as_array_mut().into_iter().flatten() {
        let name = group["metadata"]["name"].as_str().unwrap_or("").to_string();
        for version in group["versions"].as_array_mut().into_iter().flatten() {
            let Some(resources) = version["resources"].as_array_mut() else {
                continue;
            };
            resources.retain(|r| !not_served_yet(&name, r["resource"].as_str().unwrap_or("")));
            for r in resources {
                let resource = r["resource"].as_str().unwrap_or("").to_string();
                let Some(obj) = r.as_object_mut() else {
                    continue;
                };
                if let Some(Value::Array(subs)) = obj.get_mut("subresources") {
                    subs.retain(|s| {
                        let sub = s["subresource"].as_str().unwrap_or("");
                        !not_served_yet(&name, &format!("{resource}/{sub}"))
                    });
                    if subs.is_empty() {
                        obj.remove("subresources");
                    }
                }
            }
        }
    }
}

/// `serverAddressByClientCIDRs` names the address the server was reached on, so it is compared
/// by shape: as many entries, the same `clientCIDR`s, and a `host:port` server address. When
/// the shape holds, the actual value is replaced by upstream's so the body comparison passes.
fn server_address_by_shape(expected: &mut Value, actual: &mut Value) {
    const KEY: &str = "serverAddressByClientCIDRs";
    let (Some(e), Some(a)) = (expected[KEY].as_array(), actual[KEY].as_array()) else {
        return;
    };
    let same_shape = e.len() == a.len()
        && e.iter().zip(a).all(|(e, a)| {
            a.as_object().is_some_and(|o| o.len() == 2)
                && a["clientCIDR"] == e["clientCIDR"]
                && a["serverAddress"]
                    .as_str()
                    .is_some_and(|s| s.parse::<std::net::SocketAddr>().is_ok())
        });
    if same_shape {
        actual[KEY] = expected[KEY].clone();
    }
}

// ---------------------------------------------------------------------------------------------
// Discovery.

#[test]
fn exclusions_are_recorded_upstream() {
    // A stale or misspelt entry would silently hide nothing; each must name something upstream
    // actually lists in its legacy discovery documents.
    let mut listed = BTreeSet::new();
    let mut docs = vec![("".to_string(), read_golden("discovery/api_v1.json"))];
    for g in read_golden("discovery/apis.json")["body"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let group = g["name"].as_str().unwrap_or("").to_string();
        for v in g["versions"].as_array().into_iter().flatten() {
            let version = v["version"].as_str().unwrap_or("");
            docs.push((
                group.clone(),
                read_golden(&format!("discovery/apis_{group}_{version}.json")),
            ));
        }
    }
    for (group, doc) in docs {
        for r in doc["body"]["resources"].as_array().into_iter().flatten() {
            listed.insert((group.clone(), r["name"].as_str().unwrap_or("").to_string()));
        }
    }
    for &(g, n) in NOT_SERVED_YET {
        assert!(
            listed.contains(&(g.to_string(), n.to_string())),
            "NOT_SERVED_YET has ({g:?}, {n:?}), which upstream does not list"
        );
    }
}

/// HEAD as a real kube-apiserver v1.36.2 answers it (checked by hand against one): its REST
/// routes (built-in resources, legacy and built-in group version discovery, `/version`, the
/// OIDC documents) have no HEAD and answer 405; its plain handlers (health, OpenAPI, `/apis`
/// and groups) answer as for GET. No answer to a HEAD carries a body, over HTTP/1.1 or
/// HTTP/2 (where a body on a HEAD answer resets the stream).
#[tokio::test(flavor = "multi_thread")]
async fn head_requests_are_answered_without_a_body() {
    let server = TestServer::start().await;
    for http2 in [false, true] {
        let client = Client::with_protocols(&server, http2);
        client.wait_ready().await;
        for (path, code) in [
            ("/api/v1/namespaces/default/configmaps", 405),
            (
                "/api/v1/namespaces/default/configmaps/kube-root-ca.crt",
                405,
            ),
            ("/apis/apps/v1", 405),
            ("/api", 405),
            ("/version", 405),
            ("/.well-known/openid-configuration", 405),
            ("/apis", 200),
            ("/apis/apps", 200),
            ("/healthz", 200),
            ("/readyz", 200),
            ("/openapi/v2", 200),
        ] {
            let r = client.request(Method::HEAD, path, JSON, None).await;
            assert_eq!(
                (r.status, &r.body),
                (code, &Value::String(String::new())),
                "HEAD {path} (http2: {http2})"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn legacy_discovery_matches_upstream() {
    let server = TestServer::start().await;
    let client = Client::new(&server);
    client.wait_ready().await;
    let mut problems = Vec::new();

    problems.extend(
        check_golden(
            "GET /api",
            client.get("/api", JSON).await,
            "discovery/api.json",
            server_address_by_shape,
        )
        .err(),
    );
    problems.extend(
        check_golden(
            "GET /api/v1",
            client.get("/api/v1", JSON).await,
            "discovery/api_v1.json",
            |e, _| drop_not_served_legacy("", e),
        )
        .err(),
    );
    problems.extend(
        check_golden(
            "GET /apis",
            client.get("/apis", JSON).await,
            "discovery/apis.json",
            |_, _| {},
        )
        .err(),
    );

    let groups = read_golden("discovery/apis.json")["body"]["groups"].clone();
    for g in groups.as_array().into_iter().flatten() {
        let group = g["name"].as_str().unwrap_or("");
        let path = format!("/apis/{group}");
        let file = format!("discovery/apis_{group}.json");
        problems.extend(
            check_golden(
                &format!("GET {path}"),
                client.get(&path, JSON).await,
                &file,
                |_, _| {},
            )
            .err(),
        );
        for v in g["versions"].as_array().into_iter().flatten() {
            let version = v["version"].as_str().unwrap_or("");
            let path = format!("/apis/{group}/{version}");
            let file = format!("discovery/apis_{group}_{version}.json");
            problems.extend(
                check_golden(
                    &format!("GET {path}"),
                    client.get(&path, JSON).await,
                    &file,
                    |e, _| drop_not_served_legacy(group, e),
                )
                .err(),
            );
        }
    }

    server.stop().await;
    report(problems);
}

#[tokio::test(flavor = "multi_thread")]
async fn aggregated_discovery_matches_upstream() {
    let server = TestServer::start().await;
    let client = Client::new(&server);
    client.wait_ready().await;
    let mut problems = Vec::new();
    for (path, file) in [
        ("/api", "discovery/aggregated_api.json"),
        ("/apis", "discovery/aggregated_apis.json"),
    ] {
        problems.extend(
            check_golden(
                &format!("GET {path} (aggregated)"),
                client.get(path, AGGREGATED).await,
                file,
                |e, _| drop_not_served_aggregated(e),
            )
            .err(),
        );
    }
    server.stop().await;
    report(problems);
}

// ---------------------------------------------------------------------------------------------
// Tables.

/// The recorded table files as (file name, group, version, resource): `<group>_<version>_<resource>.json`,
/// or `v1_<resource>.json` for the core group.
fn recorded_tables() -> Vec<(String, String, String, String)> {
    let dir = golden_dir().join("tables");
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter_map(|file| {
            let stem = file.strip_suffix(".json")?.to_string();
            let parts: Vec<&str> = stem.split('_').collect();
            let (g, v, r) = match parts.as_slice() {
                [v, r] => (String::new(), v.to_string(), r.to_string()),
                [g, v, r] => (g.to_string(), v.to_string(), r.to_string()),
                _ => panic!("unexpected table file name {file}"),
            };
            Some((file, g, v, r))
        })
        .collect();
    out.sort();
    out
}

fn collection_path(group: &str, version: &str, resource: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}/{resource}")
    } else {
        format!("/apis/{group}/{version}/{resource}")
    }
}

/// Keeps only `columnDefinitions` of a Table, the part the recordings hold.
fn only_columns(expected: &mut Value, actual: &mut Value) {
    *expected = json!({"columnDefinitions": expected["columnDefinitions"].clone()});
    *actual = json!({"columnDefinitions": actual["columnDefinitions"].clone()});
}

#[tokio::test(flavor = "multi_thread")]
async fn table_columns_match_upstream() {
    let server = TestServer::start().await;
    let client = Client::new(&server);
    client.wait_ready().await;
    let mut problems = Vec::new();
    let tables = recorded_tables();
    assert!(
        tables.len() > 50,
        "the recorded tables are in tests/golden/tables"
    );
    for (file, group, version, resource) in tables {
        let path = format!("{}?limit=1", collection_path(&group, &version, &resource));
        let resp = client.get(&path, TABLE).await;
        if not_served_yet(&group, &resource) {
            // Not served: it must really be absent, so that serving it makes this fail and the
            // entry comes off NOT_SERVED_YET (and its columns get compared).
            if resp.status != 404 {
                problems.push(format!(
                    "GET {path}: answers {} although ({group:?}, {resource:?}) is in NOT_SERVED_YET",
                    resp.status
                ));
            }
            continue;
        }
        problems.extend(
            check_golden(
                &format!("GET {path} as Table"),
                resp,
                &format!("tables/{file}"),
                only_columns,
            )
            .err(),
        );
    }
    server.stop().await;
    report(problems);
}

#[tokio::test(flavor = "multi_thread")]
async fn table_rows_have_one_cell_per_column() {
    let server = TestServer::start().await;
    let client = Client::new(&server);
    client.wait_ready().await;
    let labels = json!({"app": "golden"});
    let pod_spec =
        json!({"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}]});
    let objects = [
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "golden-cm"}, "data": {"a": "b"}}),
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "golden-deploy"},
                "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": pod_spec}}}),
        ),
        (
            "/api/v1/namespaces/default/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "golden-svc"},
                "spec": {"selector": labels, "ports": [{"port": 80}]}}),
        ),
        (
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "golden-ns"}}),
        ),
        (
            "/api/v1/namespaces/default/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "golden-pod", "labels": labels}, "spec": pod_spec}),
        ),
    ];

    let mut problems = Vec::new();
    for (collection, object) in objects {
        let kind = object["kind"].as_str().unwrap_or("").to_string();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let created = client
            .request(Method::POST, collection, JSON, Some(&object))
            .await;
        assert_eq!(created.status, 201, "creating the {kind}: {}", created.body);

        // kubectl asks for both: a list for `kubectl get <kind>`, one object for `get <kind> <name>`.
        for path in [collection.to_string(), format!("{collection}/{name}")] {
            let table = client.get(&path, TABLE).await;
            if table.status != 200 {
                problems.push(format!(
                    "GET {path} as Table: status {}: {}",
                    table.status, table.body
                ));
                continue;
            }
            let columns = table.body["columnDefinitions"]
                .as_array()
                .map_or(0, Vec::len);
            let rows = table.body["rows"].as_array().cloned().unwrap_or_default();
            let Some(row) = rows.iter().find(|r| r["cells"][0] == json!(name)) else {
                problems.push(format!(
                    "GET {path} as Table: no row named {name}: {}",
                    short(&table.body)
                ));
                continue;
            };
            let cells = row["cells"].as_array().map_or(0, Vec::len);
            if columns == 0 || cells != columns {
                problems.push(format!(
                    "GET {path} as Table ({kind}): {columns} columns but {cells} cells: {}",
                    row["cells"]
                ));
            }
        }
    }
    server.stop().await;
    report(problems);
}
