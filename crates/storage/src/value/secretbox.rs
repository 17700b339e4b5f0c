//! NaCl secretbox (XSalsa20-Poly1305) values (upstream: `value/encrypt/secretbox`): stored as
//! `nonce(24) | tag(16) | ciphertext`, as Go's `secretbox.Seal` lays them out. Like upstream,
//! the authenticated data is not used.

use async_trait::async_trait;
use crypto_secretbox::aead::{Aead, KeyInit};
use crypto_secretbox::{Key, Nonce, XSalsa20Poly1305};
use rand::RngCore;

use super::{TransformError, Transformer};

const NONCE_SIZE: usize = 24;
const OVERHEAD: usize = 16;

pub struct Secretbox {
    cipher: XSalsa20Poly1305,
}

impl Secretbox {
    pub fn new(key: &[u8; 32]) -> Self {
        Self {
            cipher: XSalsa20Poly1305::new(Key::from_slice(key)),
        }
    }
}

#[async_trait]
impl Transformer for Secretbox {
    async fn transform_from_storage(
        &self,
        data: &[u8],
        _context: &[u8],
    ) -> Result<(Vec<u8>, bool), TransformError> {
        if data.len() < OVERHEAD + NONCE_SIZE {
            return Err(TransformError::new(
                "the stored data was shorter than the required size",
            ));
        }
        let (nonce, sealed) = data.split_at(NONCE_SIZE);
        self.cipher
            .decrypt(Nonce::from_slice(nonce), sealed)
            .map(|out| (out, false))
            // Upstream's message for a failed open, however odd.
            .map_err(|_| TransformError::new("output array was not large enough for encryption"))
    }

    async fn transform_to_storage(
        &self,
        data: &[u8],
        _context: &[u8],
    ) -> Result<Vec<u8>, TransformError> {
        let mut nonce = [0u8; NONCE_SIZE];
        rand::rng().fill_bytes(&mut nonce);
        let sealed = self
            .cipher
            .encrypt(Nonce::from_slice(&nonce), data)
            .map_err(|_| TransformError::new("failed to seal with secretbox"))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = [
        0x1b, 0x27, 0x55, 0x64, 0x73, 0xe9, 0x85, 0xd4, 0x62, 0xcd, 0x51, 0x19, 0x7a, 0x9a, 0x46,
        0xc7, 0x60, 0x09, 0x54, 0x9e, 0xac, 0x64, 0x74, 0xf2, 0x06, 0xc4, 0xee, 0x08, 0x44, 0xf6,
        0x83, 0x89,
    ];
    const NONCE: [u8; 24] = [
        0x69, 0x69, 0x6e, 0xe9, 0x55, 0xb6, 0x2b, 0x73, 0xcd, 0x62, 0xbd, 0xa8, 0x75, 0xfc, 0x73,
        0xd6, 0x82, 0x19, 0xe0, 0x03, 0x6b, 0x7a, 0x0b, 0x37,
    ];

    #[tokio::test]
    async fn reads_nacl_secretbox_with_the_tag_first() {
        // NaCl's secretbox test vector: the first 32 bytes of the 131-byte message, sealed. The
        // tag comes first, then the ciphertext (Go's layout), so the vector's ciphertext bytes
        // at offset 16 are the message XOR the stream.
        let msg: [u8; 32] = [
            0xbe, 0x07, 0x5f, 0xc5, 0x3c, 0x81, 0xf2, 0xd5, 0xcf, 0x14, 0x13, 0x16, 0xeb, 0xeb,
            0x0c, 0x7b, 0x52, 0x28, 0xc5, 0x2a, 0x4c, 0x62, 0xcb, 0xd4, 0x4b, 0x66, 0x84, 0x9b,
            0x64, 0x24, 0x4f, 0xfc,
        ];
        let expected_cipher: [u8; 16] = [
            0x8e, 0x99, 0x3b, 0x9f, 0x48, 0x68, 0x12, 0x73, 0xc2, 0x96, 0x50, 0xba, 0x32, 0xfc,
            0x76, 0xce,
        ];
        let sealed = XSalsa20Poly1305::new(Key::from_slice(&KEY))
            .encrypt(Nonce::from_slice(&NONCE), msg.as_slice())
            .unwrap();
        assert_eq!(&sealed[16..32], &expected_cipher);
        let stored = [NONCE.as_slice(), &sealed].concat();
        let t = Secretbox::new(&KEY);
        assert_eq!(
            t.transform_from_storage(&stored, b"").await.unwrap(),
            (msg.to_vec(), false)
        );

        let stored = t.transform_to_storage(b"firstvalue", b"ctx").await.unwrap();
        assert_eq!(stored.len(), 24 + 16 + 10);
        assert_eq!(
            t.transform_from_storage(&stored, b"other").await.unwrap().0,
            b"firstvalue"
        );
        let other = Secretbox::new(&[0; 32]);
        assert_eq!(
            other
                .transform_from_storage(&stored, b"")
                .await
                .unwrap_err()
                .0,
            "output array was not large enough for encryption"
        );
        assert_eq!(
            t.transform_from_storage(&stored[..30], b"")
                .await
                .unwrap_err()
                .0,
            "the stored data was shorter than the required size"
        );
    }
}
