//! AES transformers (upstream: `value/encrypt/aes`): AES-CBC with PKCS#7 padding (`aescbc`),
//! AES-GCM with random nonces (`aesgcm`), AES-GCM with a counter nonce for a key made once per
//! process (KMS v2's DEK), and AES-GCM under keys derived per write by HKDF from a seed (KMS v2's
//! default). Stored forms are upstream's: CBC `iv(16) | ciphertext`, GCM `nonce(12) |
//! ciphertext | tag(16)`, HKDF `info(32) | nonce(12) | ciphertext | tag(16)`.

use std::sync::atomic::{AtomicU64, Ordering};

use aes_gcm::aead::consts::U12;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes128Gcm, Aes256Gcm, AesGcm};
use async_trait::async_trait;
use cbc::cipher::block_padding::{NoPadding, Pkcs7};
use cbc::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use rand::RngCore;
use sha2::Sha256;

use super::{TransformError, Transformer};

const BLOCK_SIZE: usize = 16;
const NONCE_SIZE: usize = 12;
/// The size of keys, seeds and the HKDF info upstream uses (its `commonSize`).
pub const COMMON_SIZE: usize = 32;

type Aes192Gcm = AesGcm<aes::Aes192, U12>;

fn shorter() -> TransformError {
    TransformError::new("the stored data was shorter than the required size")
}

fn random(buf: &mut [u8]) {
    rand::rng().fill_bytes(buf);
}

/// A fresh random key of `len` bytes (upstream's `GenerateKey`).
pub fn generate_key(len: usize) -> Vec<u8> {
    let mut key = vec![0; len];
    random(&mut key);
    key
}

/// The AES key sizes upstream accepts (16, 24 or 32 bytes), or upstream's `aes.NewCipher` error.
fn check_key(key: &[u8]) -> Result<(), TransformError> {
    match key.len() {
        16 | 24 | 32 => Ok(()),
        n => Err(TransformError::new(format!(
            "crypto/aes: invalid key size {n}"
        ))),
    }
}

/// AES-CBC with a random IV and PKCS#7 padding; no authentication (upstream's `aescbc`).
pub struct Cbc {
    key: Vec<u8>,
}

impl Cbc {
    pub fn new(key: &[u8]) -> Result<Self, TransformError> {
        check_key(key)?;
        Ok(Self { key: key.to_vec() })
    }

    fn encrypt(&self, iv: &[u8; BLOCK_SIZE], data: &[u8]) -> Vec<u8> {
        macro_rules! enc {
            ($c:ty) => {
                cbc::Encryptor::<$c>::new_from_slices(&self.key, iv)
                    .map(|e| e.encrypt_padded_vec_mut::<Pkcs7>(data))
            };
        }
        let out = match self.key.len() {
            16 => enc!(aes::Aes128),
            24 => enc!(aes::Aes192),
            _ => enc!(aes::Aes256),
        };
        // The key length was checked in `new`, so the cipher always builds.
        out.unwrap_or_default()
    }

    fn decrypt(&self, iv: &[u8], data: &[u8]) -> Option<Vec<u8>> {
        macro_rules! dec {
            ($c:ty) => {
                cbc::Decryptor::<$c>::new_from_slices(&self.key, iv)
                    .ok()
                    .and_then(|d| d.decrypt_padded_vec_mut::<NoPadding>(data).ok())
            };
        }
        match self.key.len() {
            16 => dec!(aes::Aes128),
            24 => dec!(aes::Aes192),
            _ => dec!(aes::Aes256),
        }
    }
}

#[async_trait]
impl Transformer for Cbc {
    async fn transform_from_storage(
        &self,
        data: &[u8],
        _context: &[u8],
    ) -> Result<(Vec<u8>, bool), TransformError> {
        if data.len() < BLOCK_SIZE {
            return Err(shorter());
        }
        let (iv, data) = data.split_at(BLOCK_SIZE);
        if !data.len().is_multiple_of(BLOCK_SIZE) {
            return Err(TransformError::new(
                "the stored data is not a multiple of the block size",
            ));
        }
        let mut result = self.decrypt(iv, data).unwrap_or_default();
        // Upstream checks the padding itself, with these messages.
        let Some(&last) = result.last() else {
            return Err(TransformError::new(
                "invalid PKCS7 data (empty or not padded)",
            ));
        };
        let padding = last as usize;
        if padding == 0 || padding > result.len() {
            return Err(TransformError::new(
                "invalid PKCS7 data (empty or not padded)",
            ));
        }
        let size = result.len() - padding;
        if result[size..].iter().any(|&b| b != last) {
            return Err(TransformError::new("invalid padding on input"));
        }
        result.truncate(size);
        Ok((result, false))
    }

    async fn transform_to_storage(
        &self,
        data: &[u8],
        _context: &[u8],
    ) -> Result<Vec<u8>, TransformError> {
        let mut iv = [0u8; BLOCK_SIZE];
        random(&mut iv);
        let mut out = iv.to_vec();
        out.extend_from_slice(&self.encrypt(&iv, data));
        Ok(out)
    }
}

enum GcmCipher {
    A128(Box<Aes128Gcm>),
    A192(Box<Aes192Gcm>),
    A256(Box<Aes256Gcm>),
}

/// How a GCM transformer makes the nonces of its writes.
enum NonceSource {
    /// 12 random bytes (upstream's `NewGCMTransformer`).
    Random,
    /// 4 random bytes, then a little-endian counter (upstream's
    /// `NewGCMTransformerWithUniqueKeyUnsafe`, for a key that never outlives the process).
    Counter(AtomicU64),
}

/// Where the counter of a counter-nonce key starts: upstream starts at one billion so that a
/// wrap-around is seen.
const COUNTER_ZERO: u64 = 1_000_000_000;

/// AES-GCM; the authenticated data is the storage key (upstream's `aesgcm`).
pub struct Gcm {
    cipher: GcmCipher,
    nonces: NonceSource,
}

impl Gcm {
    /// Random nonces: the key must be rotated before 2^32 writes (upstream's advice).
    pub fn new(key: &[u8]) -> Result<Self, TransformError> {
        Self::with_nonces(key, NonceSource::Random)
    }

    /// A new random 32-byte key with counter nonces, and the key (upstream's
    /// `NewGCMTransformerWithUniqueKeyUnsafe`): the key must never encrypt outside this value.
    pub fn with_unique_key() -> Result<(Self, Vec<u8>), TransformError> {
        let key = generate_key(COMMON_SIZE);
        let gcm = Self::with_nonces(&key, NonceSource::Counter(AtomicU64::new(COUNTER_ZERO)))?;
        Ok((gcm, key))
    }

    fn with_nonces(key: &[u8], nonces: NonceSource) -> Result<Self, TransformError> {
        check_key(key)?;
        let invalid = |_| TransformError::new("crypto/aes: invalid key size");
        let cipher = match key.len() {
            16 => GcmCipher::A128(Box::new(Aes128Gcm::new_from_slice(key).map_err(invalid)?)),
            24 => GcmCipher::A192(Box::new(Aes192Gcm::new_from_slice(key).map_err(invalid)?)),
            _ => GcmCipher::A256(Box::new(Aes256Gcm::new_from_slice(key).map_err(invalid)?)),
        };
        Ok(Self { cipher, nonces })
    }

    fn nonce(&self) -> Result<[u8; NONCE_SIZE], TransformError> {
        let mut nonce = [0u8; NONCE_SIZE];
        match &self.nonces {
            NonceSource::Random => random(&mut nonce),
            NonceSource::Counter(counter) => {
                random(&mut nonce[..4]);
                let next = counter.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
                if next <= COUNTER_ZERO {
                    // Upstream exits the process here; refusing the write is as safe.
                    return Err(TransformError::new(
                        "aes-gcm detected nonce overflow - cryptographic wear out has occurred",
                    ));
                }
                nonce[4..].copy_from_slice(&next.to_le_bytes());
            }
        }
        Ok(nonce)
    }

    fn seal(&self, nonce: &[u8], data: &[u8], aad: &[u8]) -> Result<Vec<u8>, TransformError> {
        let payload = Payload { msg: data, aad };
        let nonce = aes_gcm::Nonce::from_slice(nonce);
        match &self.cipher {
            GcmCipher::A128(c) => c.encrypt(nonce, payload),
            GcmCipher::A192(c) => c.encrypt(nonce, payload),
            GcmCipher::A256(c) => c.encrypt(nonce, payload),
        }
        .map_err(|_| TransformError::new("failed to encrypt with AES-GCM"))
    }

    fn open(&self, nonce: &[u8], data: &[u8], aad: &[u8]) -> Result<Vec<u8>, TransformError> {
        let payload = Payload { msg: data, aad };
        let nonce = aes_gcm::Nonce::from_slice(nonce);
        match &self.cipher {
            GcmCipher::A128(c) => c.decrypt(nonce, payload),
            GcmCipher::A192(c) => c.decrypt(nonce, payload),
            GcmCipher::A256(c) => c.decrypt(nonce, payload),
        }
        // Go's crypto/cipher message.
        .map_err(|_| TransformError::new("cipher: message authentication failed"))
    }
}

#[async_trait]
impl Transformer for Gcm {
    async fn transform_from_storage(
        &self,
        data: &[u8],
        context: &[u8],
    ) -> Result<(Vec<u8>, bool), TransformError> {
        if data.len() < NONCE_SIZE {
            return Err(shorter());
        }
        let (nonce, sealed) = data.split_at(NONCE_SIZE);
        Ok((self.open(nonce, sealed, context)?, false))
    }

    async fn transform_to_storage(
        &self,
        data: &[u8],
        context: &[u8],
    ) -> Result<Vec<u8>, TransformError> {
        let nonce = self.nonce()?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&self.seal(&nonce, data, context)?);
        Ok(out)
    }
}

/// AES-GCM under a key derived for every write from a seed: `HKDF-Expand(SHA-256, seed, info)`
/// with 32 random bytes of info stored in front (upstream's
/// `NewHKDFExtendedNonceGCMTransformer`). Immune to nonce reuse, so the seed may live forever.
pub struct ExtendedNonceGcm {
    seed: Vec<u8>,
}

impl ExtendedNonceGcm {
    pub fn new(seed: &[u8]) -> Result<Self, TransformError> {
        if seed.len() < COMMON_SIZE {
            return Err(TransformError::new(format!(
                "invalid seed length {} used for key generation",
                seed.len()
            )));
        }
        Ok(Self {
            seed: seed.to_vec(),
        })
    }

    fn derived(&self, info: &[u8]) -> Result<Gcm, TransformError> {
        let kdf = hkdf::Hkdf::<Sha256>::from_prk(&self.seed).map_err(|e| {
            TransformError::new(format!("failed to KDF expand seed with info: {e}"))
        })?;
        let mut key = [0u8; COMMON_SIZE];
        kdf.expand(info, &mut key).map_err(|e| {
            TransformError::new(format!("failed to read a derived key from KDF: {e}"))
        })?;
        Gcm::new(&key)
    }
}

#[async_trait]
impl Transformer for ExtendedNonceGcm {
    async fn transform_from_storage(
        &self,
        data: &[u8],
        context: &[u8],
    ) -> Result<(Vec<u8>, bool), TransformError> {
        if data.len() < COMMON_SIZE {
            return Err(shorter());
        }
        let (info, rest) = data.split_at(COMMON_SIZE);
        let gcm = self
            .derived(info)
            .map_err(|e| TransformError::new(format!("failed to derive read key from KDF: {e}")))?;
        gcm.transform_from_storage(rest, context).await
    }

    async fn transform_to_storage(
        &self,
        data: &[u8],
        context: &[u8],
    ) -> Result<Vec<u8>, TransformError> {
        let mut info = [0u8; COMMON_SIZE];
        random(&mut info);
        let gcm = self.derived(&info).map_err(|e| {
            TransformError::new(format!("failed to derive write key from KDF: {e}"))
        })?;
        let mut out = info.to_vec();
        out.extend_from_slice(&gcm.transform_to_storage(data, context).await?);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn cbc_reads_the_standard_vector_and_round_trips() {
        // NIST SP 800-38A F.2.5 (CBC-AES256), first block, with one full block of PKCS#7 padding
        // encrypted after it as upstream's writer adds it: the stored form is iv | blocks.
        let key = hex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4");
        let iv = hex("000102030405060708090a0b0c0d0e0f");
        let plain = hex("6bc1bee22e409f96e93d7e117393172a");
        let cbc = Cbc::new(&key).unwrap();
        let stored = [
            iv.clone(),
            cbc.encrypt(&iv.clone().try_into().unwrap(), &plain),
        ]
        .concat();
        assert_eq!(
            &stored[16..32],
            hex("f58c4c04d6e5f1ba779eabfb5f7bfbd6").as_slice(),
            "the first block is the standard's ciphertext"
        );
        assert_eq!(stored.len(), 48, "a full padding block follows");
        let (out, stale) = cbc.transform_from_storage(&stored, b"").await.unwrap();
        assert_eq!((out, stale), (plain, false));

        let stored = cbc.transform_to_storage(b"hello", b"k").await.unwrap();
        assert_eq!(stored.len(), 32);
        assert_eq!(
            cbc.transform_from_storage(&stored, b"other")
                .await
                .unwrap()
                .0,
            b"hello",
            "CBC has no authenticated data"
        );
        let other = Cbc::new(&[7u8; 32]).unwrap();
        let err = other
            .transform_from_storage(&stored, b"")
            .await
            .unwrap_err();
        assert!(
            err.0.starts_with("invalid P") || err.0 == "invalid padding on input",
            "{err}"
        );
        assert_eq!(
            cbc.transform_from_storage(&stored[..20], b"")
                .await
                .unwrap_err()
                .0,
            "the stored data is not a multiple of the block size"
        );
        assert_eq!(
            cbc.transform_from_storage(&stored[..8], b"")
                .await
                .unwrap_err()
                .0,
            "the stored data was shorter than the required size"
        );
    }

    #[tokio::test]
    async fn gcm_reads_the_standard_vector_and_binds_the_key() {
        // The GCM specification's test case 4 (AES-128, 60-byte plaintext, 20 bytes of AAD).
        let key = hex("feffe9928665731c6d6a8f9467308308");
        let nonce = hex("cafebabefacedbaddecaf888");
        let plain = hex(
            "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
        );
        let aad = hex("feedfacedeadbeeffeedfacedeadbeefabaddad2");
        let sealed = hex(
            "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e0915bc94fbc3221a5db94fae95ae7121a47",
        );
        let gcm = Gcm::new(&key).unwrap();
        let stored = [nonce, sealed].concat();
        assert_eq!(
            gcm.transform_from_storage(&stored, &aad).await.unwrap(),
            (plain, false)
        );
        for size in [16, 24, 32] {
            let gcm = Gcm::new(&vec![1u8; size]).unwrap();
            let stored = gcm
                .transform_to_storage(b"v", b"/registry/secrets/a")
                .await
                .unwrap();
            assert_eq!(stored.len(), 12 + 1 + 16);
            assert_eq!(
                gcm.transform_from_storage(&stored, b"/registry/secrets/a")
                    .await
                    .unwrap()
                    .0,
                b"v"
            );
            // A value copied to another key does not decrypt there.
            assert_eq!(
                gcm.transform_from_storage(&stored, b"/registry/secrets/b")
                    .await
                    .unwrap_err()
                    .0,
                "cipher: message authentication failed"
            );
        }
        assert!(Gcm::new(&[0; 8]).is_err());
    }

    #[tokio::test]
    async fn counter_nonces_count_up_from_one_billion() {
        let (gcm, key) = Gcm::with_unique_key().unwrap();
        assert_eq!(key.len(), 32);
        let a = gcm.transform_to_storage(b"x", b"").await.unwrap();
        let b = gcm.transform_to_storage(b"x", b"").await.unwrap();
        let counter = |v: &[u8]| u64::from_le_bytes(v[4..12].try_into().unwrap());
        assert_eq!(counter(&a), COUNTER_ZERO + 1);
        assert_eq!(counter(&b), COUNTER_ZERO + 2);
        // A plain GCM transformer with the same key reads it (as upstream's readers do).
        let reader = Gcm::new(&key).unwrap();
        assert_eq!(
            reader.transform_from_storage(&b, b"").await.unwrap().0,
            b"x"
        );
    }

    #[tokio::test]
    async fn hkdf_derives_a_key_per_write_as_upstream() {
        let seed = [9u8; 32];
        let t = ExtendedNonceGcm::new(&seed).unwrap();
        let stored = t.transform_to_storage(b"data", b"/k").await.unwrap();
        assert_eq!(stored.len(), 32 + 12 + 4 + 16);
        // Independently: the key is HKDF-Expand(SHA-256, seed, info), then plain AES-GCM.
        let mut key = [0u8; 32];
        hkdf::Hkdf::<Sha256>::from_prk(&seed)
            .unwrap()
            .expand(&stored[..32], &mut key)
            .unwrap();
        let gcm = Gcm::new(&key).unwrap();
        assert_eq!(
            gcm.transform_from_storage(&stored[32..], b"/k")
                .await
                .unwrap()
                .0,
            b"data"
        );
        assert_eq!(
            t.transform_from_storage(&stored, b"/k").await.unwrap().0,
            b"data"
        );
        assert!(ExtendedNonceGcm::new(&[0; 16]).is_err());
    }
}
