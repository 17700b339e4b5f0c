//! Where each built-in group version sorts among the others: the `groupPriorityMinimum` and
//! `versionPriority` of the APIService that autoregistration writes for it (upstream: the table of
//! pkg/controlplane/apiserver/aggregator.go merged with cmd/kube-apiserver/app/aggregator.go's).
//! A built-in group version without a row gets no APIService, as upstream skips it; custom
//! resources' group versions all get [`CRD_GROUP_PRIORITY`] and [`CRD_VERSION_PRIORITY`].

/// `(group, version, groupPriorityMinimum, versionPriority)`.
const PRIORITIES: &[(&str, &str, i64, i64)] = &[
    ("", "v1", 18000, 1),
    ("events.k8s.io", "v1", 17750, 15),
    ("events.k8s.io", "v1beta1", 17750, 5),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authentication.k8s.io", "v1beta1", 17700, 9),
    ("authentication.k8s.io", "v1alpha1", 17700, 1),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("certificates.k8s.io", "v1beta1", 17300, 9),
    ("certificates.k8s.io", "v1alpha1", 17300, 1),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1beta1", 16700, 12),
    ("admissionregistration.k8s.io", "v1alpha1", 16700, 9),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("coordination.k8s.io", "v1beta1", 16500, 13),
    ("coordination.k8s.io", "v1alpha2", 16500, 12),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("discovery.k8s.io", "v1beta1", 16200, 12),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
    ("flowcontrol.apiserver.k8s.io", "v1beta3", 16100, 18),
    ("flowcontrol.apiserver.k8s.io", "v1beta2", 16100, 15),
    ("flowcontrol.apiserver.k8s.io", "v1beta1", 16100, 12),
    ("flowcontrol.apiserver.k8s.io", "v1alpha1", 16100, 9),
    ("internal.apiserver.k8s.io", "v1alpha1", 16000, 9),
    ("storagemigration.k8s.io", "v1beta1", 15800, 9),
    // kube-apiserver's own groups, merged over the generic table (its `resource.k8s.io` rows
    // replace the generic one).
    ("apps", "v1", 17800, 15),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2", 17500, 30),
    ("autoscaling", "v2beta1", 17500, 9),
    ("autoscaling", "v2beta2", 17500, 1),
    ("batch", "v1", 17400, 15),
    ("batch", "v1beta1", 17400, 9),
    ("batch", "v2alpha1", 17400, 9),
    ("networking.k8s.io", "v1", 17200, 15),
    ("networking.k8s.io", "v1beta1", 17200, 9),
    ("policy", "v1", 17100, 15),
    ("policy", "v1beta1", 17100, 9),
    ("storage.k8s.io", "v1", 16800, 15),
    ("storage.k8s.io", "v1beta1", 16800, 9),
    ("storage.k8s.io", "v1alpha1", 16800, 1),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("scheduling.k8s.io", "v1alpha2", 16600, 2),
    ("node.k8s.io", "v1", 16300, 15),
    ("node.k8s.io", "v1alpha1", 16300, 1),
    ("node.k8s.io", "v1beta1", 16300, 9),
    ("resource.k8s.io", "v1", 16200, 21),
    ("resource.k8s.io", "v1beta2", 16200, 15),
    ("resource.k8s.io", "v1beta1", 16200, 9),
    ("resource.k8s.io", "v1alpha3", 16200, 1),
];

/// Custom resources sort after every built-in group (upstream's crdregistration controller).
pub const CRD_GROUP_PRIORITY: i64 = 1000;
/// Custom resources' versions sort among themselves by their names (kube-like version order).
pub const CRD_VERSION_PRIORITY: i64 = 100;

/// The priorities of a built-in group version, if upstream registers an APIService for it.
pub fn builtin(group: &str, version: &str) -> Option<(i64, i64)> {
    PRIORITIES
        .iter()
        .find(|(g, v, _, _)| *g == group && *v == version)
        .map(|&(_, _, g, v)| (g, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_unique_and_the_merge_keeps_kube_apiservers_values() {
        for (i, (g, v, _, _)) in PRIORITIES.iter().enumerate() {
            assert!(
                !PRIORITIES[i + 1..]
                    .iter()
                    .any(|(g2, v2, _, _)| g2 == g && v2 == v),
                "{v}.{g} twice"
            );
        }
        assert_eq!(builtin("", "v1"), Some((18000, 1)));
        assert_eq!(builtin("resource.k8s.io", "v1"), Some((16200, 21)));
        assert_eq!(builtin("autoscaling", "v2"), Some((17500, 30)));
        assert_eq!(builtin("apiregistration.k8s.io", "v1"), None);
    }
}
