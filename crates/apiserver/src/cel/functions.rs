//! The functions a Kubernetes CEL expression may call, as data: one row per overload, with
//! cel-go's overload id where the cost model or a reader cares, and its signature. These are
//! the declarations the checker resolves calls against (upstream: cel-go's standard library,
//! its strings/sets/lists extensions, optional types, and apiserver/pkg/cel/library: lists,
//! regex, URLs, quantity, IP/CIDR, format, semver), as the environment of kube-apiserver v1.36
//! declares them. Signatures read `(arg, ...) -> result` for global functions and
//! `target.(arg, ...) -> result` for member functions; `A` and `B` are type parameters.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::checker::Type;

/// The CEL name of the type of admission's `authorizer` variable.
pub const AUTHORIZER: &str = "kubernetes.authorization.Authorizer";

/// One overload of a function.
pub struct Overload {
    pub id: &'static str,
    pub member: bool,
    pub params: Vec<Type>,
    pub result: Type,
}

const ROWS: &[(&str, &str, &str)] = &[
    // Logic and conditionals.
    ("_&&_", "logical_and", "(bool, bool) -> bool"),
    ("_||_", "logical_or", "(bool, bool) -> bool"),
    ("!_", "logical_not", "(bool) -> bool"),
    (
        "@not_strictly_false",
        "not_strictly_false",
        "(bool) -> bool",
    ),
    ("_?_:_", "conditional", "(bool, A, A) -> A"),
    ("_==_", "equals", "(A, A) -> bool"),
    ("_!=_", "not_equals", "(A, A) -> bool"),
    // Arithmetic.
    ("_+_", "add_int64", "(int, int) -> int"),
    ("_+_", "add_uint64", "(uint, uint) -> uint"),
    ("_+_", "add_double", "(double, double) -> double"),
    ("_+_", "add_string", "(string, string) -> string"),
    ("_+_", "add_bytes", "(bytes, bytes) -> bytes"),
    ("_+_", "add_list", "(list(A), list(A)) -> list(A)"),
    (
        "_+_",
        "add_timestamp_duration",
        "(timestamp, duration) -> timestamp",
    ),
    (
        "_+_",
        "add_duration_timestamp",
        "(duration, timestamp) -> timestamp",
    ),
    (
        "_+_",
        "add_duration_duration",
        "(duration, duration) -> duration",
    ),
    ("_-_", "subtract_int64", "(int, int) -> int"),
    ("_-_", "subtract_uint64", "(uint, uint) -> uint"),
    ("_-_", "subtract_double", "(double, double) -> double"),
    (
        "_-_",
        "subtract_timestamp_timestamp",
        "(timestamp, timestamp) -> duration",
    ),
    (
        "_-_",
        "subtract_timestamp_duration",
        "(timestamp, duration) -> timestamp",
    ),
    (
        "_-_",
        "subtract_duration_duration",
        "(duration, duration) -> duration",
    ),
    ("_*_", "multiply_int64", "(int, int) -> int"),
    ("_*_", "multiply_uint64", "(uint, uint) -> uint"),
    ("_*_", "multiply_double", "(double, double) -> double"),
    ("_/_", "divide_int64", "(int, int) -> int"),
    ("_/_", "divide_uint64", "(uint, uint) -> uint"),
    ("_/_", "divide_double", "(double, double) -> double"),
    ("_%_", "modulo_int64", "(int, int) -> int"),
    ("_%_", "modulo_uint64", "(uint, uint) -> uint"),
    ("-_", "negate_int64", "(int) -> int"),
    ("-_", "negate_double", "(double) -> double"),
    // Indexing and membership.
    ("_[_]", "index_list", "(list(A), int) -> A"),
    ("_[_]", "index_map", "(map(A, B), A) -> B"),
    ("@in", "in_list", "(A, list(A)) -> bool"),
    ("@in", "in_map", "(A, map(A, B)) -> bool"),
    // Sizes and strings.
    ("size", "size_string", "(string) -> int"),
    ("size", "size_bytes", "(bytes) -> int"),
    ("size", "size_list", "(list(A)) -> int"),
    ("size", "size_map", "(map(A, B)) -> int"),
    ("size", "string_size", "string.() -> int"),
    ("size", "bytes_size", "bytes.() -> int"),
    ("size", "list_size", "list(A).() -> int"),
    ("size", "map_size", "map(A, B).() -> int"),
    ("contains", "contains_string", "string.(string) -> bool"),
    (
        "startsWith",
        "starts_with_string",
        "string.(string) -> bool",
    ),
    ("endsWith", "ends_with_string", "string.(string) -> bool"),
    ("matches", "matches", "(string, string) -> bool"),
    ("matches", "matches_string", "string.(string) -> bool"),
    // Conversions.
    ("int", "int64_to_int64", "(int) -> int"),
    ("int", "uint64_to_int64", "(uint) -> int"),
    ("int", "double_to_int64", "(double) -> int"),
    ("int", "string_to_int64", "(string) -> int"),
    ("int", "timestamp_to_int64", "(timestamp) -> int"),
    ("int", "duration_to_int64", "(duration) -> int"),
    ("uint", "uint64_to_uint64", "(uint) -> uint"),
    ("uint", "int64_to_uint64", "(int) -> uint"),
    ("uint", "double_to_uint64", "(double) -> uint"),
    ("uint", "string_to_uint64", "(string) -> uint"),
    ("double", "double_to_double", "(double) -> double"),
    ("double", "int64_to_double", "(int) -> double"),
    ("double", "uint64_to_double", "(uint) -> double"),
    ("double", "string_to_double", "(string) -> double"),
    ("string", "string_to_string", "(string) -> string"),
    ("string", "int64_to_string", "(int) -> string"),
    ("string", "uint64_to_string", "(uint) -> string"),
    ("string", "double_to_string", "(double) -> string"),
    ("string", "bool_to_string", "(bool) -> string"),
    ("string", "bytes_to_string", "(bytes) -> string"),
    ("string", "timestamp_to_string", "(timestamp) -> string"),
    ("string", "duration_to_string", "(duration) -> string"),
    ("string", "ip_to_string", "(net.IP) -> string"),
    ("string", "cidr_to_string", "(net.CIDR) -> string"),
    ("bytes", "bytes_to_bytes", "(bytes) -> bytes"),
    ("bytes", "string_to_bytes", "(string) -> bytes"),
    ("bool", "bool_to_bool", "(bool) -> bool"),
    ("bool", "string_to_bool", "(string) -> bool"),
    ("duration", "duration_to_duration", "(duration) -> duration"),
    ("duration", "string_to_duration", "(string) -> duration"),
    (
        "timestamp",
        "timestamp_to_timestamp",
        "(timestamp) -> timestamp",
    ),
    ("timestamp", "string_to_timestamp", "(string) -> timestamp"),
    ("timestamp", "int64_to_timestamp", "(int) -> timestamp"),
    ("dyn", "to_dyn", "(A) -> dyn"),
    ("type", "type", "(A) -> type(A)"),
    // Timestamps and durations.
    ("getFullYear", "timestamp_to_year", "timestamp.() -> int"),
    (
        "getFullYear",
        "timestamp_to_year_with_tz",
        "timestamp.(string) -> int",
    ),
    ("getMonth", "timestamp_to_month", "timestamp.() -> int"),
    (
        "getMonth",
        "timestamp_to_month_with_tz",
        "timestamp.(string) -> int",
    ),
    (
        "getDayOfYear",
        "timestamp_to_day_of_year",
        "timestamp.() -> int",
    ),
    (
        "getDayOfYear",
        "timestamp_to_day_of_year_with_tz",
        "timestamp.(string) -> int",
    ),
    (
        "getDayOfMonth",
        "timestamp_to_day_of_month",
        "timestamp.() -> int",
    ),
    (
        "getDayOfMonth",
        "timestamp_to_day_of_month_with_tz",
        "timestamp.(string) -> int",
    ),
    (
        "getDate",
        "timestamp_to_day_of_month_1_based",
        "timestamp.() -> int",
    ),
    (
        "getDate",
        "timestamp_to_day_of_month_1_based_with_tz",
        "timestamp.(string) -> int",
    ),
    (
        "getDayOfWeek",
        "timestamp_to_day_of_week",
        "timestamp.() -> int",
    ),
    (
        "getDayOfWeek",
        "timestamp_to_day_of_week_with_tz",
        "timestamp.(string) -> int",
    ),
    ("getHours", "timestamp_to_hours", "timestamp.() -> int"),
    (
        "getHours",
        "timestamp_to_hours_with_tz",
        "timestamp.(string) -> int",
    ),
    ("getHours", "duration_to_hours", "duration.() -> int"),
    ("getMinutes", "timestamp_to_minutes", "timestamp.() -> int"),
    (
        "getMinutes",
        "timestamp_to_minutes_with_tz",
        "timestamp.(string) -> int",
    ),
    ("getMinutes", "duration_to_minutes", "duration.() -> int"),
    ("getSeconds", "timestamp_to_seconds", "timestamp.() -> int"),
    (
        "getSeconds",
        "timestamp_to_seconds_with_tz",
        "timestamp.(string) -> int",
    ),
    ("getSeconds", "duration_to_seconds", "duration.() -> int"),
    (
        "getMilliseconds",
        "timestamp_to_milliseconds",
        "timestamp.() -> int",
    ),
    (
        "getMilliseconds",
        "timestamp_to_milliseconds_with_tz",
        "timestamp.(string) -> int",
    ),
    (
        "getMilliseconds",
        "duration_to_milliseconds",
        "duration.() -> int",
    ),
    // Strings extension (version 2).
    ("charAt", "string_char_at_int", "string.(int) -> string"),
    (
        "indexOf",
        "string_index_of_string",
        "string.(string) -> int",
    ),
    (
        "indexOf",
        "string_index_of_string_int",
        "string.(string, int) -> int",
    ),
    (
        "lastIndexOf",
        "string_last_index_of_string",
        "string.(string) -> int",
    ),
    (
        "lastIndexOf",
        "string_last_index_of_string_int",
        "string.(string, int) -> int",
    ),
    ("lowerAscii", "string_lower_ascii", "string.() -> string"),
    ("upperAscii", "string_upper_ascii", "string.() -> string"),
    (
        "replace",
        "string_replace_string_string",
        "string.(string, string) -> string",
    ),
    (
        "replace",
        "string_replace_string_string_int",
        "string.(string, string, int) -> string",
    ),
    (
        "split",
        "string_split_string",
        "string.(string) -> list(string)",
    ),
    (
        "split",
        "string_split_string_int",
        "string.(string, int) -> list(string)",
    ),
    (
        "substring",
        "string_substring_int",
        "string.(int) -> string",
    ),
    (
        "substring",
        "string_substring_int_int",
        "string.(int, int) -> string",
    ),
    ("trim", "string_trim", "string.() -> string"),
    ("join", "list_join", "list(string).() -> string"),
    (
        "join",
        "list_join_string",
        "list(string).(string) -> string",
    ),
    ("format", "string_format", "string.(list(dyn)) -> string"),
    ("strings.quote", "strings_quote", "(string) -> string"),
    // Sets extension.
    (
        "sets.contains",
        "list_sets_contains_list",
        "(list(A), list(A)) -> bool",
    ),
    (
        "sets.equivalent",
        "list_sets_equivalent_list",
        "(list(A), list(A)) -> bool",
    ),
    (
        "sets.intersects",
        "list_sets_intersects_list",
        "(list(A), list(A)) -> bool",
    ),
    // Lists: Kubernetes' library, then the lists extension (version 3).
    ("isSorted", "list_is_sorted", "list(A).() -> bool"),
    ("sum", "list_sum", "list(A).() -> A"),
    ("max", "list_max", "list(A).() -> A"),
    ("min", "list_min", "list(A).() -> A"),
    ("indexOf", "list_index_of", "list(A).(A) -> int"),
    ("lastIndexOf", "list_last_index_of", "list(A).(A) -> int"),
    ("distinct", "list_distinct", "list(A).() -> list(A)"),
    ("flatten", "list_flatten", "list(list(A)).() -> list(A)"),
    (
        "flatten",
        "list_flatten_int",
        "list(dyn).(int) -> list(dyn)",
    ),
    ("lists.range", "lists_range", "(int) -> list(int)"),
    ("reverse", "list_reverse", "list(A).() -> list(A)"),
    ("slice", "list_slice", "list(A).(int, int) -> list(A)"),
    ("sort", "list_sort", "list(A).() -> list(A)"),
    ("first", "list_first", "list(A).() -> optional(A)"),
    ("last", "list_last", "list(A).() -> optional(A)"),
    // Regular expressions.
    ("find", "string_find_string", "string.(string) -> string"),
    (
        "findAll",
        "string_find_all_string",
        "string.(string) -> list(string)",
    ),
    (
        "findAll",
        "string_find_all_string_int",
        "string.(string, int) -> list(string)",
    ),
    // URLs.
    ("url", "string_to_url", "(string) -> kubernetes.URL"),
    ("isURL", "is_url_string", "(string) -> bool"),
    ("getScheme", "url_get_scheme", "kubernetes.URL.() -> string"),
    ("getHost", "url_get_host", "kubernetes.URL.() -> string"),
    (
        "getHostname",
        "url_get_hostname",
        "kubernetes.URL.() -> string",
    ),
    ("getPort", "url_get_port", "kubernetes.URL.() -> string"),
    (
        "getEscapedPath",
        "url_get_escaped_path",
        "kubernetes.URL.() -> string",
    ),
    (
        "getQuery",
        "url_get_query",
        "kubernetes.URL.() -> map(string, list(string))",
    ),
    // Quantities.
    (
        "quantity",
        "string_to_quantity",
        "(string) -> kubernetes.Quantity",
    ),
    ("isQuantity", "is_quantity_string", "(string) -> bool"),
    ("sign", "quantity_sign", "kubernetes.Quantity.() -> int"),
    (
        "isInteger",
        "quantity_is_integer",
        "kubernetes.Quantity.() -> bool",
    ),
    (
        "asInteger",
        "quantity_as_integer",
        "kubernetes.Quantity.() -> int",
    ),
    (
        "asApproximateFloat",
        "quantity_as_float",
        "kubernetes.Quantity.() -> double",
    ),
    (
        "add",
        "quantity_add",
        "kubernetes.Quantity.(kubernetes.Quantity) -> kubernetes.Quantity",
    ),
    (
        "add",
        "quantity_add_int",
        "kubernetes.Quantity.(int) -> kubernetes.Quantity",
    ),
    (
        "sub",
        "quantity_sub",
        "kubernetes.Quantity.(kubernetes.Quantity) -> kubernetes.Quantity",
    ),
    (
        "sub",
        "quantity_sub_int",
        "kubernetes.Quantity.(int) -> kubernetes.Quantity",
    ),
    (
        "isGreaterThan",
        "quantity_is_greater_than",
        "kubernetes.Quantity.(kubernetes.Quantity) -> bool",
    ),
    (
        "isLessThan",
        "quantity_is_less_than",
        "kubernetes.Quantity.(kubernetes.Quantity) -> bool",
    ),
    (
        "compareTo",
        "quantity_compare_to",
        "kubernetes.Quantity.(kubernetes.Quantity) -> int",
    ),
    // IP addresses and CIDRs.
    ("ip", "string_to_ip", "(string) -> net.IP"),
    ("isIP", "is_ip", "(string) -> bool"),
    ("ip.isCanonical", "ip_is_canonical", "(string) -> bool"),
    ("family", "ip_family", "net.IP.() -> int"),
    ("isUnspecified", "ip_is_unspecified", "net.IP.() -> bool"),
    ("isLoopback", "ip_is_loopback", "net.IP.() -> bool"),
    (
        "isLinkLocalMulticast",
        "ip_is_link_local_multicast",
        "net.IP.() -> bool",
    ),
    (
        "isLinkLocalUnicast",
        "ip_is_link_local_unicast",
        "net.IP.() -> bool",
    ),
    (
        "isGlobalUnicast",
        "ip_is_global_unicast",
        "net.IP.() -> bool",
    ),
    ("cidr", "string_to_cidr", "(string) -> net.CIDR"),
    ("isCIDR", "is_cidr", "(string) -> bool"),
    (
        "containsIP",
        "cidr_contains_ip_string",
        "net.CIDR.(string) -> bool",
    ),
    (
        "containsIP",
        "cidr_contains_ip_ip",
        "net.CIDR.(net.IP) -> bool",
    ),
    (
        "containsCIDR",
        "cidr_contains_cidr_string",
        "net.CIDR.(string) -> bool",
    ),
    (
        "containsCIDR",
        "cidr_contains_cidr",
        "net.CIDR.(net.CIDR) -> bool",
    ),
    ("ip", "cidr_ip", "net.CIDR.() -> net.IP"),
    ("masked", "cidr_masked", "net.CIDR.() -> net.CIDR"),
    ("prefixLength", "cidr_prefix_length", "net.CIDR.() -> int"),
    // Formats.
    (
        "format.named",
        "format_named",
        "(string) -> optional(kubernetes.NamedFormat)",
    ),
    (
        "format.dns1123Label",
        "format_dns1123_label",
        "() -> kubernetes.NamedFormat",
    ),
    (
        "format.dns1123Subdomain",
        "format_dns1123_subdomain",
        "() -> kubernetes.NamedFormat",
    ),
    (
        "format.dns1035Label",
        "format_dns1035_label",
        "() -> kubernetes.NamedFormat",
    ),
    (
        "format.qualifiedName",
        "format_qualified_name",
        "() -> kubernetes.NamedFormat",
    ),
    (
        "format.dns1123LabelPrefix",
        "format_dns1123_label_prefix",
        "() -> kubernetes.NamedFormat",
    ),
    (
        "format.dns1123SubdomainPrefix",
        "format_dns1123_subdomain_prefix",
        "() -> kubernetes.NamedFormat",
    ),
    (
        "format.dns1035LabelPrefix",
        "format_dns1035_label_prefix",
        "() -> kubernetes.NamedFormat",
    ),
    (
        "format.labelValue",
        "format_label_value",
        "() -> kubernetes.NamedFormat",
    ),
    ("format.uri", "format_uri", "() -> kubernetes.NamedFormat"),
    ("format.uuid", "format_uuid", "() -> kubernetes.NamedFormat"),
    ("format.byte", "format_byte", "() -> kubernetes.NamedFormat"),
    ("format.date", "format_date", "() -> kubernetes.NamedFormat"),
    (
        "format.datetime",
        "format_datetime",
        "() -> kubernetes.NamedFormat",
    ),
    (
        "validate",
        "format_validate",
        "kubernetes.NamedFormat.(string) -> optional(list(string))",
    ),
    // Semantic versions.
    (
        "semver",
        "string_to_semver",
        "(string) -> kubernetes.Semver",
    ),
    (
        "semver",
        "string_bool_to_semver",
        "(string, bool) -> kubernetes.Semver",
    ),
    ("isSemver", "is_semver_string", "(string) -> bool"),
    (
        "isSemver",
        "is_semver_string_bool",
        "(string, bool) -> bool",
    ),
    ("major", "semver_major", "kubernetes.Semver.() -> int"),
    ("minor", "semver_minor", "kubernetes.Semver.() -> int"),
    ("patch", "semver_patch", "kubernetes.Semver.() -> int"),
    (
        "isGreaterThan",
        "semver_is_greater_than",
        "kubernetes.Semver.(kubernetes.Semver) -> bool",
    ),
    (
        "isLessThan",
        "semver_is_less_than",
        "kubernetes.Semver.(kubernetes.Semver) -> bool",
    ),
    (
        "compareTo",
        "semver_compare_to",
        "kubernetes.Semver.(kubernetes.Semver) -> int",
    ),
    // Authorization checks (library/authz.go, with the selectors of AuthzSelectors, on by
    // default since AuthorizeWithSelectors is): only admission declares an `authorizer`, but
    // the functions are in every environment, as in upstream's base environment.
    (
        "path",
        "authorizer_path",
        "authz.Authorizer.(string) -> authz.PathCheck",
    ),
    (
        "group",
        "authorizer_group",
        "authz.Authorizer.(string) -> authz.GroupCheck",
    ),
    (
        "serviceAccount",
        "authorizer_serviceaccount",
        "authz.Authorizer.(string, string) -> authz.Authorizer",
    ),
    (
        "resource",
        "groupcheck_resource",
        "authz.GroupCheck.(string) -> authz.ResourceCheck",
    ),
    (
        "subresource",
        "resourcecheck_subresource",
        "authz.ResourceCheck.(string) -> authz.ResourceCheck",
    ),
    (
        "namespace",
        "resourcecheck_namespace",
        "authz.ResourceCheck.(string) -> authz.ResourceCheck",
    ),
    (
        "name",
        "resourcecheck_name",
        "authz.ResourceCheck.(string) -> authz.ResourceCheck",
    ),
    (
        "fieldSelector",
        "authorizer_fieldselector",
        "authz.ResourceCheck.(string) -> authz.ResourceCheck",
    ),
    (
        "labelSelector",
        "authorizer_labelselector",
        "authz.ResourceCheck.(string) -> authz.ResourceCheck",
    ),
    (
        "check",
        "pathcheck_check",
        "authz.PathCheck.(string) -> authz.Decision",
    ),
    (
        "check",
        "resourcecheck_check",
        "authz.ResourceCheck.(string) -> authz.Decision",
    ),
    ("errored", "decision_errored", "authz.Decision.() -> bool"),
    ("error", "decision_error", "authz.Decision.() -> string"),
    ("allowed", "decision_allowed", "authz.Decision.() -> bool"),
    ("reason", "decision_reason", "authz.Decision.() -> string"),
    // Optional values.
    ("optional.of", "optional_of", "(A) -> optional(A)"),
    (
        "optional.ofNonZeroValue",
        "optional_ofNonZeroValue",
        "(A) -> optional(A)",
    ),
    ("optional.none", "optional_none", "() -> optional(dyn)"),
    ("value", "optional_value", "optional(A).() -> A"),
    ("hasValue", "optional_hasValue", "optional(A).() -> bool"),
    (
        "or",
        "optional_or_optional",
        "optional(A).(optional(A)) -> optional(A)",
    ),
    ("orValue", "optional_orValue_value", "optional(A).(A) -> A"),
];

/// Orderings: every comparison operator over the same kinds, and the numeric kinds against
/// each other (cross-type numeric comparisons are on in Kubernetes' environment).
const ORDERED: &[(&str, &str)] = &[
    ("bool", "bool"),
    ("int64", "int"),
    ("uint64", "uint"),
    ("double", "double"),
    ("string", "string"),
    ("bytes", "bytes"),
    ("timestamp", "timestamp"),
    ("duration", "duration"),
];
const NUMERIC: &[(&str, &str)] = &[("int64", "int"), ("uint64", "uint"), ("double", "double")];
const COMPARISONS: &[(&str, &str)] = &[
    ("_<_", "less"),
    ("_<=_", "less_equals"),
    ("_>_", "greater"),
    ("_>=_", "greater_equals"),
];

/// Every overload of each function name.
pub fn overloads(name: &str) -> Option<&'static [Overload]> {
    static TABLE: OnceLock<HashMap<&'static str, Vec<Overload>>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            let mut table: HashMap<&'static str, Vec<Overload>> = HashMap::new();
            for (name, id, sig) in ROWS {
                table
                    .entry(name)
                    .or_default()
                    .push(parse_signature(id, sig));
            }
            for (op, prefix) in COMPARISONS {
                let list = table.entry(op).or_default();
                for (id, ty) in ORDERED {
                    let sig = format!("({ty}, {ty}) -> bool");
                    list.push(parse_signature(leak(format!("{prefix}_{id}")), &sig));
                }
                for (lid, lty) in NUMERIC {
                    for (rid, rty) in NUMERIC {
                        if lid != rid {
                            let sig = format!("({lty}, {rty}) -> bool");
                            list.push(parse_signature(leak(format!("{prefix}_{lid}_{rid}")), &sig));
                        }
                    }
                }
            }
            table
        })
        .get(name)
        .map(Vec::as_slice)
}

fn leak(s: String) -> &'static str {
    // The table is built once per process; its ids live as long as it does.
    Box::leak(s.into_boxed_str())
}

/// Whether a call `ns.f(...)` on an identifier `ns` that is not a variable names the global
/// function `ns.f`.
pub fn is_qualified_function(name: &str) -> bool {
    name.contains('.') && overloads(name).is_some()
}

fn parse_signature(id: &'static str, sig: &str) -> Overload {
    let (lhs, result) = sig.split_once(" -> ").expect("signature has a result");
    // The argument list is the parenthesis that closes the left-hand side.
    let mut depth = 0;
    let open = lhs
        .char_indices()
        .rev()
        .find(|&(_, c)| {
            match c {
                ')' => depth += 1,
                '(' => depth -= 1,
                _ => {}
            }
            depth == 0
        })
        .map(|(i, _)| i)
        .expect("signature opens its arguments");
    let (target, args) = (&lhs[..open], &lhs[open + 1..lhs.len() - 1]);
    let mut params = Vec::new();
    let member = !target.is_empty();
    if member {
        params.push(parse_type(
            target.strip_suffix('.').expect("member target ends in ."),
        ));
    }
    for arg in split_top(args) {
        params.push(parse_type(arg));
    }
    Overload {
        id,
        member,
        params,
        result: parse_type(result),
    }
}

/// Splits `a, list(b), map(c, d)` at its top-level commas.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !s[start..].trim().is_empty() {
        out.push(s[start..].trim());
    }
    out
}

fn parse_type(s: &str) -> Type {
    let s = s.trim();
    if let Some(inner) = s.strip_suffix(')') {
        let (head, args) = inner.split_once('(').expect("type arguments open");
        let args: Vec<Type> = split_top(args).into_iter().map(parse_type).collect();
        let mut args = args.into_iter();
        let mut next = || Box::new(args.next().expect("type argument"));
        return match head {
            "list" => Type::List(next()),
            "map" => {
                let k = next();
                Type::Map(k, next())
            }
            "optional" => Type::Optional(next()),
            "type" => Type::Type(next()),
            other => panic!("unknown type constructor {other}"),
        };
    }
    match s {
        "bool" => Type::Bool,
        "int" => Type::Int,
        "uint" => Type::Uint,
        "double" => Type::Double,
        "string" => Type::String,
        "bytes" => Type::Bytes,
        "timestamp" => Type::Timestamp,
        "duration" => Type::Duration,
        "dyn" => Type::Dyn,
        "A" => Type::Param(0),
        "B" => Type::Param(1),
        "net.IP" => Type::Opaque("net.IP"),
        "net.CIDR" => Type::Opaque("net.CIDR"),
        "kubernetes.URL" => Type::Opaque("kubernetes.URL"),
        "kubernetes.Quantity" => Type::Opaque("kubernetes.Quantity"),
        "kubernetes.Semver" => Type::Opaque("kubernetes.Semver"),
        "kubernetes.NamedFormat" => Type::Opaque("kubernetes.NamedFormat"),
        "authz.Authorizer" => Type::Opaque(AUTHORIZER),
        "authz.PathCheck" => Type::Opaque("kubernetes.authorization.PathCheck"),
        "authz.GroupCheck" => Type::Opaque("kubernetes.authorization.GroupCheck"),
        "authz.ResourceCheck" => Type::Opaque("kubernetes.authorization.ResourceCheck"),
        "authz.Decision" => Type::Opaque("kubernetes.authorization.Decision"),
        other => panic!("unknown type {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_parses() {
        assert!(
            overloads("_<_")
                .unwrap()
                .iter()
                .any(|o| o.id == "less_int64_double")
        );
        assert!(overloads("containsIP").unwrap().iter().all(|o| o.member));
        assert!(is_qualified_function("sets.contains"));
        for (name, _, _) in ROWS {
            assert!(overloads(name).is_some());
        }
    }
}
