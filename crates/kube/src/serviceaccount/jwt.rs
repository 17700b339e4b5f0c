//! Service-account JSON Web Tokens signed with ES256 (upstream: pkg/serviceaccount/jwt.go, with
//! go-jose): the compact form, the key id upstream derives from the public key, signature
//! checks, and the JWKS document that `/openid/v1/jwks` serves.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair,
    UnparsedPublicKey,
};
use serde_json::{Value, json};

/// The DER prefix of a P-256 SubjectPublicKeyInfo, before the 65-byte uncompressed point.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The body of a PEM block, decoded.
fn pem_der(pem: &str) -> Result<Vec<u8>, String> {
    let body: String = pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .map(str::trim)
        .collect();
    STANDARD
        .decode(body)
        .map_err(|e| format!("decoding the signing key: {e}"))
}

/// A signing key and what is derived from it.
pub struct Signer {
    key: EcdsaKeyPair,
    rng: SystemRandom,
    pub key_id: String,
}

impl Signer {
    /// From a PKCS#8 PEM of an ECDSA P-256 key.
    pub fn from_pkcs8_pem(pem: &str) -> Result<Signer, String> {
        let rng = SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pem_der(pem)?, &rng)
            .map_err(|e| format!("reading the service-account signing key: {e}"))?;
        let key_id = key_id(key.public_key().as_ref());
        Ok(Signer { key, rng, key_id })
    }

    /// The uncompressed public point, for verifiers.
    pub fn public_point(&self) -> Vec<u8> {
        self.key.public_key().as_ref().to_vec()
    }

    /// `header.claims.signature`, base64url without padding.
    pub fn sign(&self, claims: &Value) -> Result<String, String> {
        let header = json!({"alg": "ES256", "kid": self.key_id});
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self
            .key
            .sign(&self.rng, signing_input.as_bytes())
            .map_err(|e| format!("signing: {e}"))?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        ))
    }
}

/// Upstream's `keyIDFromPublicKey`: base64url of the SHA-256 of the key's PKIX DER.
pub fn key_id(point: &[u8]) -> String {
    let mut der = P256_SPKI_PREFIX.to_vec();
    der.extend_from_slice(point);
    URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, &der))
}

/// A token split and decoded, not yet trusted.
pub struct Parsed {
    pub header: Value,
    pub claims: Value,
    signing_input: String,
    signature: Vec<u8>,
}

/// Splits a compact JWS; `None` when it is not one (so another authenticator may try).
pub fn parse(token: &str) -> Option<Parsed> {
    let mut parts = token.split('.');
    let (h, c, s) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let decode = |p: &str| URL_SAFE_NO_PAD.decode(p.trim_end_matches('=')).ok();
    let header: Value = serde_json::from_slice(&decode(h)?).ok()?;
    let claims: Value = serde_json::from_slice(&decode(c)?).ok()?;
    Some(Parsed {
        header,
        claims,
        signing_input: format!("{h}.{c}"),
        signature: decode(s)?,
    })
}

impl Parsed {
    /// Whether one of `points` (P-256 public keys) signed the token with ES256.
    pub fn verify(&self, points: &[Vec<u8>]) -> bool {
        if self.header.get("alg").and_then(Value::as_str) != Some("ES256") {
            return false;
        }
        points.iter().any(|p| {
            UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, p)
                .verify(self.signing_input.as_bytes(), &self.signature)
                .is_ok()
        })
    }
}

/// The JWKS document of the verifying keys (go-jose's fields).
pub fn jwks(points: &[Vec<u8>]) -> Value {
    let keys: Vec<Value> = points
        .iter()
        .filter(|p| p.len() == 65 && p[0] == 4)
        .map(|p| {
            json!({
                "use": "sig",
                "kty": "EC",
                "kid": key_id(p),
                "crv": "P-256",
                "alg": "ES256",
                "x": URL_SAFE_NO_PAD.encode(&p[1..33]),
                "y": URL_SAFE_NO_PAD.encode(&p[33..65]),
            })
        })
        .collect();
    json!({"keys": keys})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> Signer {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            STANDARD.encode(pkcs8.as_ref())
        );
        Signer::from_pkcs8_pem(&pem).unwrap()
    }

    #[test]
    fn tokens_verify_with_their_key_only() {
        let a = signer();
        let b = signer();
        let token = a.sign(&json!({"sub": "x"})).unwrap();
        let parsed = parse(&token).unwrap();
        assert_eq!(parsed.header["kid"], a.key_id.as_str());
        assert_eq!(parsed.claims["sub"], "x");
        assert!(parsed.verify(&[a.public_point()]));
        assert!(!parsed.verify(&[b.public_point()]));
        // A changed payload no longer verifies.
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged = URL_SAFE_NO_PAD.encode(json!({"sub": "y"}).to_string());
        parts[1] = &forged;
        assert!(!parse(&parts.join(".")).unwrap().verify(&[a.public_point()]));
        assert!(parse("not-a-jwt").is_none());
        let jwks = jwks(&[a.public_point()]);
        assert_eq!(jwks["keys"][0]["kid"], a.key_id.as_str());
        assert_eq!(jwks["keys"][0]["x"].as_str().unwrap().len(), 43);
    }
}
