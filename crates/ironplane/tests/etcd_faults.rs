//! Faults under the etcd backend, end to end: the real binary on real etcd members started here
//! (Debian's `etcd-server`; missing etcd fails the test).
//!
//! - etcd frozen (SIGSTOP) and killed: requests answer within seconds with kube-apiserver's 504
//!   `Timeout` Status instead of holding their clients, `/readyz` fails its `etcd` check; etcd
//!   back on the same data and ports: the same server serves again, and a watch opened before
//!   the outage sees every write made after, once, with nothing replayed.
//! - A 3-member etcd cluster whose leader is killed under concurrent writes: no write fails
//!   beyond one retry, and every acknowledged write is there afterwards.
//! - Two replicas on one etcd with writers on both, one killed with SIGKILL: the other's writes
//!   keep succeeding, and no acknowledged write is lost.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Server, wait_until};
use storage::testing::EtcdServer;

/// The bearer token of a `system:masters` user, so that raw requests show the server's Status.
const TOKEN: &str = "fault-token";

/// Starts a server on `etcd_servers` that also accepts [`TOKEN`].
fn start(etcd_servers: &str, tokens: &tempfile::TempDir) -> Server {
    let file = tokens.path().join("tokens.csv");
    std::fs::write(&file, format!("{TOKEN},admin,uid-0,\"system:masters\"\n"))
        .expect("write the token file");
    let file = file.to_string_lossy().into_owned();
    Server::start_with(&["--etcd-servers", etcd_servers, "--token-auth-file", &file])
}

/// One HTTPS request with [`TOKEN`] (the server's certificate is not checked): the status code,
/// the body, and how long the answer took. Python's urllib, with a client timeout well above
/// what the test allows, so that a hanging server fails the test instead of hanging it.
fn request(s: &Server, method: &str, path: &str, body: Option<&str>) -> (u16, String, Duration) {
    request_to(&s.url, method, path, body)
}

/// A watch read as it streams: every event's type and object name, in order.
struct Watch {
    child: std::process::Child,
    events: Arc<Mutex<Vec<(String, String)>>>,
}

impl Watch {
    fn open(s: &Server, path: &str) -> Watch {
        const SCRIPT: &str = "import ssl,sys,urllib.request\n\
ctx=ssl.create_default_context();ctx.check_hostname=False;ctx.verify_mode=ssl.CERT_NONE\n\
req=urllib.request.Request(sys.argv[1],headers={'Authorization':'Bearer '+sys.argv[2]})\n\
r=urllib.request.urlopen(req,context=ctx)\n\
for line in r:\n sys.stdout.write(line.decode());sys.stdout.flush()\n";
        let mut child = Command::new("python3")
            .args(["-c", SCRIPT, &format!("{}{path}", s.url), TOKEN])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let stdout = child.stdout.take().expect("piped stdout");
        let events = Arc::new(Mutex::new(Vec::new()));
        std::thread::spawn({
            let events = events.clone();
            move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
                        continue;
                    };
                    let kind = event["type"].as_str().unwrap_or_default().to_string();
                    let name = event["object"]["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    events
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((kind, name));
                }
            }
        });
        Watch { child, events }
    }

    fn events(&self) -> Vec<(String, String)> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What upstream's timeout filter answers when etcd does not answer before the deadline.
fn assert_timeout_status(
    what: &str,
    (code, body, elapsed): (u16, String, Duration),
    within: Duration,
) {
    assert_eq!(code, 504, "{what}: {body}");
    let status: serde_json::Value = serde_json::from_str(&body).expect("a Status");
    assert_eq!(
        status,
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "code": 504, "reason": "Timeout", "details": {},
            "message": "Timeout: request did not complete within the allotted timeout"}),
        "{what}"
    );
    assert!(elapsed < within, "{what} took {elapsed:?}");
    eprintln!("{what}: 504 after {elapsed:?}");
}

fn configmap(name: &str) -> String {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
        .to_string()
}

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

#[test]
fn etcd_down_fails_promptly_and_watches_resume_when_it_returns() {
    let mut etcd = EtcdServer::start().expect("a real etcd (apt-get install -y etcd-server)");
    let tokens = tempfile::tempdir().expect("tempdir");
    let s = start(&etcd.url, &tokens);
    s.wait_for_root_ca("default");
    for name in ["before", "doomed"] {
        let (code, body, _) = request(&s, "POST", CONFIGMAPS, Some(&configmap(name)));
        assert_eq!(code, 201, "{body}");
    }
    let (_, list, _) = request(&s, "GET", CONFIGMAPS, None);
    let list: serde_json::Value = serde_json::from_str(&list).expect("a list");
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("the list's resourceVersion")
        .to_string();
    // On the watch cache: from an exact version, with a timeout beyond the test's length.
    let watch = Watch::open(
        &s,
        &format!("{CONFIGMAPS}?watch=1&resourceVersion={rv}&timeoutSeconds=600"),
    );
    std::thread::sleep(Duration::from_millis(500));

    for fault in ["freeze", "kill"] {
        match fault {
            "freeze" => etcd.pause().expect("SIGSTOP etcd"),
            _ => etcd.kill(),
        }
        // A request made as etcd goes away waits at most for the etcd check to fail (a probe
        // a second, 2 s timeout) instead of the 60 s deadline.
        assert_timeout_status(
            &format!("GET with etcd {fault}"),
            request(&s, "GET", &format!("{CONFIGMAPS}/before"), None),
            Duration::from_secs(8),
        );
        let (code, ready, _) = request(&s, "GET", "/readyz?verbose", None);
        assert_eq!(code, 500, "{ready}");
        assert!(ready.contains("[-]etcd failed"), "{ready}");
        // Once the check has failed, requests fail at once. A consistent list is not served
        // from the watch cache, which cannot know it is current.
        let prompt = Duration::from_secs(3);
        assert_timeout_status(
            &format!("LIST with etcd {fault}"),
            request(&s, "GET", CONFIGMAPS, None),
            prompt,
        );
        assert_timeout_status(
            &format!("CREATE with etcd {fault}"),
            request(&s, "POST", CONFIGMAPS, Some(&configmap("refused"))),
            prompt,
        );

        match fault {
            "freeze" => etcd.resume().expect("SIGCONT etcd"),
            _ => etcd.restart().expect("etcd restarts on its data"),
        }
        let back = Instant::now();
        wait_until("the server to serve again", 30, || {
            request(&s, "GET", &format!("{CONFIGMAPS}/before"), None).0 == 200
        });
        eprintln!("serving {:?} after etcd's return ({fault})", back.elapsed());
        wait_until("/readyz", 30, || {
            request(&s, "GET", "/readyz", None).0 == 200
        });
        let (code, body, _) = request(
            &s,
            "POST",
            CONFIGMAPS,
            Some(&configmap(&format!("after-{fault}"))),
        );
        assert_eq!(code, 201, "{body}");
        if fault == "freeze" {
            let (code, body, _) = request(&s, "DELETE", &format!("{CONFIGMAPS}/doomed"), None);
            assert_eq!(code, 200, "{body}");
        }
    }
    let (code, body, _) = request(&s, "GET", &format!("{CONFIGMAPS}/refused"), None);
    assert_eq!(code, 404, "a refused create was not applied: {body}");

    // The watch opened before both outages saw each write made after them, once, in order,
    // and nothing again of what it had seen.
    let expected = [
        ("ADDED", "after-freeze"),
        ("DELETED", "doomed"),
        ("ADDED", "after-kill"),
    ]
    .map(|(t, n)| (t.to_string(), n.to_string()));
    let ours = || {
        watch
            .events()
            .into_iter()
            .filter(|(_, name)| name != common::ROOT_CA)
            .collect::<Vec<_>>()
    };
    wait_until("the pre-outage watch to see the new writes", 20, || {
        ours().len() >= expected.len()
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(ours(), expected);
}

/// What one writer saw: the names acknowledged (201), and every failure as
/// `(name, first answer, answer to the one retry)`.
#[derive(Default)]
struct Written {
    acknowledged: Vec<String>,
    /// A write whose first attempt failed, and every attempt's answer.
    failures: Vec<(String, Vec<String>)>,
    /// Acknowledged after `Writers::mark`.
    acknowledged_after_mark: usize,
}

/// Concurrent writers, each creating ConfigMaps `<prefix><writer>-<n>` one after another
/// through the real server until stopped; a failed create is retried up to [`RETRIES`] times,
/// half a second apart (a 409 on a retry means an earlier attempt was applied after all).
/// A failed write's retries at most: an etcd election under a loaded machine can outlast one.
const RETRIES: usize = 5;

struct Writers {
    stop: Arc<std::sync::atomic::AtomicBool>,
    mark: Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Written>>,
}

impl Writers {
    fn start(servers: &[&Server], per_server: usize, prefix: &str) -> Writers {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = Arc::new(AtomicBool::new(false));
        let mark = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for (index, server) in servers.iter().enumerate() {
            for writer in 0..per_server {
                let url = server.url.clone();
                let (stop, mark) = (stop.clone(), mark.clone());
                let name_prefix = format!("{prefix}{index}-{writer}-");
                threads.push(std::thread::spawn(move || {
                    let mut written = Written::default();
                    let mut n = 0;
                    while !stop.load(Ordering::SeqCst) {
                        let name = format!("{name_prefix}{n}");
                        n += 1;
                        let body = configmap(&name);
                        let (code, answer, _) = request_to(&url, "POST", CONFIGMAPS, Some(&body));
                        if code == 201 {
                            written.acknowledged.push(name);
                            if mark.load(Ordering::SeqCst) {
                                written.acknowledged_after_mark += 1;
                            }
                            continue;
                        }
                        // Retried as a client would, until it is applied or found applied;
                        // while etcd elects a leader an attempt may fail again.
                        let mut answers = vec![format!("{code} {answer}")];
                        for _ in 0..RETRIES {
                            std::thread::sleep(Duration::from_millis(500));
                            let (again, retry, _) =
                                request_to(&url, "POST", CONFIGMAPS, Some(&body));
                            answers.push(format!("{again} {retry}"));
                            if again == 201 {
                                written.acknowledged.push(name.clone());
                                if mark.load(Ordering::SeqCst) {
                                    written.acknowledged_after_mark += 1;
                                }
                            }
                            if again == 201 || again == 409 {
                                break;
                            }
                        }
                        written.failures.push((name, answers));
                    }
                    written
                }));
            }
        }
        Writers {
            stop,
            mark,
            threads,
        }
    }

    /// From now on, count acknowledged writes separately.
    fn mark(&self) {
        self.mark.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn stop(self) -> Vec<Written> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.threads
            .into_iter()
            .map(|t| t.join().expect("writer thread"))
            .collect()
    }
}

/// [`request`] to a server by URL.
fn request_to(url: &str, method: &str, path: &str, body: Option<&str>) -> (u16, String, Duration) {
    const SCRIPT: &str = "import ssl,sys,urllib.request\n\
ctx=ssl.create_default_context();ctx.check_hostname=False;ctx.verify_mode=ssl.CERT_NONE\n\
body=sys.argv[4].encode() if sys.argv[4] else None\n\
req=urllib.request.Request(sys.argv[1],data=body,method=sys.argv[2],headers={'Authorization':'Bearer '+sys.argv[3],'Content-Type':'application/json'})\n\
try:\n r=urllib.request.urlopen(req,context=ctx,timeout=90);print(r.status,r.read().decode())\n\
except urllib.error.HTTPError as e:\n print(e.code,e.read().decode())\n\
except Exception as e:\n print(0,e)\n";
    let started = Instant::now();
    let out = Command::new("python3")
        .args(["-c", SCRIPT, &format!("{url}{path}"), method, TOKEN])
        .arg(body.unwrap_or(""))
        .output()
        .expect("python3 runs");
    let elapsed = started.elapsed();
    let out = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let (code, body) = out.split_once(' ').unwrap_or((&out, ""));
    (code.parse().unwrap_or(0), body.to_string(), elapsed)
}

/// The names of the ConfigMaps in `default` whose name starts with `prefix`, listed through `s`.
fn listed(s: &Server, prefix: &str) -> std::collections::BTreeSet<String> {
    let (code, body, _) = request(s, "GET", CONFIGMAPS, None);
    assert_eq!(code, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).expect("a list");
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|item| item["metadata"]["name"].as_str())
        .filter(|name| name.starts_with(prefix))
        .map(String::from)
        .collect()
}

#[test]
fn one_etcd_member_of_three_lost_under_write_load() {
    let mut members = EtcdServer::start_cluster(3).expect("a real 3-member etcd cluster");
    let servers = members
        .iter()
        .map(|m| m.url.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let tokens = tempfile::tempdir().expect("tempdir");
    let s = start(&servers, &tokens);
    let writers = Writers::start(&[&s], 4, "load-");
    std::thread::sleep(Duration::from_secs(3));
    // The leader: its loss is the worst case (an election before any write commits).
    let leader = members
        .iter()
        .position(EtcdServer::is_leader)
        .expect("a leader");
    members[leader].kill();
    let killed = Instant::now();
    writers.mark();
    // Long enough for a write that the lost leader had taken to time out in etcd (its proposal
    // timeout is about 7 s) and be retried, and for writes to go on after.
    std::thread::sleep(Duration::from_secs(12));
    let written = writers.stop();
    eprintln!(
        "writers stopped {:?} after the leader's loss",
        killed.elapsed()
    );

    let acknowledged: std::collections::BTreeSet<String> = written
        .iter()
        .flat_map(|w| w.acknowledged.iter().cloned())
        .collect();
    let after: usize = written.iter().map(|w| w.acknowledged_after_mark).sum();
    let failures: Vec<_> = written.iter().flat_map(|w| w.failures.iter()).collect();
    eprintln!(
        "{} writes acknowledged, {after} after the leader was killed; {} failed at first: {failures:#?}",
        acknowledged.len(),
        failures.len()
    );
    assert!(after > 0, "writes go on after the leader's loss");
    // Every failure is the storage's, answered as upstream answers it while etcd has no leader
    // (a 500 with etcd's error), and the retries absorb it: one was applied, or found an earlier
    // attempt applied after all.
    for (name, answers) in &failures {
        let (last, failed) = answers.split_last().expect("at least the first answer");
        assert!(
            last.starts_with("201 ") || last.starts_with("409 "),
            "{name}: {answers:#?}"
        );
        assert!(
            failed.iter().all(|a| a.starts_with("500 ")),
            "{name}: {answers:#?}"
        );
    }
    // Every acknowledged write is there, through the server and in etcd's surviving members.
    let found = listed(&s, "load-");
    let missing: Vec<_> = acknowledged.difference(&found).collect();
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    let survivor = &members[(leader + 1) % 3];
    let keys = survivor
        .raw_keys("/registry/configmaps/default/load-")
        .expect("etcd's keys");
    for name in &acknowledged {
        assert!(
            keys.contains(&format!("/registry/configmaps/default/{name}")),
            "{name}"
        );
    }
}

#[test]
fn a_replica_killed_under_write_load() {
    let etcd = EtcdServer::start().expect("a real etcd (apt-get install -y etcd-server)");
    let pki = tempfile::tempdir().expect("tempdir");
    let pki_dir = pki.path().to_string_lossy().into_owned();
    let tokens = tempfile::tempdir().expect("tempdir");
    let file = tokens.path().join("tokens.csv");
    std::fs::write(&file, format!("{TOKEN},admin,uid-0,\"system:masters\"\n"))
        .expect("write the token file");
    let file = file.to_string_lossy().into_owned();
    let replica = |advertise: &str| {
        Server::start_with(&[
            "--etcd-servers",
            &etcd.url,
            "--cert-dir",
            &pki_dir,
            "--advertise-address",
            advertise,
            "--token-auth-file",
            &file,
        ])
    };
    let survivor = replica("127.0.0.1");
    let doomed = replica("127.0.0.2");
    let on_survivor = Writers::start(&[&survivor], 3, "kept-");
    let on_doomed = Writers::start(&[&doomed], 3, "gone-");
    std::thread::sleep(Duration::from_secs(3));
    drop(doomed.kill9());
    on_survivor.mark();
    std::thread::sleep(Duration::from_secs(5));
    let kept = on_survivor.stop();
    let gone = on_doomed.stop();

    // The survivor kept serving: every one of its writes succeeded, before and after.
    let failures: Vec<_> = kept.iter().flat_map(|w| w.failures.iter()).collect();
    assert!(failures.is_empty(), "{failures:#?}");
    let after: usize = kept.iter().map(|w| w.acknowledged_after_mark).sum();
    assert!(after > 0, "the survivor wrote after the kill");
    // Nothing acknowledged by either replica was lost.
    let acknowledged: std::collections::BTreeSet<String> = kept
        .iter()
        .chain(&gone)
        .flat_map(|w| w.acknowledged.iter().cloned())
        .collect();
    let mut found = listed(&survivor, "kept-");
    found.extend(listed(&survivor, "gone-"));
    let missing: Vec<_> = acknowledged.difference(&found).collect();
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    eprintln!(
        "{} writes acknowledged ({after} by the survivor after the kill); the killed replica's \
         writers saw {} failures (connection refused after the kill)",
        acknowledged.len(),
        gone.iter().map(|w| w.failures.len()).sum::<usize>()
    );
}
