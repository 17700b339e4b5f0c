//! The storage codec: how an object becomes the value written into the `Kv` and how a stored
//! value becomes the object again (upstream's storage codec, `NewStorageCodec`).
//!
//! This module owns the seam and the media types upstream's `--storage-media-type` names. It
//! knows no kind: the codec of built-in kinds (protobuf in upstream's `k8s\0` envelope) lives
//! with the protobuf schema, above this crate, and is handed to [`crate::KvStore::with_codec`].
//!
//! Whatever a store writes, it reads every format back, as upstream's recognizing decoder
//! does: a value that starts with `{` is JSON and the store reads it itself (the fast path that
//! splices the resourceVersion into the stored bytes), anything else goes to the codec's
//! [`StorageCodec::decode`]. So a store that holds values written under an earlier media type
//! (JSON before, protobuf now, or the reverse) reads them all.

use serde_json::Value;

/// A version of a kind that kube-apiserver stores and a store of Ironplane does not keep, with
/// the conversion of its objects to the version the store keeps, for a codec's
/// [`StorageCodec::upgrade`]; and, with `write`, the version Ironplane keeps and the conversion
/// of its objects back, so that they are stored as kube-apiserver stores them (as JSON: the
/// kinds concerned have their own legacy codec upstream). The kind's own module owns it (e.g.
/// `apiextensions::crd`).
#[derive(Clone, Copy, Debug)]
pub struct StoredVersion {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub upgrade: Convert,
    pub write: Option<(&'static str, Convert)>,
}

/// A conversion of an object between two versions of its kind, in place.
pub type Convert = fn(&mut Value) -> Result<(), String>;

/// A media type `--storage-media-type` accepts (upstream's `storageMediaTypes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StorageMediaType {
    /// `application/json`.
    #[default]
    Json,
    /// `application/yaml`.
    Yaml,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

impl StorageMediaType {
    /// Every accepted value, in the sorted order upstream lists them in its error message.
    pub const ALL: [StorageMediaType; 3] = [
        StorageMediaType::Json,
        StorageMediaType::Protobuf,
        StorageMediaType::Yaml,
    ];

    /// The media type's name.
    pub fn as_str(self) -> &'static str {
        match self {
            StorageMediaType::Json => "application/json",
            StorageMediaType::Yaml => "application/yaml",
            StorageMediaType::Protobuf => "application/vnd.kubernetes.protobuf",
        }
    }

    /// Reads the flag's value; upstream accepts exactly one of the three names, and refuses
    /// anything else with this message.
    pub fn parse(value: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == value)
            .ok_or_else(|| {
                let allowed: Vec<&str> = Self::ALL.iter().map(|m| m.as_str()).collect();
                format!(
                    "--storage-media-type {value:?} invalid, allowed values: {}",
                    allowed.join(", ")
                )
            })
    }
}

impl std::fmt::Display for StorageMediaType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Turns objects into stored values and non-JSON stored values into objects.
pub trait StorageCodec: Send + Sync + 'static {
    /// The bytes to store for `obj`, a JSON object whose metadata holds no resourceVersion;
    /// `None` stores the object's JSON, which the store has already encoded (so the JSON path
    /// costs nothing more than before there were codecs).
    fn encode(&self, obj: &Value) -> Result<Option<Vec<u8>>, String>;

    /// The object a stored value that is not JSON holds (JSON values never come here). The
    /// answer's metadata may lack a resourceVersion: the store sets it from the key's revision.
    fn decode(&self, stored: &[u8]) -> Result<Value, String>;

    /// The JSON of `obj` as its kind's server writes it, which the store keeps and answers
    /// with: here Go's encoding of a map (members sorted, Go's escapes), as upstream writes
    /// custom resources.
    fn to_json(&self, obj: &Value) -> Vec<u8> {
        apimachinery::gojson::to_vec(obj)
    }

    /// Whether the `metadata` member named `member` (its JSON key, unquoted) comes before
    /// `resourceVersion` in what [`StorageCodec::to_json`] writes, so that the store can set a
    /// resourceVersion into that JSON where the codec would have written it.
    fn precedes_resource_version(&self, member: &[u8]) -> bool {
        member < b"resourceVersion".as_slice()
    }

    /// Brings an object stored in another version of its kind to the version its store keeps,
    /// as upstream's storage codec converts whatever it decodes to the storage version; answers
    /// whether it changed the object. Such objects come from servers whose storage version
    /// differs (kube-apiserver stores CustomResourceDefinitions as `v1beta1`). Every stored
    /// object comes here, JSON ones too, so the check must be cheap.
    fn upgrade(&self, _obj: &mut Value) -> Result<bool, String> {
        Ok(false)
    }
}

/// JSON only: what custom resources are stored as (upstream stores them as JSON whatever the
/// flag says), and the codec of a store built without one.
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonCodec;

impl StorageCodec for JsonCodec {
    fn encode(&self, _obj: &Value) -> Result<Option<Vec<u8>>, String> {
        Ok(None)
    }

    fn decode(&self, stored: &[u8]) -> Result<Value, String> {
        // Not JSON by its first byte: serde's error names what it found.
        serde_json::from_slice(stored).map_err(|e| e.to_string())
    }
}

/// The object a stored value of any format holds, in the version its store keeps: JSON parsed
/// here, anything else decoded by `codec`, then [`StorageCodec::upgrade`]d. The flag tells
/// whether `stored` is that object's JSON as it is (JSON that needed no upgrade), so that a
/// caller may keep the stored bytes instead of encoding the object again.
pub fn read_stored(codec: &dyn StorageCodec, stored: &[u8]) -> Result<(Value, bool), String> {
    let (mut value, json) = if is_json(stored) {
        (
            serde_json::from_slice(stored).map_err(|e| e.to_string())?,
            true,
        )
    } else {
        (codec.decode(stored)?, false)
    };
    let upgraded = codec.upgrade(&mut value)?;
    Ok((value, json && !upgraded))
}

/// Whether a stored value is JSON (upstream's JSON recognizer: the first byte after white space
/// is `{`).
pub(crate) fn is_json(stored: &[u8]) -> bool {
    stored
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        .is_some_and(|b| *b == b'{')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_parse_as_upstream_validates_them() {
        for media_type in StorageMediaType::ALL {
            assert_eq!(StorageMediaType::parse(media_type.as_str()), Ok(media_type));
        }
        assert_eq!(
            StorageMediaType::parse("application/cbor"),
            Err(
                "--storage-media-type \"application/cbor\" invalid, allowed values: \
                 application/json, application/vnd.kubernetes.protobuf, application/yaml"
                    .to_string()
            )
        );
        // Upstream compares the whole string: parameters are not accepted.
        assert!(StorageMediaType::parse("application/json; charset=utf-8").is_err());
    }

    #[test]
    fn json_is_recognized_by_its_first_byte() {
        assert!(is_json(b"{}"));
        assert!(is_json(b" \n\t{\"a\":1}"));
        assert!(!is_json(b"k8s\0\n"));
        assert!(!is_json(b"apiVersion: v1\n"));
        assert!(!is_json(b""));
        assert!(!is_json(b"[]"));
    }
}
