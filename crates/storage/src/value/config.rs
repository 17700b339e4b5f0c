//! `--encryption-provider-config` (upstream: `server/options/encryptionconfig`, the
//! `EncryptionConfiguration` types of `apis/apiserver` and their validation): reading and
//! validating the file with upstream's messages, building the per-resource transformers and the
//! KMS probes, the `kms-providers` health check, the transformers a reload can swap
//! ([`DynamicTransformers`]), and the automatic reload controller.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use sha2::Digest;

use super::aes::{Cbc, Gcm};
use super::grpc::GrpcKms;
use super::kmsv2::{Envelope, KmsService, Probe};
use super::secretbox::Secretbox;
use super::{
    GroupResource, Identity, PrefixTransformer, PrefixTransformers, ResourceTransformers,
    TransformError, Transformer,
};

const AES_CBC_PREFIX: &str = "k8s:enc:aescbc:v1:";
const AES_GCM_PREFIX: &str = "k8s:enc:aesgcm:v1:";
const SECRETBOX_PREFIX: &str = "k8s:enc:secretbox:v1:";
const KMS_V2_PREFIX: &str = "k8s:enc:kms:v2:";
/// The name of the one health check of KMS v2 plugins, and of the reload's check.
pub const KMS_HEALTH_CHECK_NAME: &str = "kms-providers";
/// How often the reload controller reads the file (upstream's
/// `EncryptionConfigFileChangePollDuration`).
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(60);
/// The shortest wait before the transformers a reload replaced are closed.
const MIN_KMS_CLOSE_GRACE_PERIOD: Duration = Duration::from_secs(10);

/// `apiserver.config.k8s.io/v1` `EncryptionConfiguration`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EncryptionConfiguration {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub resources: Vec<ResourceConfiguration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceConfiguration {
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub providers: Vec<ProviderConfiguration>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfiguration {
    pub aesgcm: Option<KeysConfiguration>,
    pub aescbc: Option<KeysConfiguration>,
    pub secretbox: Option<KeysConfiguration>,
    pub identity: Option<IdentityConfiguration>,
    pub kms: Option<KmsConfiguration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeysConfiguration {
    #[serde(default)]
    pub keys: Vec<Key>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Key {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub secret: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityConfiguration {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KmsConfiguration {
    /// `v1` (the default, refused as upstream does without the KMSv1 feature gate) or `v2`.
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "cachesize")]
    pub cache_size: Option<i32>,
    #[serde(default)]
    pub endpoint: String,
    /// A Go duration (`3s`, the default).
    #[serde(default)]
    pub timeout: Option<String>,
}

impl KmsConfiguration {
    /// Upstream's defaulting: timeout 3s, apiVersion v1, cachesize 1000 for v1.
    fn default_fields(&mut self) {
        if self.timeout.is_none() {
            self.timeout = Some("3s".into());
        }
        if self.api_version.is_empty() {
            self.api_version = "v1".into();
        }
        if self.cache_size.is_none() && self.api_version == "v1" {
            self.cache_size = Some(1000);
        }
    }

    fn timeout(&self) -> Duration {
        self.timeout
            .as_deref()
            .and_then(|t| parse_go_duration(t).ok())
            .unwrap_or(Duration::ZERO)
    }
}

/// A Go duration string (`1h2m3.5s`, `500ms`), or the reason it is not one. A negative duration
/// comes back as zero, which validation refuses as not positive, as upstream does.
fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("time: invalid duration {text:?}");
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("time: missing unit in duration {text:?}"))?;
        let number: f64 = rest[..number_len].parse().map_err(|_| bad())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            unit => return Err(format!("time: unknown unit {unit:?} in duration {text:?}")),
        };
        total += number * scale;
        rest = &rest[unit_len..];
    }
    if negative && total > 0.0 {
        // Validation reports non-positive timeouts; a zero duration stands for them.
        return Ok(Duration::ZERO);
    }
    Ok(Duration::from_secs_f64(total))
}

/// One field error as upstream's `field.Error` prints it.
fn required(path: &str, detail: &str) -> String {
    format!("{path}: Required value: {detail}")
}

fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {value}: {detail}")
}

/// A `[]string` bad value as `field.Error` prints it: its JSON (checked against a real
/// kube-apiserver v1.36.2).
fn go_quote_list(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_default()
}

/// Upstream's `ValidateEncryptionConfiguration`: every problem, as field errors.
pub fn validate(c: &EncryptionConfiguration, reload: bool) -> Vec<String> {
    let mut errs = Vec::new();
    if c.resources.is_empty() {
        errs.push(required("resources", "at least one resources is required"));
        return errs;
    }
    let mut kms_names = BTreeSet::new();
    for (i, conf) in c.resources.iter().enumerate() {
        let r = format!("resources[{i}].resources");
        let p = format!("resources[{i}].providers");
        if conf.resources.is_empty() {
            errs.push(required(&r, &format!("at least one {r} is required")));
        }
        errs.extend(validate_resource_overlap(&conf.resources, &r));
        errs.extend(validate_resource_names(&conf.resources, &r));
        if conf.providers.is_empty() {
            errs.push(required(&p, &format!("at least one {p} is required")));
        }
        for (j, provider) in conf.providers.iter().enumerate() {
            let path = format!("{p}[{j}]");
            let found = [
                provider.kms.is_some(),
                provider.aesgcm.is_some(),
                provider.aescbc.is_some(),
                provider.secretbox.is_some(),
                provider.identity.is_some(),
            ]
            .iter()
            .filter(|f| **f)
            .count();
            if found == 0 {
                errs.push(invalid(&path, "{}", "provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity"));
                continue;
            }
            if found > 1 {
                errs.push(invalid(&path, "{}", "more than one provider specified in a single element, should split into different list elements"));
                continue;
            }
            if let Some(kms) = &provider.kms {
                errs.extend(validate_kms(
                    kms,
                    &format!("{path}.kms"),
                    &kms_names,
                    reload,
                ));
                kms_names.insert(kms.name.clone());
            } else if let Some(aes) = &provider.aesgcm {
                errs.extend(validate_keys(
                    &aes.keys,
                    &format!("{path}.aesgcm.keys"),
                    &[16, 24, 32],
                ));
            } else if let Some(aes) = &provider.aescbc {
                errs.extend(validate_keys(
                    &aes.keys,
                    &format!("{path}.aescbc.keys"),
                    &[16, 24, 32],
                ));
            } else if let Some(sb) = &provider.secretbox {
                errs.extend(validate_keys(
                    &sb.keys,
                    &format!("{path}.secretbox.keys"),
                    &[32],
                ));
            }
        }
    }
    errs
}

fn validate_resource_overlap(resources: &[String], path: &str) -> Vec<String> {
    if resources.len() < 2 {
        return Vec::new();
    }
    let parsed: Vec<GroupResource> = resources.iter().map(|r| GroupResource::parse(r)).collect();
    let any = GroupResource::new("*", "*");
    let (mut overlap, mut duplicate) = (false, false);
    for (i, r1) in parsed.iter().enumerate() {
        for (j, r2) in parsed.iter().enumerate() {
            if i == j {
                continue;
            }
            if r1 == r2 && !duplicate {
                duplicate = true;
                continue;
            }
            if overlap {
                continue;
            }
            if *r1 == any {
                overlap = true;
                continue;
            }
            if r1.group != r2.group {
                continue;
            }
            if r1.resource == "*" || r2.resource == "*" {
                overlap = true;
            }
        }
    }
    let list = go_quote_list(resources);
    let mut errs = Vec::new();
    if duplicate {
        errs.push(invalid(
            path,
            &list,
            "the same resource cannot be specified multiple times",
        ));
    }
    if overlap {
        errs.push(invalid(path, &list, "using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked"));
    }
    errs
}

fn validate_resource_names(resources: &[String], path: &str) -> Vec<String> {
    let mut errs = Vec::new();
    for (j, res) in resources.iter().enumerate() {
        let at = format!("{path}[{j}]");
        let value = format!("{res:?}");
        let gr = GroupResource::parse(res);
        let detail = if res.to_lowercase() != *res {
            "resource name should not contain capital letters"
        } else if res == "*" {
            "use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources"
        } else if matches!(
            res.as_str(),
            "apiserveripinfo" | "serviceipallocations" | "servicenodeportallocations"
        ) {
            "resources which do not have REST API/s cannot be encrypted"
        } else if gr.group == "events.k8s.io" {
            "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file"
        } else if gr.group == "extensions" {
            "'extensions' group has been removed and cannot be used for encryption"
        } else if gr.group == "*" && gr.resource != "*" {
            "encrypting the same resource across groups is not supported"
        } else {
            continue;
        };
        errs.push(invalid(&at, &value, detail));
    }
    errs
}

fn validate_keys(keys: &[Key], path: &str, sizes: &[usize]) -> Vec<String> {
    if keys.is_empty() {
        return vec![required(path, "at least one keys is required")];
    }
    let mut errs = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if key.name.is_empty() {
            errs.push(required(
                &format!("{at}.name"),
                "name is a mandatory field for a key",
            ));
        }
        if key.secret.is_empty() {
            errs.push(required(
                &format!("{at}.secret"),
                "secret is a mandatory field for a key",
            ));
            continue;
        }
        match base64::engine::general_purpose::STANDARD.decode(&key.secret) {
            Err(_) => errs.push(invalid(
                &format!("{at}.secret"),
                "\"REDACTED\"",
                "secrets must be base64 encoded",
            )),
            Ok(secret) if !sizes.contains(&secret.len()) => {
                let sizes: Vec<String> = sizes.iter().map(usize::to_string).collect();
                errs.push(invalid(
                    &format!("{at}.secret"),
                    "\"REDACTED\"",
                    &format!(
                        "secret is not of the expected length, got {}, expected one of [{}]",
                        secret.len(),
                        sizes.join(" ")
                    ),
                ));
            }
            Ok(_) => {}
        }
    }
    errs
}

fn validate_kms(
    c: &KmsConfiguration,
    path: &str,
    names: &BTreeSet<String>,
    reload: bool,
) -> Vec<String> {
    let mut errs = Vec::new();
    let name_path = format!("{path}.name");
    if c.name.is_empty() {
        errs.push(required(
            &name_path,
            "name is a mandatory field for a provider",
        ));
    }
    if c.api_version != "v1" && c.name.contains(':') {
        errs.push(invalid(
            &name_path,
            &format!("{:?}", c.name),
            &format!("invalid KMS provider name {}, must not contain ':'", c.name),
        ));
    }
    if (reload || c.api_version != "v1") && names.contains(&c.name) {
        errs.push(invalid(
            &name_path,
            &format!("{:?}", c.name),
            &format!(
                "duplicate KMS provider name {}, names must be unique",
                c.name
            ),
        ));
    }
    let timeout_text = c.timeout.clone().unwrap_or_default();
    match parse_go_duration(&timeout_text) {
        Ok(d) if !d.is_zero() => {}
        _ => errs.push(invalid(
            &format!("{path}.timeout"),
            &format!("{timeout_text:?}"),
            "timeout should be a positive value",
        )),
    }
    let endpoint_path = format!("{path}.endpoint");
    if c.endpoint.is_empty() {
        errs.push(invalid(
            &endpoint_path,
            "\"\"",
            "endpoint is a mandatory field for a kms",
        ));
    } else {
        let scheme = c.endpoint.split_once("://").map_or("", |(s, _)| s);
        if scheme != "unix" {
            errs.push(invalid(
                &endpoint_path,
                &format!("{:?}", c.endpoint),
                &format!("unsupported scheme {scheme:?} for KMS provider, only unix is supported"),
            ));
        }
    }
    let cache_path = format!("{path}.cachesize");
    if c.api_version != "v1"
        && let Some(size) = c.cache_size
    {
        errs.push(invalid(
            &cache_path,
            &size.to_string(),
            "cachesize is not supported in v2",
        ));
    }
    if c.api_version == "v1" && c.cache_size == Some(0) {
        errs.push(invalid(
            &cache_path,
            "0",
            "cachesize should be a positive value, or negative to disable",
        ));
    }
    if c.api_version != "v1" && c.api_version != "v2" {
        errs.push(invalid(
            &format!("{path}.apiVersion"),
            &format!("{:?}", c.api_version),
            "unsupported apiVersion apiVersion for KMS provider, only v1 and v2 are supported",
        ));
    }
    errs
}

/// Upstream's aggregate of field errors: one as itself, several as `[a, b]`.
fn aggregate(errs: Vec<String>) -> Option<String> {
    TransformError::aggregate(errs.into_iter().map(TransformError).collect()).map(|e| e.0)
}

/// The `kms-providers` health check: every KMS v2 plugin's `Status`, probed as upstream's
/// `kmsHealthChecker` does (`kms-provider-<i>: <error>` per failing plugin).
#[derive(Clone, Default)]
pub struct KmsHealth {
    probes: Vec<Arc<Probe>>,
}

impl KmsHealth {
    pub async fn check(&self) -> Result<(), TransformError> {
        let mut errors = Vec::new();
        for (i, probe) in self.probes.iter().enumerate() {
            if let Err(e) = probe.check().await {
                errors.push(TransformError::new(format!("kms-provider-{i}: {e}")));
            }
        }
        TransformError::aggregate(errors).map_or(Ok(()), Err)
    }
}

/// A loaded configuration (upstream's `encryptionconfig.EncryptionConfiguration`).
pub struct Loaded {
    pub transformers: ResourceTransformers,
    /// The `kms-providers` check: with automatic reload always (a no-op without KMS), else when a
    /// KMS v2 provider is configured.
    pub health: Option<KmsHealth>,
    /// `sha256:<hex>` of the file, to tell a changed file.
    pub content_hash: String,
    /// How long to wait after a reload before closing these transformers' KMS connections.
    pub kms_close_grace_period: Duration,
    /// Stops the KMS probes' polling when set or dropped.
    pub closer: tokio::sync::watch::Sender<bool>,
}

fn read_and_hash(path: &Path) -> Result<(Vec<u8>, String), String> {
    let data = std::fs::read(path).map_err(|e| {
        format!(
            "error reading encryption provider configuration file {:?}: {e}",
            path.display().to_string()
        )
    })?;
    if data.is_empty() {
        return Err(format!(
            "encryption provider configuration file {:?} is empty",
            path.display().to_string()
        ));
    }
    let hash = content_hash(&data);
    Ok((data, hash))
}

fn content_hash(data: &[u8]) -> String {
    let digest = sha2::Sha256::digest(data);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The file's hash without parsing it (the reload controller's cheap change check).
pub fn config_hash(path: &Path) -> Result<String, String> {
    read_and_hash(path).map(|(_, hash)| hash)
}

/// Parses and validates the file at `path` (upstream's `loadConfig`).
pub fn parse(path: &Path, reload: bool) -> Result<(EncryptionConfiguration, String), String> {
    let (data, hash) = read_and_hash(path).map_err(|e| format!("error while loading file: {e}"))?;
    let decoding = |e: String| {
        format!(
            "error decoding encryption provider configuration file {:?}: {e}",
            path.display().to_string()
        )
    };
    let mut config: EncryptionConfiguration =
        serde_yaml_ng::from_slice(&data).map_err(|e| decoding(e.to_string()))?;
    if config.api_version != "apiserver.config.k8s.io/v1"
        || config.kind != "EncryptionConfiguration"
    {
        return Err(decoding(format!(
            "no kind {:?} is registered for version {:?}",
            config.kind, config.api_version
        )));
    }
    for r in &mut config.resources {
        for p in &mut r.providers {
            if let Some(kms) = &mut p.kms {
                kms.default_fields();
            }
        }
    }
    if let Some(errs) = aggregate(validate(&config, reload)) {
        return Err(errs);
    }
    Ok((config, hash))
}

/// Loads the file into transformers and probes (upstream's `LoadEncryptionConfig`); KMS v2
/// plugins are asked for their status once before this returns, then polled in the background
/// until the returned `closer` fires.
pub async fn load(path: &Path, reload: bool) -> Result<Loaded, String> {
    let (config, content_hash) =
        parse(path, reload).map_err(|e| format!("error while parsing file: {e}"))?;
    let (closer, closed) = tokio::sync::watch::channel(false);
    let (transformers, probes, kms_timeout_sum) = build(&config, closed)
        .await
        .map_err(|e| format!("error while building transformers: {e}"))?;
    let health = (reload || !probes.is_empty()).then_some(KmsHealth { probes });
    Ok(Loaded {
        transformers,
        health,
        content_hash,
        kms_close_grace_period: 2 * kms_timeout_sum,
        closer,
    })
}

type Built = (ResourceTransformers, Vec<Arc<Probe>>, Duration);

async fn build(
    config: &EncryptionConfiguration,
    closed: tokio::sync::watch::Receiver<bool>,
) -> Result<Built, String> {
    let mut by_resource: HashMap<GroupResource, Vec<PrefixTransformer>> = HashMap::new();
    let mut probes = Vec::new();
    let mut timeout_sum = Duration::ZERO;
    for rc in &config.resources {
        let mut list = Vec::new();
        for provider in &rc.providers {
            let transformer = if let Some(c) = &provider.aesgcm {
                aes_prefix_transformer(&c.keys, AES_GCM_PREFIX, |k| {
                    Gcm::new(k).map(|t| Arc::new(t) as Arc<dyn Transformer>)
                })?
            } else if let Some(c) = &provider.aescbc {
                aes_prefix_transformer(&c.keys, AES_CBC_PREFIX, |k| {
                    Cbc::new(k).map(|t| Arc::new(t) as Arc<dyn Transformer>)
                })?
            } else if let Some(c) = &provider.secretbox {
                secretbox_prefix_transformer(&c.keys)?
            } else if let Some(c) = &provider.kms {
                let (t, probe) = kms_prefix_transformer(c, closed.clone()).await?;
                probes.push(probe);
                timeout_sum += c.timeout();
                t
            } else if provider.identity.is_some() {
                PrefixTransformer {
                    prefix: Vec::new(),
                    transformer: Arc::new(Identity),
                }
            } else {
                return Err("provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity".into());
            };
            list.push(transformer);
        }
        for resource in &rc.resources {
            let gr = GroupResource::parse(resource);
            for mask in [
                GroupResource::new(gr.group.clone(), "*"),
                GroupResource::new("*", "*"),
            ] {
                if by_resource.contains_key(&mask) {
                    return Err(format!(
                        "resource {:?} is masked by earlier rule {:?}",
                        gr.yaml_string(),
                        mask.yaml_string()
                    ));
                }
            }
            by_resource
                .entry(gr)
                .or_default()
                .extend(list.iter().cloned());
        }
    }
    let overrides = by_resource
        .into_iter()
        .map(|(gr, list)| {
            let t: Arc<dyn Transformer> =
                Arc::new(PrefixTransformers::new("no matching prefix found", list));
            (gr, t)
        })
        .collect();
    Ok((ResourceTransformers { overrides }, probes, timeout_sum))
}

fn decode_key(key: &Key) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(&key.secret)
        .map_err(|e| format!("could not obtain secret for named key {}: {e}", key.name))
}

fn check_names(keys: &[Key], provider: &str) -> Result<(), String> {
    if keys.is_empty() {
        return Err(format!("{provider} provider has no valid keys"));
    }
    for key in keys {
        if key.name.is_empty() {
            return Err("key with invalid name provided".into());
        }
        if key.secret.is_empty() {
            return Err(format!("key {} has no provided secret", key.name));
        }
    }
    Ok(())
}

fn aes_prefix_transformer(
    keys: &[Key],
    prefix: &str,
    make: impl Fn(&[u8]) -> Result<Arc<dyn Transformer>, TransformError>,
) -> Result<PrefixTransformer, String> {
    check_names(keys, "aes")?;
    let mut list = Vec::new();
    for key in keys {
        let secret = decode_key(key)?;
        let transformer = make(&secret).map_err(|e| {
            format!(
                "error while creating cipher for named key {}: {e}",
                key.name
            )
        })?;
        list.push(PrefixTransformer {
            prefix: format!("{}:", key.name).into_bytes(),
            transformer,
        });
    }
    Ok(PrefixTransformer {
        prefix: prefix.as_bytes().to_vec(),
        transformer: Arc::new(PrefixTransformers::new(
            "no matching key was found for the provided AES transformer",
            list,
        )),
    })
}

fn secretbox_prefix_transformer(keys: &[Key]) -> Result<PrefixTransformer, String> {
    check_names(keys, "secretbox")?;
    let mut list = Vec::new();
    for key in keys {
        let secret = decode_key(key)?;
        let secret: [u8; 32] = secret.as_slice().try_into().map_err(|_| {
            format!(
                "expected key size 32 for secretbox provider, got {}",
                secret.len()
            )
        })?;
        list.push(PrefixTransformer {
            prefix: format!("{}:", key.name).into_bytes(),
            transformer: Arc::new(Secretbox::new(&secret)),
        });
    }
    Ok(PrefixTransformer {
        prefix: SECRETBOX_PREFIX.as_bytes().to_vec(),
        transformer: Arc::new(PrefixTransformers::new(
            "no matching key was found for the provided Secretbox transformer",
            list,
        )),
    })
}

async fn kms_prefix_transformer(
    c: &KmsConfiguration,
    closed: tokio::sync::watch::Receiver<bool>,
) -> Result<(PrefixTransformer, Arc<Probe>), String> {
    match c.api_version.as_str() {
        "v1" => Err("KMSv1 is deprecated and will only receive security updates going forward. Use KMSv2 instead.  Set --feature-gates=KMSv1=true to use the deprecated KMSv1 feature.".into()),
        "v2" => {
            let service: Arc<dyn KmsService> = Arc::new(
                GrpcKms::new(&c.endpoint, c.timeout()).map_err(|e| {
                    format!("could not configure KMSv2-Plugin's probe {:?}, error: {e}", c.name)
                })?,
            );
            let probe = Probe::new(&c.name, service.clone());
            probe.prime_and_probe(closed).await;
            Ok((
                PrefixTransformer {
                    prefix: format!("{KMS_V2_PREFIX}{}:", c.name).into_bytes(),
                    transformer: Arc::new(Envelope::new(service, probe.clone())),
                },
                probe,
            ))
        }
        v => Err(format!(
            "could not configure KMS plugin {:?}, unsupported KMS API version {v:?}",
            c.name
        )),
    }
}

struct Tracker {
    transformers: ResourceTransformers,
    health: Option<KmsHealth>,
    closer: tokio::sync::watch::Sender<bool>,
    grace: Duration,
}

/// The transformers in force, swapped whole by a reload (upstream's `DynamicTransformers`; with
/// a static configuration nothing ever swaps them).
pub struct DynamicTransformers {
    tracker: RwLock<Arc<Tracker>>,
}

impl DynamicTransformers {
    pub fn new(loaded: Loaded) -> Arc<Self> {
        Arc::new(Self {
            tracker: RwLock::new(Arc::new(Tracker {
                transformers: loaded.transformers,
                health: loaded.health,
                closer: loaded.closer,
                grace: loaded.kms_close_grace_period,
            })),
        })
    }

    fn current(&self) -> Arc<Tracker> {
        self.tracker
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The transformer of `resource`; `None` for plain identity, so that the common case of an
    /// unencrypted resource copies nothing.
    pub fn for_resource(&self, resource: &GroupResource) -> Option<Arc<dyn Transformer>> {
        let t = self.current();
        let o = &t.transformers.overrides;
        o.get(resource)
            .or_else(|| o.get(&GroupResource::new(resource.group.clone(), "*")))
            .or_else(|| o.get(&GroupResource::new("*", "*")))
            .cloned()
    }

    /// Whether a `kms-providers` health check exists.
    pub fn has_health_check(&self) -> bool {
        self.current().health.is_some()
    }

    /// The `kms-providers` check of the configuration in force.
    pub async fn check(&self) -> Result<(), TransformError> {
        match self.current().health.clone() {
            Some(h) => h.check().await,
            None => Ok(()),
        }
    }

    /// Puts a newly loaded configuration in force; the old one's KMS connections close after its
    /// grace period, once requests that started with it are done.
    pub fn set(&self, loaded: Loaded) {
        let new = Arc::new(Tracker {
            transformers: loaded.transformers,
            health: loaded.health,
            closer: loaded.closer,
            grace: loaded.kms_close_grace_period,
        });
        let old = std::mem::replace(
            &mut *self.tracker.write().unwrap_or_else(|e| e.into_inner()),
            new,
        );
        tokio::spawn(async move {
            tokio::time::sleep(old.grace).await;
            let _ = old.closer.send(true);
        });
    }
}

/// The automatic reload controller (upstream's `DynamicEncryptionConfigContent`): every
/// `interval` the file's hash is compared with the loaded one; a changed file is loaded and put
/// in force once its KMS plugins are healthy, a bad one is logged and retried.
pub async fn run_reload(
    path: PathBuf,
    dynamic: Arc<DynamicTransformers>,
    mut last_hash: String,
    interval: Duration,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match reload_once(&path, &dynamic, &last_hash).await {
            Ok(Some(hash)) => {
                tracing::info!(file = %path.display(), "loaded new kms encryption config content");
                last_hash = hash;
            }
            Ok(None) => {}
            Err(e) => tracing::error!(
                "error processing encryption config file {}: {e}",
                path.display()
            ),
        }
    }
}

async fn reload_once(
    path: &Path,
    dynamic: &DynamicTransformers,
    last_hash: &str,
) -> Result<Option<String>, String> {
    if config_hash(path)? == last_hash {
        return Ok(None);
    }
    let loaded = load(path, true).await?;
    if loaded.content_hash == last_hash {
        return Ok(None);
    }
    let Some(health) = loaded.health.clone() else {
        return Err("unexpected number of healthz checks: 0. Should have only one".into());
    };
    // The new plugins must answer before the new configuration is used.
    let grace = loaded
        .kms_close_grace_period
        .max(MIN_KMS_CLOSE_GRACE_PERIOD);
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        match health.check().await {
            Ok(()) => break,
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(format!(
                    "health check for new transformers failed, polling error timed out waiting for the condition: {e}"
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let hash = loaded.content_hash.clone();
    dynamic.set(loaded);
    Ok(Some(hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join("enc.yaml");
        std::fs::write(&path, text).unwrap();
        path
    }

    const KEY16: &str = "MTIzNDU2Nzg5MDEyMzQ1Ng=="; // 16 bytes
    const KEY32: &str = "MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTI="; // 32 bytes

    #[tokio::test]
    async fn builds_transformers_and_rotates_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            &format!(
                "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets, '*.apps']\n  providers:\n  - aescbc:\n      keys:\n      - {{name: key1, secret: {KEY32}}}\n  - aesgcm:\n      keys:\n      - {{name: g, secret: {KEY16}}}\n  - secretbox:\n      keys:\n      - {{name: s, secret: {KEY32}}}\n  - identity: {{}}\n"
            ),
        );
        let loaded = load(&path, false).await.unwrap();
        assert!(loaded.health.is_none(), "no KMS and no reload: no check");
        let dynamic = DynamicTransformers::new(loaded);
        let secrets = dynamic
            .for_resource(&GroupResource::parse("secrets"))
            .unwrap();
        let stored = secrets
            .transform_to_storage(b"{}", b"/registry/secrets/a/b")
            .await
            .unwrap();
        assert!(stored.starts_with(b"k8s:enc:aescbc:v1:key1:"));
        assert_eq!(
            secrets
                .transform_from_storage(&stored, b"/registry/secrets/a/b")
                .await
                .unwrap(),
            (b"{}".to_vec(), false)
        );
        // Unencrypted values read through identity, stale.
        assert_eq!(
            secrets.transform_from_storage(b"{}", b"").await.unwrap(),
            (b"{}".to_vec(), true)
        );
        assert!(
            dynamic
                .for_resource(&GroupResource::parse("deployments.apps"))
                .is_some()
        );
        assert!(
            dynamic
                .for_resource(&GroupResource::parse("configmaps"))
                .is_none()
        );

        // Rotation: a new first key writes; values under the old key read stale.
        std::fs::write(
            &path,
            format!(
                "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys:\n      - {{name: key2, secret: {KEY16}}}\n      - {{name: key1, secret: {KEY32}}}\n"
            ),
        )
        .unwrap();
        let rotated = DynamicTransformers::new(load(&path, false).await.unwrap());
        let secrets2 = rotated
            .for_resource(&GroupResource::parse("secrets"))
            .unwrap();
        assert_eq!(
            secrets2.transform_from_storage(&stored, b"").await.unwrap(),
            (b"{}".to_vec(), true)
        );
        let again = secrets2.transform_to_storage(b"{}", b"").await.unwrap();
        assert!(again.starts_with(b"k8s:enc:aescbc:v1:key2:"));
        assert_eq!(
            secrets2
                .transform_from_storage(b"{}", b"")
                .await
                .unwrap_err()
                .0,
            "no matching prefix found",
            "without identity, plain values are refused"
        );
    }

    #[tokio::test]
    async fn invalid_configurations_get_upstreams_messages() {
        let dir = tempfile::tempdir().unwrap();
        let head = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n";
        let cases = [
            (
                "resources: []\n",
                "resources: Required value: at least one resources is required",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys:\n      - {name: k, secret: 'YWJj'}\n",
                "resources[0].providers[0].aescbc.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 3, expected one of [16 24 32]",
            ),
            (
                "resources:\n- resources: ['*', Secrets]\n  providers:\n  - identity: {}\n",
                "[resources[0].resources: Invalid value: [\"*\",\"Secrets\"]: using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked, resources[0].resources[0]: Invalid value: \"*\": use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources, resources[0].resources[1]: Invalid value: \"Secrets\": resource name should not contain capital letters]",
            ),
            (
                "resources:\n- resources: [secrets, '*.']\n  providers:\n  - identity: {}\n",
                "resources[0].resources: Invalid value: [\"secrets\",\"*.\"]: using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked",
            ),
            (
                "resources:\n- resources: [secrets]\n  providers:\n  - kms: {name: a, endpoint: 'tcp://x'}\n",
                "resources[0].providers[0].kms.endpoint: Invalid value: \"tcp://x\": unsupported scheme \"tcp\" for KMS provider, only unix is supported",
            ),
        ];
        for (body, want) in cases {
            let path = write(dir.path(), &format!("{head}{body}"));
            let err = parse(&path, false).unwrap_err();
            assert_eq!(err, want, "{body}");
        }
        let path = write(
            dir.path(),
            &format!(
                "{head}resources:\n- resources: [secrets]\n  providers:\n  - kms: {{name: a, endpoint: 'unix:///x'}}\n"
            ),
        );
        let err = load(&path, false).await.err().unwrap();
        assert!(
            err.starts_with("error while building transformers: KMSv1 is deprecated"),
            "{err}"
        );
        let path = write(
            dir.path(),
            &format!(
                "{head}resources:\n- resources: ['*.']\n  providers:\n  - identity: {{}}\n- resources: [secrets]\n  providers:\n  - identity: {{}}\n"
            ),
        );
        let err = load(&path, false).await.err().unwrap();
        assert_eq!(
            err,
            "error while building transformers: resource \"secrets\" is masked by earlier rule \"*.\""
        );
        let path = write(
            dir.path(),
            &format!(
                "{head}resources:\n- resources: [secrets]\n  providers:\n  - identiti: {{}}\n"
            ),
        );
        assert!(
            parse(&path, false)
                .unwrap_err()
                .starts_with("error decoding encryption provider configuration file")
        );
        std::fs::write(&path, "").unwrap();
        assert!(parse(&path, false).unwrap_err().ends_with("is empty"));
        assert_eq!(parse_go_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_go_duration("250ms").unwrap(),
            Duration::from_millis(250)
        );
        assert!(parse_go_duration("3").is_err());
    }
}
