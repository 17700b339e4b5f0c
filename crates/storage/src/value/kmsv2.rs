//! KMS v2 envelope encryption (upstream: `value/encrypt/envelope/kmsv2` and the KMS v2 probe of
//! `encryptionconfig`). Values are encrypted locally with a DEK; the DEK (by default a *seed*
//! from which a key per write is derived with HKDF) is encrypted once by the KMS plugin and
//! stored beside every value in upstream's `EncryptedObject` protobuf, so a read needs the plugin
//! only the first time it meets a DEK (decrypted DEKs are cached by their encrypted form).
//!
//! The write DEK is made when the server starts and whenever the plugin's `Status` reports a
//! key ID other than the one the DEK was encrypted under; the probe polls `Status` every minute
//! (every 10 s while it fails). A write DEK not confirmed by `Status` for 3 minutes expires:
//! writes fail rather than use a key the plugin may have rotated away from. A value whose key ID
//! is not the current one reads as stale, so updates rewrite it under the new key.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use prost::Message;
use sha2::Digest;

use super::aes::{COMMON_SIZE, ExtendedNonceGcm, Gcm, generate_key};
use super::grpc::{DecryptRequest, EncryptResponse, StatusResponse};
use super::{TransformError, Transformer};

/// What the KMS plugin offers (upstream's `kmsservice.Service`).
#[async_trait]
pub trait KmsService: Send + Sync {
    async fn status(&self) -> Result<StatusResponse, TransformError>;
    async fn encrypt(&self, uid: &str, plaintext: &[u8])
    -> Result<EncryptResponse, TransformError>;
    async fn decrypt(&self, request: DecryptRequest) -> Result<Vec<u8>, TransformError>;
}

/// The stored form of a KMS v2 value (upstream's `kmsv2/v2/api.proto`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct EncryptedObject {
    #[prost(bytes = "vec", tag = "1")]
    pub encrypted_data: Vec<u8>,
    #[prost(string, tag = "2")]
    pub key_id: String,
    #[prost(bytes = "vec", tag = "3")]
    pub encrypted_dek_source: Vec<u8>,
    #[prost(btree_map = "string, bytes", tag = "4")]
    pub annotations: BTreeMap<String, Vec<u8>>,
    #[prost(int32, tag = "5")]
    pub encrypted_dek_source_type: i32,
}

/// `EncryptedDEKSourceType`: the plaintext of the encrypted DEK source is the AES-GCM key itself.
pub const AES_GCM_KEY: i32 = 0;
/// ... or a seed for HKDF-SHA256, with the first 32 bytes of the data as the info.
pub const HKDF_SHA256_XNONCE_AES_GCM_SEED: i32 = 1;

const ANNOTATIONS_MAX_SIZE: usize = 32 * 1024;
const KEY_ID_MAX_SIZE: usize = 1024;
const ENCRYPTED_DEK_SOURCE_MAX_SIZE: usize = 1024;
/// How long decrypted DEKs stay cached (upstream's `cacheTTL`).
const CACHE_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long a write DEK stays usable after the last `Status` that confirmed its key ID.
pub const WRITE_DEK_MAX_TTL: Duration = Duration::from_secs(180);
/// How often `Status` is polled while the plugin is healthy, and while it is not.
pub const POSITIVE_INTERVAL: Duration = Duration::from_secs(60);
pub const NEGATIVE_INTERVAL: Duration = Duration::from_secs(10);
/// How long a health answer is reused (upstream's kmsPluginHealthz{Positive,Negative}TTL).
const HEALTHZ_POSITIVE_TTL: Duration = Duration::from_secs(20);
const HEALTHZ_NEGATIVE_TTL: Duration = Duration::from_secs(3);

/// Upstream's `ValidateKeyID`.
pub fn validate_key_id(key_id: &str) -> Result<(), TransformError> {
    if key_id.is_empty() {
        return Err(TransformError::new("keyID is empty"));
    }
    if key_id.len() > KEY_ID_MAX_SIZE {
        return Err(TransformError::new(format!(
            "keyID is {} bytes, which exceeds the max size of {KEY_ID_MAX_SIZE}",
            key_id.len()
        )));
    }
    Ok(())
}

/// Whether `name` is a fully qualified domain name (upstream's `IsFullyQualifiedDomainName`),
/// as a field error on `annotations`.
fn fqdn_error(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("annotations: Required value".into());
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.len() > 253 || !name.split('.').all(label_ok) {
        return Some(format!(
            "annotations: Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ));
    }
    if name.split('.').count() < 2 {
        return Some(format!(
            "annotations: Invalid value: {name:?}: should be a domain with at least two segments separated by dots"
        ));
    }
    None
}

/// Upstream's `ValidateEncryptedObject`.
pub fn validate_encrypted_object(o: &EncryptedObject) -> Result<(), TransformError> {
    if !matches!(
        o.encrypted_dek_source_type,
        AES_GCM_KEY | HKDF_SHA256_XNONCE_AES_GCM_SEED
    ) {
        return Err(TransformError::new(format!(
            "unknown encryptedDEKSourceType: {}",
            o.encrypted_dek_source_type
        )));
    }
    if o.encrypted_data.is_empty() {
        return Err(TransformError::new("encrypted data is empty"));
    }
    if o.encrypted_dek_source.is_empty() {
        return Err(TransformError::new(
            "failed to validate encrypted DEK source: encrypted DEK source is empty",
        ));
    }
    if o.encrypted_dek_source.len() > ENCRYPTED_DEK_SOURCE_MAX_SIZE {
        return Err(TransformError::new(format!(
            "failed to validate encrypted DEK source: encrypted DEK source is {} bytes, which exceeds the max size of {ENCRYPTED_DEK_SOURCE_MAX_SIZE}",
            o.encrypted_dek_source.len()
        )));
    }
    validate_key_id(&o.key_id)
        .map_err(|e| TransformError::new(format!("failed to validate key id: {e}")))?;
    let mut errors: Vec<TransformError> = o
        .annotations
        .keys()
        .filter_map(|k| fqdn_error(k).map(TransformError))
        .collect();
    let total: usize = o.annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > ANNOTATIONS_MAX_SIZE {
        errors.push(TransformError::new(format!(
            "total size of annotations is {total}, which exceeds the max size of {ANNOTATIONS_MAX_SIZE}"
        )));
    }
    match TransformError::aggregate(errors) {
        Some(e) => Err(TransformError::new(format!(
            "failed to validate annotations: {e}"
        ))),
        None => Ok(()),
    }
}

/// The DEK cache's key (upstream's `generateCacheKey`, a cryptobyte encoding): the source type
/// (u32), the encrypted DEK source and the key ID (u16-length-prefixed), then, when there are
/// annotations, their count (u32) and each key and value (u16-length-prefixed) in key order.
pub fn cache_key(
    source_type: i32,
    encrypted_dek_source: &[u8],
    key_id: &str,
    annotations: &BTreeMap<String, Vec<u8>>,
) -> Vec<u8> {
    let mut b = Vec::new();
    let prefixed = |b: &mut Vec<u8>, data: &[u8]| {
        // Lengths were validated far below 64 KiB.
        b.extend_from_slice(&(data.len() as u16).to_be_bytes());
        b.extend_from_slice(data);
    };
    b.extend_from_slice(&(source_type as u32).to_be_bytes());
    prefixed(&mut b, encrypted_dek_source);
    prefixed(&mut b, key_id.as_bytes());
    if !annotations.is_empty() {
        b.extend_from_slice(&(annotations.len() as u32).to_be_bytes());
        for (k, v) in annotations {
            prefixed(&mut b, k.as_bytes());
            prefixed(&mut b, v);
        }
    }
    b
}

/// `sha256:<hex>` of a key ID, as upstream shows key IDs in messages.
pub fn hash_if_not_empty(data: &str) -> String {
    if data.is_empty() {
        return String::new();
    }
    let digest = sha2::Sha256::digest(data.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The write DEK and what is stored beside every value it encrypts (upstream's `kmsv2.State`).
#[derive(Clone)]
pub struct State {
    pub transformer: Arc<dyn Transformer>,
    pub key_id: String,
    pub encrypted_dek_source: Vec<u8>,
    pub annotations: BTreeMap<String, Vec<u8>>,
    pub source_type: i32,
    pub uid: String,
    pub expiration: SystemTime,
    pub cache_key: Vec<u8>,
}

/// A new write DEK (a seed, as upstream's default KDF mode), encrypted by the plugin (upstream's
/// `GenerateTransformer`).
pub async fn generate_transformer(
    uid: &str,
    service: &dyn KmsService,
) -> Result<(Arc<dyn Transformer>, EncryptedObject, Vec<u8>), TransformError> {
    let seed = generate_key(COMMON_SIZE);
    let transformer: Arc<dyn Transformer> = Arc::new(ExtendedNonceGcm::new(&seed)?);
    let resp = service
        .encrypt(uid, &seed)
        .await
        .map_err(|e| TransformError::new(format!("failed to encrypt DEK, error: {e}")))?;
    let mut o = EncryptedObject {
        key_id: resp.key_id,
        encrypted_dek_source: resp.ciphertext,
        encrypted_data: vec![0],
        annotations: resp.annotations,
        encrypted_dek_source_type: HKDF_SHA256_XNONCE_AES_GCM_SEED,
    };
    validate_encrypted_object(&o)?;
    let key = cache_key(
        o.encrypted_dek_source_type,
        &o.encrypted_dek_source,
        &o.key_id,
        &o.annotations,
    );
    o.encrypted_data.clear();
    Ok((transformer, o, key))
}

struct LastResponse {
    error: Option<TransformError>,
    received: Option<Instant>,
    ttl: Duration,
}

/// Polls one plugin's `Status`, keeps its write DEK current, and answers its health (upstream's
/// `kmsv2PluginProbe`).
pub struct Probe {
    pub name: String,
    service: Arc<dyn KmsService>,
    state: RwLock<Option<State>>,
    last: tokio::sync::Mutex<LastResponse>,
    version: Mutex<String>,
}

impl Probe {
    pub fn new(name: &str, service: Arc<dyn KmsService>) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_string(),
            service,
            state: RwLock::new(None),
            last: tokio::sync::Mutex::new(LastResponse {
                error: None,
                received: None,
                ttl: HEALTHZ_NEGATIVE_TTL,
            }),
            version: Mutex::new(String::new()),
        })
    }

    /// The current write state, valid for reads whatever its expiration (upstream's
    /// `getCurrentState`).
    pub fn current_state(&self) -> Result<State, TransformError> {
        let state = self.state.read().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(state) = state else {
            return Err(TransformError::new("got unexpected nil transformer"));
        };
        let copy = EncryptedObject {
            key_id: state.key_id.clone(),
            encrypted_dek_source: state.encrypted_dek_source.clone(),
            annotations: state.annotations.clone(),
            encrypted_dek_source_type: state.source_type,
            encrypted_data: vec![0],
        };
        validate_encrypted_object(&copy)
            .map_err(|e| TransformError::new(format!("got invalid EncryptedObject: {e}")))?;
        if state.cache_key.is_empty() {
            return Err(TransformError::new("got unexpected empty cacheKey"));
        }
        Ok(state)
    }

    /// The plugin's health, asking it again once the last answer is older than its TTL.
    pub async fn check(&self) -> Result<(), TransformError> {
        let mut last = self.last.lock().await;
        if let Some(received) = last.received
            && received.elapsed() < last.ttl
        {
            return last.error.clone().map_or(Ok(()), Err);
        }
        let result = match self.service.status().await {
            Ok(response) => self.healthy_and_maybe_rotate(response).await,
            Err(e) => Err(TransformError::new(format!(
                "failed to perform status section of the healthz check for KMS Provider {}, error: {e}",
                self.name
            ))),
        };
        last.received = Some(Instant::now());
        last.ttl = if result.is_ok() {
            HEALTHZ_POSITIVE_TTL
        } else {
            HEALTHZ_NEGATIVE_TTL
        };
        last.error = result.clone().err();
        result
    }

    async fn healthy_and_maybe_rotate(&self, r: StatusResponse) -> Result<(), TransformError> {
        let mut errors = Vec::new();
        if r.healthz != "ok" {
            errors.push(TransformError::new(format!(
                "got unexpected healthz status: {}",
                r.healthz
            )));
        }
        if r.version != "v2" && r.version != "v2beta1" {
            errors.push(TransformError::new(format!(
                "expected KMSv2 API version v2, got {}",
                r.version
            )));
        } else {
            let mut version = self.version.lock().unwrap_or_else(|e| e.into_inner());
            if version.is_empty() {
                *version = r.version.clone();
            }
            if *version != r.version {
                errors.push(TransformError::new(format!(
                    "KMSv2 API version should not change after the initial status response version {}, got {}",
                    version, r.version
                )));
            }
        }
        match validate_key_id(&r.key_id) {
            Err(e) => errors.push(TransformError::new(format!(
                "got invalid KMSv2 KeyID hash {:?}: {e}",
                hash_if_not_empty(&r.key_id)
            ))),
            Ok(()) => {
                if let Err(e) = self
                    .rotate_dek_on_key_id_change(&r.key_id, &uuid::Uuid::new_v4().to_string())
                    .await
                {
                    errors.push(e);
                }
            }
        }
        match TransformError::aggregate(errors) {
            Some(e) => Err(TransformError::new(format!(
                "kmsv2 Provider {} is not healthy, error: {e}",
                self.name
            ))),
            None => Ok(()),
        }
    }

    /// Keeps the write DEK when the key ID is unchanged (moving its expiration on), and makes a
    /// new one when it changed; on failure the old DEK stays until it expires.
    async fn rotate_dek_on_key_id_change(
        &self,
        status_key_id: &str,
        uid: &str,
    ) -> Result<(), TransformError> {
        let current = self.current_state();
        let expiration = SystemTime::now() + WRITE_DEK_MAX_TTL;
        if let Ok(state) = &current
            && state.key_id == status_key_id
            && state.source_type == HKDF_SHA256_XNONCE_AES_GCM_SEED
        {
            let mut state = state.clone();
            state.expiration = expiration;
            *self.state.write().unwrap_or_else(|e| e.into_inner()) = Some(state);
            return Ok(());
        }
        let generated = generate_transformer(uid, self.service.as_ref()).await;
        let encrypt_key_id = match &generated {
            Ok((_, o, _)) => o.key_id.clone(),
            Err(_) => String::new(),
        };
        let gen_error = match generated {
            Ok((transformer, o, cache_key)) if o.key_id == status_key_id => {
                *self.state.write().unwrap_or_else(|e| e.into_inner()) = Some(State {
                    transformer,
                    key_id: o.key_id,
                    encrypted_dek_source: o.encrypted_dek_source,
                    annotations: o.annotations,
                    source_type: o.encrypted_dek_source_type,
                    uid: uid.to_string(),
                    expiration,
                    cache_key,
                });
                return Ok(());
            }
            Ok(_) => "<nil>".to_string(),
            Err(e) => e.0,
        };
        let (state_error, state_key_id) = match &current {
            Ok(s) => ("<nil>".to_string(), s.key_id.clone()),
            Err(e) => (e.0.clone(), String::new()),
        };
        Err(TransformError::new(format!(
            "failed to rotate DEK uid={uid:?}, useSeed=true, errState={state_error}, errGen={gen_error}, statusKeyIDHash={:?}, encryptKeyIDHash={:?}, stateKeyIDHash={:?}",
            hash_if_not_empty(status_key_id),
            hash_if_not_empty(&encrypt_key_id),
            hash_if_not_empty(&state_key_id),
        )))
    }

    /// Primes the DEK at once and keeps it current until `closed` fires (upstream's
    /// `primeAndProbeKMSv2`): a failed start is retried every 10 s in the background, then
    /// `Status` is polled every minute, every 10 s while it fails.
    pub async fn prime_and_probe(self: &Arc<Self>, closed: tokio::sync::watch::Receiver<bool>) {
        let primed = self.check_now().await.is_ok();
        let probe = self.clone();
        tokio::spawn(async move {
            let mut closed = closed;
            let mut healthy = primed;
            loop {
                let wait = if healthy {
                    POSITIVE_INTERVAL
                } else {
                    NEGATIVE_INTERVAL
                };
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = closed.changed() => return,
                }
                if *closed.borrow() {
                    return;
                }
                healthy = probe.check_now().await.is_ok();
            }
        });
    }

    /// `check` without reusing the last answer (the poll loop's own calls).
    async fn check_now(&self) -> Result<(), TransformError> {
        self.last.lock().await.received = None;
        let result = self.check().await;
        if let Err(e) = &result {
            tracing::warn!(provider = %self.name, error = %e, "KMS v2 plugin status check failed");
        }
        result
    }
}

/// Decrypted DEKs by their cache key, with when they were cached.
type DekCache = HashMap<Vec<u8>, (Arc<dyn Transformer>, Instant)>;

/// The KMS v2 transformer (upstream's `envelopeTransformer`).
pub struct Envelope {
    service: Arc<dyn KmsService>,
    probe: Arc<Probe>,
    cache: Mutex<DekCache>,
}

impl Envelope {
    pub fn new(service: Arc<dyn KmsService>, probe: Arc<Probe>) -> Self {
        Self {
            service,
            probe,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, key: &[u8]) -> Option<Arc<dyn Transformer>> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .get(key)
            .filter(|(_, at)| at.elapsed() < CACHE_TTL)
            .map(|(t, _)| t.clone())
    }

    fn remember(&self, key: Vec<u8>, transformer: Arc<dyn Transformer>) {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.retain(|_, (_, at)| at.elapsed() < CACHE_TTL);
        cache.insert(key, (transformer, Instant::now()));
    }
}

#[async_trait]
impl Transformer for Envelope {
    async fn transform_from_storage(
        &self,
        data: &[u8],
        context: &[u8],
    ) -> Result<(Vec<u8>, bool), TransformError> {
        let o = EncryptedObject::decode(data).map_err(|e| {
            TransformError::new(format!("proto: cannot parse invalid wire-format data: {e}"))
        })?;
        validate_encrypted_object(&o)?;
        let state = self.probe.current_state()?;
        let key = cache_key(
            o.encrypted_dek_source_type,
            &o.encrypted_dek_source,
            &o.key_id,
            &o.annotations,
        );
        let transformer = match self.cached(&key) {
            Some(t) => t,
            None => {
                let dek = self
                    .service
                    .decrypt(DecryptRequest {
                        ciphertext: o.encrypted_dek_source.clone(),
                        uid: uuid::Uuid::new_v4().to_string(),
                        key_id: o.key_id.clone(),
                        annotations: o.annotations.clone(),
                    })
                    .await
                    .map_err(|e| {
                        TransformError::new(format!("failed to decrypt DEK, error: {e}"))
                    })?;
                let t: Arc<dyn Transformer> =
                    if o.encrypted_dek_source_type == HKDF_SHA256_XNONCE_AES_GCM_SEED {
                        Arc::new(ExtendedNonceGcm::new(&dek)?)
                    } else {
                        Arc::new(Gcm::new(&dek)?)
                    };
                self.remember(key, t.clone());
                t
            }
        };
        let (out, stale) = transformer
            .transform_from_storage(&o.encrypted_data, context)
            .await?;
        // A value under another key ID than the current write key is stale.
        Ok((
            out,
            stale || o.key_id != state.key_id || o.encrypted_dek_source_type != state.source_type,
        ))
    }

    async fn transform_to_storage(
        &self,
        data: &[u8],
        context: &[u8],
    ) -> Result<Vec<u8>, TransformError> {
        let state = self.probe.current_state()?;
        let now = SystemTime::now();
        if now > state.expiration {
            return Err(TransformError::new(format!(
                "encryptedDEKSource with keyID hash {:?} expired at {} (current time is {})",
                hash_if_not_empty(&state.key_id),
                chrono_like(state.expiration),
                chrono_like(now)
            )));
        }
        // Reads of values this server writes never miss the cache.
        self.remember(state.cache_key.clone(), state.transformer.clone());
        let encrypted_data = state
            .transformer
            .transform_to_storage(data, context)
            .await?;
        let o = EncryptedObject {
            key_id: state.key_id,
            encrypted_dek_source: state.encrypted_dek_source,
            annotations: state.annotations,
            encrypted_dek_source_type: state.source_type,
            encrypted_data,
        };
        validate_encrypted_object(&o)?;
        Ok(o.encode_to_vec())
    }
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
fn chrono_like(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::grpc::testing::TestPlugin;

    /// The test plugin, called directly (no gRPC) so that calls can be counted and failed.
    struct Direct {
        plugin: TestPlugin,
        fail: std::sync::atomic::AtomicBool,
    }

    #[async_trait]
    impl KmsService for Direct {
        async fn status(&self) -> Result<StatusResponse, TransformError> {
            if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(TransformError::new("down"));
            }
            let s = self.plugin.state.lock().unwrap().clone();
            self.plugin
                .state
                .lock()
                .unwrap()
                .calls
                .push("Status".into());
            Ok(StatusResponse {
                version: "v2".into(),
                healthz: s.healthz,
                key_id: s.key_id,
            })
        }
        async fn encrypt(&self, _: &str, p: &[u8]) -> Result<EncryptResponse, TransformError> {
            self.plugin
                .state
                .lock()
                .unwrap()
                .calls
                .push("Encrypt".into());
            let key_id = self.plugin.state.lock().unwrap().key_id.clone();
            Ok(EncryptResponse {
                ciphertext: [key_id.as_bytes(), b"|", p].concat(),
                key_id,
                annotations: BTreeMap::new(),
            })
        }
        async fn decrypt(&self, r: DecryptRequest) -> Result<Vec<u8>, TransformError> {
            self.plugin
                .state
                .lock()
                .unwrap()
                .calls
                .push("Decrypt".into());
            let prefix = format!("{}|", r.key_id);
            r.ciphertext
                .strip_prefix(prefix.as_bytes())
                .map(<[u8]>::to_vec)
                .ok_or_else(|| TransformError::new("wrong key"))
        }
    }

    fn setup() -> (Arc<Direct>, Arc<Probe>, Envelope) {
        let direct = Arc::new(Direct {
            plugin: TestPlugin::new("k1"),
            fail: Default::default(),
        });
        let probe = Probe::new("p", direct.clone());
        let envelope = Envelope::new(direct.clone(), probe.clone());
        (direct, probe, envelope)
    }

    #[tokio::test]
    async fn values_are_upstreams_encrypted_object_and_dek_is_reused() {
        let (direct, probe, envelope) = setup();
        // Before the first Status there is no write DEK: reads and writes fail as upstream.
        assert_eq!(
            envelope
                .transform_to_storage(b"v", b"/k")
                .await
                .unwrap_err()
                .0,
            "got unexpected nil transformer"
        );
        probe.check().await.unwrap();
        let a = envelope
            .transform_to_storage(b"secret", b"/k")
            .await
            .unwrap();
        let b = envelope
            .transform_to_storage(b"other", b"/k2")
            .await
            .unwrap();
        let o = EncryptedObject::decode(a.as_slice()).unwrap();
        assert_eq!(o.key_id, "k1");
        assert_eq!(o.encrypted_dek_source_type, HKDF_SHA256_XNONCE_AES_GCM_SEED);
        assert_eq!(o.encrypted_data.len(), 32 + 12 + 6 + 16);
        assert_eq!(
            o.encrypted_dek_source,
            EncryptedObject::decode(b.as_slice())
                .unwrap()
                .encrypted_dek_source,
            "one DEK per key ID"
        );
        // The seed the plugin encrypted derives the value's key, as upstream's reader does it.
        let seed = &o.encrypted_dek_source[3..];
        let reader = ExtendedNonceGcm::new(seed).unwrap();
        assert_eq!(
            reader
                .transform_from_storage(&o.encrypted_data, b"/k")
                .await
                .unwrap()
                .0,
            b"secret"
        );
        assert_eq!(
            envelope.transform_from_storage(&a, b"/k").await.unwrap(),
            (b"secret".to_vec(), false)
        );
        assert!(
            envelope
                .transform_from_storage(&a, b"/other")
                .await
                .is_err()
        );
        assert_eq!(
            direct.plugin.calls(),
            ["Status", "Encrypt"],
            "the write DEK is cached: no Decrypt call"
        );

        // The plugin's key ID changes: the next Status makes a new DEK, old values read stale.
        direct.plugin.set_key_id("k2");
        probe.check_now().await.unwrap();
        let c = envelope.transform_to_storage(b"new", b"/k").await.unwrap();
        assert_eq!(EncryptedObject::decode(c.as_slice()).unwrap().key_id, "k2");
        assert_eq!(
            envelope.transform_from_storage(&a, b"/k").await.unwrap(),
            (b"secret".to_vec(), true)
        );
        assert_eq!(
            envelope.transform_from_storage(&c, b"/k").await.unwrap(),
            (b"new".to_vec(), false)
        );

        // A fresh server (empty cache) decrypts the DEK through the plugin once.
        let fresh = Envelope::new(direct.clone(), probe.clone());
        let before = direct.plugin.calls().len();
        fresh.transform_from_storage(&a, b"/k").await.unwrap();
        fresh.transform_from_storage(&a, b"/k").await.unwrap();
        assert_eq!(direct.plugin.calls()[before..], ["Decrypt"]);
    }

    #[tokio::test]
    async fn unhealthy_plugins_fail_the_check_with_upstreams_messages() {
        let (direct, probe, _) = setup();
        direct.plugin.set_healthz("broken");
        let err = probe.check().await.unwrap_err();
        assert!(
            err.0.starts_with(
                "kmsv2 Provider p is not healthy, error: got unexpected healthz status: broken"
            ),
            "{err}"
        );
        direct.fail.store(true, std::sync::atomic::Ordering::SeqCst);
        // The negative answer is reused for 3 seconds.
        assert_eq!(probe.check().await.unwrap_err(), err);
        let err = probe.check_now().await.unwrap_err();
        assert_eq!(
            err.0,
            "failed to perform status section of the healthz check for KMS Provider p, error: down"
        );
    }

    #[test]
    fn cache_keys_and_times_are_upstreams() {
        let ann: BTreeMap<String, Vec<u8>> = [
            ("b.io".to_string(), b"2".to_vec()),
            ("a.io".to_string(), b"1".to_vec()),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            cache_key(1, b"dek", "id", &ann),
            [
                &[0, 0, 0, 1, 0, 3][..],
                b"dek",
                &[0, 2],
                b"id",
                &[0, 0, 0, 2, 0, 4],
                b"a.io",
                &[0, 1],
                b"1",
                &[0, 4],
                b"b.io",
                &[0, 1],
                b"2"
            ]
            .concat()
        );
        assert_eq!(
            cache_key(0, b"d", "i", &BTreeMap::new()),
            [0, 0, 0, 0, 0, 1, b'd', 0, 1, b'i']
        );
        assert_eq!(
            chrono_like(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
            "2023-11-14T22:13:20Z"
        );
        let mut o = EncryptedObject {
            encrypted_data: vec![1],
            key_id: "k".into(),
            encrypted_dek_source: vec![1],
            annotations: [("Bad".to_string(), vec![])].into_iter().collect(),
            encrypted_dek_source_type: 0,
        };
        assert!(
            validate_encrypted_object(&o)
                .unwrap_err()
                .0
                .starts_with("failed to validate annotations: annotations: Invalid value: \"Bad\"")
        );
        o.annotations.clear();
        o.encrypted_dek_source_type = 7;
        assert_eq!(
            validate_encrypted_object(&o).unwrap_err().0,
            "unknown encryptedDEKSourceType: 7"
        );
    }
}
