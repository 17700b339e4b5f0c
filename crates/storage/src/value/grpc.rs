//! The KMS v2 plugin API (upstream: `k8s.io/kms/apis/v2/api.proto`, service
//! `v2.KeyManagementService`) over gRPC on a unix socket: the messages, derived by hand with
//! `prost` so that no protoc is needed, the client the envelope transformer calls, and a small
//! plugin (`testing`) for tests.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use http::uri::PathAndQuery;
use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint};

use super::TransformError;
use super::kmsv2::KmsService;

#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusResponse {
    #[prost(string, tag = "1")]
    pub version: String,
    #[prost(string, tag = "2")]
    pub healthz: String,
    #[prost(string, tag = "3")]
    pub key_id: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DecryptRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub ciphertext: Vec<u8>,
    #[prost(string, tag = "2")]
    pub uid: String,
    #[prost(string, tag = "3")]
    pub key_id: String,
    #[prost(btree_map = "string, bytes", tag = "4")]
    pub annotations: BTreeMap<String, Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DecryptResponse {
    #[prost(bytes = "vec", tag = "1")]
    pub plaintext: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct EncryptRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub plaintext: Vec<u8>,
    #[prost(string, tag = "2")]
    pub uid: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct EncryptResponse {
    #[prost(bytes = "vec", tag = "1")]
    pub ciphertext: Vec<u8>,
    #[prost(string, tag = "2")]
    pub key_id: String,
    #[prost(btree_map = "string, bytes", tag = "3")]
    pub annotations: BTreeMap<String, Vec<u8>>,
}

/// The gRPC service's name and methods.
pub const SERVICE: &str = "v2.KeyManagementService";
const STATUS: &str = "/v2.KeyManagementService/Status";
const ENCRYPT: &str = "/v2.KeyManagementService/Encrypt";
const DECRYPT: &str = "/v2.KeyManagementService/Decrypt";

/// The socket path of a `unix://` endpoint, or upstream's validation message.
pub fn socket_path(endpoint: &str) -> Result<PathBuf, TransformError> {
    match endpoint.split_once("://") {
        Some(("unix", path)) if !path.is_empty() => Ok(PathBuf::from(path)),
        Some(("unix", _)) => Err(TransformError::new(format!(
            "failed to create connection to unix socket: {endpoint}, error: missing path"
        ))),
        Some((scheme, _)) => Err(TransformError::new(format!(
            "unsupported scheme {scheme:?} for KMS provider, only unix is supported"
        ))),
        None => Err(TransformError::new(
            "unsupported scheme \"\" for KMS provider, only unix is supported",
        )),
    }
}

/// A KMS v2 plugin reached over gRPC on a unix socket; connects lazily (a plugin may start after
/// the server, as upstream allows) and bounds every call by the configured timeout.
pub struct GrpcKms {
    channel: Channel,
    timeout: Duration,
}

impl GrpcKms {
    pub fn new(endpoint: &str, timeout: Duration) -> Result<Self, TransformError> {
        let path = socket_path(endpoint)?;
        // The URI is a placeholder: the connector dials the socket whatever it says.
        let channel = Endpoint::from_static("http://kms.local").connect_with_connector_lazy(
            tower::service_fn(move |_: http::Uri| {
                let path = path.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(path).await?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            }),
        );
        Ok(Self { channel, timeout })
    }

    async fn call<Req, Resp>(&self, method: &'static str, request: Req) -> Result<Resp, String>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        let call = async {
            grpc.ready()
                .await
                .map_err(|e| format!("rpc error: code = Unavailable desc = {e}"))?;
            let mut request = tonic::Request::new(request);
            request.set_timeout(self.timeout);
            grpc.unary(
                request,
                PathAndQuery::from_static(method),
                tonic_prost::ProstCodec::<Req, Resp>::default(),
            )
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| format!("rpc error: code = {:?} desc = {}", s.code(), s.message()))
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result,
            Err(_) => {
                Err("rpc error: code = DeadlineExceeded desc = context deadline exceeded".into())
            }
        }
    }
}

#[async_trait]
impl KmsService for GrpcKms {
    async fn status(&self) -> Result<StatusResponse, TransformError> {
        self.call(STATUS, StatusRequest {})
            .await
            .map_err(TransformError)
    }

    async fn encrypt(
        &self,
        uid: &str,
        plaintext: &[u8],
    ) -> Result<EncryptResponse, TransformError> {
        let request = EncryptRequest {
            plaintext: plaintext.to_vec(),
            uid: uid.to_string(),
        };
        self.call(ENCRYPT, request).await.map_err(TransformError)
    }

    async fn decrypt(&self, request: DecryptRequest) -> Result<Vec<u8>, TransformError> {
        self.call::<_, DecryptResponse>(DECRYPT, request)
            .await
            .map(|r| r.plaintext)
            .map_err(TransformError)
    }
}

/// A KMS v2 plugin for tests, served over gRPC on a unix socket like a real one. Its "KEK" is a
/// byte XORed into the DEK under the current key ID, so that a DEK encrypted under one key ID
/// decrypts only with that key ID's byte, as with a real KMS.
pub mod testing {
    use std::convert::Infallible;
    use std::future::Future;
    use std::path::Path;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll};

    use tonic::body::Body;
    use tonic::server::NamedService;
    use tonic::{Request, Response, Status};

    use super::*;

    /// What the plugin answers; change it while it runs.
    #[derive(Clone, Debug)]
    pub struct PluginState {
        pub key_id: String,
        pub healthz: String,
        pub calls: Vec<String>,
    }

    #[derive(Clone)]
    pub struct TestPlugin {
        pub state: Arc<Mutex<PluginState>>,
    }

    fn kek(key_id: &str) -> u8 {
        key_id
            .bytes()
            .fold(0x5au8, |a, b| a.wrapping_mul(31).wrapping_add(b))
            | 1
    }

    impl TestPlugin {
        pub fn new(key_id: &str) -> Self {
            Self {
                state: Arc::new(Mutex::new(PluginState {
                    key_id: key_id.into(),
                    healthz: "ok".into(),
                    calls: Vec::new(),
                })),
            }
        }

        fn lock(&self) -> std::sync::MutexGuard<'_, PluginState> {
            self.state.lock().unwrap_or_else(|e| e.into_inner())
        }

        pub fn set_key_id(&self, key_id: &str) {
            self.lock().key_id = key_id.into();
        }

        pub fn set_healthz(&self, healthz: &str) {
            self.lock().healthz = healthz.into();
        }

        /// The methods called so far (`Status`, `Encrypt`, `Decrypt`).
        pub fn calls(&self) -> Vec<String> {
            self.lock().calls.clone()
        }

        fn status(&self) -> StatusResponse {
            let mut s = self.lock();
            s.calls.push("Status".into());
            StatusResponse {
                version: "v2".into(),
                healthz: s.healthz.clone(),
                key_id: s.key_id.clone(),
            }
        }

        fn encrypt(&self, r: EncryptRequest) -> EncryptResponse {
            let mut s = self.lock();
            s.calls.push("Encrypt".into());
            let k = kek(&s.key_id);
            EncryptResponse {
                ciphertext: r.plaintext.iter().map(|b| b ^ k).collect(),
                key_id: s.key_id.clone(),
                annotations: [("version.encryption.example.com".to_string(), b"1".to_vec())]
                    .into_iter()
                    .collect(),
            }
        }

        fn decrypt(&self, r: DecryptRequest) -> DecryptResponse {
            self.lock().calls.push("Decrypt".into());
            let k = kek(&r.key_id);
            DecryptResponse {
                plaintext: r.ciphertext.iter().map(|b| b ^ k).collect(),
            }
        }

        /// Serves on a new unix socket at `path` until the returned task is aborted.
        pub fn serve(&self, path: &Path) -> std::io::Result<tokio::task::JoinHandle<()>> {
            let listener = tokio::net::UnixListener::bind(path)?;
            let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
            let service = self.clone();
            Ok(tokio::spawn(async move {
                let _ = tonic::transport::Server::builder()
                    .add_service(service)
                    .serve_with_incoming(incoming)
                    .await;
            }))
        }
    }

    impl NamedService for TestPlugin {
        const NAME: &'static str = SERVICE;
    }

    type BoxFuture = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

    fn unary<Req, Resp, F>(req: http::Request<Body>, f: F) -> BoxFuture
    where
        Req: prost::Message + Default + Send + Sync + 'static,
        Resp: prost::Message + Send + Sync + 'static,
        F: Fn(Req) -> Resp + Clone + Send + Sync + 'static,
    {
        Box::pin(async move {
            let method = tower::service_fn(move |r: Request<Req>| {
                let f = f.clone();
                async move { Ok::<_, Status>(Response::new(f(r.into_inner()))) }
            });
            let mut grpc =
                tonic::server::Grpc::new(tonic_prost::ProstCodec::<Resp, Req>::default());
            Ok(grpc.unary(method, req).await)
        })
    }

    impl tower::Service<http::Request<Body>> for TestPlugin {
        type Response = http::Response<Body>;
        type Error = Infallible;
        type Future = BoxFuture;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<Body>) -> BoxFuture {
            let p = self.clone();
            match req.uri().path() {
                STATUS => unary(req, move |_: StatusRequest| p.status()),
                ENCRYPT => unary(req, move |r| p.encrypt(r)),
                DECRYPT => unary(req, move |r| p.decrypt(r)),
                _ => Box::pin(async { Ok(Status::unimplemented("no such method").into_http()) }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::TestPlugin;
    use super::*;

    #[tokio::test]
    async fn talks_to_a_plugin_over_a_unix_socket() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("kms.sock");
        let plugin = TestPlugin::new("key-1");
        let server = plugin.serve(&sock).unwrap();
        let client = GrpcKms::new(
            &format!("unix://{}", sock.display()),
            Duration::from_secs(3),
        )
        .unwrap();
        let status = client.status().await.unwrap();
        assert_eq!(
            (
                status.version.as_str(),
                status.healthz.as_str(),
                status.key_id.as_str()
            ),
            ("v2", "ok", "key-1")
        );
        let enc = client.encrypt("uid", b"dek").await.unwrap();
        assert_eq!(enc.key_id, "key-1");
        assert_ne!(enc.ciphertext, b"dek");
        let plain = client
            .decrypt(DecryptRequest {
                ciphertext: enc.ciphertext,
                uid: "uid2".into(),
                key_id: enc.key_id,
                annotations: enc.annotations,
            })
            .await
            .unwrap();
        assert_eq!(plain, b"dek");
        assert_eq!(plugin.calls(), ["Status", "Encrypt", "Decrypt"]);
        // The probe accepts what the plugin answers (its annotations are valid, ...).
        let probe = crate::value::kmsv2::Probe::new("p", std::sync::Arc::new(client));
        probe.check().await.unwrap();
        assert!(probe.current_state().is_ok());
        server.abort();
        // A plugin that is not there fails the call with a gRPC error, within the timeout.
        let absent = GrpcKms::new(
            &format!("unix://{}", dir.path().join("absent.sock").display()),
            Duration::from_secs(3),
        )
        .unwrap();
        let err = absent.status().await.unwrap_err();
        assert!(err.0.starts_with("rpc error: code = "), "{err}");
        assert!(socket_path("tcp://localhost:80").is_err());
    }
}
