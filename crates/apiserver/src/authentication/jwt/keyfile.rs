//! Keys read from PEM files, as upstream's `keyutil` reads `--service-account-key-file` and
//! `--service-account-signing-key-file`: public keys (SPKI `PUBLIC KEY`, PKCS#1
//! `RSA PUBLIC KEY`, the key of a `CERTIFICATE`, or the public half of a private key) to verify
//! tokens, and one private key (RSA PKCS#1 or PKCS#8, ECDSA P-256 or P-384 in PKCS#8 or SEC1) to
//! sign them with RS256, ES256 or ES384.
//!
//! Also the key id upstream derives from a public key (base64url of the SHA-256 of its PKIX DER)
//! and the JWKS entries it serves for it.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, ECDSA_P384_SHA384_FIXED_SIGNING, EcdsaKeyPair, KeyPair,
    RSA_PKCS1_SHA256, RsaKeyPair,
};
use serde_json::{Value, json};
use x509_parser::prelude::FromDer;

use super::keys::{Jwk, PublicKey};

/// One PEM block: its label and decoded body.
fn pem_blocks(pem: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut out = Vec::new();
    let mut lines = pem.lines();
    while let Some(line) = lines.next() {
        let Some(label) = line
            .trim()
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
        else {
            continue;
        };
        let end = format!("-----END {label}-----");
        let mut body = String::new();
        let mut closed = false;
        for line in lines.by_ref() {
            if line.trim() == end {
                closed = true;
                break;
            }
            // Headers of encrypted PEM (`Proc-Type:`) are not supported, as upstream's.
            if !line.contains(':') {
                body.push_str(line.trim());
            }
        }
        if !closed {
            return Err(format!("PEM block {label:?} is not closed"));
        }
        let der = STANDARD
            .decode(body)
            .map_err(|e| format!("PEM block {label:?}: {e}"))?;
        out.push((label.to_string(), der));
    }
    Ok(out)
}

/// A DER element: tag, length, content.
fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const OID_EC: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];

impl PublicKey {
    /// The key's SubjectPublicKeyInfo DER (Go's `x509.MarshalPKIXPublicKey`).
    pub fn pkix_der(&self) -> Vec<u8> {
        let integer = |bytes: &[u8]| {
            let trimmed: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
            let mut content = trimmed;
            if content.first().is_none_or(|b| b & 0x80 != 0) {
                content.insert(0, 0);
            }
            der(0x02, &content)
        };
        let (algorithm, key) = match self {
            PublicKey::Rsa { n, e } => (
                [der(0x06, OID_RSA), der(0x05, &[])].concat(),
                der(0x30, &[integer(n), integer(e)].concat()),
            ),
            PublicKey::Ec { curve, point } => (
                [
                    der(0x06, OID_EC),
                    der(0x06, if curve == "P-384" { OID_P384 } else { OID_P256 }),
                ]
                .concat(),
                point.clone(),
            ),
        };
        let bits = [&[0u8][..], &key].concat();
        der(0x30, &[der(0x30, &algorithm), der(0x03, &bits)].concat())
    }

    /// Upstream's `keyIDFromPublicKey`.
    pub fn key_id(&self) -> String {
        URL_SAFE_NO_PAD.encode(ring::digest::digest(
            &ring::digest::SHA256,
            &self.pkix_der(),
        ))
    }

    /// The algorithm tokens signed with the matching private key use.
    pub fn algorithm(&self) -> &'static str {
        match self {
            PublicKey::Rsa { .. } => "RS256",
            PublicKey::Ec { curve, .. } if curve == "P-384" => "ES384",
            PublicKey::Ec { .. } => "ES256",
        }
    }

    /// The JWKS entry upstream serves for the key, in its field order.
    pub fn jwk_json(&self) -> Value {
        let kid = self.key_id();
        match self {
            PublicKey::Rsa { n, e } => json!({"use": "sig", "kty": "RSA", "kid": kid,
                "alg": "RS256", "n": URL_SAFE_NO_PAD.encode(n), "e": URL_SAFE_NO_PAD.encode(e)}),
            PublicKey::Ec { curve, point } => {
                let half = (point.len() - 1) / 2;
                json!({"use": "sig", "kty": "EC", "kid": kid, "crv": curve,
                    "alg": self.algorithm(),
                    "x": URL_SAFE_NO_PAD.encode(&point[1..1 + half]),
                    "y": URL_SAFE_NO_PAD.encode(&point[1 + half..])})
            }
        }
    }

    /// The key as a verifying JWK, with the key id upstream gives it.
    pub fn to_jwk(&self) -> Jwk {
        Jwk {
            kid: Some(self.key_id()),
            alg: None,
            key: self.clone(),
        }
    }
}

/// The public key of a SubjectPublicKeyInfo.
fn spki_key(spki: &x509_parser::x509::SubjectPublicKeyInfo<'_>) -> Result<PublicKey, String> {
    use x509_parser::public_key::PublicKey as Parsed;
    match spki
        .parsed()
        .map_err(|e| format!("parsing a public key: {e}"))?
    {
        Parsed::RSA(rsa) => Ok(PublicKey::Rsa {
            n: rsa
                .modulus
                .iter()
                .copied()
                .skip_while(|b| *b == 0)
                .collect(),
            e: rsa
                .exponent
                .iter()
                .copied()
                .skip_while(|b| *b == 0)
                .collect(),
        }),
        Parsed::EC(point) => {
            let curve = match point.data().len() {
                65 => "P-256",
                97 => "P-384",
                _ => return Err("unsupported elliptic curve".into()),
            };
            Ok(PublicKey::Ec {
                curve: curve.into(),
                point: point.data().to_vec(),
            })
        }
        _ => Err("unsupported public key type".into()),
    }
}

/// A private key, for signing.
pub enum SigningKey {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair, &'static str),
}

/// Wraps a SEC1 `EC PRIVATE KEY` into PKCS#8 for its curve (told by the private scalar's
/// length), which is the form ring reads.
fn sec1_to_pkcs8(sec1: &[u8]) -> Result<(Vec<u8>, &'static str), String> {
    // SEQUENCE { INTEGER 1, OCTET STRING d, ... }, with a short or one-byte long length.
    let body = match sec1 {
        [0x30, 0x81, _, rest @ ..] => rest,
        [0x30, len, rest @ ..] if *len < 0x80 => rest,
        _ => return Err("malformed EC private key".into()),
    };
    let scalar_len = match body {
        [0x02, 0x01, 0x01, 0x04, len, ..] => *len,
        _ => return Err("malformed EC private key".into()),
    };
    let (curve, name) = match scalar_len {
        32 => (OID_P256, "P-256"),
        48 => (OID_P384, "P-384"),
        _ => return Err("unsupported elliptic curve".into()),
    };
    let algorithm = der(0x30, &[der(0x06, OID_EC), der(0x06, curve)].concat());
    let pkcs8 = der(
        0x30,
        &[der(0x02, &[0]), algorithm, der(0x04, sec1)].concat(),
    );
    Ok((pkcs8, name))
}

impl SigningKey {
    fn from_block(label: &str, der: &[u8]) -> Result<SigningKey, String> {
        let rng = SystemRandom::new();
        let ec = |pkcs8: &[u8], curve: &str| -> Option<SigningKey> {
            match curve {
                "P-256" => EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8, &rng)
                    .ok()
                    .map(|k| SigningKey::Ec(k, "ES256")),
                _ => EcdsaKeyPair::from_pkcs8(&ECDSA_P384_SHA384_FIXED_SIGNING, pkcs8, &rng)
                    .ok()
                    .map(|k| SigningKey::Ec(k, "ES384")),
            }
        };
        match label {
            "RSA PRIVATE KEY" => RsaKeyPair::from_der(der)
                .map(SigningKey::Rsa)
                .map_err(|e| format!("reading an RSA private key: {e}")),
            "EC PRIVATE KEY" => {
                let (pkcs8, curve) = sec1_to_pkcs8(der)?;
                ec(&pkcs8, curve).ok_or_else(|| "reading an EC private key".to_string())
            }
            "PRIVATE KEY" => RsaKeyPair::from_pkcs8(der)
                .map(SigningKey::Rsa)
                .ok()
                .or_else(|| ec(der, "P-256"))
                .or_else(|| ec(der, "P-384"))
                .ok_or_else(|| "unsupported private key type (RSA, ECDSA P-256 or P-384)".into()),
            other => Err(format!("{other:?} is not a private key")),
        }
    }

    /// The first private key of a PEM file's content.
    pub fn from_pem(pem: &str) -> Result<SigningKey, String> {
        pem_blocks(pem)?
            .iter()
            .find(|(label, _)| label.ends_with("PRIVATE KEY"))
            .ok_or_else(|| "data does not contain a private key".to_string())
            .and_then(|(label, der)| SigningKey::from_block(label, der))
    }

    pub fn public_key(&self) -> PublicKey {
        match self {
            SigningKey::Rsa(k) => {
                let c = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(k.public());
                PublicKey::Rsa { n: c.n, e: c.e }
            }
            SigningKey::Ec(k, alg) => PublicKey::Ec {
                curve: if *alg == "ES384" { "P-384" } else { "P-256" }.into(),
                point: k.public_key().as_ref().to_vec(),
            },
        }
    }

    pub fn algorithm(&self) -> &'static str {
        match self {
            SigningKey::Rsa(_) => "RS256",
            SigningKey::Ec(_, alg) => alg,
        }
    }

    /// A compact JWS of `claims` with `kid` in its header.
    pub fn sign(&self, kid: &str, claims: &Value) -> Result<String, String> {
        let header = json!({"alg": self.algorithm(), "kid": kid});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let rng = SystemRandom::new();
        let signature = match self {
            SigningKey::Rsa(k) => {
                let mut sig = vec![0; k.public().modulus_len()];
                k.sign(&RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut sig)
                    .map_err(|e| format!("signing: {e}"))?;
                sig
            }
            SigningKey::Ec(k, _) => k
                .sign(&rng, input.as_bytes())
                .map_err(|e| format!("signing: {e}"))?
                .as_ref()
                .to_vec(),
        };
        Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }
}

/// Every public key of a PEM file's content (upstream `keyutil.ParsePublicKeysPEM`): public
/// keys, certificates' keys, and private keys' public halves.
pub fn public_keys_from_pem(pem: &str) -> Result<Vec<PublicKey>, String> {
    let mut keys = Vec::new();
    for (label, der) in pem_blocks(pem)? {
        let key = match label.as_str() {
            "PUBLIC KEY" => {
                let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(&der)
                    .map_err(|e| format!("parsing a public key: {e}"))?;
                spki_key(&spki)?
            }
            "CERTIFICATE" => {
                let (_, cert) = x509_parser::parse_x509_certificate(&der)
                    .map_err(|e| format!("parsing a certificate: {e}"))?;
                spki_key(cert.public_key())?
            }
            "RSA PUBLIC KEY" => {
                let spki = der_spki_of_pkcs1(&der);
                let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(&spki)
                    .map_err(|e| format!("parsing an RSA public key: {e}"))?;
                spki_key(&spki)?
            }
            l if l.ends_with("PRIVATE KEY") => SigningKey::from_block(l, &der)?.public_key(),
            _ => continue,
        };
        keys.push(key);
    }
    if keys.is_empty() {
        return Err("data does not contain any valid RSA or ECDSA public keys".into());
    }
    Ok(keys)
}

/// A PKCS#1 RSAPublicKey wrapped as a SubjectPublicKeyInfo.
fn der_spki_of_pkcs1(pkcs1: &[u8]) -> Vec<u8> {
    let algorithm = der(0x30, &[der(0x06, OID_RSA), der(0x05, &[])].concat());
    let bits = [&[0u8][..], pkcs1].concat();
    der(0x30, &[algorithm, der(0x03, &bits)].concat())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authentication::jwt::keys::Jws;

    fn pem(label: &str, der: &[u8]) -> String {
        format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            STANDARD.encode(der)
        )
    }

    #[test]
    fn ec_keys_sign_and_their_public_halves_verify() {
        let rng = SystemRandom::new();
        for (alg, curve) in [
            (&ECDSA_P256_SHA256_FIXED_SIGNING, "ES256"),
            (&ECDSA_P384_SHA384_FIXED_SIGNING, "ES384"),
        ] {
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
            let key = SigningKey::from_pem(&pem("PRIVATE KEY", pkcs8.as_ref())).unwrap();
            assert_eq!(key.algorithm(), curve);
            let public = key.public_key();
            let token = key.sign(&public.key_id(), &json!({"sub": "x"})).unwrap();
            assert!(Jws::parse(&token).unwrap().verify(&[public.to_jwk()]));
            // The SPKI this module writes is one x509-parser reads back to the same key.
            let again = public_keys_from_pem(&pem("PUBLIC KEY", &public.pkix_der())).unwrap();
            assert_eq!(again, std::slice::from_ref(&public));
            assert_eq!(public.jwk_json()["kid"], public.key_id());
        }
    }

    #[test]
    fn the_p256_key_id_is_upstreams() {
        // The key id of a P-256 key is the SHA-256 of its 91-byte SPKI, whose prefix is fixed.
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let public = SigningKey::from_pem(&pem("PRIVATE KEY", pkcs8.as_ref()))
            .unwrap()
            .public_key();
        let spki = public.pkix_der();
        assert_eq!(spki.len(), 91);
        assert_eq!(
            &spki[..26],
            [
                0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06,
                0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00
            ]
        );
        assert!(public_keys_from_pem("nothing here").is_err());
        assert!(SigningKey::from_pem(&pem("PUBLIC KEY", &spki)).is_err());
    }
}
