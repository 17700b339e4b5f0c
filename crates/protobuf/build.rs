//! Build script: turns upstream's schema data into the table that `src/schema.rs` reads.
//!
//! Two inputs, both kept as data in `data/`: the `generated.proto` files of k8s.io/api,
//! apimachinery, apiextensions and apiregistration (compiled here by protox, a pure-Rust protobuf
//! compiler, so no protoc is needed), and `go-fields.json.gz`, the facts about each Go struct field
//! that the .proto files do not carry (JSON name, `omitempty`, `inline`, pointer or not). The
//! output, `$OUT_DIR/schema.txt`, is one line per package version, message and field; the crate
//! embeds it, so nothing of protox is linked into the server.
//!
//! The script refuses (fails the build) whenever the two inputs disagree or a message needs
//! handling it does not know: a new upstream release then fails loudly here instead of producing
//! wrong bytes at run time.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use protox::prost_reflect::{
    Cardinality, DescriptorPool, FieldDescriptor, Kind, MessageDescriptor,
};
use serde_json::Value;

/// Messages whose Go type marshals itself (custom `MarshalJSON`/`Marshal`), keyed by full proto
/// name, with the codec `src/schema.rs` knows them by. Their Go field facts do not apply.
const SPECIALS: &[(&str, &str)] = &[
    ("k8s.io.apimachinery.pkg.apis.meta.v1.Time", "time"),
    (
        "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime",
        "microtime",
    ),
    ("k8s.io.apimachinery.pkg.apis.meta.v1.Duration", "duration"),
    ("k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1", "rawjson"),
    ("k8s.io.apimachinery.pkg.apis.meta.v1.Verbs", "strings"),
    ("k8s.io.apimachinery.pkg.api.resource.Quantity", "quantity"),
    (
        "k8s.io.apimachinery.pkg.api.resource.QuantityValue",
        "quantity",
    ),
    (
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
        "intorstring",
    ),
    (
        "k8s.io.apimachinery.pkg.runtime.RawExtension",
        "rawextension",
    ),
    ("k8s.io.apimachinery.pkg.runtime.Unknown", "unknown"),
    (
        "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON",
        "rawjson",
    ),
    (
        "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
        "schemaorbool",
    ),
    (
        "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
        "schemaorarray",
    ),
    (
        "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
        "schemaorstringarray",
    ),
];

/// The wire shape each special codec relies on: `number:type:cardinality` of every field. The
/// run-time codecs address these fields by number, so the build checks them here.
const SPECIAL_SHAPES: &[(&str, &str)] = &[
    ("time", "1:i64:1 2:i32:1"),
    ("microtime", "1:i64:1 2:i32:1"),
    ("duration", "1:i64:1"),
    ("rawjson", "1:y:1"),
    ("strings", "1:s:*"),
    ("quantity", "1:s:1"),
    ("intorstring", "1:i64:1 2:i32:1 3:s:1"),
    ("rawextension", "1:y:1"),
    ("unknown", "1:msg:1 2:y:1 3:s:1 4:s:1"),
    ("schemaorbool", "1:b:1 2:msg:1"),
    ("schemaorarray", "1:msg:1 2:msg:*"),
    ("schemaorstringarray", "1:msg:1 2:s:*"),
];

/// Go types that are a named copy of another package's struct (`type List metav1.List`): the Go
/// facts are those of the original, matched by protobuf field name.
const BORROWED_FACTS: &[(&str, &str, &str)] = &[
    (
        "k8s.io.api.core.v1.List",
        "k8s.io/apimachinery/pkg/apis/meta/v1",
        "List",
    ),
    (
        "k8s.io.apimachinery.pkg.apis.meta.v1beta1.PartialObjectMetadataList",
        "k8s.io/apimachinery/pkg/apis/meta/v1",
        "PartialObjectMetadataList",
    ),
    (
        "k8s.io.api.admissionregistration.v1alpha1.MatchCondition",
        "k8s.io/api/admissionregistration/v1",
        "MatchCondition",
    ),
];

/// Go packages left out: no server of v1.36 serves them and the field facts do not cover them.
const SKIPPED_GO_PACKAGES: &[&str] = &[
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1",
    "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1beta1",
];

/// Go packages with no struct facts of their own whose every message is special or borrowed.
const FACTLESS_GO_PACKAGES: &[&str] = &[
    "k8s.io/apimachinery/pkg/api/resource",
    "k8s.io/apimachinery/pkg/util/intstr",
    "k8s.io/apimachinery/pkg/runtime/schema",
    "k8s.io/apimachinery/pkg/apis/meta/v1beta1",
];

/// `omitzero` options that the facts file does not record. Upstream v1.36 tags
/// `ObjectMeta.CreationTimestamp` with `json:"creationTimestamp,omitempty,omitzero"`, so a zero
/// time is left out of JSON rather than written as `null` (see the recorded Deployment's
/// `spec.template.metadata`).
const OMITZERO: &[(&str, &str, &str)] = &[(
    "k8s.io/apimachinery/pkg/apis/meta/v1",
    "ObjectMeta",
    "creationTimestamp",
)];

fn main() {
    if let Err(message) = run() {
        eprintln!("error: {message}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let manifest = PathBuf::from(env("CARGO_MANIFEST_DIR")?);
    let data = manifest.join("data");
    let proto_root = data.join("proto");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", data.display());

    let mut files = Vec::new();
    collect_protos(&proto_root, &proto_root, &mut files)?;
    files.sort();
    let pool = protox::Compiler::new([&proto_root])
        .map_err(|e| format!("protox: {e}"))?
        .include_imports(true)
        .include_source_info(false)
        .open_files(&files)
        .map_err(|e| format!("protox: {e}"))?
        .descriptor_pool();

    let facts = load_facts(&data.join("go-fields.json.gz"))?;
    let table = Table::build(&pool, &facts)?;
    let out = PathBuf::from(env("OUT_DIR")?).join("schema.txt");
    fs::write(&out, table.text).map_err(|e| format!("writing {}: {e}", out.display()))
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|e| format!("{name}: {e}"))
}

fn collect_protos(root: &Path, dir: &Path, files: &mut Vec<String>) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            collect_protos(root, &path, files)?;
        } else if path.extension().is_some_and(|ext| ext == "proto") {
            let relative = path.strip_prefix(root).map_err(|e| e.to_string())?;
            files.push(relative.to_string_lossy().replace('\\', "/"));
        }
    }
    Ok(())
}

/// Go package path → struct name → fields in declaration order.
type Facts = HashMap<String, HashMap<String, Vec<Value>>>;

fn load_facts(path: &Path) -> Result<Facts, String> {
    let file = fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// One Go struct field that has a protobuf tag.
struct Fact<'a> {
    json: &'a str,
    /// The Go field name, which is what Go's JSON encoder writes for the internal (untagged)
    /// types that validation messages print.
    go_name: &'a str,
    number: u32,
    proto_name: Option<&'a str>,
    omitempty: bool,
    inline: bool,
    pointer: bool,
    /// The Go type as the source spells it (`*int32`, `[]Container`, `metav1.ObjectMeta`).
    go_type: &'a str,
}

fn parse_fact(value: &Value) -> Result<Option<Fact<'_>>, String> {
    let Some(tag) = value.get("protobuf").and_then(Value::as_str) else {
        // Fields without a protobuf tag (the inline TypeMeta) travel in the envelope, not in the
        // message.
        return Ok(None);
    };
    let mut parts = tag.split(',');
    let number = parts
        .nth(1)
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("protobuf tag without a field number: {tag}"))?;
    // A few tags carry no name (`bytes,1,req` on an embedded struct); those are matched by number.
    let proto_name = tag.split(',').find_map(|part| part.strip_prefix("name="));
    let flag = |name: &str| value.get(name).and_then(Value::as_bool).unwrap_or(false);
    Ok(Some(Fact {
        json: value.get("json").and_then(Value::as_str).unwrap_or(""),
        go_name: value.get("go").and_then(Value::as_str).unwrap_or(""),
        number,
        proto_name,
        omitempty: flag("omitempty"),
        inline: flag("inline"),
        pointer: flag("pointer"),
        go_type: value.get("type").and_then(Value::as_str).unwrap_or(""),
    }))
}

struct Table {
    text: String,
}

impl Table {
    fn build(pool: &DescriptorPool, facts: &Facts) -> Result<Table, String> {
        let mut text = String::new();
        let mut emitted = BTreeSet::new();
        let mut referenced = BTreeMap::new();
        let mut versions = BTreeMap::new();
        let specials: HashMap<&str, &str> = SPECIALS.iter().copied().collect();

        for file in pool.files() {
            let go_package = file
                .file_descriptor_proto()
                .options
                .as_ref()
                .and_then(|options| options.go_package.clone())
                .ok_or_else(|| format!("{}: no go_package option", file.name()))?;
            if SKIPPED_GO_PACKAGES.contains(&go_package.as_str()) {
                continue;
            }
            let package_facts = facts.get(&go_package);
            if package_facts.is_none() && !FACTLESS_GO_PACKAGES.contains(&go_package.as_str()) {
                return Err(format!("no Go field facts for package {go_package}"));
            }
            if let Some((dir, version)) = api_version_of(&go_package) {
                let previous = versions.insert(
                    (dir.to_string(), version.to_string()),
                    file.package_name().to_string(),
                );
                if previous.is_some() {
                    return Err(format!("two proto packages for {dir}/{version}"));
                }
            }
            for message in file.messages() {
                if message.child_messages().any(|child| !child.is_map_entry()) {
                    return Err(format!("{}: nested messages", message.full_name()));
                }
                let special = specials.get(message.full_name()).copied().or_else(|| {
                    // ExtraValue (a `[]string` in Go) is declared in several packages.
                    (message.name() == "ExtraValue").then_some("strings")
                });
                let own_facts = package_facts.and_then(|structs| structs.get(message.name()));
                let lines = match (special, own_facts) {
                    (Some(special), _) => special_fields(&message, special)?,
                    (None, Some(fields)) => {
                        let omitzero: Vec<&str> = OMITZERO
                            .iter()
                            .filter(|(pkg, name, _)| *pkg == go_package && *name == message.name())
                            .map(|(_, _, json)| *json)
                            .collect();
                        fact_fields(
                            &message,
                            fields,
                            false,
                            &omitzero,
                            go_package_name(&go_package),
                        )?
                    }
                    (None, None) => {
                        if let Some((_, pkg, name)) = BORROWED_FACTS
                            .iter()
                            .find(|(full, _, _)| *full == message.full_name())
                        {
                            let fields = facts
                                .get(*pkg)
                                .and_then(|structs| structs.get(*name))
                                .ok_or_else(|| format!("no facts for {pkg}.{name}"))?;
                            fact_fields(&message, fields, true, &[], go_package_name(pkg))?
                        } else if message.fields().len() == 0 {
                            // Empty Go structs are absent from the facts file.
                            Vec::new()
                        } else {
                            return Err(format!(
                                "no Go facts for {} and no special codec",
                                message.full_name()
                            ));
                        }
                    }
                };
                writeln!(
                    text,
                    "M\t{}\t{}",
                    message.full_name(),
                    special.unwrap_or("-")
                )
                .map_err(|e| e.to_string())?;
                for line in lines {
                    for reference in &line.references {
                        referenced.insert(reference.clone(), message.full_name().to_string());
                    }
                    text.push_str(&line.text);
                    text.push('\n');
                }
                emitted.insert(message.full_name().to_string());
            }
        }
        for (reference, user) in &referenced {
            if !emitted.contains(reference) {
                return Err(format!(
                    "{user} refers to {reference}, which is not in the table"
                ));
            }
        }
        for ((dir, version), package) in versions {
            writeln!(text, "V\t{dir}\t{version}\t{package}").map_err(|e| e.to_string())?;
        }
        Ok(Table { text })
    }
}

/// `k8s.io/api/apps/v1` → (`apps`, `v1`); None for packages that are not an API version.
fn api_version_of(go_package: &str) -> Option<(&str, &str)> {
    let mut segments = go_package.rsplit('/');
    let version = segments.next()?;
    let dir = segments.next()?;
    let mut chars = version.chars();
    (chars.next() == Some('v') && chars.next().is_some_and(|c| c.is_ascii_digit()))
        .then_some((dir, version))
}

struct FieldLine {
    text: String,
    references: Vec<String>,
}

/// The type column of a field line, and the message it refers to, if any.
fn type_of(field: &FieldDescriptor) -> Result<(String, &'static str, Option<String>), String> {
    let scalar = |kind: &Kind| -> Result<(String, Option<String>), String> {
        Ok(match kind {
            Kind::String => ("s".into(), None),
            Kind::Bool => ("b".into(), None),
            Kind::Int32 => ("i32".into(), None),
            Kind::Int64 => ("i64".into(), None),
            Kind::Double => ("f64".into(), None),
            Kind::Bytes => ("y".into(), None),
            Kind::Message(message) => (
                message.full_name().to_string(),
                Some(message.full_name().to_string()),
            ),
            other => return Err(format!("{}: unsupported type {other:?}", field.full_name())),
        })
    };
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            return Err(format!(
                "{}: map without an entry message",
                field.full_name()
            ));
        };
        if entry.map_entry_key_field().kind() != Kind::String {
            return Err(format!("{}: map key is not a string", field.full_name()));
        }
        let (ty, reference) = scalar(&entry.map_entry_value_field().kind())?;
        return Ok((ty, "m", reference));
    }
    let card = match field.cardinality() {
        Cardinality::Repeated => "*",
        _ => "1",
    };
    let (ty, reference) = scalar(&field.kind())?;
    Ok((ty, card, reference))
}

fn field_line(
    field: &FieldDescriptor,
    json: &str,
    flags: &str,
    go_type: &str,
    go_name: &str,
) -> Result<FieldLine, String> {
    let (ty, card, reference) = type_of(field)?;
    let flags = if flags.is_empty() { "-" } else { flags };
    let json = if json.is_empty() { "-" } else { json };
    let go_type = if go_type.is_empty() { "-" } else { go_type };
    let go_name = if go_name.is_empty() { "-" } else { go_name };
    Ok(FieldLine {
        text: format!(
            "F\t{}\t{json}\t{flags}\t{card}\t{ty}\t{go_type}\t{go_name}",
            field.number()
        ),
        references: reference.into_iter().collect(),
    })
}

fn special_fields(message: &MessageDescriptor, special: &str) -> Result<Vec<FieldLine>, String> {
    let mut fields: Vec<FieldDescriptor> = message.fields().collect();
    fields.sort_by_key(FieldDescriptor::number);
    let mut shape = Vec::new();
    for field in &fields {
        let (ty, card, reference) = type_of(field)?;
        let ty = if reference.is_some() {
            "msg".to_string()
        } else {
            ty
        };
        shape.push(format!("{}:{ty}:{card}", field.number()));
    }
    let shape = shape.join(" ");
    let expected = SPECIAL_SHAPES
        .iter()
        .find(|(name, _)| *name == special)
        .map(|(_, shape)| *shape)
        .ok_or_else(|| format!("no shape for special {special}"))?;
    if shape != expected {
        return Err(format!(
            "{} has shape {shape}, the {special} codec expects {expected}",
            message.full_name()
        ));
    }
    fields
        .iter()
        .map(|field| field_line(field, field.name(), "", "", ""))
        .collect()
}

fn fact_fields(
    message: &MessageDescriptor,
    facts: &[Value],
    by_name: bool,
    omitzero: &[&str],
    package_name: &str,
) -> Result<Vec<FieldLine>, String> {
    let mut lines = Vec::new();
    let mut covered = BTreeSet::new();
    for value in facts {
        let Some(fact) = parse_fact(value)? else {
            continue;
        };
        let field = match (by_name, fact.proto_name) {
            (true, Some(name)) => message.get_field_by_name(name),
            _ => message.get_field(fact.number),
        }
        .ok_or_else(|| {
            format!(
                "{}: Go field {} has no proto field",
                message.full_name(),
                fact.number
            )
        })?;
        if fact.json == "-" {
            return Err(format!(
                "{}: field {} is hidden from JSON",
                message.full_name(),
                field.name()
            ));
        }
        if fact.inline != fact.json.is_empty() {
            return Err(format!(
                "{}: field {} inline mismatch",
                message.full_name(),
                field.name()
            ));
        }
        let mut flags = String::new();
        for (set, flag) in [
            (fact.pointer, 'p'),
            (fact.omitempty, 'o'),
            (fact.inline, 'i'),
            (omitzero.contains(&fact.json), 'z'),
        ] {
            if set {
                flags.push(flag);
            }
        }
        if !covered.insert(field.number()) {
            return Err(format!(
                "{}: field {} twice",
                message.full_name(),
                field.name()
            ));
        }
        let go_type = reflect_type_name(fact.go_type.trim_start_matches('*'), package_name);
        lines.push(field_line(
            &field,
            fact.json,
            &flags,
            &go_type,
            fact.go_name,
        )?);
    }
    if covered.len() != message.fields().len() {
        return Err(format!(
            "{}: proto fields without Go facts",
            message.full_name()
        ));
    }
    Ok(lines)
}

/// The name Go's `reflect` gives a package's types: the last element of its import path
/// (`k8s.io/api/apps/v1` → `v1`, `k8s.io/apimachinery/pkg/api/resource` → `resource`).
fn go_package_name(import_path: &str) -> &str {
    import_path.rsplit('/').next().unwrap_or(import_path)
}

/// A field's Go type as `reflect.Type.String()` writes it, which is what Go's JSON decoder puts in
/// its type errors: named types are qualified by their package *name* (`metav1.ObjectMeta` and
/// `ObjectMeta` alike become `v1.ObjectMeta`), and `byte` is `uint8`.
fn reflect_type_name(go_type: &str, package_name: &str) -> String {
    if let Some(rest) = go_type.strip_prefix("[]") {
        return format!("[]{}", reflect_type_name(rest, package_name));
    }
    if let Some(rest) = go_type.strip_prefix('*') {
        return format!("*{}", reflect_type_name(rest, package_name));
    }
    if let Some(rest) = go_type.strip_prefix("map[")
        && let Some((key, value)) = rest.split_once(']')
    {
        return format!(
            "map[{}]{}",
            reflect_type_name(key, package_name),
            reflect_type_name(value, package_name)
        );
    }
    const BUILTIN: &[&str] = &[
        "string",
        "bool",
        "int",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float32",
        "float64",
        "interface{}",
        "any",
    ];
    match go_type {
        "byte" => "uint8".to_string(),
        "rune" => "int32".to_string(),
        t if BUILTIN.contains(&t) => t.to_string(),
        t => match t.split_once('.') {
            // An import alias such as `metav1` or `authenticationv1` names a package whose
            // name is its version; other aliases (`resource`, `intstr`) are the name itself.
            Some((alias, name)) => format!("{}.{name}", alias_package_name(alias)),
            None => format!("{package_name}.{t}"),
        },
    }
}

fn alias_package_name(alias: &str) -> &str {
    let Some(at) = alias.rfind('v') else {
        return alias;
    };
    let version = &alias[at..];
    let rest = &version[1..];
    let digits = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    let well_formed = digits.len() < rest.len()
        && (digits.is_empty()
            || ["alpha", "beta"].iter().any(|stage| {
                digits
                    .strip_prefix(stage)
                    .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
            }));
    if well_formed { version } else { alias }
}
