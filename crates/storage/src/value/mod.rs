//! Encryption at rest (upstream: `k8s.io/apiserver/pkg/storage/value` and
//! `pkg/server/options/encryptionconfig`).
//!
//! This module owns how a stored value is turned into what the backend keeps and back: the
//! [`Transformer`] trait, upstream's prefix dispatch ([`PrefixTransformers`]: the first
//! transformer writes, any whose prefix matches reads, and a read by any but the first is
//! *stale*), and the transformers themselves — identity, AES-CBC and AES-GCM (`aes`), secretbox
//! (`secretbox`), and KMS v2 envelope encryption (`kmsv2`, talking to a plugin over gRPC in
//! `grpc`). `config` reads an `EncryptionConfiguration` into per-resource transformers and the
//! KMS health check; `kv` applies them as a decorator over any [`crate::Kv`], so that every
//! backend stores the same bytes kube-apiserver would.
//!
//! Wire formats are upstream's byte for byte (the prefix `k8s:enc:<provider>:v1:<key name>:`
//! then the provider's payload), and the authenticated data is the storage key, so that values
//! written by kube-apiserver decrypt here and the other way round.

pub mod aes;
pub mod config;
pub mod grpc;
pub mod kmsv2;
pub mod kv;
pub mod secretbox;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

/// Why a value could not be transformed; the message is upstream's, as clients read it in the
/// 500 Status of a request whose object could not be decrypted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TransformError(pub String);

impl TransformError {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }

    /// Several errors as upstream's `utilerrors.NewAggregate(...)` prints them: one alone as
    /// itself, more as `[a, b]`.
    pub fn aggregate(errors: Vec<TransformError>) -> Option<TransformError> {
        match errors.len() {
            0 => None,
            1 => errors.into_iter().next(),
            _ => Some(TransformError(format!(
                "[{}]",
                errors
                    .iter()
                    .map(|e| e.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }
}

/// Turns a value into its stored form and back (upstream's `value.Transformer`). `context` is
/// the authenticated data: the storage key, so that a value copied to another key does not
/// decrypt there.
#[async_trait]
pub trait Transformer: Send + Sync {
    /// The value stored as `data`, and whether it is *stale*: read with other than the current
    /// write key, so that an update must write it again even when the object did not change.
    async fn transform_from_storage(
        &self,
        data: &[u8],
        context: &[u8],
    ) -> Result<(Vec<u8>, bool), TransformError>;

    /// The stored form of `data`.
    async fn transform_to_storage(
        &self,
        data: &[u8],
        context: &[u8],
    ) -> Result<Vec<u8>, TransformError>;

    /// `transform_from_storage` for a value of `resource` (as `secrets`, `deployments.apps`):
    /// the prefix dispatch records the transformation in the metrics under that resource.
    async fn transform_from_storage_for(
        &self,
        data: &[u8],
        context: &[u8],
        _resource: &str,
    ) -> Result<(Vec<u8>, bool), TransformError> {
        self.transform_from_storage(data, context).await
    }

    /// `transform_to_storage` for a value of `resource`, as `transform_from_storage_for`.
    async fn transform_to_storage_for(
        &self,
        data: &[u8],
        context: &[u8],
        _resource: &str,
    ) -> Result<Vec<u8>, TransformError> {
        self.transform_to_storage(data, context).await
    }
}

/// The prefix that marks every encrypted value; identity refuses to read values with it.
pub const ENCRYPTED_PREFIX: &[u8] = b"k8s:enc:";

/// Stores values as they are, and refuses to read encrypted ones (upstream's
/// `identity.NewEncryptCheckTransformer`).
pub struct Identity;

#[async_trait]
impl Transformer for Identity {
    async fn transform_from_storage(
        &self,
        data: &[u8],
        _context: &[u8],
    ) -> Result<(Vec<u8>, bool), TransformError> {
        if data.starts_with(ENCRYPTED_PREFIX) {
            return Err(TransformError::new(
                "identity transformer tried to read encrypted data",
            ));
        }
        Ok((data.to_vec(), false))
    }

    async fn transform_to_storage(
        &self,
        data: &[u8],
        _context: &[u8],
    ) -> Result<Vec<u8>, TransformError> {
        Ok(data.to_vec())
    }
}

/// A transformer for the values that start with `prefix` (empty for identity).
#[derive(Clone)]
pub struct PrefixTransformer {
    pub prefix: Vec<u8>,
    pub transformer: Arc<dyn Transformer>,
}

/// Upstream's `NewPrefixTransformers`: writes with the first, reads with the first whose prefix
/// matches (an empty prefix that fails is skipped, so identity never hides a real error); a read
/// by any but the first is stale. `no_match` is the error when nothing matched.
pub struct PrefixTransformers {
    pub transformers: Vec<PrefixTransformer>,
    pub no_match: String,
}

impl PrefixTransformers {
    pub fn new(no_match: impl Into<String>, transformers: Vec<PrefixTransformer>) -> Self {
        Self {
            transformers,
            no_match: no_match.into(),
        }
    }
}

#[async_trait]
impl Transformer for PrefixTransformers {
    async fn transform_from_storage(
        &self,
        data: &[u8],
        context: &[u8],
    ) -> Result<(Vec<u8>, bool), TransformError> {
        self.transform_from_storage_for(data, context, "").await
    }

    async fn transform_to_storage(
        &self,
        data: &[u8],
        context: &[u8],
    ) -> Result<Vec<u8>, TransformError> {
        self.transform_to_storage_for(data, context, "").await
    }

    async fn transform_from_storage_for(
        &self,
        data: &[u8],
        context: &[u8],
        resource: &str,
    ) -> Result<(Vec<u8>, bool), TransformError> {
        let start = Instant::now();
        let mut errors = Vec::new();
        for (i, t) in self.transformers.iter().enumerate() {
            if !data.starts_with(&t.prefix) {
                continue;
            }
            let result = t
                .transformer
                .transform_from_storage(&data[t.prefix.len()..], context)
                .await;
            if t.prefix.is_empty() && result.is_err() {
                continue;
            }
            // Every prefix that was tried is recorded, its failures too, as upstream's.
            record_transformation(resource, FROM_STORAGE, &t.prefix, start, result.is_ok());
            match result {
                Ok((out, stale)) => return Ok((out, stale || i != 0)),
                Err(e) => errors.push(e),
            }
        }
        match TransformError::aggregate(errors) {
            Some(e) => Err(e),
            None => {
                record_transformation(resource, FROM_STORAGE, b"unknown", start, false);
                Err(TransformError::new(self.no_match.clone()))
            }
        }
    }

    async fn transform_to_storage_for(
        &self,
        data: &[u8],
        context: &[u8],
        resource: &str,
    ) -> Result<Vec<u8>, TransformError> {
        let Some(first) = self.transformers.first() else {
            return Err(TransformError::new(self.no_match.clone()));
        };
        let start = Instant::now();
        let out = first.transformer.transform_to_storage(data, context).await;
        record_transformation(resource, TO_STORAGE, &first.prefix, start, out.is_ok());
        let out = out?;
        let mut prefixed = Vec::with_capacity(first.prefix.len() + out.len());
        prefixed.extend_from_slice(&first.prefix);
        prefixed.extend_from_slice(&out);
        Ok(prefixed)
    }
}

const FROM_STORAGE: &str = "from_storage";
const TO_STORAGE: &str = "to_storage";

static TRANSFORMATIONS: std::sync::LazyLock<prometheus::IntCounterVec> = std::sync::LazyLock::new(
    || {
        crate::metrics::counter_vec(
            "apiserver_storage_transformation_operations_total",
            crate::metrics::Stability::Alpha,
            "Total number of transformations. Successful transformation will have a status 'OK' and a varied status string when the transformation fails. The status, resource, and transformation_type fields can be used for alerting purposes. For example, you can monitor for encryption/decryption failures using the transformation_type (e.g., from_storage for decryption and to_storage for encryption). Additionally, these fields can be used to ensure that the correct transformers are applied to each resource.",
            &[
                "resource",
                "transformation_type",
                "transformer_prefix",
                "status",
            ],
        )
    },
);
static TRANSFORMATION_LATENCY: std::sync::LazyLock<prometheus::HistogramVec> =
    std::sync::LazyLock::new(|| {
        crate::metrics::histogram_vec(
            "apiserver_storage_transformation_duration_seconds",
            crate::metrics::Stability::Alpha,
            "Latencies in seconds of value transformation operations.",
            &["transformation_type", "transformer_prefix"],
            crate::metrics::exponential_buckets(5e-6, 2.0, 25),
        )
    });

/// Upstream's `RecordTransformation`: every transformation is counted with its status (`OK`, or
/// upstream's label for a failure that carries no gRPC code), and the successful ones timed.
/// The identity transformer's empty prefix is labelled `identity`.
fn record_transformation(resource: &str, kind: &str, prefix: &[u8], start: Instant, ok: bool) {
    let prefix = if prefix.is_empty() {
        "identity"
    } else {
        std::str::from_utf8(prefix).unwrap_or("unknown")
    };
    let status = if ok { "OK" } else { "unknown-non-grpc" };
    TRANSFORMATIONS
        .with_label_values(&[resource, kind, prefix, status])
        .inc();
    if ok {
        TRANSFORMATION_LATENCY
            .with_label_values(&[kind, prefix])
            .observe(start.elapsed().as_secs_f64());
    }
}

/// A group and resource as the configuration names them (`secrets`, `deployments.apps`, `*.`,
/// `*.apps`, `*.*`); upstream's `schema.GroupResource`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }

    /// Upstream's `schema.ParseGroupResource`: the resource is up to the first dot, the group the
    /// rest (`secrets` and `secrets.` are both the core group).
    pub fn parse(text: &str) -> Self {
        match text.split_once('.') {
            Some((resource, group)) => Self::new(group, resource),
            None => Self::new("", text),
        }
    }

    /// As upstream's `GroupResource.String()`: `resource.group`, or `resource` for the core group.
    pub fn display(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// As the configuration file spells it (`*.` for every core resource).
    pub fn yaml_string(&self) -> String {
        if self.group.is_empty() && self.resource == "*" {
            "*.".into()
        } else {
            self.display()
        }
    }
}

/// The transformers a configuration gives, by group and resource, with upstream's lookup: the
/// resource itself, then `*.<group>`, then `*.*`, then identity.
#[derive(Clone, Default)]
pub struct ResourceTransformers {
    pub overrides: HashMap<GroupResource, Arc<dyn Transformer>>,
}

impl ResourceTransformers {
    pub fn for_resource(&self, resource: &GroupResource) -> Arc<dyn Transformer> {
        self.overrides
            .get(resource)
            .or_else(|| {
                self.overrides
                    .get(&GroupResource::new(resource.group.clone(), "*"))
            })
            .or_else(|| self.overrides.get(&GroupResource::new("*", "*")))
            .cloned()
            .unwrap_or_else(|| Arc::new(Identity))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reverses bytes: enough to tell which transformer ran.
    struct Tagged(&'static str, bool);

    #[async_trait]
    impl Transformer for Tagged {
        async fn transform_from_storage(
            &self,
            data: &[u8],
            _: &[u8],
        ) -> Result<(Vec<u8>, bool), TransformError> {
            if self.1 {
                return Err(TransformError::new(format!("{} failed", self.0)));
            }
            Ok(([self.0.as_bytes(), b"(", data, b")"].concat(), false))
        }
        async fn transform_to_storage(
            &self,
            data: &[u8],
            _: &[u8],
        ) -> Result<Vec<u8>, TransformError> {
            Ok([self.0.as_bytes(), data].concat())
        }
    }

    fn pt(prefix: &str, t: impl Transformer + 'static) -> PrefixTransformer {
        PrefixTransformer {
            prefix: prefix.as_bytes().to_vec(),
            transformer: Arc::new(t),
        }
    }

    #[tokio::test]
    async fn the_first_writes_any_reads_and_others_are_stale() {
        let t = PrefixTransformers::new(
            "no matching prefix found",
            vec![
                pt("a:", Tagged("A", false)),
                pt("b:", Tagged("B", false)),
                pt("", Identity),
            ],
        );
        assert_eq!(t.transform_to_storage(b"x", b"").await.unwrap(), b"a:Ax");
        assert_eq!(
            t.transform_from_storage(b"a:x", b"").await.unwrap(),
            (b"A(x)".to_vec(), false)
        );
        assert_eq!(
            t.transform_from_storage(b"b:x", b"").await.unwrap(),
            (b"B(x)".to_vec(), true)
        );
        // Identity reads unprefixed values, stale since it is not the write transformer.
        assert_eq!(
            t.transform_from_storage(b"{}", b"").await.unwrap(),
            (b"{}".to_vec(), true)
        );
        // ... but never encrypted ones: an unknown provider's value matches nothing.
        let err = t
            .transform_from_storage(b"k8s:enc:other:v1:k:x", b"")
            .await
            .unwrap_err();
        assert_eq!(err.0, "no matching prefix found");
    }

    #[tokio::test]
    async fn transformations_are_counted_by_resource_prefix_and_status() {
        let t = PrefixTransformers::new(
            "no matching prefix found",
            vec![pt("m:", Tagged("M", false)), pt("", Identity)],
        );
        let count = |kind: &str, prefix: &str, status: &str| {
            TRANSFORMATIONS
                .with_label_values(&["metrictests.example.com", kind, prefix, status])
                .get()
        };
        let r = "metrictests.example.com";
        t.transform_to_storage_for(b"x", b"", r).await.unwrap();
        t.transform_from_storage_for(b"m:x", b"", r).await.unwrap();
        t.transform_from_storage_for(b"{}", b"", r).await.unwrap();
        t.transform_from_storage_for(b"k8s:enc:other:v1:k:x", b"", r)
            .await
            .unwrap_err();
        assert_eq!(count("to_storage", "m:", "OK"), 1);
        assert_eq!(count("from_storage", "m:", "OK"), 1);
        assert_eq!(count("from_storage", "identity", "OK"), 1);
        assert_eq!(count("from_storage", "unknown", "unknown-non-grpc"), 1);
    }

    #[tokio::test]
    async fn errors_of_every_matching_transformer_are_aggregated() {
        let t = PrefixTransformers::new(
            "none",
            vec![pt("a", Tagged("A", true)), pt("ab", Tagged("AB", true))],
        );
        let err = t.transform_from_storage(b"abc", b"").await.unwrap_err();
        assert_eq!(err.0, "[A failed, AB failed]");
        let err = t.transform_from_storage(b"ac", b"").await.unwrap_err();
        assert_eq!(err.0, "A failed");
    }

    #[test]
    fn resources_resolve_as_upstream_looks_them_up() {
        let mut r = ResourceTransformers::default();
        r.overrides.insert(
            GroupResource::parse("secrets"),
            Arc::new(Tagged("S", false)),
        );
        r.overrides.insert(
            GroupResource::parse("*.apps"),
            Arc::new(Tagged("APPS", false)),
        );
        let by = |r: &ResourceTransformers, gr: &str| {
            let t = r.for_resource(&GroupResource::parse(gr));
            futures_util::FutureExt::now_or_never(t.transform_to_storage(b"", b""))
                .unwrap()
                .unwrap()
        };
        assert_eq!(by(&r, "secrets"), b"S");
        assert_eq!(by(&r, "deployments.apps"), b"APPS");
        assert_eq!(by(&r, "configmaps"), b"");
        r.overrides
            .insert(GroupResource::parse("*.*"), Arc::new(Tagged("ALL", false)));
        assert_eq!(by(&r, "configmaps"), b"ALL");
        assert_eq!(GroupResource::parse("*."), GroupResource::new("", "*"));
        assert_eq!(GroupResource::parse("*.").yaml_string(), "*.");
    }
}
