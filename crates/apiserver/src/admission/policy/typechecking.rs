//! Type checking of a ValidatingAdmissionPolicy (upstream: admission/plugin/policy/validating/
//! typechecking.go): each validation's `expression` and `messageExpression` is compiled once for
//! every kind the policy's `matchConstraints` name, with `object` and `oldObject` typed by that
//! kind's served schema and `params` by the param kind's, and what does not compile becomes an
//! expression warning for `status.typeChecking`. The validatingadmissionpolicy-status controller
//! (`ironplane_kube::controllers::validatingadmissionpolicy_status`) writes them.
//!
//! The environment is upstream's type-checking one, not admission's: `authorizer` is declared
//! for its functions but `authorizer.requestResource` is not, so any use of the latter is
//! warned about (`unexpected failed resolution of 'kubernetes.authorization.Authorizer'`), as
//! upstream warns.
//!
//! Type checking only informs: it must never change what a policy does at admission, so a
//! kind whose schema cannot be found is skipped, and nothing here fails.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use apimachinery::gvk::{GroupVersionKind, GroupVersionResource};
use serde_json::Value;

use crate::admission::compile::{decl_of, namespace_type, request_type, variables_type};
use crate::cel::checker::{self, Type};
use crate::cel::functions::AUTHORIZER;
use crate::cel::resolver;
use crate::cel::types::DeclType;
use crate::registry::ResourceInfo;
use crate::server::GenericApiServer;

/// The most kinds one resource rule adds (upstream's `maxTypesToCheck`).
const MAX_TYPES_TO_CHECK: usize = 10;

/// What type checking asks of the server: its RESTMapper and its schema resolver.
pub trait TypeSource {
    /// `RESTMapper.KindsFor` of a resource named by group, version and resource.
    fn kinds_for(&self, gvr: &GroupVersionResource) -> Vec<GroupVersionKind>;
    /// The schema of a kind with its references filled in; `None` is upstream's
    /// `ErrSchemaNotFound`.
    fn schema(&self, gvk: &GroupVersionKind) -> Option<Value>;
}

/// One warning of `status.typeChecking.expressionWarnings`.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpressionWarning {
    /// Where the expression is: `spec.validations[0].expression`.
    pub field_ref: String,
    pub warning: String,
}

/// `TypeChecker.Check`: the warnings of `policy`, in the order of its validations (an
/// expression, then its message expression); empty when everything compiles.
pub fn check(policy: &Value, source: &dyn TypeSource) -> Vec<ExpressionWarning> {
    let ctx = Context::new(policy, source);
    let mut warnings = Vec::new();
    let validations = policy
        .pointer("/spec/validations")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, v) in validations.iter().enumerate() {
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
        for (field, expression) in [
            ("expression", text("expression")),
            ("messageExpression", text("messageExpression")),
        ] {
            // A message expression is optional.
            if field == "messageExpression" && expression.is_empty() {
                continue;
            }
            if let Some(warning) = ctx.check_expression(expression) {
                warnings.push(ExpressionWarning {
                    field_ref: format!("spec.validations[{i}].{field}"),
                    warning,
                });
            }
        }
    }
    warnings
}

/// What every expression of one policy is checked with.
struct Context {
    /// The kinds to check against and the type of `object` for each (`dyn` where the schema
    /// declares no type).
    kinds: Vec<(GroupVersionKind, Type)>,
    /// `params`, declared only when the policy has a param kind.
    params: Option<Type>,
    /// The composited variables, by name and expression.
    variables: Vec<(String, String)>,
}

impl Context {
    /// `CreateContext`: the kinds and their types, resolved once for the policy.
    fn new(policy: &Value, source: &dyn TypeSource) -> Context {
        let kinds = types_to_check(policy, source)
            .into_iter()
            // A kind without a schema is not checked.
            .filter_map(|gvk| {
                let t = decl_type(source, &gvk)?;
                Some((gvk, t))
            })
            .collect();
        let params = policy
            .pointer("/spec/paramKind")
            .filter(|k| k.is_object())
            .and_then(|k| {
                let text = |f: &str| k.get(f).and_then(Value::as_str).unwrap_or("");
                param_gvk(text("apiVersion"), text("kind"))
            })
            .map(|gvk| decl_type(source, &gvk).unwrap_or(Type::Dyn));
        let variables = policy
            .pointer("/spec/variables")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|v| {
                let text = |f: &str| v.get(f).and_then(Value::as_str).unwrap_or("").to_string();
                (text("name"), text("expression"))
            })
            .collect();
        Context {
            kinds,
            params,
            variables,
        }
    }

    /// `CheckExpression`: the expression compiled for every kind; the warning joins each
    /// kind's issues, as `TypeCheckingResults.String` does.
    fn check_expression(&self, expression: &str) -> Option<String> {
        let mut messages = Vec::new();
        for (gvk, object) in &self.kinds {
            if let Err(issues) = self.compile(object, expression) {
                messages.push(format!(
                    "{}/{}, Kind={}: {issues}\n",
                    gvk.group, gvk.version, gvk.kind
                ));
            }
        }
        (!messages.is_empty()).then(|| messages.join("\n"))
    }

    /// Compiles `expression` in upstream's type-checking environment with `object` typed; the
    /// composited variables are compiled first, each seeing those before it, and typed by what
    /// they compile to (`dyn` when they do not: their errors are not reported).
    fn compile(&self, object: &Type, expression: &str) -> Result<(), String> {
        let mut vars: Vec<(&str, Type)> = vec![
            ("namespaceObject", namespace_type()),
            ("request", request_type()),
            ("object", object.clone()),
            ("oldObject", object.clone()),
        ];
        if let Some(params) = &self.params {
            vars.push(("params", params.clone()));
        }
        // Only the authorizer's functions: upstream declares no `authorizer.requestResource`
        // here.
        vars.push(("authorizer", Type::Opaque(AUTHORIZER)));
        let mut fields: BTreeMap<String, Arc<DeclType>> = BTreeMap::new();
        for (name, source) in &self.variables {
            vars.push(("variables", variables_type(&fields)));
            let output = checker::compile(source, &vars)
                .map(|c| c.output().clone())
                .unwrap_or(Type::Dyn);
            vars.pop();
            fields.insert(name.clone(), decl_of(&output));
        }
        vars.push(("variables", variables_type(&fields)));
        checker::compile(expression, &vars).map(|_| ())
    }
}

/// The type of a kind's objects: its schema as a declared type, named after the kind and the
/// nanosecond as upstream's `generateUniqueTypeName`; `None` when the schema is not found.
fn decl_type(source: &dyn TypeSource, gvk: &GroupVersionKind) -> Option<Type> {
    let schema = source.schema(gvk)?;
    Some(match DeclType::from_openapi(&schema, true) {
        Some(decl) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or_default();
            Type::of_decl(&decl, &format!("{}{nanos}", gvk.kind))
        }
        None => Type::Dyn,
    })
}

/// The param kind's GVK as Go's `schema.ParseGroupVersion` reads `apiVersion`; `None` for an
/// unparsable version or an empty GVK (then no `params` is declared).
fn param_gvk(api_version: &str, kind: &str) -> Option<GroupVersionKind> {
    let (group, version) = match api_version.matches('/').count() {
        0 => ("", api_version),
        1 => api_version.split_once('/')?,
        _ => return None,
    };
    let gvk = GroupVersionKind::new(group, version, kind);
    (!(group.is_empty() && version.is_empty() && kind.is_empty())).then_some(gvk)
}

/// `typesToCheck`: the kinds of the resources the policy's resource rules name exactly (a
/// wildcard group or version skips the rule, wildcard and subresource names are left out),
/// each rule adding at most `MAX_TYPES_TO_CHECK`; sorted by group, version and kind.
fn types_to_check(policy: &Value, source: &dyn TypeSource) -> Vec<GroupVersionKind> {
    let rules = policy
        .pointer("/spec/matchConstraints/resourceRules")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut gvks = BTreeSet::new();
    for rule in rules {
        let strings = |k: &str| -> Vec<&str> {
            rule.get(k)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect()
        };
        let (mut groups, mut versions) = (strings("apiGroups"), strings("apiVersions"));
        if groups.iter().chain(&versions).any(|s| s.contains('*')) {
            continue;
        }
        let mut resources: Vec<&str> = strings("resources")
            .into_iter()
            .filter(|r| !r.contains(['*', '/']))
            .collect();
        if groups.is_empty() || versions.is_empty() || resources.is_empty() {
            continue;
        }
        groups.sort_unstable();
        versions.sort_unstable();
        resources.sort_unstable();
        let mut count = 0;
        for group in &groups {
            for version in &versions {
                for resource in &resources {
                    let gvr = GroupVersionResource::new(*group, *version, *resource);
                    for gvk in source.kinds_for(&gvr) {
                        gvks.insert(gvk);
                        count += 1;
                        // Upstream stops looking at all once one rule has added this many.
                        if count == MAX_TYPES_TO_CHECK {
                            return gvks.into_iter().collect();
                        }
                    }
                }
            }
        }
    }
    gvks.into_iter().collect()
}

/// The kinds of `gvr` among served resources, as the RESTMapper client-go builds from discovery
/// answers `KindsFor`: a resource matches by its plural or singular name (lower-cased); with a
/// group the match is exact, and the core group's empty name matches the version and resource
/// in every group (so `v1` `events` are core's and events.k8s.io's).
pub fn kinds_for(resources: &[ResourceInfo], gvr: &GroupVersionResource) -> Vec<GroupVersionKind> {
    let resource = gvr.resource.to_lowercase();
    let mut out: Vec<GroupVersionKind> = Vec::new();
    if resource.is_empty() || gvr.version.is_empty() {
        return out;
    }
    for info in resources {
        let singular = match info.singular.as_str() {
            "" => info.kind.to_lowercase(),
            s => s.to_string(),
        };
        let named = info.resource == resource || singular == resource;
        let in_group = gvr.group.is_empty() || info.group == gvr.group;
        if named && in_group && info.version == gvr.version {
            let gvk = info.gvk();
            if !out.contains(&gvk) {
                out.push(gvk);
            }
        }
    }
    out
}

/// The kinds and schemas a server serves: its resources as discovery lists them, and its
/// `/openapi/v3` documents (built-in kinds and custom resources alike, as a controller outside
/// the server reads them).
pub struct ServedTypes {
    server: Arc<GenericApiServer>,
}

impl ServedTypes {
    pub fn new(server: Arc<GenericApiServer>) -> Self {
        ServedTypes { server }
    }

    /// A view for one policy: the served resources read once, each document parsed at most once
    /// and dropped with the view. Parsed documents are not kept between checks: a group's is
    /// several MiB as JSON values, and policies change seldom, so an idle server holds none.
    pub fn snapshot(&self) -> ServedSnapshot<'_> {
        ServedSnapshot {
            types: self,
            resources: self.server.served_resources(),
            documents: Mutex::default(),
        }
    }
}

pub struct ServedSnapshot<'a> {
    types: &'a ServedTypes,
    resources: Vec<ResourceInfo>,
    /// By path, the documents this check has parsed.
    documents: Mutex<HashMap<String, Option<Arc<Value>>>>,
}

impl ServedSnapshot<'_> {
    fn document(&self, path: &str) -> Option<Arc<Value>> {
        let mut documents = self.documents.lock().unwrap_or_else(|e| e.into_inner());
        documents
            .entry(path.to_string())
            .or_insert_with(|| {
                let json = self.types.server.openapi_v3_json(path)?;
                serde_json::from_slice(&json).ok().map(Arc::new)
            })
            .clone()
    }
}

impl TypeSource for ServedSnapshot<'_> {
    fn kinds_for(&self, gvr: &GroupVersionResource) -> Vec<GroupVersionKind> {
        kinds_for(&self.resources, gvr)
    }

    fn schema(&self, gvk: &GroupVersionKind) -> Option<Value> {
        let path = match gvk.group.as_str() {
            "" => format!("api/{}", gvk.version),
            group => format!("apis/{group}/{}", gvk.version),
        };
        let doc = self.document(&path)?;
        resolver::schema_of(&doc, gvk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// One schema for every kind, and a RESTMapper that knows pods and deployments (upstream's
    /// test type checker).
    struct Fake(Option<Value>);

    impl TypeSource for Fake {
        fn kinds_for(&self, gvr: &GroupVersionResource) -> Vec<GroupVersionKind> {
            let kind = match (
                gvr.group.as_str(),
                gvr.version.as_str(),
                gvr.resource.as_str(),
            ) {
                ("", "v1", "pods") => GroupVersionKind::new("", "v1", "Pod"),
                ("apps", "v1", "deployments") => GroupVersionKind::new("apps", "v1", "Deployment"),
                _ => return Vec::new(),
            };
            vec![kind]
        }

        fn schema(&self, _gvk: &GroupVersionKind) -> Option<Value> {
            self.0.clone()
        }
    }

    fn rule(group: &str, version: &str, resource: &str) -> Value {
        json!({"apiGroups": [group], "apiVersions": [version], "resources": [resource], "operations": ["*"]})
    }

    fn policy(validations: Value, rules: Vec<Value>) -> Value {
        json!({"spec": {"validations": validations, "matchConstraints": {"resourceRules": rules}}})
    }

    fn deployments(validations: Value) -> Value {
        policy(validations, vec![rule("apps", "v1", "deployments")])
    }

    fn schema(foo: &str) -> Fake {
        Fake(Some(
            json!({"type": "object", "properties": {"foo": {"type": foo}}}),
        ))
    }

    fn refs(warnings: &[ExpressionWarning]) -> Vec<&str> {
        warnings.iter().map(|w| w.field_ref.as_str()).collect()
    }

    #[test]
    fn kinds_come_from_exact_rules_sorted() {
        let p = policy(
            json!([]),
            vec![
                rule("apps", "v1", "deployments"),
                rule("", "v1", "pods"),
                rule("apps", "*", "deployments"),
                rule("apps", "v1", "*"),
                rule("", "v1", "pods/status"),
            ],
        );
        assert_eq!(
            types_to_check(&p, &Fake(None)),
            vec![
                GroupVersionKind::new("", "v1", "Pod"),
                GroupVersionKind::new("apps", "v1", "Deployment"),
            ]
        );
        assert!(types_to_check(&json!({"spec": {}}), &Fake(None)).is_empty());
    }

    #[test]
    fn warnings_name_the_expression_and_the_kind() {
        let p = deployments(json!([{"expression": "object.foo == 'bar'"}]));
        // No schema: nothing is checked.
        assert!(check(&p, &Fake(None)).is_empty());
        assert!(check(&p, &schema("string")).is_empty());
        assert_eq!(
            check(&p, &schema("integer")),
            vec![ExpressionWarning {
                field_ref: "spec.validations[0].expression".into(),
                warning: "apps/v1, Kind=Deployment: ERROR: <input>:1:12: found no matching overload for '_==_' applied to '(int, string)'\n | object.foo == 'bar'\n | ...........^\n".into(),
            }]
        );
        let undefined = check(
            &p,
            &Fake(Some(
                json!({"type": "object", "properties": {"bar": {"type": "string"}}}),
            )),
        );
        assert_eq!(
            undefined[0].warning,
            "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'foo'\n | object.foo == 'bar'\n | ......^\n"
        );
        // A schema without a type checks `object` as dyn.
        assert!(check(&p, &Fake(Some(json!({})))).is_empty());
    }

    #[test]
    fn several_kinds_join_their_issues() {
        let p = policy(
            json!([{"expression": "object.foo == 1"}]),
            vec![rule("apps", "v1", "deployments"), rule("", "v1", "pods")],
        );
        assert_eq!(
            check(&p, &schema("string"))[0].warning,
            "/v1, Kind=Pod: ERROR: <input>:1:12: found no matching overload for '_==_' applied to '(string, int)'\n | object.foo == 1\n | ...........^\n\napps/v1, Kind=Deployment: ERROR: <input>:1:12: found no matching overload for '_==_' applied to '(string, int)'\n | object.foo == 1\n | ...........^\n"
        );
    }

    #[test]
    fn message_expressions_params_and_the_authorizer() {
        let p = deployments(json!([
            {"expression": "object.foo == 'bar'"},
            {"expression": "object.bar == 'foo'", "messageExpression": "object.foo + 114514"},
        ]));
        assert_eq!(
            refs(&check(&p, &schema("string"))),
            vec![
                "spec.validations[1].expression",
                "spec.validations[1].messageExpression"
            ]
        );
        let mut with_params = deployments(json!([{"expression": "object.foo == params.bar"}]));
        with_params["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "DoesNotMatter"});
        let w = check(&with_params, &schema("string"));
        assert!(w[0].warning.contains("undefined field 'bar'"), "{w:?}");
        // Without a param kind, `params` is not declared at all.
        let no_params = deployments(json!([{"expression": "params != null"}]));
        assert!(
            check(&no_params, &schema("string"))[0]
                .warning
                .contains("undeclared reference to 'params'")
        );
        let authz = deployments(json!([
            {"expression": "authorizer.group('').resource('endpoints').check('create').allowed()"},
            {"expression": "authorizer.allowed()"},
        ]));
        let w = check(&authz, &schema("string"));
        assert_eq!(refs(&w), vec!["spec.validations[1].expression"]);
        assert!(
            w[0].warning.contains("found no matching overload for 'allowed' applied to 'kubernetes.authorization.Authorizer.()'"),
            "{w:?}"
        );
    }

    #[test]
    fn variables_are_typed_by_what_they_compile_to() {
        let with_vars = |vars: Value, expression: &str| {
            let mut p = deployments(json!([{ "expression": expression }]));
            p["spec"]["variables"] = vars;
            check(&p, &schema("integer"))
        };
        assert!(
            with_vars(
                json!([{"name": "works", "expression": "true"}]),
                "variables.works"
            )
            .is_empty()
        );
        assert!(
            with_vars(
                json!([{"name": "works", "expression": "true"}]),
                "variables.nonExisting"
            )[0]
            .warning
            .contains("undefined field 'nonExisting'")
        );
        assert!(
            with_vars(
                json!([{"name": "name", "expression": "'something'"}]),
                "variables.name == object.foo"
            )[0]
            .warning
            .contains("found no matching overload for '_==_' applied to '(string, int)'")
        );
        // A variable that does not compile is dyn, and its own error is not reported.
        assert!(
            with_vars(
                json!([{"name": "name", "expression": "object.foo == 'str'"}]),
                "variables.name == object.foo"
            )
            .is_empty()
        );
    }

    #[test]
    fn uint_null_and_keyed_map_variables_keep_their_types() {
        let with_vars = |vars: Value, expression: &str| {
            let mut p = deployments(json!([{ "expression": expression }]));
            p["spec"]["variables"] = vars;
            check(&p, &schema("integer"))
                .into_iter()
                .map(|w| w.warning)
                .collect::<Vec<_>>()
        };
        let uint = json!([{"name": "u", "expression": "1u"}]);
        assert_eq!(
            with_vars(uint.clone(), "variables.u == 1"),
            [
                "apps/v1, Kind=Deployment: ERROR: <input>:1:13: found no matching overload for '_==_' applied to '(uint, int)'\n | variables.u == 1\n | ............^\n"
            ]
        );
        // Numbers of different kinds compare in Kubernetes' environment.
        assert!(with_vars(uint.clone(), "variables.u > 1 && variables.u == 2u").is_empty());
        let null = json!([{"name": "n", "expression": "null"}]);
        assert_eq!(
            with_vars(null.clone(), "variables.n == 'x'"),
            [
                "apps/v1, Kind=Deployment: ERROR: <input>:1:13: found no matching overload for '_==_' applied to '(null_type, string)'\n | variables.n == 'x'\n | ............^\n"
            ]
        );
        assert!(with_vars(null, "variables.n == null").is_empty());
        let keyed = json!([{"name": "m", "expression": "{1: 'a'}"}]);
        assert_eq!(
            with_vars(keyed.clone(), "variables.m['x'] == 'a'"),
            [
                "apps/v1, Kind=Deployment: ERROR: <input>:1:12: found no matching overload for '_[_]' applied to '(map(int, string), string)'\n | variables.m['x'] == 'a'\n | ...........^\n"
            ]
        );
        assert!(with_vars(keyed, "variables.m[1] == 'a'").is_empty());
        // A list of them keeps its element type.
        assert_eq!(
            with_vars(
                json!([{"name": "l", "expression": "[1u, 2u]"}]),
                "variables.l[0] == 1"
            ),
            [
                "apps/v1, Kind=Deployment: ERROR: <input>:1:16: found no matching overload for '_==_' applied to '(uint, int)'\n | variables.l[0] == 1\n | ...............^\n"
            ]
        );
    }

    #[test]
    fn the_authorizer_has_no_fields_when_type_checking() {
        // Upstream's type checking declares `authorizer` but not `authorizer.requestResource`,
        // and no type provider knows the authorizer's object type: selecting any field of it
        // fails, and what follows is checked against an error type.
        let warnings = |expression: &str| {
            check(
                &deployments(json!([{ "expression": expression }])),
                &schema("string"),
            )
            .into_iter()
            .map(|w| w.warning)
            .collect::<Vec<_>>()
        };
        assert_eq!(
            warnings("authorizer.requestResource.check('get').allowed()"),
            [
                "apps/v1, Kind=Deployment: ERROR: <input>:1:11: unexpected failed resolution of 'kubernetes.authorization.Authorizer'\n | authorizer.requestResource.check('get').allowed()\n | ..........^\n"
            ]
        );
        assert_eq!(
            warnings("authorizer.requestResource.check(1).allowed()"),
            [
                "apps/v1, Kind=Deployment: ERROR: <input>:1:11: unexpected failed resolution of 'kubernetes.authorization.Authorizer'\n | authorizer.requestResource.check(1).allowed()\n | ..........^\nERROR: <input>:1:33: found no matching overload for 'check' applied to '!error!.(int)'\n | authorizer.requestResource.check(1).allowed()\n | ................................^\n"
            ]
        );
        // The library's functions are declared with their types.
        assert_eq!(
            warnings("authorizer.path('/healthz').check('get').allowed() == 'yes'"),
            [
                "apps/v1, Kind=Deployment: ERROR: <input>:1:52: found no matching overload for '_==_' applied to '(bool, string)'\n | authorizer.path('/healthz').check('get').allowed() == 'yes'\n | ...................................................^\n"
            ]
        );
        assert_eq!(
            warnings(
                "authorizer.serviceAccount('ns', 'sa').group('apps').resource('deployments').namespace('ns').check(1).reason() == ''"
            ),
            [
                "apps/v1, Kind=Deployment: ERROR: <input>:1:98: found no matching overload for 'check' applied to 'kubernetes.authorization.ResourceCheck.(int)'\n | authorizer.serviceAccount('ns', 'sa').group('apps').resource('deployments').namespace('ns').check(1).reason() == ''\n | .................................................................................................^\n"
            ]
        );
        assert!(
            warnings("authorizer.group('').resource('pods').check('get').errored() || authorizer.group('').resource('pods').check('get').error() == ''")
                .is_empty()
        );
    }

    #[test]
    fn the_request_and_namespace_types_are_upstreams() {
        let p = deployments(json!([
            {"expression": "request.requestResource.foo4 == 'nope'"},
            {"expression": "request.userInfo.groups.exists(g, g == 'x') && namespaceObject.metadata.UID != ''"},
        ]));
        let w = check(&p, &schema("string"));
        assert_eq!(refs(&w), vec!["spec.validations[0].expression"]);
        assert!(w[0].warning.contains("undefined field 'foo4'"), "{w:?}");
        let printed = deployments(json!([{"expression": "request.kind == 1"}]));
        assert!(
            check(&printed, &schema("string"))[0]
                .warning
                .contains("applied to '(kubernetes.GroupVersionKind, int)'")
        );
    }

    #[test]
    fn the_rest_mapper_matches_plural_or_singular_and_any_group_for_core() {
        let info = |group: &str, resource: &str, singular: &str, kind: &str| ResourceInfo {
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            singular: singular.into(),
            kind: kind.into(),
            ..Default::default()
        };
        let served = [
            info("", "events", "event", "Event"),
            info("events.k8s.io", "events", "event", "Event"),
            info("apps", "deployments", "", "Deployment"),
        ];
        let gvr = |g: &str, r: &str| GroupVersionResource::new(g, "v1", r);
        assert_eq!(kinds_for(&served, &gvr("", "events")).len(), 2);
        assert_eq!(kinds_for(&served, &gvr("events.k8s.io", "events")).len(), 1);
        assert_eq!(
            kinds_for(&served, &gvr("apps", "Deployment")),
            vec![GroupVersionKind::new("apps", "v1", "Deployment")]
        );
        assert!(kinds_for(&served, &gvr("apps", "replicasets")).is_empty());
    }
}
