//! Fuzz target: every built-in kind's strategy — defaults, preparation, validation and
//! warnings, on create and on update — over mutated valid objects. Seeds are the objects
//! kube-apiserver stored for more than 40 kinds (`common::stored_objects`), each handed to the
//! strategies of its kind's resources; a mutation replaces, removes or retypes values at random
//! paths (any depth, lists and maps included), the way a careless or hostile client would, and
//! the objects that still fit the kind's Go types (what the decoder lets through) are handed on.
//! Nothing may panic: a bad object is refused with field errors, never a crash.

mod common;

use std::sync::Arc;

use apiserver::registry::{ResourceInfo, Strategy as KindStrategy};
use proptest::prelude::*;
use serde_json::{Value, json};

use common::{config, stored_objects};

/// Every served resource with its strategy, built as the server builds them.
/// A served resource and its strategy.
type Served = (Arc<ResourceInfo>, Arc<dyn KindStrategy>);

fn strategies() -> &'static [Served] {
    static ALL: std::sync::OnceLock<Vec<Served>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let ctx = ironplane_kube::strategies::StrategyContext {
            services: Arc::new(
                ironplane_kube::strategies::ServiceIpAllocator::new("10.0.0.0/24", "30000-32767")
                    .expect("a valid range"),
            ),
            authenticator: Arc::new(apiserver::authentication::UnionAuthenticator::new(
                Vec::new(),
            )),
            api: Arc::new(std::sync::OnceLock::new()),
            authorizer: Arc::new(apiserver::authorization::AlwaysAllow),
            tokens: None,
            escalation: ironplane_kube::rbac::escalation::Escalation {
                index: Default::default(),
                authorizer: Arc::new(apiserver::authorization::AlwaysAllow),
                api: Arc::new(std::sync::OnceLock::new()),
            },
        };
        ironplane_kube::catalog::builtin_resources()
            .into_iter()
            .map(|info| {
                // CRDs are stored by the catalog with the apiextensions layer's strategy.
                let s: Arc<dyn KindStrategy> = if info.group == "apiextensions.k8s.io" {
                    Arc::new(apiextensions::crd::CustomResourceDefinitionStrategy)
                } else {
                    ironplane_kube::strategies::for_resource(&info, &ctx)
                };
                (info, s)
            })
            .collect()
    })
}

/// The objects of upstream's recorded corpus (../shared/upstream-v1.36/corpus/requests.json):
/// rich valid objects and invalid ones of 45 kinds, the bodies of its requests and setups.
fn corpus_objects() -> Vec<Value> {
    let path = format!(
        "{}/../../../shared/upstream-v1.36/corpus/requests.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("upstream's corpus is needed as seeds: {path}: {e}"));
    let doc: Value = serde_json::from_str(&text).expect("the corpus is JSON");
    let mut out = Vec::new();
    for case in doc["cases"].as_array().into_iter().flatten() {
        let steps = case["setup"].as_array().into_iter().flatten();
        for step in steps.chain(std::iter::once(&case["request"])) {
            let body = &step["body"];
            if body["apiVersion"].is_string() && body["kind"].is_string() {
                out.push(body.clone());
            }
        }
    }
    out
}

/// The seeds, each with the index of a strategy of its kind (by `apiVersion`'s group and
/// `kind`).
fn seeds() -> &'static [(usize, Value)] {
    static SEEDS: std::sync::OnceLock<Vec<(usize, Value)>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(load_seeds)
}

fn load_seeds() -> Vec<(usize, Value)> {
    let mut out = Vec::new();
    for obj in stored_objects().iter().cloned().chain(corpus_objects()) {
        let obj = &obj;
        let api_version = obj["apiVersion"].as_str().unwrap_or("");
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        let kind = obj["kind"].as_str().unwrap_or("");
        for (i, (info, _)) in strategies().iter().enumerate() {
            if info.group == group && info.kind == kind {
                out.push((i, obj.clone()));
            }
        }
    }
    out
}

/// Values a mutation puts in place of another.
fn replacement() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        Just(json!("")),
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(i64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(1.5)),
        Just(json!(true)),
        Just(json!([])),
        Just(json!({})),
        Just(json!([null])),
        Just(json!({"": null})),
        Just(json!("-1")),
        Just(json!("1e400")),
        Just(json!("99999999999999999999Gi")),
        Just(json!("*")),
        Just(json!("/")),
        "[ -~]{0,12}".prop_map(Value::String),
        "\\PC{0,6}".prop_map(Value::String),
    ]
}

/// Strings that validation rules care about: empty, signs, paths, qualified names, addresses,
/// quantities, enum-like words, over-long ones.
const STRINGS: &[&str] = &[
    "",
    "-1",
    "0",
    "a",
    "*",
    "/",
    "..",
    "a/b/c",
    "kubernetes.io/x",
    "example.com/",
    "Always",
    "None",
    "UPPER",
    "-",
    "bad value!",
    "10.0.0.1",
    "10.0.0.010",
    "::1",
    "0.0.0.0/0",
    "10.0.0.0/33",
    "1.5",
    "1e400",
    "999999999999999999999Gi",
    "-1Gi",
    "0.5m",
    "1Ei",
    "\u{0}",
    "a\nb",
    "${X}",
    "$(X)",
    "system:masters",
    "latest",
    "sha256:00",
];

/// A value of `slot`'s JSON type, picked by `n`: what a client sends that type-checks but
/// breaks rules.
fn same_type(slot: &Value, n: usize, drawn: &Value) -> Value {
    match slot {
        Value::String(_) => match drawn {
            Value::String(s) if n.is_multiple_of(3) => json!(s),
            _ if n.is_multiple_of(7) => json!("x".repeat(300)),
            _ => json!(STRINGS[n % STRINGS.len()]),
        },
        Value::Number(_) => {
            let numbers = [
                0i64,
                -1,
                1,
                2,
                65536,
                2_147_483_647,
                -2_147_483_648,
                86400,
                1000,
            ];
            json!(numbers[n % numbers.len()])
        }
        Value::Bool(b) => json!(!b),
        Value::Array(a) if n.is_multiple_of(2) => {
            json!(a.iter().rev().cloned().collect::<Vec<_>>())
        }
        Value::Array(_) => json!([]),
        Value::Object(_) => json!({}),
        Value::Null => drawn.clone(),
    }
}

/// One edit: at the `pick`-th node of the object (in a depth-first walk), replace the value,
/// remove it from its parent, or double a list.
#[derive(Clone, Debug)]
enum Edit {
    Replace(usize, Value),
    Remove(usize),
    Double(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<usize>(), replacement()).prop_map(|(p, v)| Edit::Replace(p, v)),
        2 => any::<usize>().prop_map(Edit::Remove),
        1 => any::<usize>().prop_map(Edit::Double),
    ]
}

fn count(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(count).sum(),
        Value::Object(m) => m.values().map(count).sum(),
        _ => 0,
    }
}

/// What `at` calls with a node's parent and the node's key or index.
type Visit<'a> = dyn FnMut(&mut Value, Option<&str>, Option<usize>) + 'a;

/// Applies `f` to the `n`-th node below `v` (0 is `v`'s first child) with its parent.
fn at(v: &mut Value, n: &mut usize, f: &mut Visit) -> bool {
    let keys: Vec<String> = match v {
        Value::Object(m) => m.keys().cloned().collect(),
        _ => Vec::new(),
    };
    match v {
        Value::Object(_) => {
            for k in keys {
                if *n == 0 {
                    f(v, Some(&k), None);
                    return true;
                }
                *n -= 1;
                if at(&mut v[&k], n, f) {
                    return true;
                }
            }
        }
        Value::Array(a) => {
            for i in 0..a.len() {
                if *n == 0 {
                    f(v, None, Some(i));
                    return true;
                }
                *n -= 1;
                if at(&mut v[i], n, f) {
                    return true;
                }
            }
        }
        _ => {}
    }
    false
}

fn apply(obj: &mut Value, e: &Edit) {
    let size = count(obj).max(2) - 1;
    let (pick, edit) = match e {
        Edit::Replace(p, _) | Edit::Remove(p) | Edit::Double(p) => (*p % size, e),
    };
    let mut n = pick;
    at(obj, &mut n, &mut |parent, key, index| {
        let slot = match (key, index) {
            (Some(k), _) => &mut parent[k],
            (_, Some(i)) => &mut parent[i],
            _ => return,
        };
        match edit {
            // Mostly a value of the same JSON type, so that the object still fits its Go types
            // and reaches the strategies; sometimes the drawn value as it is.
            Edit::Replace(p, v) if !p.is_multiple_of(4) => *slot = same_type(slot, p / 4, v),
            Edit::Replace(_, v) => *slot = v.clone(),
            Edit::Double(_) => {
                if let Value::Array(a) = slot {
                    let copy = a.clone();
                    a.extend(copy);
                } else {
                    *slot = json!([slot.clone(), slot.clone()]);
                }
            }
            Edit::Remove(_) => match (parent, key, index) {
                (Value::Object(m), Some(k), _) => {
                    m.remove(k);
                }
                (Value::Array(a), _, Some(i)) => {
                    a.remove(i);
                }
                _ => {}
            },
        }
    });
}

/// The whole strategy surface on one object: what a create and an update of it run.
fn exercise(strategy: &dyn KindStrategy, original: &Value, mutated: &Value) {
    let mut created = mutated.clone();
    strategy.default(&mut created);
    strategy.prepare_for_create(&mut created);
    let _ = strategy.validate(&created);
    let _ = strategy.warnings_on_create(&created);
    let mut old = original.clone();
    strategy.default(&mut old);
    let mut updated = mutated.clone();
    strategy.default(&mut updated);
    strategy.prepare_for_update(&mut updated, &old);
    let _ = strategy.validate_update(&updated, &old);
    let _ = strategy.warnings_on_update(&updated, &old);
    let _ = strategy.validate_status_update(&updated, &old);
    // The reverse update: from a broken stored object to a valid one.
    let mut back = original.clone();
    strategy.default(&mut back);
    strategy.prepare_for_update(&mut back, &created);
    let _ = strategy.validate_update(&back, &created);
}

proptest! {
    #![proptest_config(config("validation", 20000))]

    #[test]
    fn strategies_never_panic(pick in any::<usize>(), edits in proptest::collection::vec(edit(), 1..6)) {
        let seeds = seeds();
        prop_assume!(!seeds.is_empty());
        let (i, original) = &seeds[pick % seeds.len()];
        let (_, strategy) = &strategies()[*i];
        let mut mutated = original.clone();
        for e in &edits {
            apply(&mut mutated, e);
        }
        // Strategies see what the decoder let through: objects that fit their Go types (a
        // string where Go has a struct is refused with Go's error before any strategy runs).
        let api_version = original["apiVersion"].as_str().unwrap_or("");
        let kind = original["kind"].as_str().unwrap_or("");
        if ironplane_protobuf::check_go_types(api_version, kind, &mutated).is_ok() {
            exercise(strategy.as_ref(), original, &mutated);
        }
    }
}

#[test]
fn every_seed_kind_has_a_strategy_and_passes_untouched() {
    let seeds = seeds();
    assert!(seeds.len() >= 40, "only {} seeds", seeds.len());
    for (i, obj) in seeds {
        let (info, strategy) = &strategies()[*i];
        let mut o = obj.clone();
        strategy.default(&mut o);
        exercise(strategy.as_ref(), obj, obj);
        let _ = info;
    }
}

#[test]
fn most_mutations_reach_the_strategies() {
    // The target is only as good as the share of mutated objects that pass the Go type check
    // and reach the strategies; a drop in that share means the generator went stale.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let edits = proptest::collection::vec(edit(), 1..6);
    let (mut reached, total) = (0, 2000);
    for n in 0..total {
        let (_, original) = &seeds()[n % seeds().len()];
        let mut mutated = original.clone();
        for e in edits.new_tree(&mut runner).expect("a draw").current() {
            apply(&mut mutated, &e);
        }
        let api_version = original["apiVersion"].as_str().unwrap_or("");
        let kind = original["kind"].as_str().unwrap_or("");
        if ironplane_protobuf::check_go_types(api_version, kind, &mutated).is_ok() {
            reached += 1;
        }
    }
    assert!(
        reached * 2 > total,
        "only {reached} of {total} mutated objects type-check"
    );
    eprintln!("{reached} of {total} mutated objects type-check");
}
