//! Compact JSON Web Signatures and the JSON Web Keys that verify them (upstream: go-jose as
//! go-oidc uses it): splitting a token without trusting it, reading a JWKS document, and checking
//! a signature with the algorithms upstream accepts.
//!
//! This module must not decide whether a token's claims are acceptable (issuer, audience,
//! expiry): that is the authenticator's. ring verifies every algorithm of upstream's list but
//! ES512 (P-521), which RustCrypto's `p521` verifies.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{self, UnparsedPublicKey, VerificationAlgorithm};
use serde_json::Value;

/// Every algorithm upstream's `AllValidSigningAlgorithms` lists, in its order.
pub const ALL_ALGORITHMS: &[&str] = &[
    "ES256", "ES384", "ES512", "PS256", "PS384", "PS512", "RS256", "RS384", "RS512",
];

/// A token split and decoded, not yet trusted.
#[derive(Debug)]
pub struct Jws {
    pub header: Value,
    pub claims: Value,
    signing_input: String,
    signature: Vec<u8>,
}

impl Jws {
    /// Splits a compact JWS (`header.payload.signature`, base64url); the error is why it is not
    /// one, in go-jose's spirit.
    pub fn parse(token: &str) -> Result<Jws, String> {
        if token.trim_start().starts_with('{') {
            return Err("token is not compact JWT".into());
        }
        let parts: Vec<&str> = token.split('.').collect();
        let [h, c, s] = parts[..] else {
            return Err("malformed token".into());
        };
        let decode = |p: &str| {
            URL_SAFE_NO_PAD
                .decode(p)
                .map_err(|e| format!("error decoding token: {e}"))
        };
        let header: Value = serde_json::from_slice(&decode(h)?)
            .map_err(|e| format!("while unmarshaling token header: {e}"))?;
        let claims: Value = serde_json::from_slice(&decode(c)?)
            .map_err(|e| format!("while unmarshaling token: {e}"))?;
        if !header.is_object() || !claims.is_object() {
            return Err("malformed token".into());
        }
        Ok(Jws {
            header,
            claims,
            signing_input: format!("{h}.{c}"),
            signature: decode(s)?,
        })
    }

    pub fn algorithm(&self) -> &str {
        self.header.get("alg").and_then(Value::as_str).unwrap_or("")
    }

    pub fn key_id(&self) -> Option<&str> {
        self.header.get("kid").and_then(Value::as_str)
    }

    /// Whether one of `keys` signed the token with its algorithm: keys with the token's key id
    /// when it names one (go-oidc's remote key set), else every key.
    pub fn verify(&self, keys: &[Jwk]) -> bool {
        let alg = self.algorithm();
        keys.iter()
            .filter(|k| self.key_id().is_none() || k.kid.as_deref() == self.key_id())
            .filter(|k| k.alg.as_deref().is_none_or(|a| a == alg))
            .any(|k| k.verify(alg, self.signing_input.as_bytes(), &self.signature))
    }
}

/// The public part of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PublicKey {
    /// Modulus and exponent, big-endian.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// A curve (`P-256`, `P-384`, `P-521`) and its uncompressed point `04 || x || y`.
    Ec { curve: String, point: Vec<u8> },
}

/// One key of a JWKS document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jwk {
    pub kid: Option<String>,
    /// The algorithm the key is for, when the document says so.
    pub alg: Option<String>,
    pub key: PublicKey,
}

impl Jwk {
    /// Whether this key signed `msg` with the JWS algorithm `alg`: the key's type and curve must
    /// be the algorithm's.
    fn verify(&self, alg: &str, msg: &[u8], sig: &[u8]) -> bool {
        match &self.key {
            PublicKey::Rsa { n, e } => {
                let params: &signature::RsaParameters = match alg {
                    "RS256" => &signature::RSA_PKCS1_2048_8192_SHA256,
                    "RS384" => &signature::RSA_PKCS1_2048_8192_SHA384,
                    "RS512" => &signature::RSA_PKCS1_2048_8192_SHA512,
                    "PS256" => &signature::RSA_PSS_2048_8192_SHA256,
                    "PS384" => &signature::RSA_PSS_2048_8192_SHA384,
                    "PS512" => &signature::RSA_PSS_2048_8192_SHA512,
                    _ => return false,
                };
                signature::RsaPublicKeyComponents { n, e }
                    .verify(params, msg, sig)
                    .is_ok()
            }
            PublicKey::Ec { curve, point } => {
                let algorithm: &'static dyn VerificationAlgorithm = match (curve.as_str(), alg) {
                    ("P-256", "ES256") => &signature::ECDSA_P256_SHA256_FIXED,
                    ("P-384", "ES384") => &signature::ECDSA_P384_SHA384_FIXED,
                    ("P-521", "ES512") => return verify_es512(point, msg, sig),
                    _ => return false,
                };
                UnparsedPublicKey::new(algorithm, point)
                    .verify(msg, sig)
                    .is_ok()
            }
        }
    }
}

/// An ES512 signature (`r || s`, 66 bytes each, SHA-512 of the message) by the P-521 key
/// `point`.
fn verify_es512(point: &[u8], msg: &[u8], sig: &[u8]) -> bool {
    use p521::ecdsa::signature::Verifier;
    let Ok(key) = p521::ecdsa::VerifyingKey::from_sec1_bytes(point) else {
        return false;
    };
    let Ok(sig) = p521::ecdsa::Signature::from_slice(sig) else {
        return false;
    };
    key.verify(msg, &sig).is_ok()
}

/// The keys of a JWKS document (`{"keys": [...]}`). Keys of other types or curves, and keys
/// marked for encryption (`"use": "enc"`), are skipped, as go-jose cannot use them to verify.
pub fn parse_jwks(doc: &Value) -> Result<Vec<Jwk>, String> {
    let Some(keys) = doc.get("keys").and_then(Value::as_array) else {
        return Err("JWKS document has no keys".into());
    };
    let b64 = |k: &Value, f: &str| {
        k.get(f)
            .and_then(Value::as_str)
            .and_then(|s| URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).ok())
    };
    let mut out = Vec::new();
    for k in keys {
        if k.get("use").and_then(Value::as_str) == Some("enc") {
            continue;
        }
        let key = match k.get("kty").and_then(Value::as_str) {
            Some("RSA") => match (b64(k, "n"), b64(k, "e")) {
                (Some(n), Some(e)) => PublicKey::Rsa { n, e },
                _ => continue,
            },
            Some("EC") => {
                let curve = k.get("crv").and_then(Value::as_str).unwrap_or("");
                let size = match curve {
                    "P-256" => 32,
                    "P-384" => 48,
                    "P-521" => 66,
                    _ => continue,
                };
                match (b64(k, "x"), b64(k, "y")) {
                    (Some(x), Some(y)) if x.len() == size && y.len() == size => {
                        let mut point = vec![4u8];
                        point.extend(x);
                        point.extend(y);
                        PublicKey::Ec {
                            curve: curve.to_string(),
                            point,
                        }
                    }
                    _ => continue,
                }
            }
            _ => continue,
        };
        out.push(Jwk {
            kid: k.get("kid").and_then(Value::as_str).map(str::to_string),
            alg: k.get("alg").and_then(Value::as_str).map(str::to_string),
            key,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
    use serde_json::json;

    fn es256_key() -> EcdsaKeyPair {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap()
    }

    fn sign(key: &EcdsaKeyPair, header: Value, claims: Value) -> String {
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let sig = key.sign(&SystemRandom::new(), input.as_bytes()).unwrap();
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
    }

    fn jwk(key: &EcdsaKeyPair, kid: &str) -> Value {
        let p = key.public_key().as_ref();
        json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
               "x": URL_SAFE_NO_PAD.encode(&p[1..33]), "y": URL_SAFE_NO_PAD.encode(&p[33..])})
    }

    #[test]
    fn verifies_with_the_named_key_only() {
        let (a, b) = (es256_key(), es256_key());
        let keys = parse_jwks(&json!({"keys": [jwk(&a, "a"), jwk(&b, "b"),
            {"kty": "oct", "k": "c2VjcmV0"}]}))
        .unwrap();
        assert_eq!(keys.len(), 2);
        let token = sign(&a, json!({"alg": "ES256", "kid": "a"}), json!({"sub": "x"}));
        let jws = Jws::parse(&token).unwrap();
        assert!(jws.verify(&keys));
        // The same signature under another key id finds no key that verifies.
        let wrong_kid = sign(&a, json!({"alg": "ES256", "kid": "b"}), json!({"sub": "x"}));
        assert!(!Jws::parse(&wrong_kid).unwrap().verify(&keys));
        // Without a key id every key is tried.
        let no_kid = sign(&a, json!({"alg": "ES256"}), json!({"sub": "x"}));
        assert!(Jws::parse(&no_kid).unwrap().verify(&keys));
        // An algorithm the key does not fit, or none at all, never verifies.
        let none = sign(&a, json!({"alg": "none"}), json!({"sub": "x"}));
        assert!(!Jws::parse(&none).unwrap().verify(&keys));
        let rs = sign(&a, json!({"alg": "RS256", "kid": "a"}), json!({"sub": "x"}));
        assert!(!Jws::parse(&rs).unwrap().verify(&keys));
        // A changed payload no longer verifies.
        let mut parts: Vec<String> = token.split('.').map(str::to_string).collect();
        parts[1] = URL_SAFE_NO_PAD.encode(json!({"sub": "y"}).to_string());
        assert!(!Jws::parse(&parts.join(".")).unwrap().verify(&keys));
    }

    #[test]
    fn es512_tokens_verify_with_p521_keys() {
        use p521::ecdsa::signature::Signer;
        let secret = p521::SecretKey::from_slice(&[1u8; 66]).unwrap();
        let signing = p521::ecdsa::SigningKey::from(&secret);
        let point = signing.verifying_key().to_sec1_point(false);
        let point = point.as_bytes();
        let p521_jwk = json!({"kty": "EC", "crv": "P-521", "kid": "p", "alg": "ES512",
            "x": URL_SAFE_NO_PAD.encode(&point[1..67]), "y": URL_SAFE_NO_PAD.encode(&point[67..])});
        let keys = parse_jwks(&json!({"keys": [p521_jwk]})).unwrap();
        assert_eq!(keys.len(), 1);
        let sign = |header: Value, claims: Value| {
            let input = format!(
                "{}.{}",
                URL_SAFE_NO_PAD.encode(header.to_string()),
                URL_SAFE_NO_PAD.encode(claims.to_string())
            );
            let sig: p521::ecdsa::Signature = signing.sign(input.as_bytes());
            format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.to_bytes()))
        };
        let token = sign(json!({"alg": "ES512", "kid": "p"}), json!({"sub": "x"}));
        assert!(Jws::parse(&token).unwrap().verify(&keys));
        // A changed payload, or the signature claimed under another algorithm, fails.
        let mut parts: Vec<String> = token.split('.').map(str::to_string).collect();
        parts[1] = URL_SAFE_NO_PAD.encode(json!({"sub": "y"}).to_string());
        assert!(!Jws::parse(&parts.join(".")).unwrap().verify(&keys));
        let es384 = sign(json!({"alg": "ES384", "kid": "p"}), json!({"sub": "x"}));
        assert!(!Jws::parse(&es384).unwrap().verify(&keys));
        // A P-256 key never verifies an ES512 token.
        let other = es256_key();
        let p256 = parse_jwks(&json!({"keys": [jwk(&other, "p")]})).unwrap();
        assert!(!Jws::parse(&token).unwrap().verify(&p256));
    }

    #[test]
    fn malformed_tokens_are_told_apart() {
        assert_eq!(Jws::parse("a.b").unwrap_err(), "malformed token");
        assert_eq!(
            Jws::parse("{\"a\":1}").unwrap_err(),
            "token is not compact JWT"
        );
        assert!(
            Jws::parse("!!.e30.")
                .unwrap_err()
                .starts_with("error decoding token")
        );
        // A payload that is not a JSON object.
        let p = URL_SAFE_NO_PAD.encode("[1]");
        assert_eq!(
            Jws::parse(&format!("e30.{p}.")).unwrap_err(),
            "malformed token"
        );
    }
}
