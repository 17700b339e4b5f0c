//! The type checker (upstream: cel-go's checker, as Kubernetes configures its environment):
//! gives every node of a parsed expression its type and every call the overloads it may
//! resolve to, and reports what cel-go refuses — a field an object type does not declare, a
//! name nothing declares, a call no overload accepts, a comprehension over something that is
//! not a list or map — in cel-go's words and format (`ERROR: <input>:line:col: ...` with the
//! source line and a caret). The `cel` crate parses and evaluates but does not check, so this
//! is written here; where a type cannot be known statically it is `dyn`, which matches
//! everything, as in cel-go.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use kube_cel::cel::common::ast::{
    EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue, MapExpr, StructExpr,
};

use super::functions::{self, Overload};
use super::types::{DeclKind, DeclType};

/// A CEL type as the checker sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    Duration,
    Timestamp,
    Dyn,
    /// `google.protobuf.Any`: assignable to and from everything, as `dyn`, but named "any".
    Any,
    List(Box<Type>),
    Map(Box<Type>, Box<Type>),
    /// A declared object (a schema's properties), with the name cel-go would print.
    Object(ObjectType),
    /// Kubernetes' library types: `net.IP`, `kubernetes.Quantity`, ...
    Opaque(&'static str),
    Optional(Box<Type>),
    Type(Box<Type>),
    /// A type parameter of an overload signature.
    Param(u8),
    /// What an expression cel-go could not type is (an undeclared name, an undefined field, a
    /// call no overload accepts): it fits everything, as `dyn`, so that one mistake is reported
    /// once, and is printed `!error!` where a later message names it.
    Error,
}

#[derive(Clone, Debug)]
pub struct ObjectType {
    pub decl: Arc<DeclType>,
    pub name: Arc<str>,
}

impl PartialEq for ObjectType {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.decl, &other.decl)
    }
}

impl Type {
    /// The CEL type of a declared type; objects are named after their place in the tree, as
    /// upstream's `MaybeAssignTypeName` names them.
    pub fn of_decl(decl: &Arc<DeclType>, name: &str) -> Type {
        match &decl.kind {
            DeclKind::Bool => Type::Bool,
            DeclKind::Int => Type::Int,
            DeclKind::Uint => Type::Uint,
            DeclKind::Null => Type::Null,
            DeclKind::Double => Type::Double,
            DeclKind::String => Type::String,
            DeclKind::Bytes => Type::Bytes,
            DeclKind::Duration => Type::Duration,
            DeclKind::Timestamp => Type::Timestamp,
            DeclKind::Dyn => Type::Dyn,
            DeclKind::Any => Type::Any,
            DeclKind::Opaque(name) => Type::Opaque(name),
            DeclKind::List(e) => Type::List(Box::new(Type::of_decl(e, &format!("{name}.@idx")))),
            DeclKind::Map(e) => Type::Map(
                Box::new(Type::String),
                Box::new(Type::of_decl(e, &format!("{name}.@elem"))),
            ),
            DeclKind::KeyedMap(k, e) => Type::Map(
                Box::new(Type::of_decl(k, &format!("{name}.@key"))),
                Box::new(Type::of_decl(e, &format!("{name}.@elem"))),
            ),
            DeclKind::Object(_) => Type::Object(ObjectType {
                decl: decl.clone(),
                name: Arc::from(name),
            }),
            DeclKind::Named(name, inner) => Type::of_decl(inner, name),
        }
    }

    pub fn is_dyn(&self) -> bool {
        matches!(self, Type::Dyn | Type::Any | Type::Param(_) | Type::Error)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Bool => f.write_str("bool"),
            Type::Int => f.write_str("int"),
            Type::Uint => f.write_str("uint"),
            Type::Double => f.write_str("double"),
            Type::String => f.write_str("string"),
            Type::Bytes => f.write_str("bytes"),
            Type::Null => f.write_str("null_type"),
            Type::Duration => f.write_str("google.protobuf.Duration"),
            Type::Timestamp => f.write_str("google.protobuf.Timestamp"),
            Type::Dyn | Type::Param(_) => f.write_str("dyn"),
            Type::Any => f.write_str("any"),
            Type::List(e) => write!(f, "list({e})"),
            Type::Map(k, v) => write!(f, "map({k}, {v})"),
            Type::Object(o) => f.write_str(&o.name),
            Type::Opaque(n) => f.write_str(n),
            Type::Optional(t) => write!(f, "optional_type({t})"),
            Type::Type(t) => write!(f, "type({t})"),
            Type::Error => f.write_str("!error!"),
        }
    }
}

/// What a checked expression is: the types of its nodes, the overloads of its calls.
pub struct Checked {
    pub expr: IdedExpr,
    pub types: HashMap<u64, Type>,
    pub overloads: HashMap<u64, Vec<&'static str>>,
    /// Field selections that name a declared variable whole (`authorizer.requestResource`):
    /// cel-go plans them as identifiers, not as selections.
    pub dotted_vars: HashSet<u64>,
}

impl Checked {
    pub fn output(&self) -> &Type {
        self.types.get(&self.expr.id).unwrap_or(&Type::Dyn)
    }

    pub fn type_of(&self, id: u64) -> &Type {
        self.types.get(&id).unwrap_or(&Type::Dyn)
    }
}

/// Parses `source`; the error is cel-go's issue text.
fn parse(source: &str) -> Result<IdedExpr, String> {
    kube_cel::cel::parser::Parser::new()
        .parse(source)
        .map_err(|errs| {
            errs.errors
                .iter()
                .map(|e| {
                    render(
                        source,
                        e.pos.0.max(1) as usize,
                        e.pos.1.max(1) as usize,
                        &e.msg,
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
}

/// The syntax errors of `source` in cel-go's words, if it does not parse (for expressions whose
/// variables and libraries the checker does not declare, such as admission policies').
pub fn syntax_errors(source: &str) -> Option<String> {
    parse(source).err()
}

/// Libraries an environment adds to Kubernetes' base environment.
#[derive(Clone, Copy, Debug, Default)]
pub struct Extensions {
    /// cel-go's `ext.Bindings`: the `cel.bind(name, init, body)` macro (DRA selectors).
    pub bindings: bool,
}

/// Parses and checks `source` with the given variables; the error is cel-go's issue text.
pub fn compile(source: &str, vars: &[(&str, Type)]) -> Result<Checked, String> {
    compile_with(source, vars, Extensions::default())
}

/// `compile` in an environment with the given extensions.
pub fn compile_with(
    source: &str,
    vars: &[(&str, Type)],
    extensions: Extensions,
) -> Result<Checked, String> {
    let expr = parse(source)?;
    check_expr(Some(source), expr, vars, extensions)
}

/// Checks an expression already parsed (and perhaps rewritten, as a mutation's object
/// initializers are made maps for the evaluator) with the given variables; errors are cel-go's
/// messages without their source lines.
pub fn check_parsed(expr: IdedExpr, vars: &[(&str, Type)]) -> Result<Checked, String> {
    check_expr(None, expr, vars, Extensions::default())
}

fn check_expr(
    source: Option<&str>,
    mut expr: IdedExpr,
    vars: &[(&str, Type)],
    extensions: Extensions,
) -> Result<Checked, String> {
    if extensions.bindings {
        let mut next_id = max_id(&expr) + 1;
        expand_bindings(&mut expr, &mut next_id);
    }
    let vars: HashMap<String, Type> = vars
        .iter()
        .map(|(n, t)| (n.to_string(), t.clone()))
        .collect();
    qualify_calls(&mut expr, &vars);
    let mut checker = Checker {
        vars: &vars,
        scopes: Vec::new(),
        types: HashMap::new(),
        overloads: HashMap::new(),
        dotted_vars: HashSet::new(),
        errors: Vec::new(),
    };
    checker.check(&expr);
    if !checker.errors.is_empty() {
        let mut errors = checker.errors;
        errors.sort_by_key(|e| e.0);
        let Some(source) = source else {
            return Err(errors
                .iter()
                .map(|(_, msg)| msg.as_str())
                .collect::<Vec<_>>()
                .join("\n"));
        };
        let spots = locate(source, &expr);
        return Err(errors
            .iter()
            .map(|(id, msg)| {
                let (line, col) = spots.get(id).copied().unwrap_or((1, 1));
                render(source, line, col, msg)
            })
            .collect::<Vec<_>>()
            .join("\n"));
    }
    Ok(Checked {
        expr,
        types: checker.types,
        overloads: checker.overloads,
        dotted_vars: checker.dotted_vars,
    })
}

/// cel-go's `ToDisplayString`: the message, the source line, and a caret under the column
/// (both 1-based here).
fn render(source: &str, line: usize, col: usize, msg: &str) -> String {
    let mut out = format!("ERROR: <input>:{line}:{col}: {msg}");
    if let Some(snippet) = source.split('\n').nth(line - 1) {
        let snippet = snippet.replace('\t', " ");
        out.push_str("\n | ");
        out.push_str(&snippet);
        out.push_str("\n | ");
        for c in snippet.chars().take(col - 1) {
            out.push(if c.len_utf8() > 1 { '\u{ff0e}' } else { '.' });
        }
        let at = snippet.chars().nth(col - 1);
        out.push(if at.is_some_and(|c| c.len_utf8() > 1) {
            '\u{ff3e}'
        } else {
            '^'
        });
    }
    out
}

/// `sets.contains(a, b)` parses as a call of `contains` on the identifier `sets`: where that
/// identifier is not a variable and `sets.contains` is a function, it is that global call.
fn qualify_calls(e: &mut IdedExpr, vars: &HashMap<String, Type>) {
    if let Expr::Call(call) = &mut e.expr
        && let Some(Expr::Ident(ns)) = call.target.as_deref().map(|t| &t.expr)
    {
        let name = format!("{ns}.{}", call.func_name);
        if !vars.contains_key(ns) && functions::is_qualified_function(&name) {
            call.target = None;
            call.func_name = name;
        }
    }
    for child in children_mut(e) {
        qualify_calls(child, vars);
    }
}

/// The iteration variable of an expanded `cel.bind`, as cel-go names it.
const BIND_ITER_VAR: &str = "#unused";

fn max_id(e: &IdedExpr) -> u64 {
    children(e).into_iter().map(max_id).fold(e.id, u64::max)
}

/// Expands `cel.bind(name, init, body)` as cel-go's bindings macro does: a comprehension over
/// an empty list whose accumulator, `name`, starts as `init` and is the scope of `body`. So the
/// checker types `name` as `init` and the cost estimate is cel-go's for the expansion.
fn expand_bindings(e: &mut IdedExpr, next_id: &mut u64) {
    for child in children_mut(e) {
        expand_bindings(child, next_id);
    }
    let Expr::Call(call) = &mut e.expr else {
        return;
    };
    let is_bind = call.func_name == "bind"
        && call.args.len() == 3
        && matches!(call.target.as_deref().map(|t| &t.expr), Some(Expr::Ident(ns)) if ns == "cel");
    let Some(Expr::Ident(name)) = is_bind.then(|| call.args[0].expr.clone()) else {
        return;
    };
    let mut fresh = |expr: Expr| {
        *next_id += 1;
        IdedExpr { id: *next_id, expr }
    };
    let iter_range = fresh(Expr::List(kube_cel::cel::common::ast::ListExpr {
        elements: Vec::new(),
        optional_indices: Vec::new(),
    }));
    let loop_cond = fresh(Expr::Literal(LiteralValue::Boolean(false.into())));
    let loop_step = fresh(Expr::Ident(name.clone()));
    let mut args = std::mem::take(&mut call.args).into_iter().skip(1);
    let (Some(accu_init), Some(result)) = (args.next(), args.next()) else {
        return;
    };
    e.expr = Expr::Comprehension(Box::new(kube_cel::cel::common::ast::ComprehensionExpr {
        iter_range,
        iter_var: BIND_ITER_VAR.to_string(),
        iter_var2: None,
        accu_var: name,
        accu_init,
        loop_cond,
        loop_step,
        result,
    }));
}

/// The direct children of `e`: a call's target then its arguments, a comprehension's parts,
/// a literal's elements, keys and values, a selection's operand.
pub(super) fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Call(c) => c.target.as_deref().into_iter().chain(&c.args).collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) => {
            entry_children(entries)
        }
        Expr::Select(s) => vec![&s.operand],
        _ => Vec::new(),
    }
}

/// The keys and values of a map literal's entries, the values of an object literal's fields.
pub(super) fn entry_children(entries: &[IdedEntryExpr]) -> Vec<&IdedExpr> {
    entries
        .iter()
        .flat_map(|en| match &en.expr {
            EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
            EntryExpr::StructField(sf) => vec![&sf.value],
        })
        .collect()
}

/// [`children`], to rewrite them.
fn children_mut(e: &mut IdedExpr) -> Vec<&mut IdedExpr> {
    match &mut e.expr {
        Expr::Call(c) => {
            let mut out: Vec<&mut IdedExpr> = c.target.as_deref_mut().into_iter().collect();
            out.extend(c.args.iter_mut());
            out
        }
        Expr::Comprehension(c) => vec![
            &mut c.iter_range,
            &mut c.accu_init,
            &mut c.loop_cond,
            &mut c.loop_step,
            &mut c.result,
        ],
        Expr::List(l) => l.elements.iter_mut().collect(),
        Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) => entries
            .iter_mut()
            .flat_map(|en| match &mut en.expr {
                EntryExpr::MapEntry(me) => vec![&mut me.key, &mut me.value],
                EntryExpr::StructField(sf) => vec![&mut sf.value],
            })
            .collect(),
        Expr::Select(s) => vec![&mut s.operand],
        _ => Vec::new(),
    }
}

/// Names the runtime knows that carry no typed declaration here: calls to them are `dyn`.
const UNTYPED_FUNCTIONS: &[&str] = &[
    "math.abs",
    "math.bitAnd",
    "math.bitNot",
    "math.bitOr",
    "math.bitShiftLeft",
    "math.bitShiftRight",
    "math.bitXor",
    "math.ceil",
    "math.floor",
    "math.greatest",
    "math.isFinite",
    "math.isInf",
    "math.isNaN",
    "math.least",
    "math.round",
    "math.sign",
    "math.sqrt",
    "math.trunc",
    "_?._",
    "_[?_]",
    "cel.bind",
    "transformList",
    "transformMap",
    "transformMapEntry",
    "all",
    "exists",
    "existsOne",
    "exists_one",
    "sortBy",
    "optMap",
    "optFlatMap",
];

const TYPE_NAMES: &[(&str, Type)] = &[
    ("int", Type::Int),
    ("uint", Type::Uint),
    ("double", Type::Double),
    ("bool", Type::Bool),
    ("string", Type::String),
    ("bytes", Type::Bytes),
    ("null_type", Type::Null),
    ("dyn", Type::Dyn),
];

struct Checker<'a> {
    vars: &'a HashMap<String, Type>,
    scopes: Vec<(String, Type)>,
    types: HashMap<u64, Type>,
    overloads: HashMap<u64, Vec<&'static str>>,
    dotted_vars: HashSet<u64>,
    errors: Vec<(u64, String)>,
}

impl Checker<'_> {
    fn error(&mut self, id: u64, msg: String) {
        self.errors.push((id, msg));
    }

    fn lookup(&self, name: &str) -> Option<Type> {
        self.scopes
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
            .or_else(|| self.vars.get(name).cloned())
    }

    fn check(&mut self, e: &IdedExpr) -> Type {
        let t = self.check_kind(e);
        self.types.insert(e.id, t.clone());
        t
    }

    fn check_kind(&mut self, e: &IdedExpr) -> Type {
        match &e.expr {
            Expr::Literal(l) => match l {
                LiteralValue::Boolean(_) => Type::Bool,
                LiteralValue::Bytes(_) => Type::Bytes,
                LiteralValue::Double(_) => Type::Double,
                LiteralValue::Int(_) => Type::Int,
                LiteralValue::Null => Type::Null,
                LiteralValue::String(_) => Type::String,
                LiteralValue::UInt(_) => Type::Uint,
            },
            Expr::Ident(name) => {
                if let Some(t) = self.lookup(name) {
                    return t;
                }
                if let Some((_, t)) = TYPE_NAMES.iter().find(|(n, _)| n == name) {
                    return Type::Type(Box::new(t.clone()));
                }
                if matches!(name.as_str(), "list" | "map" | "type") {
                    return Type::Type(Box::new(Type::Dyn));
                }
                self.error(
                    e.id,
                    format!("undeclared reference to '{name}' (in container '')"),
                );
                Type::Error
            }
            Expr::Select(sel) => {
                // A dotted name is first looked up whole, as cel-go does: admission declares
                // `authorizer.requestResource` as a variable of its own.
                if !sel.test
                    && let Some(t) = qualified_name(e).and_then(|n| self.vars.get(&n).cloned())
                {
                    self.dotted_vars.insert(e.id);
                    return t;
                }
                let operand = self.check(&sel.operand);
                let t = match &operand {
                    Type::Object(o) => match o.decl.field(&sel.field) {
                        Some(f) => Type::of_decl(f, &format!("{}.{}", o.name, sel.field)),
                        None => {
                            self.error(e.id, format!("undefined field '{}'", sel.field));
                            Type::Error
                        }
                    },
                    Type::Map(_, v) => (**v).clone(),
                    // The library types other than IP and CIDR are object types to cel-go,
                    // whose fields it asks the type provider for; no provider knows them, so
                    // selecting any field of one fails (`authorizer.requestResource` where only
                    // `authorizer` is declared, as in upstream's policy type checking).
                    Type::Opaque(name) if !matches!(*name, "net.IP" | "net.CIDR") => {
                        self.error(e.id, format!("unexpected failed resolution of '{name}'"));
                        Type::Error
                    }
                    Type::Dyn | Type::Any | Type::Param(_) | Type::Optional(_) | Type::Error => {
                        Type::Dyn
                    }
                    other => {
                        self.error(
                            e.id,
                            format!("type '{other}' does not support field selection"),
                        );
                        Type::Dyn
                    }
                };
                if sel.test { Type::Bool } else { t }
            }
            Expr::Call(call) => {
                let mut args = Vec::new();
                if let Some(target) = &call.target {
                    args.push(self.check(target));
                }
                for a in &call.args {
                    args.push(self.check(a));
                }
                self.resolve(e.id, &call.func_name, call.target.is_some(), &args)
            }
            Expr::List(list) => {
                let elems: Vec<Type> = list.elements.iter().map(|x| self.check(x)).collect();
                Type::List(Box::new(join(&elems)))
            }
            Expr::Map(map) => {
                let (mut keys, mut values) = (Vec::new(), Vec::new());
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        keys.push(self.check(&me.key));
                        values.push(self.check(&me.value));
                    }
                }
                Type::Map(Box::new(join(&keys)), Box::new(join(&values)))
            }
            Expr::Struct(s) => {
                // No object type is declared in this environment (and the evaluator could not
                // build one).
                self.error(
                    e.id,
                    format!(
                        "undeclared reference to '{}' (in container '')",
                        s.type_name
                    ),
                );
                for entry in &s.entries {
                    if let EntryExpr::StructField(sf) = &entry.expr {
                        self.check(&sf.value);
                    }
                }
                Type::Error
            }
            Expr::Comprehension(c) => {
                let range = self.check(&c.iter_range);
                let (var1, var2) = match &range {
                    Type::List(elem) if c.iter_var2.is_some() => (Type::Int, (**elem).clone()),
                    Type::List(elem) => ((**elem).clone(), Type::Dyn),
                    Type::Map(k, v) => ((**k).clone(), (**v).clone()),
                    Type::Dyn | Type::Any | Type::Param(_) | Type::Error => (Type::Dyn, Type::Dyn),
                    other => {
                        self.error(
                            c.iter_range.id,
                            format!(
                                "expression of type '{other}' cannot be range of a comprehension (must be list, map, or dynamic)"
                            ),
                        );
                        (Type::Error, Type::Error)
                    }
                };
                let init = self.check(&c.accu_init);
                let mark = self.scopes.len();
                self.scopes.push((c.accu_var.clone(), init.clone()));
                self.scopes.push((c.iter_var.clone(), var1));
                if let Some(v2) = &c.iter_var2 {
                    self.scopes.push((v2.clone(), var2));
                }
                self.check(&c.loop_cond);
                let step = self.check(&c.loop_step);
                self.scopes.truncate(mark);
                // An empty list or map literal starts the accumulator of map() and filter():
                // what the steps add decides its element type.
                let accu = match (&init, &step) {
                    (Type::List(e), Type::List(_)) if **e == Type::Dyn => step,
                    (Type::Map(_, v), Type::Map(_, _)) if **v == Type::Dyn => step,
                    _ => init,
                };
                self.scopes.push((c.accu_var.clone(), accu));
                let result = self.check(&c.result);
                self.scopes.truncate(mark);
                result
            }
            Expr::Unspecified => Type::Dyn,
        }
    }

    fn resolve(&mut self, id: u64, name: &str, member: bool, args: &[Type]) -> Type {
        let Some(candidates) = functions::overloads(name) else {
            if UNTYPED_FUNCTIONS.contains(&name) {
                return Type::Dyn;
            }
            self.error(
                id,
                format!("undeclared reference to '{name}' (in container '')"),
            );
            return Type::Error;
        };
        let mut ids = Vec::new();
        let mut result: Option<Type> = None;
        for o in candidates
            .iter()
            .filter(|o| o.member == member && o.params.len() == args.len())
        {
            if let Some(r) = matches(o, args) {
                ids.push(o.id);
                result = Some(match result {
                    None => r,
                    Some(prev) if prev == r => prev,
                    Some(_) => Type::Dyn,
                });
            }
        }
        match result {
            Some(t) => {
                self.overloads.insert(id, ids);
                t
            }
            None => {
                let shown: Vec<String> = args.iter().map(ToString::to_string).collect();
                let signature = if member {
                    format!("{}.({})", shown[0], shown[1..].join(", "))
                } else {
                    format!("({})", shown.join(", "))
                };
                self.error(
                    id,
                    format!("found no matching overload for '{name}' applied to '{signature}'"),
                );
                Type::Error
            }
        }
    }
}

/// `containers.ToQualifiedName`: the dotted name a chain of field selections on an identifier
/// spells (`a.b.c`), if it is one.
fn qualified_name(e: &IdedExpr) -> Option<String> {
    match &e.expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(sel) if !sel.test => {
            let mut name = qualified_name(&sel.operand)?;
            name.push('.');
            name.push_str(&sel.field);
            Some(name)
        }
        _ => None,
    }
}

/// The result type of `o` applied to `args`, if they fit its parameters.
fn matches(o: &Overload, args: &[Type]) -> Option<Type> {
    let mut bound: [Option<Type>; 2] = [None, None];
    for (p, a) in o.params.iter().zip(args) {
        if !assignable(p, a, &mut bound) {
            return None;
        }
    }
    Some(substitute(&o.result, &bound))
}

fn assignable(p: &Type, a: &Type, bound: &mut [Option<Type>; 2]) -> bool {
    match (p, a) {
        (Type::Param(i), _) => {
            let i = *i as usize;
            match bound[i].clone() {
                None => {
                    bound[i] = Some(a.clone());
                    true
                }
                Some(Type::Dyn) => {
                    // The more specific of the two is what the parameter stands for.
                    bound[i] = Some(a.clone());
                    true
                }
                Some(b) => {
                    let mut inner = [None, None];
                    if assignable(&b, a, &mut inner) {
                        true
                    } else if assignable(a, &b, &mut inner) {
                        bound[i] = Some(a.clone());
                        true
                    } else {
                        false
                    }
                }
            }
        }
        (_, Type::Dyn | Type::Any | Type::Param(_) | Type::Error)
        | (Type::Dyn | Type::Any | Type::Error, _) => {
            // dyn fits anything; a parameter it meets is still bound, to dyn.
            bind_dyn(p, bound);
            true
        }
        (Type::List(p), Type::List(a)) => assignable(p, a, bound),
        (Type::Map(pk, pv), Type::Map(ak, av)) => {
            assignable(pk, ak, bound) && assignable(pv, av, bound)
        }
        (Type::Optional(p), Type::Optional(a)) | (Type::Type(p), Type::Type(a)) => {
            assignable(p, a, bound)
        }
        // null is a value of every message-like type: objects, opaque library types,
        // optionals, and the protobuf well-known timestamp and duration.
        (
            Type::Object(_)
            | Type::Opaque(_)
            | Type::Optional(_)
            | Type::Timestamp
            | Type::Duration,
            Type::Null,
        ) => true,
        (p, a) => p == a,
    }
}

fn bind_dyn(p: &Type, bound: &mut [Option<Type>; 2]) {
    match p {
        Type::Param(i) if bound[*i as usize].is_none() => bound[*i as usize] = Some(Type::Dyn),
        Type::List(e) | Type::Optional(e) | Type::Type(e) => bind_dyn(e, bound),
        Type::Map(k, v) => {
            bind_dyn(k, bound);
            bind_dyn(v, bound);
        }
        _ => {}
    }
}

fn substitute(t: &Type, bound: &[Option<Type>; 2]) -> Type {
    match t {
        Type::Param(i) => bound[*i as usize].clone().unwrap_or(Type::Dyn),
        Type::List(e) => Type::List(Box::new(substitute(e, bound))),
        Type::Map(k, v) => Type::Map(
            Box::new(substitute(k, bound)),
            Box::new(substitute(v, bound)),
        ),
        Type::Optional(e) => Type::Optional(Box::new(substitute(e, bound))),
        Type::Type(e) => Type::Type(Box::new(substitute(e, bound))),
        other => other.clone(),
    }
}

/// The common type of a literal's elements: theirs when they agree, `dyn` otherwise.
fn join(types: &[Type]) -> Type {
    match types.split_first() {
        Some((first, rest)) if rest.iter().all(|t| t == first) => first.clone(),
        _ => Type::Dyn,
    }
}

/// Where each node's token is in the source (line, column, 1-based), for error messages: the
/// nodes are walked in source order and matched, kind by kind, with the source's tokens (the
/// `cel` crate's parser keeps no positions for a successful parse).
fn locate(source: &str, root: &IdedExpr) -> HashMap<u64, (usize, usize)> {
    let tokens = tokenize(source);
    let mut order: Vec<(u64, TokenKey)> = Vec::new();
    walk_in_source_order(root, &mut Vec::new(), &mut order);
    let mut used: HashMap<TokenKey, usize> = HashMap::new();
    let mut spots = HashMap::new();
    for (id, key) in order {
        let n = used.entry(key.clone()).or_default();
        if let Some(offset) = find_token(&tokens, &key, *n) {
            spots.insert(id, line_col(source, offset));
        }
        *n += 1;
    }
    spots
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum TokenKey {
    /// `.field`, at the dot.
    Select(String),
    /// A bare identifier not followed by `(`.
    Ident(String),
    /// The `(` of a call of the (last segment of the) name.
    Call(String),
    /// An operator token.
    Op(&'static str),
}

fn op_token(func: &str, argc: usize) -> Option<&'static str> {
    Some(match func {
        "_&&_" => "&&",
        "_||_" => "||",
        "!_" => "!",
        "-_" => "-u",
        "_-_" if argc == 2 => "-",
        "_+_" => "+",
        "_*_" => "*",
        "_/_" => "/",
        "_%_" => "%",
        "_==_" => "==",
        "_!=_" => "!=",
        "_<_" => "<",
        "_<=_" => "<=",
        "_>_" => ">",
        "_>=_" => ">=",
        "_[_]" => "[",
        "@in" => "in",
        "_?_:_" => "?",
        _ => return None,
    })
}

fn walk_in_source_order(e: &IdedExpr, accus: &mut Vec<String>, out: &mut Vec<(u64, TokenKey)>) {
    let synthesized =
        |x: &IdedExpr, accus: &Vec<String>| matches!(&x.expr, Expr::Ident(n) if accus.contains(n));
    match &e.expr {
        Expr::Ident(name) if !accus.contains(name) => {
            out.push((e.id, TokenKey::Ident(name.clone())))
        }
        Expr::Select(sel) => {
            walk_in_source_order(&sel.operand, accus, out);
            out.push((e.id, TokenKey::Select(sel.field.clone())));
        }
        Expr::Call(call) => {
            // Calls the macros add around the accumulator have no token of their own.
            let made_up = call.args.iter().any(|a| synthesized(a, accus))
                || call.func_name == "@not_strictly_false";
            match (op_token(&call.func_name, call.args.len()), made_up) {
                (_, true) => {
                    for a in &call.args {
                        walk_in_source_order(a, accus, out);
                    }
                }
                (Some(op), false) if call.args.len() >= 2 => {
                    walk_in_source_order(&call.args[0], accus, out);
                    out.push((e.id, TokenKey::Op(op)));
                    for a in &call.args[1..] {
                        walk_in_source_order(a, accus, out);
                    }
                }
                (Some(op), false) => {
                    out.push((e.id, TokenKey::Op(op)));
                    for a in &call.args {
                        walk_in_source_order(a, accus, out);
                    }
                }
                (None, false) => {
                    if let Some(t) = &call.target {
                        walk_in_source_order(t, accus, out);
                    }
                    let last = call.func_name.rsplit('.').next().unwrap_or_default();
                    out.push((e.id, TokenKey::Call(last.to_string())));
                    for a in &call.args {
                        walk_in_source_order(a, accus, out);
                    }
                }
            }
        }
        Expr::List(l) => l
            .elements
            .iter()
            .for_each(|x| walk_in_source_order(x, accus, out)),
        Expr::Map(m) => {
            for entry in &m.entries {
                if let EntryExpr::MapEntry(me) = &entry.expr {
                    walk_in_source_order(&me.key, accus, out);
                    walk_in_source_order(&me.value, accus, out);
                }
            }
        }
        // An expanded `cel.bind`: the initializer, then the body in the binding's scope.
        Expr::Comprehension(c) if c.iter_var == BIND_ITER_VAR => {
            walk_in_source_order(&c.accu_init, accus, out);
            accus.push(c.accu_var.clone());
            walk_in_source_order(&c.result, accus, out);
            accus.pop();
        }
        Expr::Comprehension(c) => {
            walk_in_source_order(&c.iter_range, accus, out);
            accus.push(c.accu_var.clone());
            walk_in_source_order(&c.loop_step, accus, out);
            accus.pop();
        }
        _ => {}
    }
}

#[derive(Debug)]
struct Token {
    text: String,
    offset: usize,
}

/// The source's tokens, without string literals' contents and comments.
fn tokenize(source: &str) -> Vec<Token> {
    let bytes = source.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if c == b'\'' || c == b'"' {
            let triple = bytes.get(i + 1) == Some(&c) && bytes.get(i + 2) == Some(&c);
            let start = i;
            i += if triple { 3 } else { 1 };
            while i < bytes.len() {
                if bytes[i] == b'\\' {
                    i += 2;
                    continue;
                }
                if bytes[i] == c
                    && (!triple || (bytes.get(i + 1) == Some(&c) && bytes.get(i + 2) == Some(&c)))
                {
                    i += if triple { 3 } else { 1 };
                    break;
                }
                i += 1;
            }
            out.push(Token {
                text: "\"".into(),
                offset: start,
            });
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            // r'..' and b'..' prefixes belong to the literal that follows.
            if i - start == 1
                && matches!(bytes.get(i), Some(b'\'' | b'"'))
                && matches!(c, b'r' | b'R' | b'b' | b'B')
            {
                continue;
            }
            out.push(Token {
                text: source[start..i].to_string(),
                offset: start,
            });
        } else if c.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                i += 1;
            }
            out.push(Token {
                text: "0".into(),
                offset: start,
            });
        } else {
            let two = source.get(i..i + 2).unwrap_or("");
            let len = if matches!(two, "&&" | "||" | "==" | "!=" | "<=" | ">=") {
                2
            } else {
                1
            };
            let ch_len = source[i..].chars().next().map_or(1, char::len_utf8);
            let len = len.max(if len == 1 { ch_len } else { 2 });
            out.push(Token {
                text: source[i..i + len].to_string(),
                offset: i,
            });
            i += len;
        }
    }
    out
}

fn is_operand_end(t: &Token) -> bool {
    let c = t.text.chars().next().unwrap_or(' ');
    c.is_ascii_alphanumeric() || c == '_' || c == '"' || matches!(t.text.as_str(), ")" | "]" | "}")
}

fn find_token(tokens: &[Token], key: &TokenKey, nth: usize) -> Option<usize> {
    let mut hits = tokens.iter().enumerate().filter(|(i, t)| {
        let prev = i.checked_sub(1).map(|p| &tokens[p]);
        let next = tokens.get(i + 1);
        match key {
            TokenKey::Select(f) => t.text == "." && next.is_some_and(|n| &n.text == f),
            TokenKey::Ident(n) => {
                &t.text == n
                    && prev.is_none_or(|p| p.text != ".")
                    && next.is_none_or(|x| x.text != "(")
            }
            TokenKey::Call(n) => {
                t.text == "("
                    && prev.is_some_and(|p| n.is_empty() || &p.text == n)
                    && prev.is_some_and(|p| {
                        p.text
                            .chars()
                            .next()
                            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    })
            }
            TokenKey::Op("-u") => t.text == "-" && !prev.is_some_and(is_operand_end),
            TokenKey::Op("-") => t.text == "-" && prev.is_some_and(is_operand_end),
            TokenKey::Op(op) => t.text == *op,
        }
    });
    hits.nth(nth).map(|(_, t)| t.offset)
}

fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn self_type() -> Type {
        let decl = DeclType::from_schema(
            &json!({"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "name": {"type": "string"},
                "items": {"type": "array", "items": {"type": "object", "properties": {"key": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            }}),
            false,
        )
        .unwrap();
        Type::of_decl(&decl, "selfType")
    }

    fn check(src: &str) -> Result<Type, String> {
        compile(src, &[("self", self_type())]).map(|c| c.output().clone())
    }

    #[test]
    fn types_follow_the_schema() {
        assert_eq!(check("self.replicas > 1").unwrap(), Type::Bool);
        assert_eq!(
            check("self.items.map(i, i.key)").unwrap(),
            Type::List(Box::new(Type::String))
        );
        assert_eq!(check("self.labels['a']").unwrap(), Type::String);
        assert_eq!(
            check("self.items.all(i, i.key.startsWith('x'))").unwrap(),
            Type::Bool
        );
        assert_eq!(
            check("sets.contains(['a'], [self.name])").unwrap(),
            Type::Bool
        );
        assert_eq!(
            check("has(self.name) && self.replicas >= 1.5").unwrap(),
            Type::Bool
        );
        assert_eq!(
            check("quantity('1').isGreaterThan(quantity('2'))").unwrap(),
            Type::Bool
        );
    }

    #[test]
    fn errors_are_cel_gos() {
        assert_eq!(
            check("self.replicas > 1 && self.nmae == 'x'").unwrap_err(),
            "ERROR: <input>:1:26: undefined field 'nmae'\n | self.replicas > 1 && self.nmae == 'x'\n | .........................^"
        );
        assert_eq!(
            check("self.name + 1 == 'a'").unwrap_err(),
            "ERROR: <input>:1:11: found no matching overload for '_+_' applied to '(string, int)'\n | self.name + 1 == 'a'\n | ..........^"
        );
        assert_eq!(
            check("foo == 1").unwrap_err(),
            "ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo == 1\n | ^"
        );
        assert!(
            check("self.name == null")
                .unwrap_err()
                .contains("'_==_' applied to '(string, null_type)'")
        );
        assert!(
            check("self.replicas.size() > 0")
                .unwrap_err()
                .contains("'size' applied to 'int.()'")
        );
    }

    #[test]
    fn any_is_checked_as_dyn_and_named_any() {
        let values = Arc::new(DeclType {
            kind: DeclKind::Map(Arc::new(DeclType {
                kind: DeclKind::Any,
                max_elements: 0,
                min_serialized_size: 0,
            })),
            max_elements: 0,
            min_serialized_size: 0,
        });
        let vars = [("m", Type::of_decl(&values, "m"))];
        let out = |src: &str| compile(src, &vars).map(|c| c.output().clone());
        assert_eq!(out("m.a").unwrap(), Type::Any);
        assert_eq!(out("m.a > 1 && m.b == 'x'").unwrap(), Type::Bool);
        assert_eq!(
            out("m[true]").unwrap_err(),
            "ERROR: <input>:1:2: found no matching overload for '_[_]' applied to '(map(string, any), bool)'\n | m[true]\n | .^"
        );
    }

    #[test]
    fn bindings_only_where_the_environment_has_them() {
        let vars = [("self", self_type())];
        let bound = "cel.bind(n, self.name, n.size() > 1 && n == 'x')";
        let with = Extensions { bindings: true };
        assert_eq!(
            compile_with(bound, &vars, with).unwrap().output(),
            &Type::Bool
        );
        // The bound name has the initializer's type.
        let err = |r: Result<Checked, String>| r.err().unwrap_or_default();
        assert!(
            err(compile_with(
                "cel.bind(n, self.replicas, n.size())",
                &vars,
                with
            ))
            .contains("'size' applied to 'int.()'")
        );
        assert!(
            err(compile(bound, &vars))
                .starts_with("ERROR: <input>:1:1: undeclared reference to 'cel' (in container '')")
        );
    }
}
