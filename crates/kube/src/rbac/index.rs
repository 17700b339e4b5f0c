//! The RBAC objects in memory, kept current by a list and a watch of each of the four kinds, and
//! indexed by subject so that a decision looks only at the bindings naming the user or one of
//! its groups (upstream reads informer listers and scans every binding; the answers are the
//! same). Upstream: pkg/registry/rbac/validation/rule.go (`DefaultRuleResolver`).

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, RwLock};

use apimachinery::object::ObjectExt;
use apimachinery::projection::Projection;
use apiserver::authentication::UserInfo;
use serde_json::Value;

use super::rules::PolicyRule;
use crate::strategies::fields::str_at;

/// The name the index's reflectors share a decoding under.
pub const FIELDS_NAME: &str = "RBAC objects as the authorizer's index reads them";

/// Every member of a Role, ClusterRole or binding the index reads: its reflectors decode only
/// these, and skip the rest (managed fields, labels, annotations, an aggregation rule) without
/// building it. A member read here and not listed would always look empty to the index: the
/// tests build the index from the bootstrap policy both ways and compare.
pub static FIELDS: LazyLock<Projection> = LazyLock::new(|| {
    Projection::of([
        "metadata.name",
        "metadata.namespace",
        "rules",
        "roleRef",
        "subjects",
    ])
});

/// A binding's reference to the role it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleRef {
    pub kind: String,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

/// A RoleBinding (with its namespace) or a ClusterRoleBinding (namespace empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    pub name: String,
    pub namespace: String,
    pub role_ref: RoleRef,
    pub subjects: Vec<Subject>,
}

impl Binding {
    fn from_value(v: &Value) -> Binding {
        let s = |v: &Value, k: &str| str_at(v, k).to_string();
        let role_ref = v.get("roleRef").cloned().unwrap_or(Value::Null);
        Binding {
            name: v.name().to_string(),
            namespace: v.namespace().to_string(),
            role_ref: RoleRef {
                kind: s(&role_ref, "kind"),
                name: s(&role_ref, "name"),
            },
            subjects: v
                .get("subjects")
                .and_then(Value::as_array)
                .map(|subjects| {
                    subjects
                        .iter()
                        .map(|x| Subject {
                            kind: s(x, "kind"),
                            name: s(x, "name"),
                            namespace: s(x, "namespace"),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The index keys of a subject: users by name (service accounts by their user name),
    /// groups by name. A service account without a namespace in a ClusterRoleBinding names
    /// nobody.
    fn subject_key(&self, s: &Subject) -> Option<Key> {
        match s.kind.as_str() {
            "User" => Some(Key::User(s.name.clone())),
            "Group" => Some(Key::Group(s.name.clone())),
            "ServiceAccount" => {
                let ns = if s.namespace.is_empty() {
                    &self.namespace
                } else {
                    &s.namespace
                };
                (!ns.is_empty())
                    .then(|| Key::User(format!("system:serviceaccount:{ns}:{}", s.name)))
            }
            _ => None,
        }
    }

    /// `appliesTo`: the first subject naming `user`, if any.
    pub fn subject_for(&self, user: &UserInfo) -> Option<&Subject> {
        self.subjects.iter().find(|s| match self.subject_key(s) {
            Some(Key::User(name)) => name == user.name,
            Some(Key::Group(group)) => user.groups.contains(&group),
            None => false,
        })
    }

    /// Upstream's `describeSubject`.
    pub fn describe_subject(&self, s: &Subject) -> String {
        if s.kind == "ServiceAccount" {
            let ns = if s.namespace.is_empty() {
                &self.namespace
            } else {
                &s.namespace
            };
            format!("{} {:?}", s.kind, format!("{}/{ns}", s.name))
        } else {
            format!("{} {:?}", s.kind, s.name)
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    User(String),
    Group(String),
}

/// Bindings by name, in name order.
type ByName = BTreeMap<String, Arc<Binding>>;

/// The bindings of one namespace ("" for ClusterRoleBindings): by name, and by the users and
/// groups their subjects name. Maps are keyed by owned strings and read with borrowed ones, so
/// a decision allocates nothing to find its bindings.
#[derive(Default)]
struct NamespaceBindings {
    by_name: HashMap<String, Arc<Binding>>,
    by_user: HashMap<String, ByName>,
    by_group: HashMap<String, ByName>,
}

/// One kind of binding, by namespace.
#[derive(Default)]
struct Bindings {
    namespaces: HashMap<String, NamespaceBindings>,
}

impl Bindings {
    fn keys(b: &Binding) -> Vec<Key> {
        b.subjects.iter().filter_map(|s| b.subject_key(s)).collect()
    }

    fn remove(&mut self, namespace: &str, name: &str) {
        let Some(ns) = self.namespaces.get_mut(namespace) else {
            return;
        };
        if let Some(old) = ns.by_name.remove(name) {
            for key in Self::keys(&old) {
                let (map, k) = match key {
                    Key::User(u) => (&mut ns.by_user, u),
                    Key::Group(g) => (&mut ns.by_group, g),
                };
                if let Some(set) = map.get_mut(&k) {
                    set.remove(name);
                    if set.is_empty() {
                        map.remove(&k);
                    }
                }
            }
        }
        if ns.by_name.is_empty() {
            self.namespaces.remove(namespace);
        }
    }

    fn upsert(&mut self, b: Binding) {
        self.remove(&b.namespace.clone(), &b.name.clone());
        let b = Arc::new(b);
        let ns = self.namespaces.entry(b.namespace.clone()).or_default();
        for key in Self::keys(&b) {
            let (map, k) = match key {
                Key::User(u) => (&mut ns.by_user, u),
                Key::Group(g) => (&mut ns.by_group, g),
            };
            map.entry(k).or_default().insert(b.name.clone(), b.clone());
        }
        ns.by_name.insert(b.name.clone(), b);
    }

    /// The bindings in `namespace` that may name `user`, each once, in name order.
    fn for_user<'a>(&'a self, namespace: &str, user: &UserInfo, out: &mut Vec<&'a Arc<Binding>>) {
        let Some(ns) = self.namespaces.get(namespace) else {
            return;
        };
        let start = out.len();
        if let Some(set) = ns.by_user.get(user.name.as_str()) {
            out.extend(set.values());
        }
        for g in &user.groups {
            if let Some(set) = ns.by_group.get(g.as_str()) {
                out.extend(set.values());
            }
        }
        // A binding naming the user and one of its groups was found twice: once is enough.
        out[start..].sort_by(|a, b| a.name.cmp(&b.name));
        out.dedup_by(|a, b| Arc::ptr_eq(a, b));
    }
}

#[derive(Default)]
struct State {
    /// Roles by namespace, then name.
    roles: HashMap<String, HashMap<String, Arc<Vec<PolicyRule>>>>,
    cluster_roles: HashMap<String, Arc<Vec<PolicyRule>>>,
    role_bindings: Bindings,
    cluster_role_bindings: Bindings,
}

/// Which of the four kinds a change is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Role,
    ClusterRole,
    RoleBinding,
    ClusterRoleBinding,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::Role,
        Kind::ClusterRole,
        Kind::RoleBinding,
        Kind::ClusterRoleBinding,
    ];

    pub fn resource(self) -> &'static str {
        match self {
            Kind::Role => "roles",
            Kind::ClusterRole => "clusterroles",
            Kind::RoleBinding => "rolebindings",
            Kind::ClusterRoleBinding => "clusterrolebindings",
        }
    }
}

/// Where a rule came from, for the reason of an allowed decision.
pub struct Source<'a> {
    pub binding: &'a Binding,
    pub subject: &'a Subject,
}

impl std::fmt::Display for Source<'_> {
    /// Upstream's `clusterRoleBindingDescriber` / `roleBindingDescriber`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = self.binding;
        let (kind, name) = if b.namespace.is_empty() {
            ("ClusterRoleBinding", b.name.clone())
        } else {
            ("RoleBinding", format!("{}/{}", b.name, b.namespace))
        };
        write!(
            f,
            "{kind} {name:?} of {} {:?} to {}",
            b.role_ref.kind,
            b.role_ref.name,
            b.describe_subject(self.subject)
        )
    }
}

/// The in-memory RBAC objects. Cheap to clone; every clone sees the same state.
#[derive(Clone, Default)]
pub struct Index {
    state: Arc<RwLock<State>>,
}

impl Index {
    /// Applies one change of one kind (a fresh list replaces everything of that kind).
    pub fn apply<T: Borrow<Value>>(
        &self,
        kind: Kind,
        delta: apiserver::registry::reflector::Delta<T>,
    ) {
        use apiserver::registry::reflector::Delta;
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        let state = &mut *state;
        match delta {
            Delta::Replace(items) => {
                match kind {
                    Kind::Role => state.roles.clear(),
                    Kind::ClusterRole => state.cluster_roles.clear(),
                    Kind::RoleBinding => state.role_bindings = Bindings::default(),
                    Kind::ClusterRoleBinding => state.cluster_role_bindings = Bindings::default(),
                }
                for item in items {
                    upsert(state, kind, item.borrow());
                }
            }
            Delta::Upsert(v) => upsert(state, kind, v.borrow()),
            Delta::Deleted(v) => {
                let v = v.borrow();
                let key = (v.namespace().to_string(), v.name().to_string());
                match kind {
                    Kind::Role => {
                        if let Some(ns) = state.roles.get_mut(&key.0) {
                            ns.remove(&key.1);
                            if ns.is_empty() {
                                state.roles.remove(&key.0);
                            }
                        }
                    }
                    Kind::ClusterRole => {
                        state.cluster_roles.remove(&key.1);
                    }
                    Kind::RoleBinding => state.role_bindings.remove(&key.0, &key.1),
                    Kind::ClusterRoleBinding => state.cluster_role_bindings.remove("", &key.1),
                }
            }
        }
    }

    /// `GetRoleReferenceRules`, with the lister's not-found message.
    pub fn role_ref_rules(
        &self,
        role_ref: &RoleRef,
        namespace: &str,
    ) -> Result<Arc<Vec<PolicyRule>>, String> {
        let state = self.state.read().unwrap_or_else(|e| e.into_inner());
        role_ref_rules(&state, role_ref, namespace).cloned()
    }

    /// `VisitRulesFor`: the rules of every ClusterRoleBinding naming the user, then of every
    /// RoleBinding in `namespace` naming it, each with its source, and the errors met (a role
    /// that does not exist). `visit` returns false to stop.
    pub fn visit_rules_for(
        &self,
        user: &UserInfo,
        namespace: &str,
        mut visit: impl FnMut(&Source<'_>, &PolicyRule) -> bool,
    ) -> Vec<String> {
        let state = self.state.read().unwrap_or_else(|e| e.into_inner());
        let mut errors = Vec::new();
        let mut bindings = Vec::new();
        state
            .cluster_role_bindings
            .for_user("", user, &mut bindings);
        if !namespace.is_empty() {
            state.role_bindings.for_user(namespace, user, &mut bindings);
        }
        for binding in bindings {
            let Some(subject) = binding.subject_for(user) else {
                continue;
            };
            match role_ref_rules(&state, &binding.role_ref, &binding.namespace) {
                Ok(rules) => {
                    let source = Source {
                        binding: binding.as_ref(),
                        subject,
                    };
                    let rules = rules.as_ref();
                    for rule in rules.iter() {
                        if !visit(&source, rule) {
                            return errors;
                        }
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        errors
    }

    /// `RulesFor`: every rule the user holds in `namespace`, and the resolution errors.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let mut rules = Vec::new();
        let errors = self.visit_rules_for(user, namespace, |_, r| {
            rules.push(r.clone());
            true
        });
        (rules, errors)
    }
}

fn role_ref_rules<'a>(
    state: &'a State,
    role_ref: &RoleRef,
    namespace: &str,
) -> Result<&'a Arc<Vec<PolicyRule>>, String> {
    match role_ref.kind.as_str() {
        "Role" => state
            .roles
            .get(namespace)
            .and_then(|ns| ns.get(role_ref.name.as_str()))
            .ok_or_else(|| {
                format!(
                    "role.rbac.authorization.k8s.io {:?} not found",
                    role_ref.name
                )
            }),
        "ClusterRole" => state
            .cluster_roles
            .get(role_ref.name.as_str())
            .ok_or_else(|| {
                format!(
                    "clusterrole.rbac.authorization.k8s.io {:?} not found",
                    role_ref.name
                )
            }),
        other => Err(format!("unsupported role reference kind: {other:?}")),
    }
}

fn upsert(state: &mut State, kind: Kind, v: &Value) {
    match kind {
        Kind::Role => {
            state
                .roles
                .entry(v.namespace().to_string())
                .or_default()
                .insert(v.name().to_string(), Arc::new(PolicyRule::all_of(v)));
        }
        Kind::ClusterRole => {
            state
                .cluster_roles
                .insert(v.name().to_string(), Arc::new(PolicyRule::all_of(v)));
        }
        Kind::RoleBinding => state.role_bindings.upsert(Binding::from_value(v)),
        Kind::ClusterRoleBinding => state.cluster_role_bindings.upsert(Binding::from_value(v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::bootstrap;
    use apiserver::registry::reflector::Delta;

    /// The index reads the same from an object decoded through [`FIELDS`] as from the whole
    /// object: every rule and binding of the bootstrap policy, with the members a stored
    /// object has beside them.
    #[test]
    fn the_projection_keeps_every_member_the_index_reads() {
        let mut by_kind: HashMap<&str, (Vec<Value>, Vec<Arc<Value>>)> = HashMap::new();
        for o in bootstrap::policy() {
            let mut whole = o.object;
            let meta = whole.metadata_mut();
            meta.insert("uid".into(), "u".into());
            meta.insert(
                "managedFields".into(),
                serde_json::json!([{"manager": "m", "operation": "Update"}]),
            );
            let bytes = serde_json::to_vec(&whole).unwrap();
            let projected = FIELDS.decode(&bytes).unwrap();
            assert!(projected.pointer("/metadata/managedFields").is_none());
            match o.resource {
                "roles" | "clusterroles" => {
                    assert_eq!(PolicyRule::all_of(&projected), PolicyRule::all_of(&whole))
                }
                _ => assert_eq!(Binding::from_value(&projected), Binding::from_value(&whole)),
            }
            let e = by_kind.entry(o.resource).or_default();
            e.0.push(whole);
            e.1.push(Arc::new(projected));
        }
        // And an index built from each answers alike.
        let (whole, projected) = (Index::default(), Index::default());
        for (resource, (w, p)) in by_kind {
            let kind = Kind::ALL
                .into_iter()
                .find(|k| k.resource() == resource)
                .expect("a kind of the index");
            whole.apply(kind, Delta::Replace(w));
            projected.apply(kind, Delta::Replace(p));
        }
        for (name, groups, namespace) in [
            ("system:kube-scheduler", vec![], ""),
            ("system:kube-controller-manager", vec![], "kube-system"),
            ("someone", vec!["system:authenticated"], ""),
            (
                "system:serviceaccount:kube-system:bootstrap-signer",
                vec![],
                "kube-public",
            ),
        ] {
            let user = UserInfo {
                name: name.into(),
                groups: groups.into_iter().map(String::from).collect(),
                ..Default::default()
            };
            let (w, p) = (
                whole.rules_for(&user, namespace),
                projected.rules_for(&user, namespace),
            );
            assert!(!w.0.is_empty(), "{name} holds rules");
            assert_eq!(w, p, "{name}");
        }
    }
}
