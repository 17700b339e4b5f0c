//! Field selectors (upstream's `k8s.io/apimachinery/pkg/fields`): `?fieldSelector=` terms
//! `field=value`, `field==value`, `field!=value`, comma-separated, with `\,` `\=` `\\` escapes
//! in values; matching against a kind's selectable fields, and the checks upstream's field label
//! conversion makes (which fields a kind may be selected by, and its error texts).
//!
//! This module parses and matches only; which fields a kind offers, and how they are read from
//! an object, belong to the kind's strategy.

use std::collections::BTreeMap;
use std::fmt;

use crate::validation::go_quote;

/// The relation of a term (`=` and `==` are the same test, as upstream).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldOperator {
    Equals,
    NotEquals,
}

/// One `field=value` or `field!=value` term, the value unescaped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: String,
    pub operator: FieldOperator,
    pub value: String,
}

impl FieldTerm {
    /// A missing field compares as the empty string, as upstream's `Fields.Get`.
    fn matches_by<'a>(&self, lookup: &impl Fn(&str) -> Option<&'a str>) -> bool {
        let have = lookup(&self.field).unwrap_or("");
        match self.operator {
            FieldOperator::Equals => have == self.value,
            FieldOperator::NotEquals => have != self.value,
        }
    }
}

impl fmt::Display for FieldTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.operator {
            FieldOperator::Equals => "=",
            FieldOperator::NotEquals => "!=",
        };
        write!(f, "{}{op}{}", self.field, escape_value(&self.value))
    }
}

/// A field selector: terms that must all hold. The terms are kept in the order upstream
/// evaluates them (sorted by their raw text), which decides which unknown field an error names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
    nothing: bool,
}

/// upstream's `EscapeValue`: `\` then `,` and `=` prefixed with a backslash.
pub fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// upstream's `UnescapeValue`, with its error texts. An unescaped `,` or `=` is reported by its
/// code point number (`61` for `=`), as Go's `%v` of a rune prints it.
pub fn unescape_value(s: &str) -> Result<String, String> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                _ => {
                    return Err(format!(
                        "invalid field selector: invalid escape sequence: \\{c}"
                    ));
                }
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                ));
            }
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".into());
    }
    Ok(out)
}

/// Splits at commas that are not escaped; escapes stay in the terms.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// The first `!=`, `==` or `=` (in that preference at each position) splits a term; the field
/// part has no escaping.
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, kind) in [
            ("!=", FieldOperator::NotEquals),
            ("==", FieldOperator::Equals),
            ("=", FieldOperator::Equals),
        ] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], kind, value));
            }
        }
    }
    None
}

impl FieldSelector {
    /// The selector that matches everything (the empty string).
    pub fn everything() -> Self {
        Self::default()
    }

    /// The selector that matches nothing.
    pub fn nothing() -> Self {
        Self {
            terms: Vec::new(),
            nothing: true,
        }
    }

    /// `field=value`, as upstream's `OneTermEqualSelector`.
    pub fn one_term_equal(field: &str, value: &str) -> Self {
        Self {
            terms: vec![FieldTerm {
                field: field.into(),
                operator: FieldOperator::Equals,
                value: value.into(),
            }],
            nothing: false,
        }
    }

    /// Parses the string syntax with upstream's errors, e.g.
    /// `invalid selector: 'a'; can't understand 'a'`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = split_terms(s);
        // upstream sorts the raw terms before reading them; the order decides which error a
        // selector with several bad terms reports.
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((field, operator, raw)) = split_term(part) else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            let value = unescape_value(raw)?;
            // upstream's parse runs an identity transform, which turns a term with neither field
            // nor value (`=`) into "everything" and drops it.
            if field.is_empty() && value.is_empty() {
                continue;
            }
            terms.push(FieldTerm {
                field: field.to_string(),
                operator,
                value,
            });
        }
        Ok(Self {
            terms,
            nothing: false,
        })
    }

    pub fn terms(&self) -> &[FieldTerm] {
        &self.terms
    }

    /// True when the selector does not restrict anything (not for `nothing()`).
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.terms.is_empty()
    }

    /// True for `nothing()`.
    pub fn matches_nothing(&self) -> bool {
        self.nothing
    }

    /// Whether an object's selectable fields satisfy every term; a field the map lacks
    /// compares as the empty string.
    pub fn matches(&self, fields: &BTreeMap<String, String>) -> bool {
        self.matches_by(|f| fields.get(f).map(String::as_str))
    }

    /// As `matches`, with fields looked up by `lookup`.
    pub fn matches_by<'a>(&self, lookup: impl Fn(&str) -> Option<&'a str>) -> bool {
        !self.nothing && self.terms.iter().all(|t| t.matches_by(&lookup))
    }

    /// The value an `=` term pins `field` to, if any (the first such term), so that
    /// `metadata.name=x` can become a read of one key.
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.operator == FieldOperator::Equals && t.field == field)
            .map(|t| t.value.as_str())
    }

    /// upstream's `Transform`: maps each term's field and value through `f` in order, stopping
    /// at the first error; terms mapped to an empty field and value are dropped. This is where a
    /// kind's field label conversion runs (e.g. pods' `spec.host` becomes `spec.nodeName`).
    pub fn transform(
        &self,
        f: impl Fn(&str, &str) -> Result<(String, String), String>,
    ) -> Result<Self, String> {
        if self.nothing {
            return Ok(self.clone());
        }
        let mut terms = Vec::with_capacity(self.terms.len());
        for t in &self.terms {
            let (field, value) = f(&t.field, &t.value)?;
            if field.is_empty() && value.is_empty() {
                continue;
            }
            terms.push(FieldTerm {
                field,
                operator: t.operator,
                value,
            });
        }
        Ok(Self {
            terms,
            nothing: false,
        })
    }

    /// The check of upstream's default field label conversion, used by kinds that declare no
    /// fields of their own (`known` is then `metadata.name`, `metadata.namespace`):
    /// `"spec.nope" is not a known field selector: only "metadata.name", "metadata.namespace"`.
    pub fn check_known(&self, known: &[&str]) -> Result<(), String> {
        match self
            .terms
            .iter()
            .find(|t| !known.contains(&t.field.as_str()))
        {
            None => Ok(()),
            Some(t) => {
                let only: Vec<String> = known.iter().map(|k| go_quote(k)).collect();
                Err(format!(
                    "{} is not a known field selector: only {}",
                    go_quote(&t.field),
                    only.join(", ")
                ))
            }
        }
    }

    /// The check of kinds with their own field label conversion (pods, nodes, events,
    /// secrets, services, namespaces, replication controllers, and custom resources, whose
    /// conversion also covers `selectableFields`): `field label not supported: spec.nope`.
    /// `message` replaces that wording where the kind's conversion has its own (`{field}`
    /// stands for the label).
    pub fn check_supported(&self, known: &[&str], message: Option<&str>) -> Result<(), String> {
        match self
            .terms
            .iter()
            .find(|t| !known.contains(&t.field.as_str()))
        {
            None => Ok(()),
            Some(t) => Err(match message {
                Some(m) => m.replace("{field}", &t.field),
                None => format!("field label not supported: {}", t.field),
            }),
        }
    }
}

/// The canonical form: terms joined by `,`, values escaped.
impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{t}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for FieldSelector {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn parsed(s: &str) -> FieldSelector {
        FieldSelector::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    #[test]
    fn parses_and_prints() {
        assert!(parsed("").is_empty());
        assert_eq!(parsed("b=2,a==1,c!=3").to_string(), "a=1,b=2,c!=3");
        assert_eq!(parsed("a=").to_string(), "a=");
        assert!(parsed("=").is_empty());
        assert!(parsed(",,").is_empty());
        assert_eq!(parsed(r"a=x\,y\=z\\w").terms()[0].value, r"x,y=z\w");
        assert_eq!(parsed(r"a=x\,y\=z\\w").to_string(), r"a=x\,y\=z\\w");
        assert_eq!(parsed("a!=b").terms()[0].operator, FieldOperator::NotEquals);
        assert_eq!(parsed("a==b").terms()[0].value, "b");
    }

    #[test]
    fn rejects_with_upstream_messages() {
        assert_eq!(
            FieldSelector::parse("a"),
            Err("invalid selector: 'a'; can't understand 'a'".to_string())
        );
        assert_eq!(
            FieldSelector::parse("x=1,b"),
            Err("invalid selector: 'x=1,b'; can't understand 'b'".to_string())
        );
        assert_eq!(
            FieldSelector::parse("a=b=c"),
            Err("invalid field selector: unescaped character in value: 61".to_string())
        );
        assert_eq!(
            FieldSelector::parse(r"a=b\x"),
            Err(r"invalid field selector: invalid escape sequence: \x".to_string())
        );
        assert_eq!(
            FieldSelector::parse(r"a=b\"),
            Err(r"invalid field selector: invalid escape sequence: \".to_string())
        );
    }

    #[test]
    fn matches_with_missing_fields_as_empty() {
        let f = fields(&[("metadata.name", "a"), ("status.phase", "Running")]);
        assert!(parsed("metadata.name=a,status.phase!=Pending").matches(&f));
        assert!(!parsed("metadata.name=b").matches(&f));
        assert!(parsed("spec.nodeName=").matches(&f));
        assert!(!parsed("spec.nodeName!=").matches(&f));
        assert!(FieldSelector::everything().matches(&f));
        assert!(!FieldSelector::nothing().matches(&f));
    }

    #[test]
    fn exact_match_and_transform() {
        let s = parsed("metadata.namespace=n,metadata.name=x");
        assert_eq!(s.requires_exact_match("metadata.name"), Some("x"));
        assert_eq!(
            parsed("metadata.name!=x").requires_exact_match("metadata.name"),
            None
        );
        let renamed = parsed("spec.host=n1").transform(|f, v| {
            Ok((
                if f == "spec.host" {
                    "spec.nodeName".to_string()
                } else {
                    f.to_string()
                },
                v.to_string(),
            ))
        });
        assert_eq!(
            renamed.map(|s| s.to_string()),
            Ok("spec.nodeName=n1".to_string())
        );
    }

    #[test]
    fn known_field_checks() {
        let s = parsed("spec.nope=x");
        assert_eq!(
            s.check_known(&["metadata.name", "metadata.namespace"]),
            Err("\"spec.nope\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"".to_string())
        );
        assert_eq!(
            s.check_supported(&["metadata.name", "spec.nodeName"], None),
            Err("field label not supported: spec.nope".to_string())
        );
        assert_eq!(
            parsed("metadata.name=a").check_known(&["metadata.name", "metadata.namespace"]),
            Ok(())
        );
        // The first unknown term in upstream's (sorted) order is the one named.
        assert_eq!(
            parsed("z.b=1,a.b=2").check_supported(&[], None),
            Err("field label not supported: a.b".to_string())
        );
    }

    #[test]
    fn recorded_bad_field_selector() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../ironplane/tests/golden/errors/bad-field-selector.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let v: Value = serde_json::from_str(&text).expect("a recording is JSON");
        let err = parsed("spec.nope=x")
            .check_known(&["metadata.name", "metadata.namespace"])
            .err();
        assert_eq!(err.as_deref(), v["body"]["message"].as_str());
    }
}
