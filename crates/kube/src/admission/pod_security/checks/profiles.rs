//! Security profiles: AppArmor, SELinux and seccomp, set on the pod, its containers or (the
//! deprecated way) in annotations (upstream: check_appArmorProfile.go, check_seLinuxOptions.go,
//! check_seccompProfile_{baseline,restricted}.go).

use apimachinery::validation::go_quote;
use serde_json::Value;

use super::{
    Check, Pod, Rule, Sorted, Violation, at, container_name, containers_phrase, join_quote, plural,
    rule, str_at,
};
use crate::admission::pod_security::api::Level;

pub(super) const CHECKS: &[Check] = &[
    Check {
        id: "appArmorProfile",
        level: Level::Baseline,
        rules: &[rule(0, app_armor)],
    },
    Check {
        id: "seLinuxOptions",
        level: Level::Baseline,
        rules: &[rule(0, se_linux_1_0), rule(31, se_linux_1_31)],
    },
    Check {
        id: "seccompProfile_baseline",
        level: Level::Baseline,
        rules: &[rule(0, seccomp_annotations), rule(19, seccomp_baseline)],
    },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        rules: &[
            Rule {
                since: 19,
                check: seccomp_restricted,
                overrides: &["seccompProfile_baseline"],
            },
            Rule {
                since: 25,
                check: seccomp_restricted_unless_windows,
                overrides: &["seccompProfile_baseline"],
            },
        ],
    },
];

/// Who set a bad value: `pod`, `containers "a", "b"`, ... joined with ` and `.
struct Setters(Vec<String>);

impl Setters {
    fn new(pod: bool) -> Self {
        Self(if pod { vec!["pod".into()] } else { Vec::new() })
    }

    fn containers<S: AsRef<str>>(&mut self, names: &[S]) {
        if !names.is_empty() {
            self.0.push(containers_phrase(names));
        }
    }

    fn joined(&self) -> String {
        self.0.join(" and ")
    }
}

const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

fn app_armor(pod: &Pod<'_>) -> Option<Violation> {
    let allowed_type = |t: &str| t == "RuntimeDefault" || t == "Localhost";
    fn profile_type(ctx: &Value) -> Option<&str> {
        at(ctx, &["appArmorProfile"]).map(|p| str_at(p, &["type"]).unwrap_or(""))
    }
    let mut values = Sorted::new();
    let pod_bad = match pod.pod_context(&[]).and_then(profile_type) {
        Some(t) if !allowed_type(t) => {
            values.insert(t.to_string());
            true
        }
        _ => false,
    };
    let mut setters = Setters::new(pod_bad);
    let mut bad = Vec::new();
    for c in pod.containers() {
        if let Some(t) = at(c, &["securityContext"]).and_then(profile_type)
            && !allowed_type(t)
        {
            bad.push(container_name(c));
            values.insert(t.to_string());
        }
    }
    setters.containers(&bad);
    let mut annotations: Vec<String> = pod
        .annotations()
        .filter(|(k, v)| {
            k.starts_with(APPARMOR_ANNOTATION_PREFIX)
                && !(v.is_empty() || *v == "runtime/default" || v.starts_with("localhost/"))
        })
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect();
    let mut values: Vec<String> = values.into_iter().collect();
    if !annotations.is_empty() {
        annotations.sort();
        setters
            .0
            .push(plural("annotation", "annotations", annotations.len()).into());
        values.extend(annotations);
    }
    if setters.0.is_empty() {
        return None;
    }
    Violation::new(
        plural(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            values.len(),
        ),
        format!(
            "{} must not set AppArmor profile type to {}",
            setters.joined(),
            join_quote(&values)
        ),
    )
}

const SELINUX_TYPES_1_0: &[&str] = &["", "container_t", "container_init_t", "container_kvm_t"];
const SELINUX_TYPES_1_31: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

fn se_linux_1_0(pod: &Pod<'_>) -> Option<Violation> {
    se_linux(pod, SELINUX_TYPES_1_0)
}

fn se_linux_1_31(pod: &Pod<'_>) -> Option<Violation> {
    se_linux(pod, SELINUX_TYPES_1_31)
}

fn se_linux(pod: &Pod<'_>, allowed: &[&str]) -> Option<Violation> {
    let mut types = Sorted::new();
    let (mut user, mut role) = (false, false);
    let mut check = |opts: Option<&Value>| -> bool {
        let Some(o) = opts else { return true };
        let mut valid = true;
        let t = str_at(o, &["type"]).unwrap_or("");
        if !allowed.contains(&t) {
            valid = false;
            types.insert(t.to_string());
        }
        if !str_at(o, &["user"]).unwrap_or("").is_empty() {
            valid = false;
            user = true;
        }
        if !str_at(o, &["role"]).unwrap_or("").is_empty() {
            valid = false;
            role = true;
        }
        valid
    };
    let pod_bad = !check(pod.pod_context(&["seLinuxOptions"]));
    let bad: Vec<&str> = pod
        .containers()
        .filter(|c| !check(at(c, &["securityContext", "seLinuxOptions"])))
        .map(container_name)
        .collect();
    let mut setters = Setters::new(pod_bad);
    setters.containers(&bad);
    if setters.0.is_empty() {
        return None;
    }
    let mut data = Vec::new();
    if !types.is_empty() {
        data.push(format!(
            "{} {}",
            plural("type", "types", types.len()),
            join_quote(&types)
        ));
    }
    if user {
        data.push("user may not be set".to_string());
    }
    if role {
        data.push("role may not be set".to_string());
    }
    Violation::new(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            setters.joined(),
            data.join("; ")
        ),
    )
}

const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

/// Before v1.19 seccomp was set by annotations.
fn seccomp_annotations(pod: &Pod<'_>) -> Option<Violation> {
    let valid =
        |v: &str| v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/");
    let mut forbidden = Sorted::new();
    let mut look = |key: &str| {
        if let Some(v) = pod.annotation(key)
            && !valid(v)
        {
            forbidden.insert(format!("{key}={}", go_quote(v)));
        }
    };
    look(SECCOMP_POD_ANNOTATION);
    for c in pod.containers() {
        look(&format!(
            "{SECCOMP_CONTAINER_ANNOTATION_PREFIX}{}",
            container_name(c)
        ));
    }
    if forbidden.is_empty() {
        return None;
    }
    let list: Vec<String> = forbidden.into_iter().collect();
    Violation::new(
        "seccompProfile",
        format!(
            "forbidden {} {}",
            plural("annotation", "annotations", list.len()),
            list.join(", ")
        ),
    )
}

fn valid_seccomp(t: &str) -> bool {
    t == "Localhost" || t == "RuntimeDefault"
}

fn seccomp_type(ctx: Option<&Value>) -> Option<&str> {
    ctx.and_then(|c| at(c, &["seccompProfile"]))
        .map(|p| str_at(p, &["type"]).unwrap_or(""))
}

/// The profiles set to something else than `RuntimeDefault` or `Localhost`, and by whom; with
/// `required`, also the containers that set none while the pod sets no valid one either.
fn seccomp(pod: &Pod<'_>, required: bool) -> Option<Violation> {
    let mut values = Sorted::new();
    let mut pod_valid = false;
    let mut pod_bad = false;
    match seccomp_type(pod.pod_context(&[])) {
        Some(t) if !valid_seccomp(t) => {
            pod_bad = true;
            values.insert(t.to_string());
        }
        Some(_) => pod_valid = true,
        None => {}
    }
    let (mut explicit, mut implicit) = (Vec::new(), Vec::new());
    for c in pod.containers() {
        match seccomp_type(at(c, &["securityContext"])) {
            Some(t) if !valid_seccomp(t) => {
                explicit.push(container_name(c));
                values.insert(t.to_string());
            }
            Some(_) => {}
            None if !pod_valid => implicit.push(container_name(c)),
            None => {}
        }
    }
    let mut setters = Setters::new(pod_bad);
    setters.containers(&explicit);
    if !setters.0.is_empty() {
        return Violation::new(
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                setters.joined(),
                join_quote(&values)
            ),
        );
    }
    if required && !implicit.is_empty() {
        return Violation::new(
            "seccompProfile",
            format!(
                "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
                containers_phrase(&implicit)
            ),
        );
    }
    None
}

fn seccomp_baseline(pod: &Pod<'_>) -> Option<Violation> {
    seccomp(pod, false)
}

fn seccomp_restricted(pod: &Pod<'_>) -> Option<Violation> {
    seccomp(pod, true)
}

fn seccomp_restricted_unless_windows(pod: &Pod<'_>) -> Option<Violation> {
    if pod.is_windows() {
        return None;
    }
    seccomp_restricted(pod)
}
