//! The dependency graph (upstream: pkg/controller/garbagecollector's `GraphBuilder` and
//! `node`): every object of every watched resource by uid, the owners its references name, and
//! the dependents that name it. Owners that were named but not seen yet are "virtual" nodes
//! until a watch shows them or the collector finds they do not exist. Each change to the graph
//! says which items the collector must look at next ([`Work`]); the graph itself never reads
//! the API.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Deserialize;

pub type Uid = Arc<str>;

pub const ORPHAN: &str = "orphan";
pub const FOREGROUND: &str = "foregroundDeletion";

/// Where an object is: upstream's `objectReference` (owner-reference coordinates and a
/// namespace).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: Uid,
    pub namespace: String,
}

/// An entry of `metadata.ownerReferences`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerRef {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub controller: Option<bool>,
    #[serde(default)]
    pub block_owner_deletion: Option<bool>,
}

impl OwnerRef {
    fn blocks(&self) -> bool {
        self.block_owner_deletion == Some(true)
    }

    /// Upstream's `ownerReferenceMatchesCoordinates`.
    fn matches(&self, id: &Identity) -> bool {
        *self.uid == *id.uid
            && self.name == id.name
            && self.kind == id.kind
            && self.api_version == id.api_version
    }
}

/// What a watch showed of one object: the parts the collector reads.
#[derive(Clone, Debug)]
pub struct Observed {
    pub identity: Identity,
    pub owners: Vec<OwnerRef>,
    pub state: DeletionState,
}

/// The deletion-related state of an object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeletionState {
    pub being_deleted: bool,
    pub orphan_finalizer: bool,
    pub foreground_finalizer: bool,
}

impl DeletionState {
    pub fn of(deletion_timestamp: bool, finalizers: &[String]) -> DeletionState {
        DeletionState {
            being_deleted: deletion_timestamp,
            orphan_finalizer: finalizers.iter().any(|f| f == ORPHAN),
            foreground_finalizer: finalizers.iter().any(|f| f == FOREGROUND),
        }
    }

    fn waits_for_orphaning(self) -> bool {
        self.being_deleted && self.orphan_finalizer
    }

    fn waits_for_dependents(self) -> bool {
        self.being_deleted && self.foreground_finalizer
    }
}

struct Node {
    identity: Identity,
    owners: Vec<OwnerRef>,
    dependents: HashSet<Uid>,
    /// Seen by a watch (not only named by a dependent).
    observed: bool,
    /// The state of the object the last watch event showed (`None` while virtual).
    last: Option<DeletionState>,
    being_deleted: bool,
    /// Deleted in the foreground: waits for its blocking dependents to go.
    deleting_dependents: bool,
}

impl Node {
    fn is_virtual(&self) -> bool {
        !self.observed
    }
}

/// What the collector must do after a change to the graph.
#[derive(Debug, Default, PartialEq)]
pub struct Work {
    /// Items to look at for deletion (upstream's attemptToDelete queue).
    pub delete: Vec<Uid>,
    /// The same, after the item's backoff (a virtual node given another identity to try).
    pub delete_later: Vec<Uid>,
    /// Owners whose dependents must be orphaned (upstream's attemptToOrphan queue).
    pub orphan: Vec<Uid>,
    /// Owners now known not to exist.
    pub absent: Vec<Identity>,
    /// Dependents whose reference names, by uid, an owner a watch has seen in another
    /// namespace (upstream's `reportInvalidNamespaceOwnerRef`: an `OwnerRefInvalidNamespace`
    /// Event on the dependent).
    pub invalid_namespace: Vec<InvalidOwnerRef>,
}

/// A dependent and the reference of it that names an owner of another namespace.
#[derive(Clone, Debug, PartialEq)]
pub struct InvalidOwnerRef {
    pub dependent: Identity,
    pub owner: OwnerRef,
}

/// What the collector needs to know about an item when it looks at it.
#[derive(Clone, Debug)]
pub struct ItemView {
    pub identity: Identity,
    pub being_deleted: bool,
    pub deleting_dependents: bool,
    pub dependents: usize,
    /// Some dependent is itself deleted in the foreground (upstream's cycle guard).
    pub a_dependent_deletes_dependents: bool,
    /// Dependents whose reference to this item blocks its deletion, and whether each of them
    /// is itself deleting its dependents.
    pub blocking: Vec<(Uid, bool)>,
    /// Every dependent's identity (for orphaning).
    pub all_dependents: Vec<Identity>,
}

#[derive(Default)]
pub struct Graph {
    nodes: HashMap<Uid, Node>,
}

impl Graph {
    pub fn contains(&self, uid: &str) -> bool {
        self.nodes.contains_key(uid)
    }

    /// Whether `uid` is in the graph and has been seen by a watch.
    pub fn is_observed(&self, uid: &str) -> bool {
        self.nodes.get(uid).is_some_and(|n| n.observed)
    }

    /// The view of `uid` the collector's workers act on.
    pub fn view(&self, uid: &str) -> Option<ItemView> {
        let n = self.nodes.get(uid)?;
        let mut blocking = Vec::new();
        let mut all_dependents = Vec::with_capacity(n.dependents.len());
        let mut a_dependent_deletes_dependents = false;
        for dep_uid in &n.dependents {
            let Some(dep) = self.nodes.get(dep_uid) else {
                continue;
            };
            a_dependent_deletes_dependents |= dep.deleting_dependents;
            all_dependents.push(dep.identity.clone());
            if dep.owners.iter().any(|o| *o.uid == *uid && o.blocks()) {
                blocking.push((dep_uid.clone(), dep.deleting_dependents));
            }
        }
        Some(ItemView {
            identity: n.identity.clone(),
            being_deleted: n.being_deleted,
            deleting_dependents: n.deleting_dependents,
            dependents: n.dependents.len(),
            a_dependent_deletes_dependents,
            blocking,
            all_dependents,
        })
    }

    /// An object added or changed, as a watch shows it (upstream's add and update events).
    pub fn observe(&mut self, o: Observed, work: &mut Work) {
        let uid = o.identity.uid.clone();
        let old_state = match self.nodes.get_mut(&uid) {
            None => {
                self.nodes.insert(
                    uid.clone(),
                    Node {
                        identity: o.identity.clone(),
                        owners: o.owners.clone(),
                        dependents: HashSet::new(),
                        observed: true,
                        last: Some(o.state),
                        being_deleted: o.state.being_deleted,
                        deleting_dependents: o.state.waits_for_dependents(),
                    },
                );
                self.add_dependent_to_owners(&uid, &o.owners, work);
                self.transitions(&uid, None, o.state, work);
                return;
            }
            Some(n) => {
                let mut old_state = n.last;
                if !n.observed {
                    // A virtual node seen at last. Dependents that named it by other
                    // coordinates are looked at again: their reference may be wrong.
                    if n.identity != o.identity {
                        let (_, mismatched) = self.partition_dependents(&uid, &o.identity);
                        // Those in another namespace than a namespaced owner are certainly
                        // wrong, and reported.
                        if !o.identity.namespace.is_empty() {
                            for dep_uid in &mismatched {
                                self.report_invalid_namespace(dep_uid, &uid, &o.identity, work);
                            }
                        }
                        work.delete.extend(mismatched);
                    }
                    old_state = None;
                }
                let n = self.nodes.get_mut(&uid).expect("present");
                n.identity = o.identity.clone();
                n.observed = true;
                old_state
            }
        };
        // Owner references that came, went, or stopped blocking.
        let (added, removed, changed) = {
            let n = &self.nodes[&uid];
            references_diff(&n.owners, &o.owners)
        };
        if !added.is_empty() || !removed.is_empty() || !changed.is_empty() {
            self.add_unblocked_owners(&removed, &changed, work);
            self.nodes.get_mut(&uid).expect("present").owners = o.owners.clone();
            self.add_dependent_to_owners(&uid, &added, work);
            for r in &removed {
                if let Some(owner) = self.nodes.get_mut(r.uid.as_str()) {
                    owner.dependents.remove(&uid);
                }
            }
        }
        let n = self.nodes.get_mut(&uid).expect("present");
        if o.state.being_deleted {
            n.being_deleted = true;
        }
        n.last = Some(o.state);
        self.transitions(&uid, old_state, o.state, work);
    }

    /// An object a watch saw deleted.
    pub fn observed_deleted(&mut self, uid: &str, work: &mut Work) {
        if self.nodes.contains_key(uid) {
            self.remove(uid, work);
        }
    }

    /// The collector found that the object `id` names does not exist (upstream's virtual
    /// delete event). A virtual node some dependents name by other coordinates stays, and is
    /// tried again under one of those.
    pub fn virtual_delete(&mut self, id: &Identity, work: &mut Work) {
        let Some(n) = self.nodes.get(&id.uid) else {
            return;
        };
        let node_virtual = n.is_virtual();
        let node_identity = n.identity.clone();
        let (matching, mismatched) = self.partition_dependents(&id.uid, id);
        if node_virtual {
            if !mismatched.is_empty() {
                if !matching.is_empty() {
                    work.absent.push(id.clone());
                    work.delete.extend(matching);
                }
                if node_identity == *id
                    && let Some(other) = self.alternate_identity(&mismatched, id)
                {
                    self.nodes.get_mut(&id.uid).expect("present").identity = other;
                    work.delete_later.push(id.uid.clone());
                }
                return;
            }
        } else if node_identity != *id {
            // A watch has seen the object under other coordinates: only the dependents that
            // named the absent coordinates are affected.
            if !matching.is_empty() {
                work.absent.push(id.clone());
                work.delete.extend(matching);
            }
            return;
        }
        self.remove(&id.uid, work);
    }

    /// A fresh list of one resource (`api_version`, `kind`): objects of it the list no longer
    /// has are deleted, the rest observed.
    pub fn replace(
        &mut self,
        api_version: &str,
        kind: &str,
        items: Vec<Observed>,
        work: &mut Work,
    ) {
        let listed: HashSet<Uid> = items.iter().map(|o| o.identity.uid.clone()).collect();
        let gone: Vec<Uid> = self
            .nodes
            .iter()
            .filter(|(uid, n)| {
                n.observed
                    && n.identity.api_version == api_version
                    && n.identity.kind == kind
                    && !listed.contains(*uid)
            })
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in gone {
            self.remove(&uid, work);
        }
        for o in items {
            self.observe(o, work);
        }
    }

    /// Upstream's `removeNode` with what the delete event does around it.
    fn remove(&mut self, uid: &str, work: &mut Work) {
        let Some(n) = self.nodes.remove(uid) else {
            return;
        };
        for owner in &n.owners {
            if let Some(o) = self.nodes.get_mut(owner.uid.as_str()) {
                o.dependents.remove(uid);
            }
        }
        if !n.dependents.is_empty() {
            work.absent.push(n.identity.clone());
        }
        work.delete.extend(n.dependents.iter().cloned());
        for owner in &n.owners {
            if self
                .nodes
                .get(owner.uid.as_str())
                .is_some_and(|o| o.deleting_dependents)
            {
                work.delete.push(Arc::from(owner.uid.as_str()));
            }
        }
    }

    /// Upstream's `addDependentToOwners`: owners not in the graph become virtual nodes to be
    /// checked; a dependent whose reference disagrees with an owner's known coordinates is
    /// checked itself.
    fn add_dependent_to_owners(&mut self, uid: &Uid, owners: &[OwnerRef], work: &mut Work) {
        let dependent = self.nodes[uid].identity.clone();
        let ns = dependent.namespace.clone();
        let mut suspicious = false;
        // Upstream's `hasPotentiallyInvalidOwnerReference`: once one reference is in doubt, the
        // later ones are not judged (nor reported).
        let mut in_doubt = false;
        for r in owners {
            let owner_uid: Uid = Arc::from(r.uid.as_str());
            match self.nodes.get_mut(&owner_uid) {
                None => {
                    let mut dependents = HashSet::new();
                    dependents.insert(uid.clone());
                    self.nodes.insert(
                        owner_uid.clone(),
                        Node {
                            identity: Identity {
                                api_version: r.api_version.clone(),
                                kind: r.kind.clone(),
                                name: r.name.clone(),
                                uid: owner_uid.clone(),
                                namespace: ns.clone(),
                            },
                            owners: Vec::new(),
                            dependents,
                            observed: false,
                            last: None,
                            being_deleted: false,
                            deleting_dependents: false,
                        },
                    );
                    work.delete.push(owner_uid);
                }
                Some(owner) => {
                    owner.dependents.insert(uid.clone());
                    // A dependent that appears while its owner waits for its dependents is
                    // looked at, as the owner's earlier pass could not see it.
                    if owner.deleting_dependents {
                        suspicious = true;
                    }
                    // The reference disagrees with what is known of the owner: its namespace,
                    // its coordinates, or (a cluster-scoped owner not seen yet, named from
                    // another namespace) possibly its scope.
                    let owner_namespaced = !owner.identity.namespace.is_empty();
                    let elsewhere = owner.identity.namespace != ns;
                    if in_doubt {
                        continue;
                    }
                    if owner_namespaced && elsewhere {
                        // A namespaced owner seen in another namespace: certainly wrong.
                        if owner.observed {
                            work.invalid_namespace.push(InvalidOwnerRef {
                                dependent: dependent.clone(),
                                owner: r.clone(),
                            });
                        }
                        in_doubt = true;
                    } else if !r.matches(&owner.identity) || (elsewhere && !owner.observed) {
                        in_doubt = true;
                    }
                }
            }
        }
        if suspicious || in_doubt {
            work.delete.push(uid.clone());
        }
    }

    /// Reports the dependent `dep_uid`'s reference to `owner_uid`, seen as `owner` (upstream
    /// reports the first reference naming that uid).
    fn report_invalid_namespace(
        &self,
        dep_uid: &Uid,
        owner_uid: &Uid,
        owner: &Identity,
        work: &mut Work,
    ) {
        let Some(dep) = self.nodes.get(dep_uid) else {
            return;
        };
        if dep.identity.namespace == owner.namespace {
            return;
        }
        if let Some(r) = dep.owners.iter().find(|r| *r.uid == **owner_uid) {
            work.invalid_namespace.push(InvalidOwnerRef {
                dependent: dep.identity.clone(),
                owner: r.clone(),
            });
        }
    }

    /// Upstream's `addUnblockedOwnersToDeleteQueue`: an owner deleted in the foreground is
    /// looked at again when a dependent stops naming it or stops blocking it.
    fn add_unblocked_owners(&self, removed: &[OwnerRef], changed: &[OwnerRef], work: &mut Work) {
        let waiting = |r: &OwnerRef| {
            self.nodes
                .get(r.uid.as_str())
                .is_some_and(|o| o.deleting_dependents)
        };
        for r in removed {
            if r.blocks() && waiting(r) {
                work.delete.push(Arc::from(r.uid.as_str()));
            }
        }
        for r in changed {
            if waiting(r) {
                work.delete.push(Arc::from(r.uid.as_str()));
            }
        }
    }

    /// Upstream's `processTransitions`: deletion starting with the `orphan` or the
    /// `foregroundDeletion` finalizer.
    fn transitions(
        &mut self,
        uid: &Uid,
        old: Option<DeletionState>,
        new: DeletionState,
        work: &mut Work,
    ) {
        let started = |waits: fn(DeletionState) -> bool| waits(new) && !old.is_some_and(waits);
        if started(DeletionState::waits_for_orphaning) {
            work.orphan.push(uid.clone());
            return;
        }
        if started(DeletionState::waits_for_dependents) {
            let n = self.nodes.get_mut(uid).expect("present");
            n.deleting_dependents = true;
            work.delete.extend(n.dependents.iter().cloned());
            work.delete.push(uid.clone());
        }
    }

    /// Dependents of `uid` whose reference to it matches `id`, and those whose does not.
    fn partition_dependents(&self, uid: &Uid, id: &Identity) -> (Vec<Uid>, Vec<Uid>) {
        let mut matching = Vec::new();
        let mut mismatched = Vec::new();
        let Some(n) = self.nodes.get(uid) else {
            return (matching, mismatched);
        };
        for dep_uid in &n.dependents {
            let Some(dep) = self.nodes.get(dep_uid) else {
                continue;
            };
            let wrong_namespace =
                !id.namespace.is_empty() && dep.identity.namespace != id.namespace;
            let mut found_match = false;
            let mut found_mismatch = false;
            for r in dep.owners.iter().filter(|r| *r.uid == **uid) {
                if r.matches(id) && !wrong_namespace {
                    found_match = true;
                } else {
                    found_mismatch = true;
                }
            }
            if found_match {
                matching.push(dep_uid.clone());
            }
            if found_mismatch {
                mismatched.push(dep_uid.clone());
            }
        }
        (matching, mismatched)
    }

    /// Another identity the `dependents` name their owner by (upstream's
    /// `getAlternateOwnerIdentity`): the first, in a stable order, after the absent one.
    fn alternate_identity(&self, dependents: &[Uid], absent: &Identity) -> Option<Identity> {
        let mut candidates: Vec<Identity> = Vec::new();
        for dep_uid in dependents {
            let Some(dep) = self.nodes.get(dep_uid) else {
                continue;
            };
            for r in dep.owners.iter().filter(|r| *r.uid == *absent.uid) {
                let id = Identity {
                    api_version: r.api_version.clone(),
                    kind: r.kind.clone(),
                    name: r.name.clone(),
                    uid: absent.uid.clone(),
                    namespace: dep.identity.namespace.clone(),
                };
                if id != *absent && !candidates.contains(&id) {
                    candidates.push(id);
                }
            }
        }
        let key = |i: &Identity| {
            (
                i.api_version.clone(),
                i.kind.clone(),
                i.namespace.clone(),
                i.name.clone(),
            )
        };
        candidates.sort_by_key(key);
        let absent_key = key(absent);
        candidates
            .iter()
            .find(|c| key(c) > absent_key)
            .or(candidates.first())
            .cloned()
    }
}

/// Upstream's `referencesDiffs`: references added, removed, and those whose
/// `blockOwnerDeletion` changed (by uid).
fn references_diff(
    old: &[OwnerRef],
    new: &[OwnerRef],
) -> (Vec<OwnerRef>, Vec<OwnerRef>, Vec<OwnerRef>) {
    let mut added = Vec::new();
    let mut changed = Vec::new();
    for n in new {
        match old.iter().find(|o| o.uid == n.uid) {
            None => added.push(n.clone()),
            Some(o) if o.block_owner_deletion != n.block_owner_deletion => changed.push(o.clone()),
            Some(_) => {}
        }
    }
    let removed = old
        .iter()
        .filter(|o| !new.iter().any(|n| n.uid == o.uid))
        .cloned()
        .collect();
    (added, removed, changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(kind: &str, name: &str, uid: &str) -> Identity {
        Identity {
            api_version: "v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: Arc::from(uid),
            namespace: "ns".into(),
        }
    }

    fn owner_ref(of: &Identity, block: bool) -> OwnerRef {
        OwnerRef {
            api_version: of.api_version.clone(),
            kind: of.kind.clone(),
            name: of.name.clone(),
            uid: of.uid.to_string(),
            controller: Some(true),
            block_owner_deletion: block.then_some(true),
        }
    }

    fn obs(identity: &Identity, owners: Vec<OwnerRef>, state: DeletionState) -> Observed {
        Observed {
            identity: identity.clone(),
            owners,
            state,
        }
    }

    fn uids(v: &[Uid]) -> Vec<&str> {
        let mut v: Vec<&str> = v.iter().map(|u| &**u).collect();
        v.sort();
        v.dedup();
        v
    }

    #[test]
    fn an_owner_not_seen_yet_is_virtual_and_checked() {
        let mut g = Graph::default();
        let owner = id("ConfigMap", "o", "u-o");
        let dep = id("Secret", "d", "u-d");
        let mut w = Work::default();
        g.observe(
            obs(
                &dep,
                vec![owner_ref(&owner, false)],
                DeletionState::default(),
            ),
            &mut w,
        );
        assert_eq!(uids(&w.delete), vec!["u-o"]);
        assert!(g.contains("u-o") && !g.is_observed("u-o"));
        // Seen at last: no longer virtual, no new work.
        let mut w = Work::default();
        g.observe(obs(&owner, vec![], DeletionState::default()), &mut w);
        assert!(g.is_observed("u-o"));
        assert_eq!(w, Work::default());
        assert_eq!(g.view("u-o").unwrap().dependents, 1);
    }

    #[test]
    fn a_deleted_owner_sends_its_dependents_to_be_checked() {
        let mut g = Graph::default();
        let owner = id("ConfigMap", "o", "u-o");
        let dep = id("Secret", "d", "u-d");
        let mut w = Work::default();
        g.observe(obs(&owner, vec![], DeletionState::default()), &mut w);
        g.observe(
            obs(
                &dep,
                vec![owner_ref(&owner, false)],
                DeletionState::default(),
            ),
            &mut w,
        );
        let mut w = Work::default();
        g.observed_deleted("u-o", &mut w);
        assert_eq!(uids(&w.delete), vec!["u-d"]);
        assert_eq!(w.absent, vec![owner]);
        assert!(!g.contains("u-o"));
    }

    #[test]
    fn foreground_deletion_marks_the_owner_and_queues_its_dependents() {
        let mut g = Graph::default();
        let owner = id("ConfigMap", "o", "u-o");
        let dep = id("Secret", "d", "u-d");
        let mut w = Work::default();
        g.observe(obs(&owner, vec![], DeletionState::default()), &mut w);
        g.observe(
            obs(
                &dep,
                vec![owner_ref(&owner, true)],
                DeletionState::default(),
            ),
            &mut w,
        );
        let deleting = DeletionState {
            being_deleted: true,
            foreground_finalizer: true,
            ..Default::default()
        };
        let mut w = Work::default();
        g.observe(obs(&owner, vec![], deleting), &mut w);
        assert_eq!(uids(&w.delete), vec!["u-d", "u-o"]);
        let view = g.view("u-o").unwrap();
        assert!(view.deleting_dependents);
        assert_eq!(
            uids(
                &view
                    .blocking
                    .iter()
                    .map(|b| b.0.clone())
                    .collect::<Vec<_>>()
            ),
            vec!["u-d"]
        );
        // The same state again is no new transition.
        let mut w = Work::default();
        g.observe(obs(&owner, vec![], deleting), &mut w);
        assert_eq!(w, Work::default());
        // The dependent going away sends the owner back to be finished.
        let mut w = Work::default();
        g.observed_deleted("u-d", &mut w);
        assert_eq!(uids(&w.delete), vec!["u-o"]);
    }

    #[test]
    fn orphaning_starts_once() {
        let mut g = Graph::default();
        let owner = id("ConfigMap", "o", "u-o");
        let orphaning = DeletionState {
            being_deleted: true,
            orphan_finalizer: true,
            ..Default::default()
        };
        let mut w = Work::default();
        g.observe(obs(&owner, vec![], DeletionState::default()), &mut w);
        g.observe(obs(&owner, vec![], orphaning), &mut w);
        assert_eq!(uids(&w.orphan), vec!["u-o"]);
        let mut w = Work::default();
        g.observe(obs(&owner, vec![], orphaning), &mut w);
        assert!(w.orphan.is_empty());
    }

    #[test]
    fn a_reference_that_stops_blocking_unblocks_a_waiting_owner() {
        let mut g = Graph::default();
        let owner = id("ConfigMap", "o", "u-o");
        let dep = id("Secret", "d", "u-d");
        let mut w = Work::default();
        g.observe(obs(&owner, vec![], DeletionState::default()), &mut w);
        g.observe(
            obs(
                &dep,
                vec![owner_ref(&owner, true)],
                DeletionState::default(),
            ),
            &mut w,
        );
        let deleting = DeletionState {
            being_deleted: true,
            foreground_finalizer: true,
            ..Default::default()
        };
        g.observe(obs(&owner, vec![], deleting), &mut w);
        let mut w = Work::default();
        g.observe(
            obs(
                &dep,
                vec![owner_ref(&owner, false)],
                DeletionState::default(),
            ),
            &mut w,
        );
        assert_eq!(uids(&w.delete), vec!["u-o"]);
        assert!(g.view("u-o").unwrap().blocking.is_empty());
        // Dropping the reference altogether detaches the dependent.
        let mut w = Work::default();
        g.observe(obs(&dep, vec![], DeletionState::default()), &mut w);
        assert_eq!(g.view("u-o").unwrap().dependents, 0);
    }

    #[test]
    fn a_virtual_owner_named_two_ways_is_tried_under_the_other_name() {
        let mut g = Graph::default();
        let right = id("ConfigMap", "o", "u-o");
        let wrong = id("Secret", "o", "u-o");
        let a = id("Pod", "a", "u-a");
        let b = id("Pod", "b", "u-b");
        let mut w = Work::default();
        g.observe(
            obs(&a, vec![owner_ref(&wrong, false)], DeletionState::default()),
            &mut w,
        );
        g.observe(
            obs(&b, vec![owner_ref(&right, false)], DeletionState::default()),
            &mut w,
        );
        // The virtual node carries the first name it was given.
        assert_eq!(g.view("u-o").unwrap().identity, wrong);
        let mut w = Work::default();
        g.virtual_delete(&wrong, &mut w);
        assert_eq!(uids(&w.delete), vec!["u-a"]);
        assert_eq!(w.absent, vec![wrong.clone()]);
        assert_eq!(uids(&w.delete_later), vec!["u-o"]);
        assert_eq!(g.view("u-o").unwrap().identity, right);
        // The dependent with the wrong name is collected; the other name is then confirmed
        // absent too, and the node goes.
        let mut w = Work::default();
        g.observed_deleted("u-a", &mut w);
        g.virtual_delete(&right, &mut w);
        assert_eq!(uids(&w.delete), vec!["u-b"]);
        assert!(!g.contains("u-o"));
    }

    #[test]
    fn a_reference_to_an_owner_of_another_namespace_is_reported() {
        let in_ns = |kind, name, uid, ns: &str| Identity {
            namespace: ns.into(),
            ..id(kind, name, uid)
        };
        let owner = in_ns("ConfigMap", "o", "u-o", "a");
        let dep = in_ns("ConfigMap", "d", "u-d", "b");
        // The owner seen first: the dependent's reference is reported at once.
        let mut g = Graph::default();
        let mut w = Work::default();
        g.observe(obs(&owner, vec![], DeletionState::default()), &mut w);
        let r = owner_ref(&owner, false);
        g.observe(obs(&dep, vec![r.clone()], DeletionState::default()), &mut w);
        assert_eq!(
            w.invalid_namespace,
            vec![InvalidOwnerRef {
                dependent: dep.clone(),
                owner: r.clone(),
            }]
        );
        assert!(w.delete.iter().any(|u| &**u == "u-d"));
        // The dependent seen first: reported when the owner shows up elsewhere.
        let mut g = Graph::default();
        let mut w = Work::default();
        g.observe(obs(&dep, vec![r.clone()], DeletionState::default()), &mut w);
        assert!(w.invalid_namespace.is_empty());
        g.observe(obs(&owner, vec![], DeletionState::default()), &mut w);
        assert_eq!(w.invalid_namespace.len(), 1);
        // A cluster-scoped owner may be named from any namespace; one seen in the dependent's
        // own namespace is fine.
        let mut g = Graph::default();
        let mut w = Work::default();
        let node = in_ns("Node", "n", "u-n", "");
        g.observe(obs(&node, vec![], DeletionState::default()), &mut w);
        g.observe(obs(&owner, vec![], DeletionState::default()), &mut w);
        let same = in_ns("ConfigMap", "s", "u-s", "a");
        g.observe(
            obs(
                &dep,
                vec![owner_ref(&node, false)],
                DeletionState::default(),
            ),
            &mut w,
        );
        g.observe(obs(&same, vec![r], DeletionState::default()), &mut w);
        assert!(w.invalid_namespace.is_empty());
    }

    #[test]
    fn a_relist_deletes_what_it_no_longer_has() {
        let mut g = Graph::default();
        let a = id("ConfigMap", "a", "u-a");
        let b = id("ConfigMap", "b", "u-b");
        let s = id("Secret", "s", "u-s");
        let mut w = Work::default();
        g.observe(obs(&a, vec![], DeletionState::default()), &mut w);
        g.observe(obs(&b, vec![], DeletionState::default()), &mut w);
        g.observe(
            obs(&s, vec![owner_ref(&b, false)], DeletionState::default()),
            &mut w,
        );
        let mut w = Work::default();
        g.replace(
            "v1",
            "ConfigMap",
            vec![obs(&a, vec![], DeletionState::default())],
            &mut w,
        );
        assert!(!g.contains("u-b") && g.contains("u-a") && g.contains("u-s"));
        assert_eq!(uids(&w.delete), vec!["u-s"]);
    }
}
