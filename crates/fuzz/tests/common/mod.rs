//! What the fuzz targets share: the proptest configuration (case count from `PROPTEST_CASES`,
//! failures kept in `proptest-regressions/<target>.txt`), JSON generators, the seed corpus (the
//! objects kube-apiserver stored and the recorded protobuf bodies of crates/protobuf/testdata),
//! byte mutations, and a protobuf wire writer for hand-built messages.

// Each target uses a different part of this module.
#![allow(dead_code)]

use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};
use serde_json::{Map, Value};

/// The number of cases: `PROPTEST_CASES` when set, else the target's default (chosen so that the
/// whole crate runs in well under three minutes in release mode on two cores).
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Which inputs a run explores. By default a fixed seed, so that a test run (and CI) is
/// reproducible and a failure is the code's, not the draw's; `PROPTEST_RNG_SEED=<n>` picks
/// another fixed seed, and `IRONPLANE_FUZZ_RANDOM=1` a fresh one each run (for long local runs,
/// whose failures are saved to `proptest-regressions/` and replayed from then on).
fn rng_seed() -> RngSeed {
    const DEFAULT_SEED: u64 = 0x1d0c_5eed_0006;
    if std::env::var_os("IRONPLANE_FUZZ_RANDOM").is_some() {
        RngSeed::Random
    } else if std::env::var_os("PROPTEST_RNG_SEED").is_some() {
        Config::default().rng_seed
    } else {
        RngSeed::Fixed(DEFAULT_SEED)
    }
}

/// The configuration of a property of `target` (the test file's name): failures are written to
/// `proptest-regressions/<target>.txt` (relative to crates/fuzz, where cargo runs the tests) and
/// replayed first on every later run.
pub fn config(target: &str, default_cases: u32) -> Config {
    let path: &'static str =
        Box::leak(format!("proptest-regressions/{target}.txt").into_boxed_str());
    Config {
        cases: cases(default_cases),
        rng_seed: rng_seed(),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(path))),
        // Shrinking a large input can take many steps; bound it so a failing run ends.
        max_shrink_iters: 4096,
        ..Config::default()
    }
}

/// As [`config`], but every case runs in a child process (proptest's fork mode), so a crash that
/// aborts the process (a stack overflow) is reported as a failing, shrunk case. `timeout_ms`
/// bounds one case.
pub fn forked_config(target: &str, default_cases: u32, timeout_ms: u32) -> Config {
    Config {
        fork: true,
        timeout: timeout_ms,
        ..config(target, default_cases)
    }
}

/// The stack a request handler has: tokio's worker threads get 2 MiB, as do test threads unless
/// `RUST_MIN_STACK` says otherwise. Deep-nesting properties run on such a thread whatever the
/// environment, so that what passes here passes in the server.
pub const SERVER_STACK: usize = 2 * 1024 * 1024;

/// Runs `f` on a thread with the server's stack size and returns its result (a panic in `f`
/// panics here; a stack overflow aborts the process, which fork mode records).
pub fn on_server_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(SERVER_STACK)
        .spawn(f)
        .expect("spawn a thread")
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

// ---------------------------------------------------------------------------------------------
// Seeds
// ---------------------------------------------------------------------------------------------

fn testdata(name: &str) -> Vec<u8> {
    let path = format!("{}/../protobuf/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The objects kube-apiserver v1.36 stored for creates of more than 40 kinds (one per line of
/// crates/protobuf/testdata/defaults.jsonl), plus the recorded ConfigMap, Deployment, Service,
/// list and Status.
pub fn stored_objects() -> &'static [Value] {
    static OBJECTS: OnceLock<Vec<Value>> = OnceLock::new();
    OBJECTS.get_or_init(|| {
        let text = String::from_utf8(testdata("defaults.jsonl")).expect("UTF-8");
        let mut objects: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON object per line"))
            .collect();
        for name in RECORDED {
            objects.push(serde_json::from_slice(&testdata(&format!("{name}.json"))).expect("JSON"));
        }
        objects
    })
}

const RECORDED: [&str; 5] = [
    "configmap",
    "deployment",
    "service",
    "configmap-list",
    "status-notfound",
];

/// The protobuf bodies kube-apiserver sent for the recorded objects.
pub fn recorded_protobuf() -> Vec<Vec<u8>> {
    RECORDED
        .iter()
        .map(|name| testdata(&format!("{name}.pb")))
        .collect()
}

/// One of the stored objects.
pub fn stored_object() -> impl Strategy<Value = Value> {
    let objects = stored_objects();
    (0..objects.len()).prop_map(move |i| objects[i].clone())
}

// ---------------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------------

/// Strings that stress parsers: empty, ASCII words, keys with prefixes, escapes, control
/// characters, any Unicode, and the odd long one.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9]{0,8}",
        2 => "[a-zA-Z0-9._/~$-]{0,16}",
        1 => Just(String::new()),
        1 => any::<String>(),
        1 => "\\PC{0,8}",
        1 => "[\\x00-\\x1f\"\\\\]{0,4}",
        1 => (1usize..5000).prop_map(|n| "x".repeat(n)),
    ]
}

/// A JSON scalar, with the numbers Go and serde disagree about (large, negative, fractional).
pub fn json_scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-3i64..3).prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        text().prop_map(Value::String),
    ]
}

/// Any JSON value: objects and arrays nested up to `depth` levels, `size` nodes in all.
pub fn json_value(depth: u32, size: u32) -> impl Strategy<Value = Value> {
    json_scalar().prop_recursive(depth, size, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..8)
                .prop_map(|entries| Value::Object(entries.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A JSON value nested `depth` levels deep, built without recursion (so the generator itself does
/// not overflow): alternating arrays and one-key objects around a scalar.
pub fn nested_value(depth: usize, leaf: Value) -> Value {
    let mut value = leaf;
    for level in 0..depth {
        value = if level % 2 == 0 {
            Value::Array(vec![value])
        } else {
            let mut map = Map::new();
            map.insert("k".into(), value);
            Value::Object(map)
        };
    }
    value
}

/// Drops a deep value without recursing: `Value`'s own `Drop` recurses once per level.
pub fn drop_deep(value: Value) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Byte mutations
// ---------------------------------------------------------------------------------------------

/// One edit of a byte string; positions are taken modulo the length at the time of the edit.
#[derive(Clone, Debug)]
pub enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
    Duplicate(usize, usize),
    /// An extreme varint (10 bytes of 0xff, or a length of 2^31) at a position.
    Varint(usize, bool),
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), 1u8..).prop_map(|(at, bits)| Mutation::Flip(at, bits)),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Mutation::Set(at, b)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        2 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Mutation::Insert(at, bytes)),
        1 => (any::<usize>(), 1usize..32).prop_map(|(at, n)| Mutation::Remove(at, n)),
        1 => (any::<usize>(), 1usize..64).prop_map(|(at, n)| Mutation::Duplicate(at, n)),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(at, huge)| Mutation::Varint(at, huge)),
    ]
}

/// Applies the edits in order; the first `keep` bytes (a magic prefix) are never touched.
pub fn mutate(bytes: &mut Vec<u8>, edits: &[Mutation], keep: usize) {
    for edit in edits {
        let len = bytes.len().saturating_sub(keep);
        let at = |i: usize| keep + if len == 0 { 0 } else { i % len };
        match edit {
            Mutation::Flip(i, bits) if len > 0 => bytes[at(*i)] ^= bits,
            Mutation::Set(i, b) if len > 0 => bytes[at(*i)] = *b,
            Mutation::Truncate(i) => bytes.truncate(keep + i % (len + 1)),
            Mutation::Insert(i, new) => {
                let at = keep + i % (len + 1);
                bytes.splice(at..at, new.iter().copied());
            }
            Mutation::Remove(i, n) if len > 0 => {
                let start = at(*i);
                let end = (start + n).min(bytes.len());
                bytes.drain(start..end);
            }
            Mutation::Duplicate(i, n) if len > 0 => {
                let start = at(*i);
                let end = (start + n).min(bytes.len());
                let copy = bytes[start..end].to_vec();
                bytes.splice(end..end, copy);
            }
            Mutation::Varint(i, huge) => {
                let at = keep + i % (len + 1);
                let varint: &[u8] = if *huge {
                    &[0xff; 10]
                } else {
                    &[0x80, 0x80, 0x80, 0x80, 0x08]
                };
                bytes.splice(at..at, varint.iter().copied());
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Protobuf wire writer (for messages the encoder would never write)
// ---------------------------------------------------------------------------------------------

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field (wire type 2).
pub fn put_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_varint(out, (u64::from(field) << 3) | 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// An envelope (`k8s\0` + runtime.Unknown) around the message `raw` of `api_version`/`kind`.
pub fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = b"k8s\0".to_vec();
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, raw);
    out
}

/// Wraps `inner` in `depth` messages, each the field `path[level % path.len()]` of the one
/// outside it, innermost first. Built from the inside out without recursion.
pub fn nest(inner: &[u8], depth: usize, path: &[u32]) -> Vec<u8> {
    let mut message = inner.to_vec();
    for level in 0..depth {
        let mut outer = Vec::with_capacity(message.len() + 8);
        put_bytes(&mut outer, path[level % path.len()], &message);
        message = outer;
    }
    message
}

// ---------------------------------------------------------------------------------------------
// Regression tests of crashes
// ---------------------------------------------------------------------------------------------

const CHILD: &str = "IRONPLANE_FUZZ_CHILD";

/// Runs `f` in a child process (this test binary, asked to run only `test_name`), so that a
/// stack overflow fails this one test instead of aborting every test of the binary. Panics with
/// the child's output when the child does not exit cleanly.
pub fn in_child_process(test_name: &str, f: impl FnOnce()) {
    if std::env::var(CHILD).as_deref() == Ok(test_name) {
        f();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let output = std::process::Command::new(exe)
        .args([test_name, "--exact", "--nocapture", "--test-threads", "1"])
        .env(CHILD, test_name)
        .output()
        .expect("run the test binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{test_name} failed in a child process ({}):\n{}{}",
        output.status,
        stdout,
        String::from_utf8_lossy(&output.stderr)
    );
}
