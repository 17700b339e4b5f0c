//! Label selectors (upstream's `k8s.io/apimachinery/pkg/labels`): the string syntax of
//! `?labelSelector=` (`a=b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, `a>1`), the
//! `metav1.LabelSelector` object of workload specs, matching, and the canonical string form.
//!
//! The lexer and parser follow upstream's token by token, so that the same inputs are accepted
//! and the same error texts come back (the HTTP layer answers them as 400 messages). This module
//! only parses and matches: it does not know where labels are stored or how a list is filtered.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

use crate::validation::{
    FieldError, FieldPath, aggregate_message, is_qualified_name, is_valid_label_value,
};

/// A requirement's operator (upstream's `selection.Operator`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

impl Operator {
    /// upstream's spelling (`in`, `!=`, `exists`, `gt`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "in",
            Operator::NotIn => "notin",
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::Exists => "exists",
            Operator::DoesNotExist => "!",
            Operator::GreaterThan => "gt",
            Operator::LessThan => "lt",
        }
    }
}

/// The binary operators in the order upstream lists them in its "expected" message.
const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

/// One `key op values` term of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// upstream's `NewRequirement`: validates the key, the number of values for the operator,
    /// integer values for `gt`/`lt`, and each value as a label value. Errors are reported under
    /// `path` (`key`, `values[i][key]`) and aggregated as upstream does.
    pub fn new(
        key: &str,
        operator: Operator,
        values: Vec<String>,
        path: &FieldPath,
    ) -> Result<Self, String> {
        let mut errs = Vec::new();
        if let Some(e) = validate_label_key(key, &path.child("key")) {
            errs.push(e);
        }
        let values_path = path.child("values");
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => {
                errs.push(FieldError::invalid(
                    &values_path,
                    values.clone(),
                    "for 'in', 'notin' operators, values set can't be empty",
                ));
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals
                if values.len() != 1 =>
            {
                errs.push(FieldError::invalid(
                    &values_path,
                    values.clone(),
                    "exact-match compatibility requires one single value",
                ));
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                errs.push(FieldError::invalid(
                    &values_path,
                    values.clone(),
                    "values set must be empty for exists and does not exist",
                ));
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(FieldError::invalid(
                        &values_path,
                        values.clone(),
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        errs.push(FieldError::invalid(
                            &values_path.index(i),
                            v.as_str(),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
            _ => {}
        }
        for (i, v) in values.iter().enumerate() {
            let msgs = is_valid_label_value(v);
            if !msgs.is_empty() {
                errs.push(FieldError::invalid(
                    &values_path.index(i).key(key),
                    v.as_str(),
                    msgs.join("; "),
                ));
            }
        }
        if errs.is_empty() {
            Ok(Self {
                key: key.to_string(),
                operator,
                values,
            })
        } else {
            Err(aggregate_message(&errs))
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values in the order given (the parser gives them sorted and without duplicates).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    fn has_value(&self, v: &str) -> bool {
        self.values.iter().any(|x| x == v)
    }

    /// Whether labels (looked up by `lookup`) satisfy this requirement. A missing key satisfies
    /// `!=`, `notin` and `!`; `gt`/`lt` compare as 64-bit integers and fail on anything else.
    pub fn matches_by<'a>(&self, lookup: impl Fn(&str) -> Option<&'a str>) -> bool {
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                lookup(&self.key).is_some_and(|v| self.has_value(v))
            }
            Operator::NotIn | Operator::NotEquals => {
                lookup(&self.key).is_none_or(|v| !self.has_value(v))
            }
            Operator::Exists => lookup(&self.key).is_some(),
            Operator::DoesNotExist => lookup(&self.key).is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(Ok(have)) = lookup(&self.key).map(str::parse::<i64>) else {
                    return false;
                };
                let [want] = self.values.as_slice() else {
                    return false;
                };
                let Ok(want) = want.parse::<i64>() else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

/// upstream's `Requirement.String()`: values sorted when there are several.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
        };
        f.write_str(op)?;
        let set = matches!(self.operator, Operator::In | Operator::NotIn);
        if set {
            f.write_str("(")?;
        }
        let mut values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        values.sort_unstable();
        f.write_str(&values.join(","))?;
        if set {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A label selector: requirements that must all hold, kept sorted by key. `Selector::nothing()`
/// (from a null `metav1.LabelSelector`) matches no object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl Selector {
    /// The selector that matches everything (the empty string).
    pub fn everything() -> Self {
        Self::default()
    }

    /// The selector that matches nothing.
    pub fn nothing() -> Self {
        Self {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Parses the string syntax, with upstream's error messages (e.g. `a in (b` gives
    /// `unable to parse requirement: found '', expected: ',' or ')'`).
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parser = Parser::new(s);
        let mut requirements = parser.parse()?;
        // Sorted by key for a deterministic form; stable, so equal keys keep their order.
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self {
            requirements,
            nothing: false,
        })
    }

    /// upstream's `SelectorFromSet`: `key=value` for each entry; empty matches everything. No
    /// validation, as upstream.
    pub fn from_set(set: &BTreeMap<String, String>) -> Self {
        let requirements = set
            .iter()
            .map(|(k, v)| Requirement {
                key: k.clone(),
                operator: Operator::Equals,
                values: vec![v.clone()],
            })
            .collect();
        Self {
            requirements,
            nothing: false,
        }
    }

    /// upstream's `metav1.LabelSelectorAsSelector` on a `metav1.LabelSelector` in JSON: null or
    /// absent matches nothing, `{}` matches everything; `matchLabels` become `=` and
    /// `matchExpressions` (`In`, `NotIn`, `Exists`, `DoesNotExist`) their operators.
    pub fn from_label_selector(v: &Value) -> Result<Self, String> {
        let sel = match v {
            Value::Null => return Ok(Self::nothing()),
            Value::Object(m) => m,
            other => return Err(format!("a label selector must be an object, not {other}")),
        };
        let empty = Map::new();
        let match_labels = match sel.get("matchLabels") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(m)) => m,
            Some(_) => return Err("matchLabels must be an object of strings".into()),
        };
        let no_exprs = Vec::new();
        let exprs = match sel.get("matchExpressions") {
            None | Some(Value::Null) => &no_exprs,
            Some(Value::Array(a)) => a,
            Some(_) => return Err("matchExpressions must be a list".into()),
        };
        if match_labels.is_empty() && exprs.is_empty() {
            return Ok(Self::everything());
        }
        let root = FieldPath::nil();
        let mut requirements = Vec::with_capacity(match_labels.len() + exprs.len());
        // Go visits matchLabels in map order; sorted keys make the first error deterministic.
        let sorted: BTreeMap<&String, &Value> = match_labels.iter().collect();
        for (k, v) in sorted {
            let value = match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                _ => return Err(format!("matchLabels[{k}] must be a string")),
            };
            requirements.push(Requirement::new(k, Operator::Equals, vec![value], &root)?);
        }
        for e in exprs {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("");
            let operator = e.get("operator").and_then(Value::as_str).unwrap_or("");
            let op = match operator {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(format!(
                        "{} is not a valid label selector operator",
                        crate::validation::go_quote(other)
                    ));
                }
            };
            let values = match e.get("values") {
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| v.as_str().unwrap_or("").to_string())
                    .collect(),
                _ => Vec::new(),
            };
            requirements.push(Requirement::new(key, op, values, &root)?);
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self {
            requirements,
            nothing: false,
        })
    }

    /// Adds a requirement, keeping the order by key.
    pub fn with_requirement(mut self, r: Requirement) -> Self {
        self.requirements.push(r);
        self.requirements.sort_by(|a, b| a.key.cmp(&b.key));
        self
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// True when the selector does not restrict anything (not for `nothing()`).
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// True for `nothing()`.
    pub fn matches_nothing(&self) -> bool {
        self.nothing
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_by(|k| labels.get(k).map(String::as_str))
    }

    /// Matches the `metadata.labels` object of a JSON object directly (absent labels are none).
    pub fn matches_json(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.matches_by(|k| labels.and_then(|m| m.get(k)).and_then(Value::as_str))
    }

    /// Matches labels looked up by `lookup`.
    pub fn matches_by<'a>(&self, lookup: impl Fn(&str) -> Option<&'a str>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches_by(&lookup))
    }

    /// The value a selector pins `label` to (`label=v`, `label==v` or `label in (v)`), if any:
    /// lets a caller narrow a list to one key.
    pub fn requires_exact_match(&self, label: &str) -> Option<&str> {
        let r = self.requirements.iter().find(|r| r.key == label)?;
        match (r.operator, r.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [v]) => Some(v),
            _ => None,
        }
    }
}

/// The canonical form: requirements joined by `,` (empty for everything and for nothing).
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Selector {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s)
    }
}

/// upstream's `validateLabelKey` in the parser: one error with all messages joined by `; `.
fn validate_label_key(key: &str, path: &FieldPath) -> Option<FieldError> {
    let msgs = is_qualified_name(key);
    if msgs.is_empty() {
        None
    } else {
        Some(FieldError::invalid(path, key, msgs.join("; ")))
    }
}

// ---------------------------------------------------------------------------------------------
// Lexer and parser, token for token as upstream's.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn literal_token(s: &[u8]) -> Option<Token> {
    Some(match s {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

fn text(b: &[u8]) -> String {
    // Tokens are cut only at ASCII bytes, so the slices are whole UTF-8.
    String::from_utf8_lossy(b).into_owned()
}

struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    /// The next byte, or 0 at the end (a NUL byte in the input reads the same, as upstream).
    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn scan_id_or_keyword(&mut self) -> (Token, String) {
        let start = self.pos;
        let mut end;
        loop {
            end = self.pos;
            let c = self.read();
            if c == 0 {
                break;
            }
            if is_special_symbol(c) || is_whitespace(c) {
                self.unread();
                break;
            }
        }
        let word = &self.s[start..end];
        match literal_token(word) {
            Some(t) => (t, text(word)),
            None => (Token::Identifier, text(word)),
        }
    }

    fn scan_special_symbol(&mut self) -> (Token, String) {
        let mut buffer = Vec::new();
        let mut last: Option<(Token, String)> = None;
        loop {
            let c = self.read();
            if c == 0 {
                break;
            }
            if !is_special_symbol(c) {
                self.unread();
                break;
            }
            buffer.push(c);
            if let Some(t) = literal_token(&buffer) {
                last = Some((t, text(&buffer)));
            } else if last.is_some() {
                self.unread();
                break;
            }
        }
        last.unwrap_or_else(|| {
            (
                Token::Error,
                format!("error expected: keyword found '{}'", text(&buffer)),
            )
        })
    }

    fn lex(&mut self) -> (Token, String) {
        let mut c = self.read();
        while is_whitespace(c) {
            c = self.read();
        }
        if c == 0 {
            return (Token::EndOfString, String::new());
        }
        self.unread();
        if is_special_symbol(c) {
            self.scan_special_symbol()
        } else {
            self.scan_id_or_keyword()
        }
    }
}

/// Whether `in`/`notin` are keywords (after a key) or plain values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

impl Parser {
    fn new(s: &str) -> Self {
        let mut lexer = Lexer {
            s: s.as_bytes(),
            pos: 0,
        };
        let mut items = Vec::new();
        loop {
            let item = lexer.lex();
            let end = item.0 == Token::EndOfString;
            items.push(item);
            if end {
                break;
            }
        }
        Self { items, position: 0 }
    }

    fn item(&self, at: usize, ctx: Context) -> (Token, String) {
        // Past the end there is only the end of the string (upstream never reads there).
        let (tok, lit) = self
            .items
            .get(at)
            .cloned()
            .unwrap_or((Token::EndOfString, String::new()));
        match tok {
            Token::In | Token::NotIn if ctx == Context::Values => (Token::Identifier, lit),
            _ => (tok, lit),
        }
    }

    fn lookahead(&self, ctx: Context) -> (Token, String) {
        self.item(self.position, ctx)
    }

    fn consume(&mut self, ctx: Context) -> (Token, String) {
        let item = self.item(self.position, ctx);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, operator) = self.parse_key_and_infer_operator()?;
        let nil = FieldPath::nil();
        if let Some(op @ (Operator::Exists | Operator::DoesNotExist)) = operator {
            return Requirement::new(&key, op, Vec::new(), &nil);
        }
        let op = self.parse_operator()?;
        let values = match op {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(&key, op, values, &nil)
    }

    /// The key, with `!` before it giving DoesNotExist, and a bare key (followed by `,` or the
    /// end) giving Exists.
    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let mut operator = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        if let Some(e) = validate_label_key(&lit, &FieldPath::nil()) {
            return Err(e.to_string());
        }
        let (next, _) = self.lookahead(Context::Values);
        if (next == Token::EndOfString || next == Token::Comma) && operator.is_none() {
            operator = Some(Operator::Exists);
        }
        Ok((lit, operator))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => return Err(format!("found '{lit}', expected: {BINARY_OPERATORS}")),
        })
    }

    /// `(x,y,z)`; `()` is the one empty value. The result is sorted without duplicates, as
    /// upstream's string set gives it.
    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                let (closing, _) = self.consume(Context::Values);
                if closing != Token::ClosedPar {
                    // upstream reports the literal it looked at before the list, kept as is.
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut set = std::collections::BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    set.insert(lit);
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(set.into_iter().collect()),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    // `(,` `,,` and `,)` stand for empty values.
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    let (tok2, _) = self.lookahead(Context::Values);
                    if tok2 == Token::ClosedPar {
                        set.insert(String::new());
                        return Ok(set.into_iter().collect());
                    }
                    if tok2 == Token::Comma {
                        set.insert(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if tok == Token::EndOfString || tok == Token::Comma {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Token::Identifier {
            Ok(vec![lit])
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn canonical(s: &str) -> String {
        match Selector::parse(s) {
            Ok(sel) => sel.to_string(),
            Err(e) => panic!("{s:?} did not parse: {e}"),
        }
    }

    fn error(s: &str) -> String {
        match Selector::parse(s) {
            Ok(sel) => panic!("{s:?} parsed as {sel}"),
            Err(e) => e,
        }
    }

    #[test]
    fn parses_upstream_valid_inputs() {
        assert_eq!(canonical(""), "");
        assert_eq!(canonical("  "), "");
        assert_eq!(canonical("x=a,y=b,z=c"), "x=a,y=b,z=c");
        assert_eq!(canonical("x = a, y=b ,z  = c"), "x=a,y=b,z=c");
        assert_eq!(canonical("x==a"), "x==a");
        assert_eq!(canonical("z=c,y=b,x=a"), "x=a,y=b,z=c");
        assert_eq!(canonical("x!=a,y=b"), "x!=a,y=b");
        assert_eq!(canonical("x=,z= "), "x=,z=");
        assert_eq!(canonical("x= ,z= "), "x=,z=");
        assert_eq!(canonical("!x"), "!x");
        assert_eq!(canonical("x"), "x");
        assert_eq!(canonical("x>1"), "x>1");
        assert_eq!(canonical("x<1,y>5"), "x<1,y>5");
        assert_eq!(
            canonical("x in (foo,,baz),y,z notin ()"),
            "x in (,baz,foo),y,z notin ()"
        );
        assert_eq!(canonical("x in (b,a,a)"), "x in (a,b)");
        assert_eq!(canonical("x in (in)"), "x in (in)");
        assert_eq!(canonical("in in (notin)"), "in in (notin)");
        assert_eq!(canonical("x=in"), "x=in");
        assert_eq!(canonical("example.com/app=web"), "example.com/app=web");
        assert_eq!(canonical("a in (,)"), "a in ()");
    }

    #[test]
    fn rejects_with_upstream_messages() {
        assert_eq!(
            error("a in (b"),
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
        assert_eq!(
            error("x==a==b"),
            "found '==', expected: ',' or 'end of string'"
        );
        assert_eq!(
            error("x=a||y=b"),
            "unable to parse requirement: values[0][x]: Invalid value: \"a||y\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
        assert_eq!(error("x=a,"), "found '', expected: identifier after ','");
        assert_eq!(
            error("x=a b"),
            "found 'b', expected: ',' or 'end of string'"
        );
        assert_eq!(
            error("x in a"),
            "unable to parse requirement: found 'a' expected: '('"
        );
        assert_eq!(
            error("x in (a b)"),
            "unable to parse requirement: found 'b', expected: ',' or ')'"
        );
        assert_eq!(
            error("x in (="),
            "unable to parse requirement: found '=', expected: ',', ')' or identifier"
        );
        assert_eq!(
            error("x in (a,="),
            "unable to parse requirement: found '=', expected: ',', or identifier"
        );
        assert_eq!(
            error("x y"),
            "unable to parse requirement: found 'y', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            error("x=(a)"),
            "unable to parse requirement: found '(', expected: identifier"
        );
        assert_eq!(
            error("!"),
            "unable to parse requirement: found '', expected: identifier"
        );
        assert_eq!(
            error("=a"),
            "found '=', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(error("!x=a"), "found '=', expected: ',' or 'end of string'");
        assert_eq!(
            error("x>a"),
            "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert_eq!(
            error("bad/key/x=a"),
            "unable to parse requirement: <nil>: Invalid value: \"bad/key/x\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        );
        assert_eq!(
            error("x=a@b"),
            "unable to parse requirement: values[0][x]: Invalid value: \"a@b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
        let two = error("x in (-a,-b)");
        assert!(
            two.starts_with("unable to parse requirement: [values[0][x]: Invalid value: \"-a\""),
            "{two}"
        );
        assert!(
            two.contains(", values[1][x]: Invalid value: \"-b\""),
            "{two}"
        );
    }

    #[test]
    fn recorded_bad_label_selector() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../ironplane/tests/golden/errors/bad-label-selector.json");
        let text =
            std::fs::read_to_string(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let v: Value = serde_json::from_str(&text).expect("a recording is JSON");
        assert_eq!(
            Some(error("a in (b").as_str()),
            v["body"]["message"].as_str()
        );
    }

    #[test]
    fn matches_like_upstream() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        let yes = [
            "",
            "app=web",
            "app==web",
            "app!=db",
            "app in (web,db)",
            "x notin (a)",
            "app",
            "!x",
            "n>4",
            "n<6",
            "app,tier=front",
        ];
        for s in yes {
            assert!(Selector::parse(s).is_ok_and(|sel| sel.matches(&l)), "{s}");
        }
        let no = [
            "app=db",
            "app!=web",
            "app notin (web)",
            "x",
            "!app",
            "n>5",
            "app>1",
            "x>1",
            "x in (a)",
            "x=",
            "app=web,tier=back",
        ];
        for s in no {
            assert!(Selector::parse(s).is_ok_and(|sel| !sel.matches(&l)), "{s}");
        }
        // `x=` needs x present with the empty value; `x!=` holds when x is absent.
        assert!(Selector::parse("x=").is_ok_and(|s| s.matches(&labels(&[("x", "")]))));
        assert!(Selector::parse("x!=").is_ok_and(|s| s.matches(&labels(&[]))));
        let json_labels = json!({"app": "web"});
        assert!(Selector::parse("app=web").is_ok_and(|s| s.matches_json(json_labels.as_object())));
        assert!(Selector::parse("!app").is_ok_and(|s| s.matches_json(None)));
    }

    #[test]
    fn everything_nothing_and_exact_match() {
        assert!(Selector::everything().is_empty());
        assert!(Selector::everything().matches(&labels(&[])));
        assert!(!Selector::nothing().is_empty());
        assert!(!Selector::nothing().matches(&labels(&[])));
        let s = Selector::parse("b=2,a in (1)").unwrap_or_default();
        assert_eq!(s.requires_exact_match("a"), Some("1"));
        assert_eq!(s.requires_exact_match("b"), Some("2"));
        assert_eq!(s.requires_exact_match("c"), None);
        assert_eq!(
            Selector::parse("a in (1,2)")
                .unwrap_or_default()
                .requires_exact_match("a"),
            None
        );
        assert_eq!(
            Selector::from_set(&labels(&[("b", "2"), ("a", "1")])).to_string(),
            "a=1,b=2"
        );
    }

    #[test]
    fn from_label_selector_object() {
        let sel = Selector::from_label_selector(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "back"]},
                {"key": "legacy", "operator": "DoesNotExist"}
            ]
        }));
        let sel = sel.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sel.to_string(), "app=web,!legacy,tier in (back,front)");
        assert!(sel.matches(&labels(&[("app", "web"), ("tier", "front")])));
        assert!(!sel.matches(&labels(&[
            ("app", "web"),
            ("tier", "front"),
            ("legacy", "")
        ])));
        assert!(Selector::from_label_selector(&json!(null)).is_ok_and(|s| s.matches_nothing()));
        assert!(Selector::from_label_selector(&json!({})).is_ok_and(|s| s.is_empty()));
        assert_eq!(
            Selector::from_label_selector(
                &json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})
            ),
            Err("\"Gt\" is not a valid label selector operator".to_string())
        );
        assert_eq!(
            Selector::from_label_selector(
                &json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})
            ),
            Err(
                "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
                    .to_string()
            )
        );
        let bad_key = Selector::from_label_selector(&json!({"matchLabels": {"bad key": "x"}}));
        assert!(bad_key.is_err_and(|e| {
            e.starts_with("key: Invalid value: \"bad key\": name part must consist")
        }));
    }
}
