//! Durability: `kill -9` the server during a stream of writes; after a restart every write that
//! got a 2xx is there.

use crate::common;

use std::sync::{Arc, Mutex};

use common::Server;

#[test]
fn acknowledged_writes_survive_kill_9() {
    let s = Server::start();
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let kubeconfig = s.kubeconfig();
    let mut writers = Vec::new();
    for w in 0..4 {
        let acked = acked.clone();
        let kubeconfig = kubeconfig.clone();
        writers.push(std::thread::spawn(move || {
            for i in 0..1000 {
                let name = format!("crash-{w}-{i}");
                let out = std::process::Command::new(common::kubectl_path())
                    .env("KUBECONFIG", &kubeconfig)
                    .args(["create", "configmap", &name, "--from-literal=v=1"])
                    .output()
                    .expect("kubectl runs");
                if out.status.success() {
                    acked.lock().unwrap().push(name);
                } else {
                    break;
                }
            }
        }));
    }
    // Let some writes land, then pull the plug mid-stream.
    while acked.lock().unwrap().len() < 40 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let dir = s.kill9();
    for w in writers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 40);
    let s = Server::start_in(dir);
    let names = s.kubectl(&["get", "cm", "-o", "name"]);
    let missing: Vec<&String> = acked
        .iter()
        .filter(|n| !names.contains(&format!("configmap/{n}\n")))
        .collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged writes lost, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
}
