//! Leader election of the in-process controllers, end to end: two real binaries on a real etcd
//! started here (Debian's `etcd-server`; missing etcd fails the test), with the election's
//! timings shortened by kube-controller-manager's flags. One replica holds the Lease and runs
//! the controllers, so a new namespace gets its `default` ServiceAccount and `kube-root-ca.crt`
//! (with the leader's CA, unchanged while it leads, though the replicas' CAs differ) and a
//! Service gets one EndpointSlice; the Lease moves to the other replica when the leader is
//! killed, or at once when it stops gracefully, as its address leaves the `kubernetes`
//! endpoints. On the embedded store there is no election.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{ROOT_CA, Server};
use serde_json::Value;
use storage::testing::EtcdServer;

const LEASE: &str = "ironplane-controller-manager";
/// The election's timings: kube-controller-manager's 15s/10s/2s shortened.
const LEASE_DURATION_SECONDS: u64 = 4;

/// Starts a replica on `etcd` advertising `advertise`, with the certificates and keys in `pki`
/// or, without it, its own.
fn replica(etcd: &EtcdServer, pki: Option<&std::path::Path>, advertise: &str) -> Server {
    let mut args = vec![
        "--etcd-servers".to_string(),
        etcd.url.clone(),
        "--advertise-address".into(),
        advertise.into(),
        "--leader-elect-lease-duration".into(),
        "4s".into(),
        "--leader-elect-renew-deadline".into(),
        "3s".into(),
        "--leader-elect-retry-period".into(),
        "1s".into(),
    ];
    if let Some(pki) = pki {
        args.extend(["--cert-dir".into(), pki.to_string_lossy().into_owned()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Server::start_with(&args)
}

/// The CA `s` generated in its data directory.
fn own_ca(s: &Server) -> String {
    std::fs::read_to_string(s.dir.path().join("pki").join("ca.crt")).expect("the CA")
}

/// The `kube-root-ca.crt` ConfigMap of `ns`: its CA and resourceVersion.
fn root_ca(s: &Server, ns: &str) -> (String, String) {
    let cm = s
        .get_json(ns, &format!("configmap/{ROOT_CA}"))
        .expect("the root CA ConfigMap");
    (
        cm["data"]["ca.crt"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        cm["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// The election's Lease as `s` serves it.
fn lease(s: &Server) -> Option<Value> {
    s.get_json("kube-system", &format!("lease/{LEASE}"))
}

fn holder(s: &Server) -> String {
    lease(s)
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(String::from))
        .unwrap_or_default()
}

/// `line` without its terminal colour sequences (`ESC [ ... m`).
fn strip_colours(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The identity `s` logged when it acquired the Lease, if it has.
fn acquired_as(s: &Server) -> Option<String> {
    s.log_lines()
        .iter()
        .map(|l| strip_colours(l))
        .filter(|l| l.contains("successfully acquired lease"))
        .filter_map(|l| {
            let rest = l.split("identity=").nth(1)?;
            // klog's text quotes string values.
            let value = rest.split_whitespace().next().unwrap_or("");
            Some(value.trim_matches('"').to_string())
        })
        .next_back()
}

/// How many EndpointSlices `s` serves for the Service `name` in `default`.
fn slices_of(s: &Server, name: &str) -> usize {
    let out = s.kubectl(&[
        "-n",
        "default",
        "get",
        "endpointslices",
        "-l",
        &format!("kubernetes.io/service-name={name}"),
        "-o",
        "name",
    ]);
    out.lines().count()
}

/// A namespace created through `s` gets its `default` ServiceAccount and root CA ConfigMap.
fn namespace_is_filled_in(s: &Server, ns: &str) {
    s.kubectl(&["create", "namespace", ns]);
    common::wait_until("the default ServiceAccount", 20, || {
        s.get_json(ns, "serviceaccount/default").is_some()
    });
    s.wait_for_root_ca(ns);
    assert!(s.get_json(ns, &format!("configmap/{ROOT_CA}")).is_some());
}

#[test]
fn one_replica_leads_and_the_other_takes_over_when_it_is_killed() {
    let etcd = EtcdServer::start().expect("a real etcd (apt-get install -y etcd-server)");
    // Each with its own CA: one root CA publisher runs, so `kube-root-ca.crt` holds the
    // leader's CA and stays put, where two publishers would rewrite it in turn.
    let a = replica(&etcd, None, "127.0.0.1");
    let b = replica(&etcd, None, "127.0.0.2");
    assert_ne!(own_ca(&a), own_ca(&b));

    common::wait_until("a leader", 20, || !holder(&a).is_empty());
    let first = holder(&a);
    let (leader, follower) = match (acquired_as(&a), acquired_as(&b)) {
        (Some(id), None) if id == first => (a, b),
        (None, Some(id)) if id == first => (b, a),
        other => panic!("exactly one replica acquires {first}: {other:?}"),
    };
    // client-go's LeaseLock, written as kube-controller-manager writes it.
    let l = lease(&follower).expect("the lease");
    assert_eq!(l["spec"]["leaseDurationSeconds"], LEASE_DURATION_SECONDS);
    assert_eq!(l["spec"]["leaseTransitions"], 0);
    let micro = l["spec"]["renewTime"].as_str().expect("renewTime");
    assert_eq!(micro.len(), "2006-01-02T15:04:05.000000Z".len(), "{micro}");
    assert_eq!(
        l["spec"]["acquireTime"].as_str().map(str::len),
        Some(micro.len())
    );
    let shown = follower.kubectl(&[
        "-n",
        "kube-system",
        "get",
        "lease",
        LEASE,
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    let shown: Value = serde_json::from_str(&shown).expect("JSON");
    assert_eq!(
        shown["metadata"]["managedFields"][0]["manager"], "kube-controller-manager",
        "{shown}"
    );
    let (host, uuid) = first.rsplit_once('_').expect("<hostname>_<uuid>");
    assert!(!host.is_empty() && uuid.len() == 36, "{first}");

    // The leader renews; the follower never takes the Lease while it does.
    let renewed = l["spec"]["renewTime"].clone();
    common::wait_until("a renewal", 10, || {
        lease(&follower).is_some_and(|l| l["spec"]["renewTime"] != renewed)
    });
    assert_eq!(holder(&follower), first);
    assert_eq!(acquired_as(&follower), None);

    // The controllers work, once: a namespace made through the follower is filled in, and a
    // Service gets one EndpointSlice.
    namespace_is_filled_in(&follower, "team-a");
    follower.kubectl(&["create", "service", "clusterip", "web", "--tcp=80:8080"]);
    common::wait_until("the Service's EndpointSlice", 20, || {
        slices_of(&follower, "web") >= 1
    });
    // Time for a second writer to show.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(slices_of(&follower, "web"), 1);
    let accounts = follower.kubectl(&["-n", "team-a", "get", "serviceaccounts", "-o", "name"]);
    assert_eq!(accounts.lines().count(), 1, "{accounts}");
    let published = root_ca(&follower, "team-a");
    assert_eq!(published.0, own_ca(&leader));
    for _ in 0..8 {
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(root_ca(&follower, "team-a"), published, "one writer");
    }
    let follower_ca = own_ca(&follower);

    // Killed without a word: the follower takes over once the lease has gone unrenewed for its
    // duration (plus a jittered retry), and the controllers work there.
    let killed = Instant::now();
    drop(leader.kill9());
    common::wait_until("the follower to lead", 20, || {
        let h = holder(&follower);
        !h.is_empty() && h != first
    });
    let took = killed.elapsed();
    eprintln!("the follower took over {took:?} after the leader was killed");
    assert!(
        took < Duration::from_secs(LEASE_DURATION_SECONDS + 5),
        "took over after {took:?}"
    );
    assert!(
        took >= Duration::from_secs(LEASE_DURATION_SECONDS - 2),
        "took an unexpired lease after {took:?}"
    );
    assert_eq!(acquired_as(&follower), Some(holder(&follower)));
    assert_eq!(
        lease(&follower).expect("lease")["spec"]["leaseTransitions"],
        1
    );
    namespace_is_filled_in(&follower, "team-b");
    // The new leader's publisher puts its CA in every namespace.
    assert_eq!(root_ca(&follower, "team-b").0, follower_ca);
    common::wait_until("the new leader's CA in team-a", 10, || {
        root_ca(&follower, "team-a").0 == follower_ca
    });
    // A LeaderElection Event for each leader.
    common::wait_until("the LeaderElection Events", 10, || {
        let events = follower.kubectl(&[
            "-n",
            "kube-system",
            "get",
            "events",
            "--field-selector",
            "reason=LeaderElection",
            "-o",
            "jsonpath={.items[*].message}",
        ]);
        events.contains(&format!("{first} became leader"))
            && events.contains(&format!("{} became leader", holder(&follower)))
    });
}

#[test]
fn a_stopping_leader_releases_the_lease_and_leaves_the_endpoints() {
    let etcd = EtcdServer::start().expect("a real etcd (apt-get install -y etcd-server)");
    let pki = tempfile::tempdir().expect("tempdir");
    let a = replica(&etcd, Some(pki.path()), "127.0.0.1");
    common::wait_until("a to lead", 20, || acquired_as(&a).is_some());
    let b = replica(&etcd, Some(pki.path()), "127.0.0.2");
    let first = holder(&b);
    assert_eq!(acquired_as(&a), Some(first.clone()));

    let both = (
        "127.0.0.1 127.0.0.2".to_string(),
        "127.0.0.1 127.0.0.2".to_string(),
    );
    common::wait_until("both replicas in the kubernetes endpoints", 30, || {
        b.kubernetes_endpoints() == both
    });

    // SIGTERM: the Lease is released as the leader stops, and the follower takes it within a
    // retry period or two rather than after the lease duration.
    let stopped = Instant::now();
    assert!(a.terminate().success());
    // It has left the `kubernetes` endpoints before it exited, not when its 15 s lease
    // expires.
    assert_eq!(
        etcd.raw_keys("/registry/masterleases/")
            .expect("etcd's keys"),
        BTreeSet::from(["/registry/masterleases/127.0.0.2".to_string()])
    );
    let one = ("127.0.0.2".to_string(), "127.0.0.2".to_string());
    assert_eq!(b.kubernetes_endpoints(), one);
    let released = lease(&b).expect("lease");
    assert_ne!(
        released["spec"]["holderIdentity"],
        first.as_str(),
        "{released}"
    );
    common::wait_until("the follower to lead", 10, || acquired_as(&b).is_some());
    let took = stopped.elapsed();
    eprintln!("the follower took over {took:?} after SIGTERM to the leader");
    assert!(
        took < Duration::from_secs(LEASE_DURATION_SECONDS),
        "{took:?}"
    );
    namespace_is_filled_in(&b, "after");
}

#[test]
fn the_embedded_store_runs_the_controllers_without_an_election() {
    let s = Server::start();
    namespace_is_filled_in(&s, "solo");
    assert!(lease(&s).is_none(), "no election on the embedded store");
    assert!(acquired_as(&s).is_none());
}
