//! Which controllers run: `--controllers`, with kube-controller-manager's syntax and names
//! (upstream: cmd/kube-controller-manager/app's controller descriptors and
//! `IsControllerEnabled`). A list item is `*` (every controller on by default), a controller's
//! name (on) or `-name` (off); the first item naming a controller decides, then `*`. Names are
//! v1.36's, and their old aliases (`garbagecollector`, `namespace`, ...) mean the same.
//!
//! Every name kube-controller-manager knows is accepted, so that one list can be given to both
//! programs; Ironplane runs only the controllers of [`RUN_IN_PROCESS`], and leaves the others
//! (workloads, nodes, volumes) to a kube-controller-manager beside it.

/// A controller kube-controller-manager v1.36 knows: its name, its aliases, and whether it is
/// off unless named.
struct Known {
    name: &'static str,
    aliases: &'static [&'static str],
    disabled_by_default: bool,
}

const fn on(name: &'static str, aliases: &'static [&'static str]) -> Known {
    Known {
        name,
        aliases,
        disabled_by_default: false,
    }
}

const fn off(name: &'static str, aliases: &'static [&'static str]) -> Known {
    Known {
        name,
        aliases,
        disabled_by_default: true,
    }
}

/// kube-controller-manager v1.36's controllers, in its registration order.
const KNOWN: &[Known] = &[
    on("serviceaccount-token-controller", &["serviceaccount-token"]),
    on("endpoints-controller", &["endpoint"]),
    on("endpointslice-controller", &["endpointslice"]),
    on(
        "endpointslice-mirroring-controller",
        &["endpointslicemirroring"],
    ),
    on(
        "replicationcontroller-controller",
        &["replicationcontroller"],
    ),
    on("pod-garbage-collector-controller", &["podgc"]),
    on("resourcequota-controller", &["resourcequota"]),
    on("namespace-controller", &["namespace"]),
    on("serviceaccount-controller", &["serviceaccount"]),
    on("garbage-collector-controller", &["garbagecollector"]),
    on("daemonset-controller", &["daemonset"]),
    on("job-controller", &["job"]),
    on("podgroup-protection-controller", &[]),
    on("deployment-controller", &["deployment"]),
    on("replicaset-controller", &["replicaset"]),
    on(
        "horizontal-pod-autoscaler-controller",
        &["horizontalpodautoscaling"],
    ),
    on("disruption-controller", &["disruption"]),
    on("statefulset-controller", &["statefulset"]),
    on("cronjob-controller", &["cronjob"]),
    on(
        "certificatesigningrequest-signing-controller",
        &["csrsigning"],
    ),
    on(
        "certificatesigningrequest-approving-controller",
        &["csrapproving"],
    ),
    on(
        "certificatesigningrequest-cleaner-controller",
        &["csrcleaner"],
    ),
    on("podcertificaterequest-cleaner-controller", &[]),
    on("ttl-controller", &["ttl"]),
    off("bootstrap-signer-controller", &["bootstrapsigner"]),
    off("token-cleaner-controller", &["tokencleaner"]),
    on("node-ipam-controller", &["nodeipam"]),
    on("node-lifecycle-controller", &["nodelifecycle"]),
    on("service-lb-controller", &["service"]),
    on("node-route-controller", &["route"]),
    on("cloud-node-lifecycle-controller", &["cloud-node-lifecycle"]),
    on(
        "persistentvolume-binder-controller",
        &["persistentvolume-binder"],
    ),
    on(
        "persistentvolume-attach-detach-controller",
        &["attachdetach"],
    ),
    on(
        "persistentvolume-expander-controller",
        &["persistentvolume-expander"],
    ),
    on(
        "clusterrole-aggregation-controller",
        &["clusterrole-aggregation"],
    ),
    on(
        "persistentvolumeclaim-protection-controller",
        &["pvc-protection"],
    ),
    on("persistentvolume-protection-controller", &["pv-protection"]),
    on("volumeattributesclass-protection-controller", &[]),
    on("ttl-after-finished-controller", &["ttl-after-finished"]),
    on(
        "root-ca-certificate-publisher-controller",
        &["root-ca-cert-publisher"],
    ),
    on(
        "kube-apiserver-serving-clustertrustbundle-publisher-controller",
        &[],
    ),
    on(
        "service-ca-certificate-publisher-controller",
        &["service-ca-cert-publisher"],
    ),
    on("ephemeral-volume-controller", &["ephemeral-volume"]),
    on(
        "storageversion-garbage-collector-controller",
        &["storage-version-gc"],
    ),
    on("resourceclaim-controller", &["resource-claim-controller"]),
    on("resourcepoolstatusrequest-controller", &[]),
    on("device-taint-eviction-controller", &[]),
    on(
        "legacy-serviceaccount-token-cleaner-controller",
        &["legacy-service-account-token-cleaner"],
    ),
    on("validatingadmissionpolicy-status-controller", &[]),
    on("taint-eviction-controller", &[]),
    on("service-cidr-controller", &[]),
    on("storage-version-migrator-controller", &["svm"]),
    off("selinux-warning-controller", &[]),
];

/// The controllers Ironplane runs itself, by upstream name. The rest of [`KNOWN`] is accepted
/// in `--controllers` and left to kube-controller-manager.
pub const RUN_IN_PROCESS: &[&str] = &[
    "namespace-controller",
    "endpoints-controller",
    "endpointslice-controller",
    "endpointslice-mirroring-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "resourcequota-controller",
    "garbage-collector-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
    "volumeattributesclass-protection-controller",
    "clusterrole-aggregation-controller",
    "certificatesigningrequest-signing-controller",
    "certificatesigningrequest-approving-controller",
    "certificatesigningrequest-cleaner-controller",
    "ttl-after-finished-controller",
    "validatingadmissionpolicy-status-controller",
    "bootstrap-signer-controller",
    "token-cleaner-controller",
    "service-cidr-controller",
    "legacy-serviceaccount-token-cleaner-controller",
];

/// The `--controllers` list, checked and with its aliases resolved.
#[derive(Debug, Clone)]
pub struct Selection {
    /// Canonical names, each with `-` kept in front when it turns the controller off.
    items: Vec<String>,
}

impl Default for Selection {
    /// kube-controller-manager's default, `*`.
    fn default() -> Self {
        Selection {
            items: vec!["*".into()],
        }
    }
}

impl Selection {
    /// Reads the list as kube-controller-manager's `ValidateControllersOptions` does: every
    /// name (without its `-`) must be a known controller or alias. The errors are upstream's.
    pub fn parse(list: &[String]) -> Result<Selection, Vec<String>> {
        let mut items = Vec::with_capacity(list.len());
        let mut errors = Vec::new();
        for item in list {
            if item == "*" {
                items.push(item.clone());
                continue;
            }
            let (sign, bare) = match item.strip_prefix('-') {
                Some(b) => ("-", b),
                None => ("", item.as_str()),
            };
            match canonical(bare) {
                Some(name) => items.push(format!("{sign}{name}")),
                None => errors.push(format!("{bare:?} is not in the list of known controllers")),
            }
        }
        if errors.is_empty() {
            Ok(Selection { items })
        } else {
            Err(errors)
        }
    }

    /// Whether the controller `name` (a canonical name of [`KNOWN`]) runs.
    pub fn enabled(&self, name: &str) -> bool {
        let mut star = false;
        for item in &self.items {
            if item == name {
                return true;
            }
            if item.strip_prefix('-') == Some(name) {
                return false;
            }
            star |= item == "*";
        }
        star && KNOWN
            .iter()
            .find(|k| k.name == name)
            .is_some_and(|k| !k.disabled_by_default)
    }
}

/// The canonical name of a controller name or alias.
fn canonical(name: &str) -> Option<&'static str> {
    KNOWN
        .iter()
        .find(|k| k.name == name || k.aliases.contains(&name))
        .map(|k| k.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(items: &[&str]) -> Selection {
        Selection::parse(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn star_runs_what_is_on_by_default() {
        let s = Selection::default();
        assert!(s.enabled("garbage-collector-controller"));
        assert!(!s.enabled("bootstrap-signer-controller"));
        assert!(!s.enabled("not-a-controller"));
    }

    #[test]
    fn first_mention_decides_and_aliases_mean_the_name() {
        let s = sel(&["*", "-garbagecollector", "bootstrapsigner"]);
        assert!(!s.enabled("garbage-collector-controller"));
        assert!(s.enabled("bootstrap-signer-controller"));
        assert!(s.enabled("namespace-controller"));
        let s = sel(&["namespace", "-namespace"]);
        assert!(s.enabled("namespace-controller"));
        assert!(
            !s.enabled("serviceaccount-controller"),
            "no star: only what is named"
        );
        let s = sel(&["-namespace-controller", "*"]);
        assert!(!s.enabled("namespace-controller"));
    }

    #[test]
    fn unknown_names_are_refused_in_upstream_words() {
        let errs = Selection::parse(&["*".into(), "-nope".into(), "garbage".into()]).unwrap_err();
        assert_eq!(
            errs,
            vec![
                "\"nope\" is not in the list of known controllers",
                "\"garbage\" is not in the list of known controllers"
            ]
        );
    }

    /// The README's command line for kube-controller-manager beside Ironplane turns off
    /// exactly the controllers Ironplane runs.
    #[test]
    fn the_readmes_controller_manager_list_is_the_complement() {
        let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"));
        let line = readme
            .lines()
            .find_map(|l| l.trim().strip_prefix("--controllers=*,"))
            .expect("README shows kube-controller-manager's --controllers");
        let mut off: Vec<&str> = line.split(',').map(|n| n.trim_start_matches('-')).collect();
        off.sort();
        let mut ours = RUN_IN_PROCESS.to_vec();
        ours.sort();
        assert_eq!(off, ours);
    }

    #[test]
    fn every_in_process_controller_is_a_known_one() {
        for name in RUN_IN_PROCESS {
            assert!(KNOWN.iter().any(|k| k.name == *name), "{name}");
        }
    }
}
