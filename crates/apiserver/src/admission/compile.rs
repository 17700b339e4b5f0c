//! The CEL environment of admission expressions and their compilation when a configuration is
//! written (upstream: admission/plugin/cel compile.go and composition.go, as
//! pkg/apis/admissionregistration/validation compiles policies and match conditions): the
//! variables an expression sees — `object`, `oldObject`, `request`, `namespaceObject`, and as a
//! configuration has them `params`, `authorizer` with `authorizer.requestResource`, and the
//! composited `variables`, each typed by what its expression compiles to — and the check that an
//! expression returns what its field needs. Errors are upstream's details: `compilation failed:`
//! and cel-go's issues, or `must evaluate to ...`.
//!
//! It only checks: admission runs expressions through `cel::eval`, which needs these types only
//! to estimate what an evaluation costs.
//! `policy::typechecking` reuses the hand-made types for its own, typed, environment.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use crate::cel::checker::{self, Type};
use crate::cel::functions::AUTHORIZER;
use crate::cel::types::{DeclKind, DeclType};

/// `OptionalVariableDeclarations`: the variables a field's expressions may see beyond those
/// every admission expression has.
#[derive(Clone, Copy, Debug, Default)]
pub struct Declarations {
    /// `params`: the configuration has a param kind.
    pub has_params: bool,
    /// `authorizer` and `authorizer.requestResource`.
    pub has_authorizer: bool,
}

/// What an expression must return, by field (`ExpressionAccessor.ReturnTypes`).
pub mod returns {
    use super::Type;

    /// Validations and match conditions.
    pub const BOOL: &[Type] = &[Type::Bool];
    /// Message expressions.
    pub const STRING: &[Type] = &[Type::String];
    /// Audit annotations' values: a string, or null for no annotation.
    pub const STRING_OR_NULL: &[Type] = &[Type::String, Type::Null];
    /// Variables: anything (upstream lists `google.protobuf.Any` and `dyn`; the first accepts
    /// every type).
    pub const ANY: &[Type] = &[Type::Any, Type::Dyn];
}

/// `plugincel.Compiler`: a stateless one, or a composited one that declares `variables` with
/// the variables compiled so far (upstream's `CompositedCompiler`, one per policy).
#[derive(Default)]
pub struct Compiler {
    /// The composited variables, by name, typed by their expressions' output; `None` when the
    /// compiler is stateless and `variables` is not declared at all.
    variables: Option<BTreeMap<String, Arc<DeclType>>>,
}

impl Compiler {
    /// A compiler without `variables` (webhooks' match conditions, a policy's match conditions,
    /// a validating policy without variables).
    pub fn stateless() -> Compiler {
        Compiler { variables: None }
    }

    /// A compiler whose expressions see `variables`, empty until variables are stored.
    pub fn composited() -> Compiler {
        Compiler {
            variables: Some(BTreeMap::new()),
        }
    }

    /// `CompileCELExpression`: `expression` compiled with `declarations`, and its output
    /// checked against `returns`; the error is upstream's detail.
    pub fn compile(
        &self,
        expression: &str,
        declarations: Declarations,
        returns: &[Type],
    ) -> Result<Type, String> {
        let vars = self.vars(declarations);
        let checked =
            checker::compile(expression, &vars).map_err(|e| format!("compilation failed: {e}"))?;
        let output = checked.output().clone();
        // cel-go's `IsExactType`, with `google.protobuf.Any` accepting everything.
        if returns.iter().any(|r| *r == output || *r == Type::Any) {
            return Ok(output);
        }
        Err(match returns {
            [one] => format!("must evaluate to {one} but got {output}"),
            many => {
                let names: Vec<String> = many.iter().map(ToString::to_string).collect();
                format!(
                    "must evaluate to one of [{}] but got {output}",
                    names.join(" ")
                )
            }
        })
    }

    /// `CompileAndStoreVariable`: compiles a variable and adds it to `variables` typed by its
    /// output (`dyn` when it does not compile, so later expressions are not blamed for it).
    pub fn compile_and_store_variable(
        &mut self,
        name: &str,
        expression: &str,
        declarations: Declarations,
    ) -> Result<(), String> {
        let result = self.compile(expression, declarations, returns::ANY);
        let decl = match &result {
            Ok(output) => decl_of(output),
            Err(_) => DeclType::of(DeclKind::Dyn),
        };
        if let Some(fields) = &mut self.variables {
            fields.insert(name.to_string(), decl);
        }
        result.map(|_| ())
    }

    /// The admission environment's variables (`createEnvForOpts`): objects and params are
    /// `dyn`, the request and namespace have upstream's hand-made types. Admission checks its
    /// programs with them for their runtime cost.
    pub(crate) fn vars(&self, declarations: Declarations) -> Vec<(&'static str, Type)> {
        let mut vars = vec![
            ("object", Type::Dyn),
            ("oldObject", Type::Dyn),
            ("namespaceObject", namespace_type()),
            ("request", request_type()),
        ];
        if declarations.has_params {
            vars.push(("params", Type::Dyn));
        }
        if declarations.has_authorizer {
            vars.push(("authorizer", Type::Opaque(AUTHORIZER)));
            vars.push((
                "authorizer.requestResource",
                Type::Opaque("kubernetes.authorization.ResourceCheck"),
            ));
        }
        if let Some(fields) = &self.variables {
            vars.push(("variables", variables_type(fields)));
        }
        vars
    }
}

/// `convertCelTypeToDeclType`: a variable's type as a field of `variables`. Scalars (`uint` and
/// `null_type` among them) are themselves; lists and maps keep their element and key types;
/// objects, optionals, types, library types and what did not compile are `dyn`, as upstream's
/// conversion makes them.
pub(crate) fn decl_of(t: &Type) -> Arc<DeclType> {
    let kind = match t {
        Type::Bool => DeclKind::Bool,
        Type::Int => DeclKind::Int,
        Type::Uint => DeclKind::Uint,
        Type::Null => DeclKind::Null,
        Type::Double => DeclKind::Double,
        Type::String => DeclKind::String,
        Type::Bytes => DeclKind::Bytes,
        Type::Duration => DeclKind::Duration,
        Type::Timestamp => DeclKind::Timestamp,
        Type::Any => DeclKind::Any,
        Type::List(e) => DeclKind::List(decl_of(e)),
        Type::Map(k, v) if **k == Type::String => DeclKind::Map(decl_of(v)),
        Type::Map(k, v) => DeclKind::KeyedMap(decl_of(k), decl_of(v)),
        Type::Dyn
        | Type::Object(_)
        | Type::Opaque(_)
        | Type::Optional(_)
        | Type::Type(_)
        | Type::Param(_)
        | Type::Error => DeclKind::Dyn,
    };
    DeclType::of(kind)
}

/// `variables`: an object of the variables compiled so far (`kubernetes.variables`).
pub(crate) fn variables_type(fields: &BTreeMap<String, Arc<DeclType>>) -> Type {
    let decl = DeclType::of(DeclKind::Object(fields.clone()));
    Type::of_decl(&decl, "kubernetes.variables")
}

fn object(name: &'static str, fields: Vec<(&str, Arc<DeclType>)>) -> Arc<DeclType> {
    let fields = fields
        .into_iter()
        .map(|(n, t)| (n.to_string(), t))
        .collect();
    DeclType::of(DeclKind::Named(
        name,
        DeclType::of(DeclKind::Object(fields)),
    ))
}

fn list(elem: Arc<DeclType>) -> Arc<DeclType> {
    DeclType::of(DeclKind::List(elem))
}

fn map(elem: Arc<DeclType>) -> Arc<DeclType> {
    DeclType::of(DeclKind::Map(elem))
}

/// `request` (`BuildRequestType`): the admission request's fields CEL may read.
pub(crate) fn request_type() -> Type {
    static REQUEST: OnceLock<Arc<DeclType>> = OnceLock::new();
    let decl = REQUEST.get_or_init(|| {
        let string = || DeclType::of(DeclKind::String);
        let gvk = || {
            object(
                "kubernetes.GroupVersionKind",
                vec![
                    ("group", string()),
                    ("version", string()),
                    ("kind", string()),
                ],
            )
        };
        let gvr = || {
            object(
                "kubernetes.GroupVersionResource",
                vec![
                    ("group", string()),
                    ("version", string()),
                    ("resource", string()),
                ],
            )
        };
        let user = object(
            "kubernetes.UserInfo",
            vec![
                ("username", string()),
                ("uid", string()),
                ("groups", list(string())),
                ("extra", map(list(string()))),
            ],
        );
        object(
            "kubernetes.AdmissionRequest",
            vec![
                ("kind", gvk()),
                ("resource", gvr()),
                ("subResource", string()),
                ("requestKind", gvk()),
                ("requestResource", gvr()),
                ("requestSubResource", string()),
                ("name", string()),
                ("namespace", string()),
                ("operation", string()),
                ("userInfo", user),
                ("dryRun", DeclType::of(DeclKind::Bool)),
                ("options", DeclType::of(DeclKind::Dyn)),
            ],
        )
    });
    Type::of_decl(decl, "kubernetes.AdmissionRequest")
}

/// `namespaceObject` (`BuildNamespaceType`): the fields of a Namespace CEL may read.
pub(crate) fn namespace_type() -> Type {
    static NAMESPACE: OnceLock<Arc<DeclType>> = OnceLock::new();
    let decl = NAMESPACE.get_or_init(|| {
        let string = || DeclType::of(DeclKind::String);
        let time = || DeclType::of(DeclKind::Timestamp);
        let int = || DeclType::of(DeclKind::Int);
        let condition = object(
            "kubernetes.NamespaceCondition",
            vec![
                ("status", string()),
                ("type", string()),
                ("lastTransitionTime", time()),
                ("message", string()),
                ("reason", string()),
            ],
        );
        let metadata = object(
            "kubernetes.NamespaceMetadata",
            vec![
                ("name", string()),
                ("generateName", string()),
                ("namespace", string()),
                ("labels", map(string())),
                ("annotations", map(string())),
                ("UID", string()),
                ("creationTimestamp", time()),
                ("deletionGracePeriodSeconds", int()),
                ("deletionTimestamp", time()),
                ("generation", int()),
                ("resourceVersion", string()),
                ("finalizers", list(string())),
            ],
        );
        object(
            "kubernetes.Namespace",
            vec![
                ("metadata", metadata),
                (
                    "spec",
                    object(
                        "kubernetes.NamespaceSpec",
                        vec![("finalizers", list(string()))],
                    ),
                ),
                (
                    "status",
                    object(
                        "kubernetes.NamespaceStatus",
                        vec![("conditions", list(condition)), ("phase", string())],
                    ),
                ),
            ],
        )
    });
    Type::of_decl(decl, "kubernetes.Namespace")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Declarations = Declarations {
        has_params: true,
        has_authorizer: true,
    };

    #[test]
    fn undeclared_names_and_wrong_returns_are_upstreams_details() {
        let c = Compiler::stateless();
        assert_eq!(
            c.compile("x == 1", ALL, returns::BOOL).unwrap_err(),
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'x' (in container '')\n | x == 1\n | ^"
        );
        assert_eq!(
            c.compile("1 + 1", ALL, returns::BOOL).unwrap_err(),
            "must evaluate to bool but got int"
        );
        // `object` is dyn in admission: what it yields is not a bool.
        assert_eq!(
            c.compile("object.spec.enabled", ALL, returns::BOOL)
                .unwrap_err(),
            "must evaluate to bool but got dyn"
        );
        assert_eq!(
            c.compile("1", ALL, returns::STRING_OR_NULL).unwrap_err(),
            "must evaluate to one of [string null_type] but got int"
        );
        assert!(c.compile("null", ALL, returns::STRING_OR_NULL).is_ok());
        assert!(c.compile("object.x", ALL, returns::ANY).is_ok());
        assert!(
            c.compile(
                "object.metadata.name.startsWith('a') && request.userInfo.username != '' && namespaceObject.metadata.name == params.ns",
                ALL,
                returns::BOOL
            )
            .is_ok()
        );
        let no_params = Declarations {
            has_params: false,
            has_authorizer: true,
        };
        assert!(
            c.compile("params.x == 1", no_params, returns::BOOL)
                .unwrap_err()
                .contains("undeclared reference to 'params'")
        );
        assert!(
            c.compile("variables.x == 1", ALL, returns::BOOL)
                .unwrap_err()
                .contains("undeclared reference to 'variables'")
        );
    }

    #[test]
    fn the_authorizer_and_its_request_resource_are_typed() {
        let c = Compiler::stateless();
        assert_eq!(
            c.compile(
                "authorizer.requestResource.check('get').allowed()",
                ALL,
                returns::BOOL
            ),
            Ok(Type::Bool)
        );
        assert_eq!(
            c.compile(
                "authorizer.requestResource.check(1).allowed()",
                ALL,
                returns::BOOL
            )
            .unwrap_err(),
            "compilation failed: ERROR: <input>:1:33: found no matching overload for 'check' applied to 'kubernetes.authorization.ResourceCheck.(int)'\n | authorizer.requestResource.check(1).allowed()\n | ................................^"
        );
        assert_eq!(
            c.compile(
                "authorizer.requestResource.check('get').reason()",
                ALL,
                returns::BOOL
            )
            .unwrap_err(),
            "must evaluate to bool but got string"
        );
        let no_authorizer = Declarations {
            has_params: true,
            has_authorizer: false,
        };
        assert!(
            c.compile(
                "authorizer.path('/').check('get').allowed()",
                no_authorizer,
                returns::BOOL
            )
            .unwrap_err()
            .contains("undeclared reference to 'authorizer'")
        );
    }

    #[test]
    fn composited_variables_are_typed_by_their_output() {
        let mut c = Compiler::composited();
        assert!(
            c.compile_and_store_variable("replicas", "object.spec.replicas", ALL)
                .is_ok()
        );
        assert!(
            c.compile_and_store_variable("isProd", "object.metadata.labels['env'] == 'prod'", ALL)
                .is_ok()
        );
        assert!(
            c.compile_and_store_variable("broken", "nope", ALL)
                .unwrap_err()
                .contains("undeclared reference to 'nope'")
        );
        // A bool variable is a validation on its own; a dyn one is not.
        assert!(c.compile("variables.isProd", ALL, returns::BOOL).is_ok());
        assert_eq!(
            c.compile("variables.replicas", ALL, returns::BOOL)
                .unwrap_err(),
            "must evaluate to bool but got dyn"
        );
        // A variable that did not compile is dyn to the rest.
        assert!(
            c.compile("variables.broken == 1", ALL, returns::BOOL)
                .is_ok()
        );
        assert_eq!(
            c.compile("variables.isProd + 1 == 2", ALL, returns::BOOL)
                .unwrap_err(),
            "compilation failed: ERROR: <input>:1:18: found no matching overload for '_+_' applied to '(bool, int)'\n | variables.isProd + 1 == 2\n | .................^"
        );
        assert!(
            c.compile("variables.other", ALL, returns::ANY)
                .unwrap_err()
                .contains("undefined field 'other'")
        );
    }
}
