//! `ironplane` as controller-runtime's envtest runs it: installed under the name
//! `kube-apiserver` it takes kube-apiserver's command line as envtest builds it
//! (sigs.k8s.io/controller-runtime, `pkg/internal/testing/controlplane/apiserver.go`), and
//! installed as `etcd` it is a stand-in that only answers envtest's health check.
//!
//! The program name (argv[0]'s file name) chooses the mode, as busybox does: envtest runs
//! `$KUBEBUILDER_ASSETS/kube-apiserver` and `$KUBEBUILDER_ASSETS/etcd`, so symbolic links to one
//! binary are all an asset directory needs (`scripts/envtest-assets.sh`).
//!
//! This module owns the translation of that command line into [`Options`] and the stand-in
//! etcd. It must not pretend: a flag that would change what the server does and that Ironplane
//! does not implement is refused with an error; a flag that does not apply (the etcd servers,
//! since the store is embedded) is accepted and said to be ignored in the log.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{CommandFactory, FromArgMatches, Parser};
use ironplane::Options;

/// What the program name asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `ironplane`'s own command line (any name but the two below).
    Ironplane,
    /// kube-apiserver's command line, as envtest passes it.
    KubeApiserver,
    /// The stand-in etcd that only answers `/health`.
    Etcd,
}

impl Mode {
    /// The mode of a program invoked as `argv0`.
    pub fn of_program(argv0: Option<&std::ffi::OsStr>) -> Mode {
        let name = argv0
            .map(Path::new)
            .and_then(Path::file_name)
            .and_then(|n| n.to_str());
        match name {
            Some("kube-apiserver") => Mode::KubeApiserver,
            Some("etcd") => Mode::Etcd,
            _ => Mode::Ironplane,
        }
    }
}

/// kube-apiserver's command line: Ironplane's options (which keep kube-apiserver's names) and
/// the flags envtest passes that Ironplane's own command line lacks.
#[derive(Parser, Debug)]
#[command(
    name = "kube-apiserver",
    about = "Ironplane as kube-apiserver (envtest drop-in): kube-apiserver's flags, served from \
             Ironplane's embedded store",
    disable_version_flag = true
)]
pub struct KubeApiserverArgs {
    /// Its `--etcd-servers` (and the etcd TLS files) are taken and ignored: in this mode
    /// Ironplane keeps its state in its embedded store (under --cert-dir, see --data-dir), and
    /// envtest's etcd is Ironplane's stand-in that stores nothing.
    #[command(flatten)]
    pub options: Options,
    /// Only `true` is accepted: Ironplane admits privileged containers (upstream's default is
    /// false, which Ironplane does not implement).
    #[arg(long, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub allow_privileged: Option<bool>,
    /// Print the Kubernetes version this server serves (`Kubernetes v1.36.0-ironplane.<v>`)
    /// and exit.
    #[arg(long)]
    pub version: bool,
}

/// The line `--version` prints, in kube-apiserver's form (`Kubernetes <gitVersion>`).
pub fn version_line() -> String {
    format!("Kubernetes v1.36.0-ironplane.{}", env!("CARGO_PKG_VERSION"))
}

/// A kube-apiserver command line made into Ironplane's options.
#[derive(Debug)]
pub struct KubeApiserver {
    pub options: Options,
    /// What the log says about flags taken but not applied, and where the store is.
    pub notes: Vec<String>,
    /// The data directory when --cert-dir is not given: a fresh temporary directory, removed
    /// when this is dropped (after the server has stopped).
    pub temp_dir: Option<tempfile::TempDir>,
}

/// The file names of the serving pair kube-apiserver reads from (or generates into)
/// `--cert-dir`; envtest writes them there before it starts the server.
const SERVING_CERT: &str = "apiserver.crt";
const SERVING_KEY: &str = "apiserver.key";

/// The data directory's name under `--cert-dir`.
pub const DATA_DIR_NAME: &str = "ironplane-data";

/// Parses kube-apiserver's command line (`args` includes the program name). `Ok(None)` means
/// `--version` was asked and printed.
pub fn parse_kube_apiserver(
    args: impl IntoIterator<Item = OsString>,
) -> Result<Option<KubeApiserver>, clap::Error> {
    let matches = command().try_get_matches_from(args)?;
    let data_dir_given =
        matches.value_source("data_dir") == Some(clap::parser::ValueSource::CommandLine);
    let args = KubeApiserverArgs::from_arg_matches(&matches)?;
    if args.version {
        println!("{}", version_line());
        return Ok(None);
    }
    prepare(args, data_dir_given)
        .map(Some)
        .map_err(|e| command().error(clap::error::ErrorKind::ValueValidation, e))
}

/// kube-apiserver's command, whose --help says where the store goes in this mode.
fn command() -> clap::Command {
    KubeApiserverArgs::command().mut_arg("data_dir", |a| {
        a.hide_default_value(true).help(
            "Where the embedded store and Ironplane's own certificates live (default: \
             <cert-dir>/ironplane-data, or a temporary directory removed at exit when \
             --cert-dir is not given)",
        )
    })
}

/// Applies kube-apiserver's meaning of the flags Ironplane reads differently, and refuses what
/// it cannot honour.
fn prepare(args: KubeApiserverArgs, data_dir_given: bool) -> Result<KubeApiserver, String> {
    let mut options = args.options;
    let mut notes = Vec::new();
    let etcd_servers = std::mem::take(&mut options.etcd_servers);
    options.etcd_cafile = None;
    options.etcd_certfile = None;
    options.etcd_keyfile = None;
    match args.allow_privileged {
        Some(false) => {
            return Err(
                "--allow-privileged=false is not implemented: Ironplane admits \
                        privileged containers, as kube-apiserver does with \
                        --allow-privileged=true"
                    .into(),
            );
        }
        Some(true) => notes.push(
            "--allow-privileged=true: privileged containers are admitted, as Ironplane always does"
                .to_string(),
        ),
        None => {}
    }

    // The store lives as long as the certificate directory envtest made for this server (it
    // removes that directory when it stops the server), or in a fresh temporary directory.
    let mut temp_dir = None;
    if !data_dir_given {
        match &options.cert_dir {
            Some(dir) => options.data_dir = dir.join(DATA_DIR_NAME),
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("ironplane-kube-apiserver-")
                    .tempdir()
                    .map_err(|e| format!("creating a temporary data directory: {e}"))?;
                options.data_dir = dir.path().to_path_buf();
                temp_dir = Some(dir);
            }
        }
    }
    if !etcd_servers.is_empty() {
        notes.push(format!(
            "--etcd-servers={} ignored: Ironplane keeps its state in its embedded store in {}",
            etcd_servers.join(","),
            options.data_dir.display()
        ));
    } else {
        notes.push(format!(
            "the embedded store is in {}",
            options.data_dir.display()
        ));
    }

    // kube-apiserver serves `<cert-dir>/apiserver.{crt,key}` when they exist, whoever signed
    // them (envtest signs them with its own CA and its clients verify against it). Ironplane's
    // own PKI (its CA, the admin certificate, the service-account key, and a serving pair when
    // the directory has none) then goes to the data directory, so that nothing of envtest's is
    // overwritten.
    if options.tls_cert_file.is_none()
        && options.tls_private_key_file.is_none()
        && let Some(dir) = options.cert_dir.take()
    {
        let (cert, key) = (dir.join(SERVING_CERT), dir.join(SERVING_KEY));
        if cert.is_file() && key.is_file() {
            notes.push(format!("serving {}", cert.display()));
            options.tls_cert_file = Some(cert);
            options.tls_private_key_file = Some(key);
        }
        options.cert_dir = Some(pki_dir(&options.data_dir));
    }
    Ok(KubeApiserver {
        options,
        notes,
        temp_dir,
    })
}

fn pki_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("pki")
}

/// The stand-in etcd: it listens on `--listen-client-urls` and answers `GET /health` with 200
/// (what envtest polls before it starts kube-apiserver); it stores nothing.
pub mod etcd {
    use std::net::SocketAddr;
    use std::process::ExitCode;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// etcd's default client URL.
    const DEFAULT_CLIENT_URL: &str = "http://localhost:2379";

    /// `etcd --help`. envtest reads it for `--unsafe-no-fsync` (etcd 3.5 and later) and passes
    /// `--unsafe-no-fsync=true` when it is listed, so the command line is the one it builds for
    /// a real etcd.
    const HELP: &str = "\
Usage: etcd [flags]

Ironplane's stand-in etcd for envtest. It answers GET /health on its client URLs and stores
nothing: Ironplane, installed as kube-apiserver, keeps its state in its own embedded store.

Flags:
  --listen-client-urls 'http://localhost:2379'
      Comma-separated plain-HTTP URLs to answer GET /health on.
  --advertise-client-urls, --listen-peer-urls, --data-dir, --name, --initial-cluster ...
      Accepted and ignored, as is every other etcd flag: the stand-in has no storage,
      no peers and no data.
  --unsafe-no-fsync
      Accepted and ignored (nothing is written).
  --version
      Print the stand-in's version and exit.
  -h, --help
      Print this help and exit.
";

    /// What the command line asks of the stand-in.
    #[derive(Debug, PartialEq, Eq)]
    pub enum Command {
        Help,
        Version,
        Serve {
            client_urls: Vec<String>,
            /// Flags accepted and ignored, as given.
            ignored: Vec<String>,
        },
    }

    /// Reads etcd's command line (without the program name). Flags are Go's: one or two
    /// dashes, the value after `=` or as the next argument.
    pub fn parse(args: &[String]) -> Result<Command, String> {
        let mut client_urls = None;
        let mut ignored = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            i += 1;
            let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
                return Err(format!("'{arg}' is not a valid flag"));
            };
            let (name, value) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (flag, None),
            };
            match name {
                "h" | "help" => return Ok(Command::Help),
                "version" => return Ok(Command::Version),
                "listen-client-urls" => {
                    let value = match value {
                        Some(v) => v,
                        None if i < args.len() => {
                            i += 1;
                            args[i - 1].clone()
                        }
                        None => return Err("flag needs an argument: -listen-client-urls".into()),
                    };
                    client_urls = Some(
                        value
                            .split(',')
                            .map(str::trim)
                            .filter(|u| !u.is_empty())
                            .map(String::from)
                            .collect::<Vec<_>>(),
                    );
                }
                _ => {
                    // A value given apart from its flag is taken along with it.
                    let value = match value {
                        Some(v) => Some(v),
                        None if i < args.len() && !args[i].starts_with('-') => {
                            i += 1;
                            Some(args[i - 1].clone())
                        }
                        None => None,
                    };
                    ignored.push(match value {
                        Some(v) => format!("--{name}={v}"),
                        None => format!("--{name}"),
                    });
                }
            }
        }
        let client_urls = client_urls.unwrap_or_else(|| vec![DEFAULT_CLIENT_URL.to_string()]);
        if client_urls.is_empty() {
            return Err("--listen-client-urls is empty".into());
        }
        Ok(Command::Serve {
            client_urls,
            ignored,
        })
    }

    /// `host:port` of a plain-HTTP client URL.
    pub fn host_port(url: &str) -> Result<&str, String> {
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            format!(
                "{url}: the stand-in etcd serves plain HTTP only (an https:// URL needs etcd's \
                 TLS, which it does not have)"
            )
        })?;
        let host_port = rest.split('/').next().unwrap_or_default();
        if host_port.is_empty() {
            return Err(format!("{url}: no host"));
        }
        Ok(host_port)
    }

    /// Runs the stand-in until `shutdown` resolves (SIGTERM or SIGINT in the binary).
    pub async fn run(args: &[String], shutdown: impl std::future::Future<Output = ()>) -> ExitCode {
        let (client_urls, ignored) = match parse(args) {
            Ok(Command::Help) => {
                print!("{HELP}");
                return ExitCode::SUCCESS;
            }
            Ok(Command::Version) => {
                println!(
                    "etcd stand-in of Ironplane {} (answers /health, stores nothing)",
                    env!("CARGO_PKG_VERSION")
                );
                return ExitCode::SUCCESS;
            }
            Ok(Command::Serve {
                client_urls,
                ignored,
            }) => (client_urls, ignored),
            Err(e) => {
                eprintln!("etcd (Ironplane's stand-in): {e}");
                return ExitCode::FAILURE;
            }
        };
        for flag in &ignored {
            tracing::info!(
                flag,
                "ignored: the stand-in etcd stores nothing and has no peers"
            );
        }
        let mut listeners = Vec::new();
        for url in &client_urls {
            let bound = match host_port(url) {
                Ok(hp) => bind(hp).await,
                Err(e) => Err(e),
            };
            match bound {
                Ok(mut l) => listeners.append(&mut l),
                Err(e) => {
                    eprintln!("etcd (Ironplane's stand-in): {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        for l in &listeners {
            if let Ok(addr) = l.local_addr() {
                tracing::info!(%addr, "the stand-in etcd answers GET /health (it stores nothing)");
            }
        }
        let serving = serve_health(listeners);
        tokio::select! {
            _ = serving => {}
            _ = shutdown => {}
        }
        ExitCode::SUCCESS
    }

    /// Binds every address `host:port` resolves to (`localhost` may be two).
    async fn bind(host_port: &str) -> Result<Vec<TcpListener>, String> {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(host_port)
            .await
            .map_err(|e| format!("resolving {host_port}: {e}"))?
            .collect();
        let mut listeners = Vec::new();
        let mut last_error = None;
        for addr in addrs {
            match TcpListener::bind(addr).await {
                Ok(l) => listeners.push(l),
                Err(e) => last_error = Some(format!("listening on {addr}: {e}")),
            }
        }
        if listeners.is_empty() {
            return Err(last_error.unwrap_or_else(|| format!("{host_port} resolves to nothing")));
        }
        Ok(listeners)
    }

    async fn serve_health(listeners: Vec<TcpListener>) {
        let mut tasks = tokio::task::JoinSet::new();
        for l in listeners {
            tasks.spawn(async move {
                loop {
                    match l.accept().await {
                        Ok((stream, _)) => {
                            tokio::spawn(answer(stream));
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "accepting a connection");
                            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        }
                    }
                }
            });
        }
        while tasks.join_next().await.is_some() {}
    }

    /// The largest request head read; a health check's is a few hundred bytes.
    const MAX_HEAD: usize = 16 * 1024;

    /// Answers one request and closes the connection.
    async fn answer(mut stream: TcpStream) {
        let mut head = Vec::new();
        let mut buf = [0u8; 2048];
        let complete = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return false,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
                if head.len() > MAX_HEAD {
                    return false;
                }
            }
            true
        })
        .await
        .unwrap_or(false);
        if !complete {
            return;
        }
        let response = respond(&head);
        let _ = stream.write_all(&response).await;
        let _ = stream.shutdown().await;
    }

    /// The response to a request head: `GET` or `HEAD /health` is healthy, as etcd answers it;
    /// anything else is Go's plain 404.
    pub fn respond(head: &[u8]) -> Vec<u8> {
        let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or_default();
        let target = parts.next().unwrap_or_default();
        let path = target.split('?').next().unwrap_or_default();
        let (status, content_type, body): (&str, &str, &[u8]) = match (method, path) {
            ("GET" | "HEAD", "/health") => (
                "200 OK",
                "application/json",
                br#"{"health":"true","reason":""}"#,
            ),
            _ => (
                "404 Not Found",
                "text/plain; charset=utf-8",
                b"404 page not found\n",
            ),
        };
        let mut out = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        if method != "HEAD" {
            out.extend_from_slice(body);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_program_name_chooses_the_mode() {
        let mode = |s: &str| Mode::of_program(Some(std::ffi::OsStr::new(s)));
        assert_eq!(mode("/assets/kube-apiserver"), Mode::KubeApiserver);
        assert_eq!(mode("kube-apiserver"), Mode::KubeApiserver);
        assert_eq!(mode("./etcd"), Mode::Etcd);
        assert_eq!(mode("/usr/bin/ironplane"), Mode::Ironplane);
        assert_eq!(mode("kube-apiserver.bak"), Mode::Ironplane);
        assert_eq!(Mode::of_program(None), Mode::Ironplane);
    }

    #[test]
    fn envtests_command_line_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let cert_dir = dir.path().to_str().unwrap();
        std::fs::write(dir.path().join("apiserver.crt"), "x").unwrap();
        std::fs::write(dir.path().join("apiserver.key"), "x").unwrap();
        let parsed = parse_kube_apiserver(strings(&[
            "kube-apiserver",
            "--allow-privileged=true",
            "--authorization-mode=RBAC",
            "--bind-address=127.0.0.1",
            &format!("--cert-dir={cert_dir}"),
            &format!("--client-ca-file={cert_dir}/client-cert-auth-ca.crt"),
            "--disable-admission-plugins=ServiceAccount",
            "--etcd-servers=http://127.0.0.1:41234",
            "--secure-port=41235",
            "--service-account-issuer=https://127.0.0.1:41235/",
            &format!("--service-account-key-file={cert_dir}/sa-signer.crt"),
            &format!("--service-account-signing-key-file={cert_dir}/sa-signer.key"),
            "--service-cluster-ip-range=10.0.0.0/24",
        ]))
        .unwrap()
        .unwrap();
        let o = &parsed.options;
        assert_eq!(o.secure_port, 41235);
        assert_eq!(o.authorization_mode, ["RBAC"]);
        assert_eq!(o.disable_admission_plugins, ["ServiceAccount"]);
        assert_eq!(o.data_dir, dir.path().join(DATA_DIR_NAME));
        assert_eq!(o.cert_dir, Some(dir.path().join(DATA_DIR_NAME).join("pki")));
        assert_eq!(o.tls_cert_file, Some(dir.path().join("apiserver.crt")));
        assert_eq!(
            o.tls_private_key_file,
            Some(dir.path().join("apiserver.key"))
        );
        assert!(parsed.temp_dir.is_none());
        assert!(
            parsed
                .notes
                .iter()
                .any(|n| n.starts_with("--etcd-servers=http://127.0.0.1:41234 ignored")),
            "{:?}",
            parsed.notes
        );
        o.validate().unwrap();
    }

    #[test]
    fn without_a_serving_pair_the_generated_one_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let parsed = parse_kube_apiserver(strings(&[
            "kube-apiserver",
            &format!("--cert-dir={}", dir.path().display()),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(parsed.options.tls_cert_file, None);
        assert_eq!(
            parsed.options.cert_dir,
            Some(dir.path().join(DATA_DIR_NAME).join("pki"))
        );
    }

    #[test]
    fn without_a_cert_dir_the_store_is_temporary() {
        let parsed = parse_kube_apiserver(strings(&["kube-apiserver"]))
            .unwrap()
            .unwrap();
        let temp = parsed.temp_dir.as_ref().expect("a temporary directory");
        assert_eq!(parsed.options.data_dir, temp.path());
        let path = temp.path().to_path_buf();
        drop(parsed);
        assert!(!path.exists(), "removed when dropped");
    }

    #[test]
    fn an_explicit_data_dir_wins() {
        let parsed = parse_kube_apiserver(strings(&[
            "kube-apiserver",
            "--cert-dir=/somewhere",
            "--data-dir=/elsewhere",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(parsed.options.data_dir, Path::new("/elsewhere"));
        assert!(parsed.temp_dir.is_none());
    }

    #[test]
    fn flags_that_would_change_behaviour_are_refused() {
        let err = parse_kube_apiserver(strings(&["kube-apiserver", "--allow-privileged=false"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not implemented"), "{err}");
        // A flag neither Ironplane nor this mode knows is an error, not silently dropped.
        assert!(parse_kube_apiserver(strings(&["kube-apiserver", "--insecure-port=0"])).is_err());
    }

    #[test]
    fn help_names_kube_apiserver_and_lacks_insecure_port() {
        // envtest runs `kube-apiserver --help` and passes --insecure-port=0 only to servers
        // that list it (before 1.24); kube-apiserver v1.36 does not.
        let help = command().render_long_help().to_string();
        assert!(help.contains("kube-apiserver"), "{help}");
        assert!(help.contains("--etcd-servers"), "{help}");
        assert!(!help.contains("--insecure-port"), "{help}");
    }

    #[test]
    fn etcd_reads_envtests_command_line() {
        let args: Vec<String> = [
            "--advertise-client-urls=http://127.0.0.1:2379",
            "--data-dir=/tmp/k8s_test_framework_1",
            "--listen-client-urls=http://127.0.0.1:2379",
            "--listen-peer-urls=http://127.0.0.1:2380",
            "--unsafe-no-fsync=true",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let etcd::Command::Serve {
            client_urls,
            ignored,
        } = etcd::parse(&args).unwrap()
        else {
            panic!("serves")
        };
        assert_eq!(client_urls, ["http://127.0.0.1:2379"]);
        assert_eq!(ignored.len(), 4);
        assert_eq!(
            etcd::parse(&["-name".into(), "x".into(), "--help".into()]).unwrap(),
            etcd::Command::Help
        );
        assert!(etcd::parse(&["positional".into()]).is_err());
        assert!(etcd::host_port("https://127.0.0.1:2379").is_err());
        assert_eq!(etcd::host_port("http://[::1]:2379/").unwrap(), "[::1]:2379");
    }

    #[test]
    fn etcd_answers_health_only() {
        let ok = etcd::respond(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
        let ok = String::from_utf8(ok).unwrap();
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.ends_with(r#"{"health":"true","reason":""}"#), "{ok}");
        let missing =
            String::from_utf8(etcd::respond(b"GET /v3/kv/range HTTP/1.1\r\n\r\n")).unwrap();
        assert!(
            missing.starts_with("HTTP/1.1 404 Not Found\r\n"),
            "{missing}"
        );
    }
}
