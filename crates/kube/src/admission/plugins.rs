//! Which admission plugins run (upstream: pkg/kubeapiserver/options/plugins.go and
//! k8s.io/apiserver/pkg/server/options/admission.go): every plugin name upstream registers, in
//! its order (`AllOrderedPlugins`), the ones on by default, and `--enable-admission-plugins` /
//! `--disable-admission-plugins` applied to them, and the plugins Ironplane has with the
//! operations each is called for (`IMPLEMENTED`). The chain always runs in upstream's order,
//! whatever the order of the flags. A name upstream does not register fails start-up as
//! upstream's option validation does; a plugin that is off by default and that Ironplane does
//! not implement cannot be turned on.

use apiserver::admission::Operation::{Connect, Create, Delete, Update};
use apiserver::admission::Operations;

/// `AllOrderedPlugins` of kube-apiserver v1.36.
pub const ALL_ORDERED_PLUGINS: &[&str] = &[
    "AlwaysAdmit",
    "NamespaceAutoProvision",
    "NamespaceLifecycle",
    "NamespaceExists",
    "LimitPodHardAntiAffinityTopology",
    "LimitRanger",
    "ServiceAccount",
    "NodeRestriction",
    "TaintNodesByCondition",
    "AlwaysPullImages",
    "ImagePolicyWebhook",
    "PodSecurity",
    "PodNodeSelector",
    "Priority",
    "DefaultTolerationSeconds",
    "PodTolerationRestriction",
    "EventRateLimit",
    "ExtendedResourceToleration",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "PodGroupProtection",
    "OwnerReferencesPermissionEnforcement",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DenyServiceExternalIPs",
    "PodTopologyLabels",
    "PodGroupWorkloadExists",
    "NodeDeclaredFeatureValidator",
    "JobValidation",
    "PodResizeValidator",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "AlwaysDeny",
];

/// The plugins on by default (`DefaultOffAdmissionPlugins` is every other one).
pub const DEFAULT_ON: &[&str] = &[
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "DefaultStorageClass",
    "PersistentVolumeClaimResize",
    "DefaultTolerationSeconds",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "StorageObjectInUseProtection",
    "PodGroupProtection",
    "Priority",
    "TaintNodesByCondition",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "PodSecurity",
    "PodTopologyLabels",
    "MutatingAdmissionPolicy",
    "ValidatingAdmissionPolicy",
    "PodGroupWorkloadExists",
    "NodeDeclaredFeatureValidator",
    "JobValidation",
    "PodResizeValidator",
];

/// The plugins Ironplane has, in upstream's order (`super::default_plugins` builds each of
/// them), with the operations each is called for, as each upstream plugin's
/// `admission.NewHandler(...)` says: the chain skips a plugin for the others, and records no
/// metric for it.
pub const IMPLEMENTED: &[(&str, Operations)] = &[
    (
        "NamespaceLifecycle",
        Operations::of(&[Create, Update, Delete]),
    ),
    ("LimitRanger", Operations::of(&[Create, Update])),
    ("ServiceAccount", Operations::of(&[Create, Update])),
    ("NodeRestriction", Operations::of(&[Create, Update, Delete])),
    ("TaintNodesByCondition", Operations::of(&[Create])),
    ("PodSecurity", Operations::of(&[Create, Update])),
    ("Priority", Operations::of(&[Create, Update, Delete])),
    (
        "DefaultTolerationSeconds",
        Operations::of(&[Create, Update]),
    ),
    ("DefaultStorageClass", Operations::of(&[Create])),
    ("StorageObjectInUseProtection", Operations::of(&[Create])),
    ("PersistentVolumeClaimResize", Operations::of(&[Update])),
    ("RuntimeClass", Operations::of(&[Create])),
    ("CertificateApproval", Operations::of(&[Update])),
    ("CertificateSigning", Operations::of(&[Update])),
    ("CertificateSubjectRestriction", Operations::of(&[Create])),
    ("DefaultIngressClass", Operations::of(&[Create])),
    (
        "MutatingAdmissionPolicy",
        Operations::of(&[Create, Update, Connect]),
    ),
    ("MutatingAdmissionWebhook", Operations::ALL),
    ("ValidatingAdmissionPolicy", Operations::ALL),
    ("ValidatingAdmissionWebhook", Operations::ALL),
    ("ResourceQuota", Operations::of(&[Create, Update])),
];

/// Whether Ironplane has plugin `name`.
pub fn is_implemented(name: &str) -> bool {
    IMPLEMENTED.iter().any(|(n, _)| *n == name)
}

/// The operations plugin `name` is called for (all of them for a name not in `IMPLEMENTED`).
pub fn handles(name: &str) -> Operations {
    IMPLEMENTED
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(Operations::ALL, |(_, ops)| *ops)
}

/// `AdmissionOptions.Validate` then `enabledPluginNames`: the plugins that run, in upstream's
/// order. Errors are joined as upstream's aggregate prints them.
pub fn enabled_plugins(enable: &[String], disable: &[String]) -> Result<Vec<&'static str>, String> {
    let mut errs = Vec::new();
    for name in enable {
        if !ALL_ORDERED_PLUGINS.contains(&name.as_str()) {
            errs.push(format!(
                "enable-admission-plugins plugin \"{name}\" is unknown"
            ));
        }
    }
    for name in disable {
        if !ALL_ORDERED_PLUGINS.contains(&name.as_str()) {
            errs.push(format!(
                "disable-admission-plugins plugin \"{name}\" is unknown"
            ));
        }
    }
    let mut both: Vec<&str> = enable
        .iter()
        .filter(|n| disable.contains(n))
        .map(String::as_str)
        .collect();
    both.sort_unstable();
    both.dedup();
    if !both.is_empty() {
        errs.push(format!(
            "[{}] in enable-admission-plugins and disable-admission-plugins overlapped",
            both.join(" ")
        ));
    }
    for name in enable {
        let name = name.as_str();
        if ALL_ORDERED_PLUGINS.contains(&name)
            && !DEFAULT_ON.contains(&name)
            && !is_implemented(name)
        {
            errs.push(format!(
                "admission plugin \"{name}\" is not implemented by Ironplane; remove it from --enable-admission-plugins"
            ));
        }
    }
    match errs.len() {
        0 => {}
        1 => return Err(errs.remove(0)),
        _ => return Err(format!("[{}]", errs.join(", "))),
    }
    let on = |name: &str| {
        enable.iter().any(|e| e == name)
            || (DEFAULT_ON.contains(&name) && !disable.iter().any(|d| d == name))
    };
    Ok(ALL_ORDERED_PLUGINS
        .iter()
        .copied()
        .filter(|n| on(n))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plugins declare upstream's operations; a name Ironplane lacks is not implemented.
    #[test]
    fn implemented_plugins_say_what_they_handle() {
        assert!(is_implemented("RuntimeClass") && !is_implemented("AlwaysPullImages"));
        assert!(!handles("RuntimeClass").contains(Update));
        assert!(handles("RuntimeClass").contains(Create));
        assert!(!handles("MutatingAdmissionPolicy").contains(Delete));
        assert!(handles("ValidatingAdmissionWebhook").contains(Connect));
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn defaults_in_upstream_order() {
        let on = enabled_plugins(&[], &[]).unwrap();
        assert_eq!(on.len(), DEFAULT_ON.len());
        assert_eq!(
            &on[..3],
            &["NamespaceLifecycle", "LimitRanger", "ServiceAccount"]
        );
        assert_eq!(on.last(), Some(&"ResourceQuota"));
        for (name, _) in IMPLEMENTED {
            assert!(ALL_ORDERED_PLUGINS.contains(name), "{name}");
        }
    }

    #[test]
    fn flags_enable_and_disable_in_upstream_order() {
        let on = enabled_plugins(
            &names(&["NamespaceLifecycle"]),
            &names(&["ServiceAccount", "DefaultStorageClass"]),
        )
        .unwrap();
        assert!(!on.contains(&"ServiceAccount") && !on.contains(&"DefaultStorageClass"));
        assert!(on.contains(&"NamespaceLifecycle"));
    }

    #[test]
    fn upstream_errors() {
        assert_eq!(
            enabled_plugins(&names(&["Foo"]), &[]).unwrap_err(),
            r#"enable-admission-plugins plugin "Foo" is unknown"#
        );
        assert_eq!(
            enabled_plugins(&names(&["Priority"]), &names(&["Bar", "Priority"])).unwrap_err(),
            r#"[disable-admission-plugins plugin "Bar" is unknown, [Priority] in enable-admission-plugins and disable-admission-plugins overlapped]"#
        );
        assert_eq!(
            enabled_plugins(&names(&["AlwaysPullImages"]), &[]).unwrap_err(),
            r#"admission plugin "AlwaysPullImages" is not implemented by Ironplane; remove it from --enable-admission-plugins"#
        );
    }
}
