//! The cost of authenticating one bearer token: a JWT checked in full (signature by the
//! issuer's key — ES256 or RS256 —, expiry, audience, claims mapped by CEL expressions) and the
//! same token answered by the token cache, as every request after the first is for 10 s. Run with
//! `cargo bench -p apiserver --bench token_authn`; prints the median and p99 of per-token times,
//! each measured over a batch of 200 tokens.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use apiserver::authentication::jwt::keyfile::SigningKey;
use apiserver::authentication::jwt::{JwtAuthenticator, JwtAuthenticators, config};
use serde_json::json;

const BATCH: u32 = 200;
const BATCHES: usize = 101;

/// A PEM private key: ES256 generated here, RS256 from `openssl` (ring cannot make RSA keys).
fn key(alg: &str) -> SigningKey {
    use base64::Engine;
    let pem = if alg == "ES256" {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = ring::signature::EcdsaKeyPair::generate_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &rng,
        )
        .unwrap();
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref())
        )
    } else {
        let out = std::process::Command::new("openssl")
            .args(["genrsa", "-traditional", "2048"])
            .output()
            .expect("the RS256 case needs the openssl command");
        String::from_utf8(out.stdout).unwrap()
    };
    SigningKey::from_pem(&pem).unwrap()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let c = config::parse(
        r#"
apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer: {url: "https://issuer.example", audiences: [k8s]}
  claimMappings:
    username: {expression: "'oidc:' + claims.sub"}
    groups: {expression: "claims.groups"}
"#,
    )
    .unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for alg in ["ES256", "RS256"] {
        let key = key(alg);
        let public = key.public_key();
        let issuer = JwtAuthenticator::new(&c.jwt[0], &[alg.to_string()]).unwrap();
        issuer.preload_keys(vec![public.to_jwk()]);
        // No cache: every token checked in full.
        let uncached = JwtAuthenticators::new(vec![issuer], Duration::ZERO);
        let tokens: Vec<String> = (0..BATCH)
            .map(|i| {
                key.sign(
                    &public.key_id(),
                    &json!({"iss": "https://issuer.example", "aud": "k8s", "sub": format!("user-{i}"),
                            "groups": ["devs", "ops"], "exp": now + 3600, "iat": now}),
                )
                .unwrap()
            })
            .collect();
        let issuer = JwtAuthenticator::new(&c.jwt[0], &[alg.to_string()]).unwrap();
        issuer.preload_keys(vec![public.to_jwk()]);
        let cached = JwtAuthenticators::new(vec![issuer], Duration::from_secs(3600));
        for (what, authn) in [("full check", &uncached), ("token cache hit", &cached)] {
            let run = |t: &String| runtime.block_on(authn.authenticate_token(t));
            for t in &tokens {
                assert!(run(t).unwrap().unwrap().name.starts_with("oidc:user-"));
            }
            let mut per_token: Vec<f64> = (0..BATCHES)
                .map(|_| {
                    let start = Instant::now();
                    for t in &tokens {
                        std::hint::black_box(run(t).unwrap());
                    }
                    start.elapsed().as_nanos() as f64 / f64::from(BATCH)
                })
                .collect();
            per_token.sort_by(f64::total_cmp);
            println!(
                "{alg} {what:20} median {:8.0} ns   p99 {:8.0} ns",
                per_token[BATCHES / 2],
                per_token[BATCHES * 99 / 100]
            );
        }
    }
}
