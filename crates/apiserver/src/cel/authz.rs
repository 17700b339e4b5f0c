//! The `authorizer` library of admission expressions (upstream: apiserver/pkg/cel/library/authz.go):
//! `authorizer.group(g).resource(r).subresource(s).namespace(n).name(x).check(verb)`,
//! `authorizer.path(p).check(verb)`, `authorizer.serviceAccount(ns, name)`,
//! `authorizer.requestResource`, and a decision's `allowed()`, `reason()`, `errored()`,
//! `error()`.
//!
//! The server's authorizer answers asynchronously and the evaluator calls functions
//! synchronously, so an evaluation runs in a session (`with_session`): a check whose answer the
//! session knows gets it; any other is recorded and answered "not allowed" for now. The caller
//! asks the authorizer for the recorded checks and evaluates again with their answers (an
//! expression's checks depend only on its inputs, so the second run sees the real answers
//! everywhere) — upstream's caching authorizer, filled before the run instead of during it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::extractors::This;
use kube_cel::cel::objects::{Key, Map, Opaque};
use kube_cel::cel::{Context, ExecutionError, ResolveResult, Value};

/// Who is asking: the request's user, or a service account named in the expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Subject {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
}

/// One authorization question (upstream's `AttributesRecord` as the library fills it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Check {
    pub subject: Subject,
    /// Set for a non-resource check (`path(...)`).
    pub path: Option<String>,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub verb: String,
}

/// The authorizer's answer to a check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    pub allowed: bool,
    pub reason: String,
    pub error: Option<String>,
}

#[derive(Debug, PartialEq, Eq)]
struct Authorizer(Subject);

#[derive(Debug, PartialEq, Eq)]
struct GroupCheck(Subject, String);

#[derive(Clone, Debug, PartialEq, Eq)]
struct ResourceCheck(Check);

#[derive(Debug, PartialEq, Eq)]
struct PathCheck(Subject, String);

#[derive(Debug, PartialEq, Eq)]
struct Decision(Answer);

impl Opaque for Authorizer {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.Authorizer"
    }
}
impl Opaque for GroupCheck {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.GroupCheck"
    }
}
impl Opaque for ResourceCheck {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.ResourceCheck"
    }
}
impl Opaque for PathCheck {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.PathCheck"
    }
}
impl Opaque for Decision {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.Decision"
    }
}

/// The key under which the `authorizer` variable (a map, so that `authorizer.requestResource`
/// selects) keeps its subject.
const SUBJECT_KEY: &str = "\u{0}authorizer";

/// The `authorizer` variable for `subject`, with `requestResource` the request's own resource.
pub fn authorizer_value(subject: Subject, request: Option<Check>) -> Value {
    let mut map = HashMap::new();
    if let Some(mut r) = request {
        r.subject = subject.clone();
        map.insert(
            Key::String(Arc::new("requestResource".into())),
            Value::Opaque(Arc::new(ResourceCheck(r))),
        );
    }
    map.insert(
        Key::String(Arc::new(SUBJECT_KEY.into())),
        Value::Opaque(Arc::new(Authorizer(subject))),
    );
    Value::Map(Map { map: Arc::new(map) })
}

#[derive(Default)]
struct Session {
    known: HashMap<Check, Answer>,
    asked: Vec<Check>,
}

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

/// Runs `f` (evaluations) with the answers in `known`; returns its result and the checks it
/// asked that `known` did not answer.
pub fn with_session<R>(known: &HashMap<Check, Answer>, f: impl FnOnce() -> R) -> (R, Vec<Check>) {
    SESSION.with(|s| {
        *s.borrow_mut() = Some(Session {
            known: known.clone(),
            asked: Vec::new(),
        })
    });
    let result = f();
    let asked = SESSION.with(|s| s.borrow_mut().take().map(|s| s.asked).unwrap_or_default());
    (result, asked)
}

fn answer(check: Check) -> Answer {
    SESSION.with(|s| {
        let mut s = s.borrow_mut();
        let Some(session) = s.as_mut() else {
            return Answer {
                error: Some("no authorizer".into()),
                ..Default::default()
            };
        };
        if let Some(a) = session.known.get(&check) {
            return a.clone();
        }
        if !session.asked.contains(&check) {
            session.asked.push(check);
        }
        Answer::default()
    })
}

/// An error in upstream's words (the evaluator prints errors of the unnamed function bare).
fn err(_function: &str, message: &str) -> ExecutionError {
    ExecutionError::function_error("", message)
}

fn opaque<'a, T: Opaque>(v: &'a Value, function: &str) -> Result<&'a T, ExecutionError> {
    match v {
        Value::Opaque(o) => o
            .downcast_ref::<T>()
            .ok_or_else(|| err(function, "no such overload")),
        _ => Err(err(function, "no such overload")),
    }
}

/// The subject of an `authorizer` value (the variable's map, or a service account's).
fn subject(v: &Value, function: &str) -> Result<Subject, ExecutionError> {
    match v {
        Value::Map(m) => m
            .map
            .get(&Key::String(Arc::new(SUBJECT_KEY.into())))
            .ok_or_else(|| err(function, "no such overload"))
            .and_then(|a| opaque::<Authorizer>(a, function).map(|a| a.0.clone())),
        other => opaque::<Authorizer>(other, function).map(|a| a.0.clone()),
    }
}

fn path(This(this): This<Value>, p: Arc<String>) -> ResolveResult {
    if p.trim().is_empty() {
        return Err(err("path", "path must not be empty"));
    }
    Ok(Value::Opaque(Arc::new(PathCheck(
        subject(&this, "path")?,
        p.to_string(),
    ))))
}

fn group(This(this): This<Value>, g: Arc<String>) -> ResolveResult {
    Ok(Value::Opaque(Arc::new(GroupCheck(
        subject(&this, "group")?,
        g.to_string(),
    ))))
}

fn service_account(
    This(this): This<Value>,
    namespace: Arc<String>,
    name: Arc<String>,
) -> ResolveResult {
    subject(&this, "serviceAccount")?;
    if !apimachinery::validation::is_dns1123_subdomain(&name).is_empty() {
        return Err(err("serviceAccount", "Invalid service account name"));
    }
    if !apimachinery::validation::is_dns1123_label(&namespace).is_empty() {
        return Err(err("serviceAccount", "Invalid service account namespace"));
    }
    Ok(Value::Opaque(Arc::new(Authorizer(Subject {
        name: format!("system:serviceaccount:{namespace}:{name}"),
        uid: String::new(),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{namespace}"),
        ],
    }))))
}

fn resource(This(this): This<Value>, r: Arc<String>) -> ResolveResult {
    let g = opaque::<GroupCheck>(&this, "resource")?;
    if r.trim().is_empty() {
        return Err(err("resource", "resource must not be empty"));
    }
    Ok(Value::Opaque(Arc::new(ResourceCheck(Check {
        subject: g.0.clone(),
        path: None,
        group: g.1.clone(),
        resource: r.to_string(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
        verb: String::new(),
    }))))
}

/// A copy of a resource check with one field set.
fn set(this: &Value, function: &str, f: impl FnOnce(&mut Check)) -> ResolveResult {
    let mut c = opaque::<ResourceCheck>(this, function)?.0.clone();
    f(&mut c);
    Ok(Value::Opaque(Arc::new(ResourceCheck(c))))
}

fn subresource(This(this): This<Value>, s: Arc<String>) -> ResolveResult {
    set(&this, "subresource", |c| c.subresource = s.to_string())
}

fn namespace(This(this): This<Value>, n: Arc<String>) -> ResolveResult {
    set(&this, "namespace", |c| c.namespace = n.to_string())
}

fn name(This(this): This<Value>, n: Arc<String>) -> ResolveResult {
    set(&this, "name", |c| c.name = n.to_string())
}

fn check(This(this): This<Value>, verb: Arc<String>) -> ResolveResult {
    let check = if let Ok(p) = opaque::<PathCheck>(&this, "check") {
        Check {
            subject: p.0.clone(),
            path: Some(p.1.clone()),
            group: String::new(),
            resource: String::new(),
            subresource: String::new(),
            namespace: String::new(),
            name: String::new(),
            verb: verb.to_string(),
        }
    } else {
        let mut c = opaque::<ResourceCheck>(&this, "check")?.0.clone();
        c.verb = verb.to_string();
        c
    };
    Ok(Value::Opaque(Arc::new(Decision(answer(check)))))
}

fn decision<'a>(v: &'a Value, function: &str) -> Result<&'a Answer, ExecutionError> {
    opaque::<Decision>(v, function).map(|d| &d.0)
}

fn allowed(This(this): This<Value>) -> ResolveResult {
    Ok(Value::Bool(decision(&this, "allowed")?.allowed))
}

fn reason(This(this): This<Value>) -> ResolveResult {
    Ok(Value::String(Arc::new(
        decision(&this, "reason")?.reason.clone(),
    )))
}

fn errored(This(this): This<Value>) -> ResolveResult {
    Ok(Value::Bool(decision(&this, "errored")?.error.is_some()))
}

fn error(This(this): This<Value>) -> ResolveResult {
    Ok(Value::String(Arc::new(
        decision(&this, "error")?.error.clone().unwrap_or_default(),
    )))
}

/// Adds the library's functions to `ctx`.
pub fn register(ctx: &mut Context<'_>) {
    ctx.add_function("path", path);
    ctx.add_function("group", group);
    ctx.add_function("serviceAccount", service_account);
    ctx.add_function("resource", resource);
    ctx.add_function("subresource", subresource);
    ctx.add_function("namespace", namespace);
    ctx.add_function("name", name);
    ctx.add_function("check", check);
    ctx.add_function("allowed", allowed);
    ctx.add_function("reason", reason);
    ctx.add_function("errored", errored);
    ctx.add_function("error", error);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel::eval::{Program, Vars};

    fn subject() -> Subject {
        Subject {
            name: "alice".into(),
            uid: String::new(),
            groups: vec!["system:authenticated".into()],
        }
    }

    #[test]
    fn checks_are_asked_then_answered() {
        let request = Check {
            subject: subject(),
            path: None,
            group: "apps".into(),
            resource: "deployments".into(),
            subresource: String::new(),
            namespace: "ns".into(),
            name: "web".into(),
            verb: String::new(),
        };
        let vars = Vars::default().bind("authorizer", authorizer_value(subject(), Some(request)));
        let p = Program::compile(
            "authorizer.group('').resource('secrets').namespace('ns').name('s').check('get').allowed() && authorizer.requestResource.check('update').allowed()",
        )
        .unwrap();
        let (first, asked) = with_session(&HashMap::new(), || p.eval(&vars));
        assert_eq!(first, Ok(Value::Bool(false)));
        assert_eq!(asked.len(), 1, "the && stops at the first false");
        assert_eq!(
            (
                asked[0].resource.as_str(),
                asked[0].name.as_str(),
                asked[0].verb.as_str()
            ),
            ("secrets", "s", "get")
        );
        let mut known: HashMap<Check, Answer> = asked
            .into_iter()
            .map(|c| {
                (
                    c,
                    Answer {
                        allowed: true,
                        ..Default::default()
                    },
                )
            })
            .collect();
        let (_, asked) = with_session(&known, || p.eval(&vars));
        assert_eq!(asked.len(), 1);
        assert_eq!(
            (
                asked[0].group.as_str(),
                asked[0].resource.as_str(),
                asked[0].verb.as_str()
            ),
            ("apps", "deployments", "update")
        );
        known.extend(asked.into_iter().map(|c| {
            (
                c,
                Answer {
                    allowed: true,
                    ..Default::default()
                },
            )
        }));
        let (last, asked) = with_session(&known, || p.eval(&vars));
        assert_eq!((last, asked.len()), (Ok(Value::Bool(true)), 0));
    }

    #[test]
    fn empty_names_are_errors() {
        let vars = Vars::default().bind("authorizer", authorizer_value(subject(), None));
        let p =
            Program::compile("authorizer.group('').resource(' ').check('get').allowed()").unwrap();
        let (r, _) = with_session(&HashMap::new(), || p.eval(&vars));
        assert_eq!(r, Err("resource must not be empty".into()));
    }
}
