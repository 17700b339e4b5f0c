//! Field paths and sets of them: what a manager owns (upstream: structured-merge-diff's
//! `fieldpath` package). A path is a list of elements — a struct field or map key (`f:name`), an
//! item of a keyed list (`k:{"name":"nginx"}`), an item of a set (`v:"a"`), a list index
//! (`i:0`). A [`Set`] is a trie of paths; its `FieldsV1` form is the nested JSON object of
//! `metadata.managedFields[].fieldsV1`, where `"."` marks a path that is itself a member.

use std::cmp::Ordering;
use std::fmt;

use serde_json::{Map, Value};

/// One step of a path.
#[derive(Clone, Debug)]
pub enum PathElement {
    /// A struct field or a map key.
    Field(Box<str>),
    /// An item of a keyed list, by its key fields, sorted by name.
    Key(Box<[(Box<str>, Value)]>),
    /// An item of a set list, by its value.
    Value(Value),
    /// An item of a list by position (only lists nobody should use positionally have them).
    Index(usize),
}

impl PathElement {
    pub fn field(name: &str) -> Self {
        PathElement::Field(name.into())
    }

    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// The element as `fieldsV1` writes it: `f:name`, `k:{...}`, `v:...`, `i:0`.
    pub fn serialize(&self) -> String {
        match self {
            PathElement::Field(name) => {
                let mut out = String::with_capacity(name.len() + 2);
                out.push_str("f:");
                out.push_str(name);
                out
            }
            PathElement::Key(fields) => {
                let mut out = String::from("k:{");
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(name.to_string()).to_string());
                    out.push(':');
                    out.push_str(&value.to_string());
                }
                out.push('}');
                out
            }
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a `fieldsV1` key. `Ok(None)` for an element type this version does not know,
    /// which upstream skips.
    pub fn deserialize(s: &str) -> Result<Option<Self>, String> {
        let b = s.as_bytes();
        if b.len() < 2 {
            return Err("key must be 2 characters long:".into());
        }
        if b[1] != b':' {
            return Err(format!("missing colon: {s}"));
        }
        let rest = &s[2..];
        Ok(Some(match b[0] {
            b'f' => PathElement::Field(rest.into()),
            b'v' => PathElement::Value(serde_json::from_str(rest).map_err(|e| e.to_string())?),
            b'k' => {
                let Value::Object(m) = serde_json::from_str(rest).map_err(|e| e.to_string())?
                else {
                    return Err(format!("key is not an object: {s}"));
                };
                // A map iterates sorted by name: the order upstream sorts key fields in.
                PathElement::Key(m.into_iter().map(|(k, v)| (k.into(), v)).collect())
            }
            b'i' => PathElement::Index(rest.parse().map_err(|_| format!("invalid index: {s}"))?),
            _ => return Ok(None),
        }))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PathElement {
    /// Upstream's order: fields, then keys, then values, then indexes; within each, names
    /// bytewise and values by [`compare_values`].
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.as_bytes().cmp(b.as_bytes()),
            (PathElement::Key(a), PathElement::Key(b)) => {
                for ((an, av), (bn, bv)) in a.iter().zip(b.iter()) {
                    let c = an
                        .as_bytes()
                        .cmp(bn.as_bytes())
                        .then_with(|| compare_values(av, bv));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                a.len().cmp(&b.len())
            }
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl fmt::Display for PathElement {
    /// As conflict messages print it: `.name`, `[name="nginx"]`, `[="a"]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                f.write_str("[")?;
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{name}={}", value_string(value))?;
                }
                f.write_str("]")
            }
            PathElement::Value(v) => write!(f, "[={}]", value_string(v)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A value as structured-merge-diff's `value.ToString` prints it: strings quoted as Go's `%q`.
fn value_string(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::String(s) => crate::validation::go_quote(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(value_string).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}={}", value_string(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// A total order over values, upstream's `value.Compare`: numbers (ints and floats compared
/// numerically), then strings, booleans, lists, maps, and null last.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => {
                let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                x.partial_cmp(&y).unwrap_or(Ordering::Equal)
            }
        },
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y.iter()) {
                let c = compare_values(p, q);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            for ((pk, pv), (qk, qv)) in x.iter().zip(y.iter()) {
                let c = pk.cmp(qk).then_with(|| compare_values(pv, qv));
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

/// A path, printed as conflicts name it (`.spec.containers[name="nginx"].image`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Path(pub Vec<PathElement>);

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for pe in &self.0 {
            write!(f, "{pe}")?;
        }
        Ok(())
    }
}

impl Path {
    /// A path of field names (`["metadata", "labels"]`).
    pub fn fields(names: &[&str]) -> Self {
        Path(names.iter().map(|n| PathElement::field(n)).collect())
    }
}

/// A set of paths, as a trie: `members` are the paths that end here, `children` the subtrees.
/// Both are sorted, and no child is empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Set {
    members: Vec<PathElement>,
    children: Vec<(PathElement, Set)>,
}

impl Set {
    pub fn new() -> Self {
        Set::default()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    fn child_index(&self, pe: &PathElement) -> Result<usize, usize> {
        self.children.binary_search_by(|(p, _)| p.cmp(pe))
    }

    /// The subtree below `pe` (`WithPrefix`), if any.
    pub fn child(&self, pe: &PathElement) -> Option<&Set> {
        self.child_index(pe).ok().map(|i| &self.children[i].1)
    }

    pub fn has_member(&self, pe: &PathElement) -> bool {
        self.members.binary_search(pe).is_ok()
    }

    /// Adds a path; the empty path (the whole object) is never tracked.
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        if rest.is_empty() {
            if let Err(i) = self.members.binary_search(first) {
                self.members.insert(i, first.clone());
            }
            return;
        }
        let i = match self.child_index(first) {
            Ok(i) => i,
            Err(i) => {
                self.children.insert(i, (first.clone(), Set::new()));
                i
            }
        };
        self.children[i].1.insert(rest);
    }

    /// The subtree at `path`, made when missing.
    pub(crate) fn node_mut(&mut self, path: &[PathElement]) -> &mut Set {
        match path.split_first() {
            None => self,
            Some((first, rest)) => self.child_mut(first).node_mut(rest),
        }
    }

    /// The subtree below `pe`, made when missing.
    pub(crate) fn child_mut(&mut self, pe: &PathElement) -> &mut Set {
        // Sets are mostly built in order (an object's members are walked sorted): a new last
        // child needs no search.
        let i = match self.children.last() {
            Some((last, _)) if *last >= *pe => match self.child_index(pe) {
                Ok(i) => i,
                Err(i) => {
                    self.children.insert(i, (pe.clone(), Set::new()));
                    i
                }
            },
            _ => {
                self.children.push((pe.clone(), Set::new()));
                self.children.len() - 1
            }
        };
        &mut self.children[i].1
    }

    /// Adds `pe` as a member of this node.
    pub(crate) fn insert_member(&mut self, pe: PathElement) {
        match self.members.last() {
            Some(last) if *last >= pe => {
                if let Err(i) = self.members.binary_search(&pe) {
                    self.members.insert(i, pe);
                }
            }
            _ => self.members.push(pe),
        }
    }

    pub fn has(&self, path: &[PathElement]) -> bool {
        match path.split_first() {
            None => false,
            Some((first, [])) => self.has_member(first),
            Some((first, rest)) => self.child(first).is_some_and(|c| c.has(rest)),
        }
    }

    pub fn union(&self, other: &Set) -> Set {
        let mut members = self.members.clone();
        for m in &other.members {
            if let Err(i) = members.binary_search(m) {
                members.insert(i, m.clone());
            }
        }
        let mut children = self.children.clone();
        for (pe, set) in &other.children {
            match children.binary_search_by(|(p, _)| p.cmp(pe)) {
                Ok(i) => children[i].1 = children[i].1.union(set),
                Err(i) => children.insert(i, (pe.clone(), set.clone())),
            }
        }
        Set { members, children }
    }

    pub fn intersection(&self, other: &Set) -> Set {
        let members = self
            .members
            .iter()
            .filter(|m| other.has_member(m))
            .cloned()
            .collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, set)| {
                let both = set.intersection(other.child(pe)?);
                (!both.is_empty()).then(|| (pe.clone(), both))
            })
            .collect();
        Set { members, children }
    }

    /// The paths of `self` that `other` does not hold (a member of `other` does not remove
    /// `self`'s paths below it: see [`Set::recursive_difference`]).
    pub fn difference(&self, other: &Set) -> Set {
        let members = self
            .members
            .iter()
            .filter(|m| !other.has_member(m))
            .cloned()
            .collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, set)| match other.child(pe) {
                Some(o) => {
                    let d = set.difference(o);
                    (!d.is_empty()).then(|| (pe.clone(), d))
                }
                None => Some((pe.clone(), set.clone())),
            })
            .collect();
        Set { members, children }
    }

    /// The paths of `self` that neither are in `other` nor lie below one of its paths.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        let members = self
            .members
            .iter()
            .filter(|m| !other.has_member(m))
            .cloned()
            .collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, set)| {
                if other.has_member(pe) {
                    return None;
                }
                match other.child(pe) {
                    Some(o) => {
                        let d = set.recursive_difference(o);
                        (!d.is_empty()).then(|| (pe.clone(), d))
                    }
                    None => Some((pe.clone(), set.clone())),
                }
            })
            .collect();
        Set { members, children }
    }

    /// [`Set::union`] in place, taking `other`'s nodes instead of copying them.
    pub fn absorb(&mut self, other: Set) {
        for m in other.members {
            if let Err(i) = self.members.binary_search(&m) {
                self.members.insert(i, m);
            }
        }
        for (pe, set) in other.children {
            match self.child_index(&pe) {
                Ok(i) => self.children[i].1.absorb(set),
                Err(i) => self.children.insert(i, (pe, set)),
            }
        }
    }

    /// [`Set::difference`] in place.
    pub fn subtract(&mut self, other: &Set) {
        if other.is_empty() {
            return;
        }
        self.members.retain(|m| !other.has_member(m));
        self.children.retain_mut(|(pe, set)| match other.child(pe) {
            Some(o) => {
                set.subtract(o);
                !set.is_empty()
            }
            None => true,
        });
    }

    /// [`Set::recursive_difference`] in place.
    pub fn subtract_recursive(&mut self, other: &Set) {
        if other.is_empty() {
            return;
        }
        self.members.retain(|m| !other.has_member(m));
        self.children.retain_mut(|(pe, set)| {
            if other.has_member(pe) {
                return false;
            }
            match other.child(pe) {
                Some(o) => {
                    set.subtract_recursive(o);
                    !set.is_empty()
                }
                None => true,
            }
        });
    }

    /// Whether the two sets share a path (cheaper than an empty [`Set::intersection`]).
    pub fn intersects(&self, other: &Set) -> bool {
        self.members.iter().any(|m| other.has_member(m))
            || self
                .children
                .iter()
                .any(|(pe, set)| other.child(pe).is_some_and(|o| set.intersects(o)))
    }

    /// Every path, members of a node before its children, each group in order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Path>) {
        for m in &self.members {
            let mut p = prefix.clone();
            p.push(m.clone());
            out.push(Path(p));
        }
        for (pe, set) in &self.children {
            prefix.push(pe.clone());
            set.collect(prefix, out);
            prefix.pop();
        }
    }

    pub(crate) fn members(&self) -> &[PathElement] {
        &self.members
    }

    pub(crate) fn children(&self) -> &[(PathElement, Set)] {
        &self.children
    }

    pub(crate) fn from_parts(members: Vec<PathElement>, children: Vec<(PathElement, Set)>) -> Set {
        Set { members, children }
    }

    /// The `fieldsV1` object.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.emit(false))
    }

    fn emit(&self, include_self: bool) -> Map<String, Value> {
        // Collected rather than inserted one by one: the map is then built in one pass over
        // its sorted keys, which matters for the managed fields of every write. A member that
        // also has children is written once, as the child that holds its ".". Members and
        // children are both sorted, so one walk of the two pairs them.
        let mut entries = Vec::with_capacity(
            usize::from(include_self) + self.members.len() + self.children.len(),
        );
        if include_self && !self.is_empty() {
            entries.push((".".to_string(), empty()));
        }
        let mut members = self.members.iter().peekable();
        for (pe, set) in &self.children {
            while let Some(m) = members.next_if(|m| *m < pe) {
                entries.push((m.serialize(), empty()));
            }
            let is_member = members.next_if(|m| *m == pe).is_some();
            entries.push((pe.serialize(), Value::Object(set.emit(is_member))));
        }
        entries.extend(members.map(|m| (m.serialize(), empty())));
        entries.into_iter().collect()
    }

    /// Reads a `fieldsV1` object (upstream's `FromJSON`): keys of unknown element types are
    /// skipped, malformed ones are an error.
    pub fn from_fields_v1(v: &Value) -> Result<Set, String> {
        Ok(read_node(v)?.0.unwrap_or_default())
    }
}

fn empty() -> Value {
    Value::Object(Map::new())
}

/// A node of `fieldsV1`: its children (None when it has none) and whether it is a member.
fn read_node(v: &Value) -> Result<(Option<Set>, bool), String> {
    let Value::Object(m) = v else {
        return Err(format!("fieldsV1 node is not an object: {v}"));
    };
    let mut children: Option<Set> = None;
    let mut is_member = false;
    for (key, child) in m {
        if key == "." {
            is_member = true;
            continue;
        }
        let Some(pe) = PathElement::deserialize(key)
            .map_err(|e| format!("parsing key as path element: {e}"))?
        else {
            continue;
        };
        let (grandchildren, child_is_member) = read_node(child)?;
        if child_is_member {
            let set = children.get_or_insert_with(Set::new);
            if let Err(i) = set.members.binary_search(&pe) {
                set.members.insert(i, pe.clone());
            }
        }
        if let Some(g) = grandchildren.filter(|g| !g.is_empty()) {
            let set = children.get_or_insert_with(Set::new);
            match set.child_index(&pe) {
                Ok(i) => set.children[i].1 = set.children[i].1.union(&g),
                Err(i) => set.children.insert(i, (pe, g)),
            }
        }
    }
    if children.is_none() {
        is_member = true;
    }
    Ok((children, is_member))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(s: &[&str]) -> Vec<PathElement> {
        s.iter()
            .map(|e| PathElement::deserialize(e).unwrap().unwrap())
            .collect()
    }

    #[test]
    fn fields_v1_round_trips_with_self_markers() {
        let v = json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                       "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}},
                                  "f:finalizers": {"v:\"a\"": {}}}});
        let s = Set::from_fields_v1(&v).unwrap();
        assert!(s.has(&p(&["f:metadata", "f:labels"])));
        assert!(s.has(&p(&["f:metadata", "f:labels", "f:app"])));
        assert!(!s.has(&p(&["f:metadata"])));
        assert!(!s.has(&p(&["f:spec"])));
        assert_eq!(s.to_fields_v1(), v);
    }

    #[test]
    fn set_operations_follow_upstream() {
        let mut a = Set::new();
        a.insert(&p(&["f:data", "f:a"]));
        a.insert(&p(&["f:data", "f:b"]));
        let mut b = Set::new();
        b.insert(&p(&["f:data"]));
        // A member of the other set does not remove paths below it, unless recursively.
        assert_eq!(a.difference(&b), a);
        assert!(a.recursive_difference(&b).is_empty());
        let mut c = Set::new();
        c.insert(&p(&["f:data", "f:b"]));
        assert_eq!(a.intersection(&c), c);
        assert_eq!(a.difference(&c).paths().len(), 1);
        assert_eq!(
            a.union(&b)
                .paths()
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>(),
            vec![".data", ".data.a", ".data.b"]
        );
    }

    #[test]
    fn in_place_operations_agree_with_the_copying_ones() {
        let mut a = Set::new();
        for p in [
            &["f:a", "f:x"][..],
            &["f:a", "f:y"],
            &["f:b"],
            &["f:c", "f:z"],
        ] {
            a.insert(&self::p(p));
        }
        let mut b = Set::new();
        for p in [&["f:a", "f:x"][..], &["f:c"], &["f:d"]] {
            b.insert(&self::p(p));
        }
        let mut x = a.clone();
        x.subtract(&b);
        assert_eq!(x, a.difference(&b));
        let mut x = a.clone();
        x.subtract_recursive(&b);
        assert_eq!(x, a.recursive_difference(&b));
        let mut x = a.clone();
        x.absorb(b.clone());
        assert_eq!(x, a.union(&b));
        assert!(a.intersects(&b));
        assert!(!a.intersects(&Set::from_fields_v1(&serde_json::json!({"f:q": {}})).unwrap()));
    }

    #[test]
    fn paths_print_as_conflicts_name_them() {
        let path = Path(p(&[
            "f:spec",
            "k:{\"port\":80,\"protocol\":\"TCP\"}",
            "f:name",
        ]));
        assert_eq!(path.to_string(), ".spec[port=80,protocol=\"TCP\"].name");
        assert_eq!(
            Path(p(&["f:finalizers", "v:\"x\""])).to_string(),
            ".finalizers[=\"x\"]"
        );
    }

    #[test]
    fn element_order_puts_fields_before_keys_and_numbers_numerically() {
        let a = PathElement::deserialize("v:9").unwrap().unwrap();
        let b = PathElement::deserialize("v:10").unwrap().unwrap();
        assert!(a < b);
        let f = PathElement::field("z");
        let k = PathElement::deserialize("k:{\"a\":1}").unwrap().unwrap();
        assert!(f < k);
        assert!(PathElement::deserialize("x:1").unwrap().is_none());
        assert!(PathElement::deserialize("f").is_err());
    }
}
