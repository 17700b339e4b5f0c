//! Authentication and authorization by services the tests run on loopback: an OpenID issuer
//! (discovery document and keys) whose ID tokens log users in through the `--oidc-*` flags and
//! through `--authentication-config` claim mappings in CEL; a TokenReview webhook; and a
//! SubjectAccessReview webhook in front of RBAC through `--authorization-config`. kubectl is
//! the client throughout.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::Server;
use common::hook_server::{HookServer, Reply};
use serde_json::{Value, json};

/// A signing key of the test issuer.
enum Key {
    Rsa(ring::signature::RsaKeyPair),
    Ec(ring::signature::EcdsaKeyPair),
}

impl Key {
    /// An RSA key made by the openssl command (ring cannot generate RSA keys), in its PKCS#1
    /// DER form.
    fn rsa(dir: &std::path::Path) -> Key {
        let path = dir.join(format!("rsa-{}.der", std::process::id()));
        let out = std::process::Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
            ])
            .args(["-outform", "DER", "-out"])
            .arg(&path)
            .output()
            .expect("this test needs the openssl command (scripts/test.sh installs it)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let der = std::fs::read(&path).unwrap();
        Key::Rsa(ring::signature::RsaKeyPair::from_der(&der).unwrap())
    }

    fn ec() -> Key {
        use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        Key::Ec(
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
                .unwrap(),
        )
    }

    fn alg(&self) -> &'static str {
        match self {
            Key::Rsa(_) => "RS256",
            Key::Ec(_) => "ES256",
        }
    }

    fn jwk(&self, kid: &str) -> Value {
        use ring::signature::KeyPair;
        match self {
            Key::Rsa(k) => {
                let c = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(k.public());
                json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                    "n": URL_SAFE_NO_PAD.encode(&c.n), "e": URL_SAFE_NO_PAD.encode(&c.e)})
            }
            Key::Ec(k) => {
                let p = k.public_key().as_ref();
                json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
                    "x": URL_SAFE_NO_PAD.encode(&p[1..33]), "y": URL_SAFE_NO_PAD.encode(&p[33..])})
            }
        }
    }

    fn sign(&self, kid: &str, claims: &Value) -> String {
        let header = json!({"alg": self.alg(), "kid": kid, "typ": "JWT"});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let rng = ring::rand::SystemRandom::new();
        let sig = match self {
            Key::Rsa(k) => {
                let mut sig = vec![0; k.public().modulus_len()];
                k.sign(
                    &ring::signature::RSA_PKCS1_SHA256,
                    &rng,
                    input.as_bytes(),
                    &mut sig,
                )
                .unwrap();
                sig
            }
            Key::Ec(k) => k.sign(&rng, input.as_bytes()).unwrap().as_ref().to_vec(),
        };
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig))
    }
}

/// An OpenID issuer on loopback: `/.well-known/openid-configuration` and `/keys`, and
/// `/groups`, a distributed claims source answering its JWT to the bearer of its access token.
struct Issuer {
    server: HookServer,
    url: String,
    key: Key,
    fetches: Arc<AtomicUsize>,
    /// The access token `/groups` wants and the JWT it answers.
    distributed: Arc<Mutex<Option<(String, String)>>>,
}

impl Issuer {
    fn start(key: Key) -> Issuer {
        let url_cell: Arc<OnceLock<String>> = Arc::default();
        let jwks = Arc::new(Mutex::new(json!({"keys": [key.jwk("k1")]})));
        let fetches = Arc::new(AtomicUsize::new(0));
        let distributed: Arc<Mutex<Option<(String, String)>>> = Arc::default();
        let (cell, keys, count) = (url_cell.clone(), jwks.clone(), fetches.clone());
        let source = distributed.clone();
        let server = HookServer::start(
            &[],
            Arc::new(move |path: &str, body: Value| {
                let url = cell.get().cloned().unwrap_or_default();
                match path {
                    "/.well-known/openid-configuration" => Reply::json(&json!({
                        "issuer": url, "jwks_uri": format!("{url}/keys"),
                        "id_token_signing_alg_values_supported": ["RS256", "ES256"]})),
                    "/keys" => {
                        count.fetch_add(1, Ordering::SeqCst);
                        Reply::json(&keys.lock().unwrap())
                    }
                    "/groups" => match &*source.lock().unwrap() {
                        Some((token, jwt))
                            if body["authorization"] == format!("Bearer {token}") =>
                        {
                            Reply {
                                status: 200,
                                body: jwt.clone().into_bytes(),
                                delay: Duration::ZERO,
                            }
                        }
                        _ => Reply {
                            status: 401,
                            body: b"{}".to_vec(),
                            delay: Duration::ZERO,
                        },
                    },
                    _ => Reply {
                        status: 404,
                        body: b"{}".to_vec(),
                        delay: Duration::ZERO,
                    },
                }
            }),
        );
        let url = format!("https://127.0.0.1:{}", server.port);
        url_cell.set(url.clone()).unwrap();
        Issuer {
            server,
            url,
            key,
            fetches,
            distributed,
        }
    }

    fn ca_file(&self, dir: &std::path::Path) -> String {
        let path = dir.join("issuer-ca.pem");
        std::fs::write(&path, &self.server.ca_pem).unwrap();
        path.display().to_string()
    }

    /// A token of this issuer for `aud`, valid for an hour unless `claims` says otherwise.
    fn token(&self, aud: &str, claims: Value) -> String {
        let mut all = json!({"iss": self.url, "aud": aud, "iat": now(), "exp": now() + 3600});
        for (k, v) in claims.as_object().unwrap() {
            all[k] = v.clone();
        }
        self.key.sign("k1", &all)
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Waits until `check` holds (RBAC's index follows its watch).
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} never happened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

const UNAUTHORIZED: &str = "error: You must be logged in to the server (Unauthorized)";

#[test]
fn oidc_flags_log_users_in_with_rs256_tokens_and_refuse_bad_ones() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = Issuer::start(Key::rsa(dir.path()));
    let ca = issuer.ca_file(dir.path());
    let flags = [
        format!("--oidc-issuer-url={}", issuer.url),
        "--oidc-client-id=kubernetes".into(),
        format!("--oidc-ca-file={ca}"),
        "--oidc-username-claim=email".into(),
        "--oidc-groups-claim=groups".into(),
        "--oidc-groups-prefix=oidc:".into(),
        "--oidc-required-claim=hd=example.com".into(),
    ];
    let s = Server::start_with(&flags.iter().map(String::as_str).collect::<Vec<_>>());
    let claims = json!({"sub": "1234", "email": "ann@example.com", "email_verified": true,
                        "groups": ["devs", "ops"], "hd": "example.com", "jti": "abc"});
    let token = issuer.token("kubernetes", claims.clone());
    let user = s.whoami(&token).user.unwrap();
    assert_eq!(user["username"], "ann@example.com");
    assert_eq!(
        user["groups"],
        json!(["oidc:devs", "oidc:ops", "system:authenticated"])
    );
    assert_eq!(
        user["extra"]["authentication.kubernetes.io/credential-id"],
        json!(["JTI=abc"])
    );

    // RBAC judges the user like any other: nothing until the group is bound.
    let denied = s.kubectl_with_token(&token, &["get", "pods", "-n", "default"]);
    assert_eq!(
        String::from_utf8_lossy(&denied.stderr).trim(),
        r#"Error from server (Forbidden): pods is forbidden: User "ann@example.com" cannot list resource "pods" in API group "" in the namespace "default""#
    );
    s.kubectl(&[
        "create",
        "clusterrolebinding",
        "oidc-devs",
        "--clusterrole=view",
        "--group=oidc:devs",
    ]);
    eventually("the group's binding", || {
        s.kubectl_with_token(&token, &["get", "pods", "-n", "default"])
            .status
            .success()
    });

    // Bad tokens: 401, and nobody is logged in.
    let mut bad = vec![
        (
            "expired",
            issuer.token("kubernetes", {
                let mut c = claims.clone();
                c["exp"] = json!(now() - 60);
                c
            }),
        ),
        (
            "wrong audience",
            issuer.token("someone-else", claims.clone()),
        ),
        (
            "malformed",
            format!("{}.x", issuer.token("kubernetes", claims.clone())),
        ),
        (
            "missing required claim",
            issuer.token("kubernetes", {
                let mut c = claims.clone();
                c["hd"] = json!("evil.com");
                c
            }),
        ),
        (
            "unverified email",
            issuer.token("kubernetes", {
                let mut c = claims.clone();
                c["email_verified"] = json!(false);
                c
            }),
        ),
    ];
    // Signed by a key the issuer does not publish, under the published key id.
    let forger = Key::rsa(dir.path());
    let mut forged_claims = claims.clone();
    forged_claims["iss"] = json!(issuer.url);
    forged_claims["aud"] = json!("kubernetes");
    forged_claims["exp"] = json!(now() + 3600);
    bad.push(("wrongly signed", forger.sign("k1", &forged_claims)));
    for (what, token) in &bad {
        assert_eq!(s.whoami(token).user.unwrap_err(), UNAUTHORIZED, "{what}");
    }
    // The forged token made the server look for new keys once at most, not on every try.
    assert!(issuer.fetches.load(Ordering::SeqCst) <= 2);
}

#[test]
fn a_distributed_groups_claim_is_fetched_from_its_source_with_the_access_token() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = Issuer::start(Key::ec());
    let ca = issuer.ca_file(dir.path());
    let flags = [
        format!("--oidc-issuer-url={}", issuer.url),
        "--oidc-client-id=kubernetes".into(),
        format!("--oidc-ca-file={ca}"),
        "--oidc-signing-algs=ES256".into(),
        "--oidc-username-claim=sub".into(),
        "--oidc-username-prefix=-".into(),
        "--oidc-groups-claim=groups".into(),
        "--oidc-groups-prefix=oidc:".into(),
    ];
    let s = Server::start_with(&flags.iter().map(String::as_str).collect::<Vec<_>>());
    // The source answers a JWT of the issuer carrying the groups, to the right bearer only.
    *issuer.distributed.lock().unwrap() = Some((
        "access-1".into(),
        issuer.token("kubernetes", json!({"groups": ["devs", "ops"]})),
    ));
    let distributed = |access_token: &str| {
        issuer.token(
            "kubernetes",
            json!({"sub": "dee",
                   "_claim_names": {"groups": "src1"},
                   "_claim_sources": {"src1": {"endpoint": format!("{}/groups", issuer.url),
                                               "access_token": access_token}}}),
        )
    };
    let user = s.whoami(&distributed("access-1")).user.unwrap();
    assert_eq!(user["username"], "dee");
    assert_eq!(
        user["groups"],
        json!(["oidc:devs", "oidc:ops", "system:authenticated"])
    );
    // A source that refuses the access token: nobody is logged in.
    assert_eq!(
        s.whoami(&distributed("wrong")).user.unwrap_err(),
        UNAUTHORIZED
    );
    // A claim in the token itself wins over its source.
    let mut claims = json!({"sub": "dee", "groups": ["own"],
        "_claim_names": {"groups": "src1"},
        "_claim_sources": {"src1": {"endpoint": format!("{}/groups", issuer.url),
                                    "access_token": "wrong"}}});
    let user = s
        .whoami(&issuer.token("kubernetes", claims.clone()))
        .user
        .unwrap();
    assert_eq!(user["groups"], json!(["oidc:own", "system:authenticated"]));
    // A source the token names but does not describe is refused.
    claims.as_object_mut().unwrap().remove("groups");
    claims["_claim_sources"] = json!({});
    assert_eq!(
        s.whoami(&issuer.token("kubernetes", claims))
            .user
            .unwrap_err(),
        UNAUTHORIZED
    );
    // The source's JWT must be for one of the audiences.
    *issuer.distributed.lock().unwrap() = Some((
        "access-2".into(),
        issuer.token("someone-else", json!({"groups": ["devs"]})),
    ));
    assert_eq!(
        s.whoami(&distributed("access-2")).user.unwrap_err(),
        UNAUTHORIZED
    );
}

#[test]
fn authentication_config_maps_claims_with_cel_and_validates_them() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = Issuer::start(Key::ec());
    let config = dir.path().join("authn.yaml");
    let ca = issuer
        .server
        .ca_pem
        .lines()
        .map(|l| format!("      {l}"))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(
        &config,
        format!(
            r#"apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: {url}
    audiences: [ironplane, other]
    audienceMatchPolicy: MatchAny
    certificateAuthority: |
{ca}
  claimValidationRules:
  - expression: "claims.tenant == 'acme'"
    message: wrong tenant
  claimMappings:
    username:
      expression: "'acme:' + claims.preferred_username"
    groups:
      expression: "claims.roles.map(r, 'role:' + r)"
    uid:
      claim: sub
    extra:
    - key: acme.example/tenant
      valueExpression: claims.tenant
  userValidationRules:
  - expression: "!user.username.startsWith('acme:system')"
    message: reserved name
anonymous:
  enabled: true
  conditions:
  - path: /livez
"#,
            url = issuer.url
        ),
    )
    .unwrap();
    let flag = format!("--authentication-config={}", config.display());
    let s = Server::start_with(&[&flag]);
    let claims = json!({"sub": "u-42", "preferred_username": "bob", "tenant": "acme",
                        "roles": ["admin", "dev"]});
    let user = s
        .whoami(&issuer.token("other", claims.clone()))
        .user
        .unwrap();
    assert_eq!(user["username"], "acme:bob");
    assert_eq!(user["uid"], "u-42");
    assert_eq!(
        user["groups"],
        json!(["role:admin", "role:dev", "system:authenticated"])
    );
    assert_eq!(user["extra"]["acme.example/tenant"], json!(["acme"]));
    let mut c = claims.clone();
    c["tenant"] = json!("globex");
    assert_eq!(
        s.whoami(&issuer.token("ironplane", c)).user.unwrap_err(),
        UNAUTHORIZED
    );
    let mut c = claims.clone();
    c["preferred_username"] = json!("system-x");
    assert_eq!(
        s.whoami(&issuer.token("ironplane", c)).user.unwrap_err(),
        UNAUTHORIZED
    );
    // The file is read again when it changes: a new mapping applies without a restart, and a
    // broken file leaves the running configuration in place.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, "jwt: [not valid").unwrap();
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(
        s.whoami(&issuer.token("other", claims.clone()))
            .user
            .unwrap()["username"],
        "acme:bob"
    );
    std::fs::write(&config, text.replace("'acme:'", "'acme2:'")).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while s
        .whoami(&issuer.token("other", claims.clone()))
        .user
        .unwrap()["username"]
        != "acme2:bob"
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the new configuration never applied"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // As upstream, the `anonymous` section is fixed at start: a file that changes it is
    // refused whole, its new mapping too.
    std::fs::write(
        &config,
        text.replace("'acme:'", "'acme3:'")
            .replace("path: /livez", "path: /readyz"),
    )
    .unwrap();
    std::thread::sleep(Duration::from_secs(12));
    assert_eq!(
        s.whoami(&issuer.token("other", claims.clone()))
            .user
            .unwrap()["username"],
        "acme2:bob"
    );
    // Anonymous requests come in on /livez only.
    let livez = common::raw_https(&format!("{}/livez", s.url), "GET", &[], None);
    assert_eq!(livez, "200 ok");
    let version = common::raw_https(&format!("{}/version", s.url), "GET", &[], None);
    assert!(version.starts_with("401 "), "{version}");

    // The flags that the file replaces are refused beside it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ironplane"))
        .args(["--secure-port", "0", "--data-dir"])
        .arg(dir.path().join("other"))
        .arg(&flag)
        .arg("--anonymous-auth=false")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--anonymous-auth flag cannot be set when anonymous field is configured"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes a kubeconfig that points at a test webhook.
fn webhook_kubeconfig(dir: &std::path::Path, name: &str, hook: &HookServer, path: &str) -> String {
    let file = dir.join(format!("{name}.kubeconfig"));
    let ca = base64::engine::general_purpose::STANDARD.encode(&hook.ca_pem);
    std::fs::write(
        &file,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hook\n  cluster:\n    server: https://127.0.0.1:{}{path}\n    certificate-authority-data: {ca}\nusers:\n- name: apiserver\n  user: {{}}\ncontexts:\n- name: hook\n  context: {{cluster: hook, user: apiserver}}\ncurrent-context: hook\n",
            hook.port
        ),
    )
    .unwrap();
    file.display().to_string()
}

#[test]
fn webhooks_authenticate_tokens_and_authorize_before_rbac() {
    let dir = tempfile::tempdir().unwrap();
    // The token webhook knows one token.
    let reviews = Arc::new(Mutex::new(Vec::<Value>::new()));
    let seen = reviews.clone();
    let authn = HookServer::start(
        &[],
        Arc::new(move |_path: &str, review: Value| {
            seen.lock().unwrap().push(review.clone());
            let status = if review["spec"]["token"] == "carol-token" {
                json!({"authenticated": true, "user": {"username": "carol", "uid": "c-1",
                       "groups": ["hooked"], "extra": {"example.com/desk": ["7"]}}})
            } else {
                json!({"authenticated": false})
            };
            Reply::json(
                &json!({"apiVersion": review["apiVersion"], "kind": "TokenReview",
                                "status": status}),
            )
        }),
    );
    // The authorization webhook: carol may read in `hooked`, never delete; it says nothing
    // about anything else.
    let decisions = Arc::new(Mutex::new(Vec::<Value>::new()));
    let asked = decisions.clone();
    let authz = HookServer::start(
        &[],
        Arc::new(move |_path: &str, review: Value| {
            asked.lock().unwrap().push(review.clone());
            let spec = &review["spec"];
            let attrs = &spec["resourceAttributes"];
            let status = match (spec["user"].as_str(), attrs["verb"].as_str()) {
                (Some("carol"), Some("delete")) => {
                    json!({"allowed": false, "denied": true, "reason": "carol never deletes"})
                }
                (Some("carol"), Some("get" | "list" | "watch")) => {
                    json!({"allowed": true, "reason": "carol reads"})
                }
                _ => json!({"allowed": false}),
            };
            Reply::json(&json!({"apiVersion": review["apiVersion"],
                                "kind": "SubjectAccessReview", "status": status}))
        }),
    );
    let authn_config = webhook_kubeconfig(dir.path(), "authn", &authn, "/authenticate");
    let authz_config = webhook_kubeconfig(dir.path(), "authz", &authz, "/authorize");
    let authorization = dir.path().join("authz.yaml");
    std::fs::write(
        &authorization,
        format!(
            r#"apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Node
  name: node
- type: Webhook
  name: desk-policy
  webhook:
    timeout: 3s
    authorizedTTL: 5m
    unauthorizedTTL: 30s
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: NoOpinion
    connectionInfo:
      type: KubeConfigFile
      kubeConfigFile: {authz_config}
    matchConditions:
    - expression: has(request.resourceAttributes) && request.resourceAttributes.namespace == 'hooked'
- type: RBAC
  name: rbac
"#
        ),
    )
    .unwrap();
    let s = Server::start_with(&[
        &format!("--authentication-token-webhook-config-file={authn_config}"),
        "--authentication-token-webhook-version=v1",
        &format!("--authorization-config={}", authorization.display()),
    ]);
    s.kubectl(&["create", "namespace", "hooked"]);
    s.kubectl(&["create", "configmap", "c", "-n", "hooked"]);

    let user = s.whoami("carol-token").user.unwrap();
    assert_eq!(user["username"], "carol");
    assert_eq!(user["extra"]["example.com/desk"], json!(["7"]));
    assert_eq!(s.whoami("mallory-token").user.unwrap_err(), UNAUTHORIZED);
    let sent = reviews.lock().unwrap().clone();
    assert_eq!(sent[0]["apiVersion"], "authentication.k8s.io/v1");
    assert_eq!(sent[0]["kind"], "TokenReview");
    assert_eq!(sent[0]["spec"]["token"], "carol-token");

    // The webhook allows reads in `hooked`, answered by the webhook with its reason.
    let get = s.kubectl_with_token("carol-token", &["get", "configmap", "c", "-n", "hooked"]);
    assert!(
        get.status.success(),
        "{}",
        String::from_utf8_lossy(&get.stderr)
    );
    // Its explicit denial stops the chain before RBAC, with its reason.
    s.kubectl(&[
        "create",
        "rolebinding",
        "carol-edit",
        "-n",
        "hooked",
        "--clusterrole=edit",
        "--user=carol",
    ]);
    let delete = s.kubectl_with_token("carol-token", &["delete", "configmap", "c", "-n", "hooked"]);
    assert_eq!(
        String::from_utf8_lossy(&delete.stderr).trim(),
        r#"Error from server (Forbidden): configmaps "c" is forbidden: User "carol" cannot delete resource "configmaps" in API group "" in the namespace "hooked": carol never deletes"#
    );
    // Outside `hooked` the match condition skips the webhook: RBAC decides (nothing bound).
    let before = decisions.lock().unwrap().len();
    let other = s.kubectl_with_token("carol-token", &["get", "configmaps", "-n", "default"]);
    assert!(!other.status.success());
    assert_eq!(decisions.lock().unwrap().len(), before);
    // Both webhooks' answers are cached: the same request asks neither again.
    let (tokens_before, decisions_before) = (
        reviews.lock().unwrap().len(),
        decisions.lock().unwrap().len(),
    );
    let again = s.kubectl_with_token("carol-token", &["get", "configmap", "c", "-n", "hooked"]);
    assert!(again.status.success());
    assert_eq!(reviews.lock().unwrap().len(), tokens_before);
    assert_eq!(decisions.lock().unwrap().len(), decisions_before);
    // The review the webhook saw is upstream's v1 SubjectAccessReview.
    let review = decisions.lock().unwrap()[0].clone();
    assert_eq!(review["apiVersion"], "authorization.k8s.io/v1");
    assert_eq!(review["spec"]["user"], "carol");
    assert_eq!(review["spec"]["uid"], "c-1");
    assert_eq!(
        review["spec"]["groups"],
        json!(["hooked", "system:authenticated"])
    );
    // The file is read again when it changes: without the webhook, RBAC's `edit` binding lets
    // carol delete.
    std::fs::write(
        &authorization,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers:\n- {type: Node, name: node}\n- {type: RBAC, name: rbac}\n",
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let delete =
            s.kubectl_with_token("carol-token", &["delete", "configmap", "c", "-n", "hooked"]);
        if delete.status.success() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the new authorization configuration never applied: {}",
            String::from_utf8_lossy(&delete.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn bad_authentication_and_authorization_configuration_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let start = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ironplane"))
            .args(["--secure-port", "0", "--data-dir"])
            .arg(dir.path().join("data"))
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    assert!(start(&["--oidc-issuer-url=https://issuer.example"]).contains(
        "oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set"
    ));
    assert!(
        start(&[
            "--oidc-issuer-url=http://issuer.example",
            "--oidc-client-id=k"
        ])
        .contains("URL scheme must be https")
    );
    assert!(
        start(&["--authorization-mode=Webhook"])
            .contains("authorization-mode Webhook's authorization config file not passed")
    );
    let authz = dir.path().join("authz.yaml");
    std::fs::write(&authz, "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers:\n- {type: RBAC, name: rbac}\n").unwrap();
    let flag = format!("--authorization-config={}", authz.display());
    assert!(
        start(&[&flag, "--authorization-mode=RBAC"]).contains(
            "--authorization-config can not be passed together with --authorization-mode"
        )
    );
}

#[test]
fn bootstrap_tokens_authenticate_while_their_secret_allows() {
    let s = Server::start_with(&["--enable-bootstrap-token-auth"]);
    let secret = |id: &str, expiration: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: bootstrap-token-{id}, namespace: kube-system}}\ntype: bootstrap.kubernetes.io/token\nstringData:\n  token-id: {id}\n  token-secret: 0123456789abcdef\n  usage-bootstrap-authentication: \"true\"\n  auth-extra-groups: system:bootstrappers:kubeadm:default-node-token\n  expiration: \"{expiration}\"\n"
        )
    };
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        &secret("abcdef", "2999-01-01T00:00:00Z"),
    );
    s.kubectl_stdin(
        &["apply", "-f", "-"],
        &secret("expird", "2001-01-01T00:00:00Z"),
    );
    let user = s.whoami("abcdef.0123456789abcdef").user.unwrap();
    assert_eq!(user["username"], "system:bootstrap:abcdef");
    assert_eq!(
        user["groups"],
        json!([
            "system:bootstrappers",
            "system:bootstrappers:kubeadm:default-node-token",
            "system:authenticated"
        ])
    );
    for bad in [
        "abcdef.0123456789abcdee",
        "expird.0123456789abcdef",
        "nosuch.0123456789abcdef",
    ] {
        assert_eq!(s.whoami(bad).user.unwrap_err(), UNAUTHORIZED, "{bad}");
    }
    // Deleting the secret ends the token.
    s.kubectl(&[
        "delete",
        "secret",
        "bootstrap-token-abcdef",
        "-n",
        "kube-system",
    ]);
    eventually("the deletion reaching authentication", || {
        s.whoami("abcdef.0123456789abcdef").user.is_err()
    });
}

/// A POST over HTTPS with a client certificate, made with Python's ssl module:
/// `"<status> <body>"`.
fn post_with_certificate(
    url: &str,
    cert: &str,
    key: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> String {
    const SCRIPT: &str = "import json,ssl,sys,urllib.request\n\
ctx=ssl.create_default_context();ctx.check_hostname=False;ctx.verify_mode=ssl.CERT_NONE\n\
ctx.load_cert_chain(sys.argv[2],sys.argv[3])\n\
req=urllib.request.Request(sys.argv[1],data=sys.argv[5].encode(),method='POST',headers=json.loads(sys.argv[4]))\n\
try:\n r=urllib.request.urlopen(req,context=ctx);print(r.status,r.read().decode())\n\
except urllib.error.HTTPError as e:\n print(e.code,e.read().decode())\n";
    let mut all: serde_json::Map<String, Value> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(*v)))
        .collect();
    all.insert("Content-Type".into(), "application/json".into());
    let out = std::process::Command::new("python3")
        .args(["-c", SCRIPT, url, cert, key])
        .arg(Value::Object(all).to_string())
        .arg(body)
        .output()
        .expect("python3 runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_front_proxy_names_the_user_in_request_headers() {
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    };
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    std::fs::write(dir.path().join("front-proxy-ca.pem"), ca.pem()).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let client = |cn: &str| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, cn);
        params.distinguished_name = name;
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &issuer).unwrap();
        let (c, k) = (
            dir.path().join(format!("{cn}.crt")),
            dir.path().join(format!("{cn}.key")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c.display().to_string(), k.display().to_string())
    };
    let s = Server::start_with(&[
        &format!(
            "--requestheader-client-ca-file={}",
            dir.path().join("front-proxy-ca.pem").display()
        ),
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
    ]);
    let url = format!("{}/apis/authentication.k8s.io/v1/selfsubjectreviews", s.url);
    let review = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#;
    let (cert, key) = client("front-proxy-client");
    let headers = [
        ("X-Remote-User", "dave"),
        ("X-Remote-Group", "proxied"),
        ("X-Remote-Extra-Acme.com%2fdesk", "9"),
    ];
    let answer = post_with_certificate(&url, &cert, &key, &headers, review);
    let (code, body) = answer.split_once(' ').unwrap();
    assert_eq!(code, "201", "{answer}");
    let user = &serde_json::from_str::<Value>(body).unwrap()["status"]["userInfo"];
    assert_eq!(user["username"], "dave");
    assert_eq!(user["groups"], json!(["proxied", "system:authenticated"]));
    assert_eq!(user["extra"]["acme.com/desk"], json!(["9"]));
    // A proxy certificate with a name that is not allowed is refused.
    let (cert, key) = client("rogue-proxy");
    let answer = post_with_certificate(&url, &cert, &key, &headers, review);
    assert!(answer.starts_with("401 "), "{answer}");
    // Without a proxy certificate the headers mean nothing: anonymous.
    let answer = common::raw_https(
        &url,
        "POST",
        &[
            ("X-Remote-User", "dave"),
            ("Content-Type", "application/json"),
        ],
        Some(review),
    );
    assert!(answer.contains("system:anonymous"), "{answer}");
    // Extension servers find the proxy's settings where upstream publishes them.
    let cm = s.kubectl(&[
        "get",
        "configmap",
        "extension-apiserver-authentication",
        "-n",
        "kube-system",
        "-o",
        "json",
    ]);
    let data = &serde_json::from_str::<Value>(&cm).unwrap()["data"];
    assert_eq!(
        data["requestheader-username-headers"],
        "[\"X-Remote-User\"]"
    );
    assert_eq!(
        data["requestheader-allowed-names"],
        "[\"front-proxy-client\"]"
    );
    assert!(
        data["requestheader-client-ca-file"]
            .as_str()
            .unwrap()
            .contains("BEGIN CERTIFICATE")
    );
}

#[test]
fn abac_policies_allow_what_they_match_before_rbac() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.jsonl");
    std::fs::write(
        &policy,
        r#"{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "alice", "namespace": "team-a", "resource": "*", "apiGroup": "*", "readonly": true}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"group": "ops", "namespace": "*", "resource": "deployments", "apiGroup": "apps"}}
"#,
    )
    .unwrap();
    let s = Server::start_with(&[
        "--authorization-mode=ABAC,RBAC",
        &format!("--authorization-policy-file={}", policy.display()),
    ]);
    // "yes", or "no" (kubectl adds the union's reasons: ABAC's "No policy matched.").
    let can = |args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        let out = String::from_utf8_lossy(&s.kubectl_output(&all).stdout)
            .trim()
            .to_string();
        if out.starts_with("no") {
            assert_eq!(out, "no - No policy matched.");
            "no".to_string()
        } else {
            out
        }
    };
    assert_eq!(can(&["list", "pods", "-n", "team-a", "--as=alice"]), "yes");
    assert_eq!(can(&["delete", "pods", "-n", "team-a", "--as=alice"]), "no");
    assert_eq!(can(&["list", "pods", "-n", "team-b", "--as=alice"]), "no");
    assert_eq!(
        can(&[
            "create",
            "deployments.apps",
            "-n",
            "x",
            "--as=bob",
            "--as-group=ops"
        ]),
        "yes"
    );
    assert_eq!(
        can(&[
            "create",
            "statefulsets.apps",
            "-n",
            "x",
            "--as=bob",
            "--as-group=ops"
        ]),
        "no"
    );
    // RBAC still answers after ABAC has no opinion.
    s.kubectl(&["create", "namespace", "team-b"]);
    s.kubectl(&[
        "create",
        "rolebinding",
        "b",
        "-n",
        "team-b",
        "--clusterrole=view",
        "--user=alice",
    ]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while can(&["list", "pods", "-n", "team-b", "--as=alice"]) != "yes" {
        assert!(std::time::Instant::now() < deadline, "RBAC never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
}
