//! Static bearer tokens from `--token-auth-file` (upstream's `tokenfile` and `bearertoken`
//! packages): the CSV file format, the `Authorization: Bearer` header, and the token lookup.
//!
//! This module must not log or print tokens, and must not compare them in time that depends on
//! how much of a guess is right: lookups go through a SHA-256 digest and end with a
//! constant-time comparison.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use async_trait::async_trait;

use super::{Authenticator, AuthnError, AuthnRequest, UserInfo, sha256};

/// Why a token file could not be loaded; each message names the file.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("reading token file '{path}': {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("token file '{path}' is not valid UTF-8")]
    NotUtf8 { path: String },
    /// A CSV syntax error, reported with the line and 1-based byte column as Go's
    /// `encoding/csv` reports it.
    #[error("token file '{path}': parse error on line {line}, column {column}: {message}")]
    Syntax {
        path: String,
        line: usize,
        column: usize,
        message: &'static str,
    },
    /// Upstream's message for a record with fewer than three fields.
    #[error(
        "token file '{path}' must have at least 3 columns (token, user name, user uid), found {found}"
    )]
    TooFewColumns { path: String, found: usize },
}

/// Authenticates `Authorization: Bearer <token>` against the tokens of a token file.
///
/// The file has one record per line, `token,user,uid[,"group1,group2"]` (CSV with Go's quoting
/// rules: fields may be quoted, `""` is a quote inside a quoted field). Columns after the fourth
/// are ignored. A record with an empty token is skipped and a repeated token replaces the
/// earlier one, both with a warning, as upstream does.
pub struct TokenFileAuthenticator {
    /// Keyed by the token's SHA-256 digest, so that looking a token up does not compare the
    /// secret itself byte by byte; the stored token is then compared in constant time.
    tokens: HashMap<[u8; 32], (Vec<u8>, UserInfo)>,
}

impl fmt::Debug for TokenFileAuthenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenFileAuthenticator")
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

impl TokenFileAuthenticator {
    /// Loads `--token-auth-file`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, TokenFileError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| TokenFileError::Read {
            path: name.clone(),
            source,
        })?;
        let text =
            String::from_utf8(bytes).map_err(|_| TokenFileError::NotUtf8 { path: name.clone() })?;
        Self::from_csv(&name, &text)
    }

    /// Parses the contents of a token file; `path` only names the file in messages.
    pub fn from_csv(path: &str, text: &str) -> Result<Self, TokenFileError> {
        let records = parse_csv(text).map_err(|e| TokenFileError::Syntax {
            path: path.to_string(),
            line: e.line,
            column: e.column,
            message: e.message,
        })?;
        let mut tokens = HashMap::new();
        for (index, record) in records.into_iter().enumerate() {
            let found = record.len();
            let mut fields = record.into_iter();
            let (Some(token), Some(name), Some(uid)) =
                (fields.next(), fields.next(), fields.next())
            else {
                return Err(TokenFileError::TooFewColumns {
                    path: path.to_string(),
                    found,
                });
            };
            let record_number = index + 1;
            if token.is_empty() {
                tracing::warn!(
                    "empty token has been found in token file '{path}', record number '{record_number}'"
                );
                continue;
            }
            // Upstream splits the fourth column on commas without dropping empty parts, so
            // an empty fourth column gives the group "": kept for compatibility.
            let groups = fields
                .next()
                .map(|g| g.split(',').map(str::to_string).collect())
                .unwrap_or_default();
            let user = UserInfo {
                name,
                uid,
                groups,
                ..UserInfo::default()
            };
            let digest = sha256(token.as_bytes());
            if tokens.insert(digest, (token.into_bytes(), user)).is_some() {
                tracing::warn!(
                    "duplicate token has been found in token file '{path}', record number '{record_number}'"
                );
            }
        }
        Ok(Self { tokens })
    }

    /// The user a token belongs to, if the file has it.
    pub fn lookup(&self, token: &[u8]) -> Option<&UserInfo> {
        let (stored, user) = self.tokens.get(&sha256(token))?;
        constant_time_eq(stored, token).then_some(user)
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

#[async_trait]
impl TokenAuthenticator for TokenFileAuthenticator {
    async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthnError> {
        Ok(self.lookup(token.as_bytes()).cloned())
    }
}

/// One way of recognising the user a bearer token names (upstream `authenticator.Token`):
/// `Ok(None)` when the token is not of its kind, `Err` when it is but is not valid.
#[async_trait]
pub trait TokenAuthenticator: Send + Sync {
    async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthnError>;
}

#[async_trait]
impl<T: TokenAuthenticator + ?Sized> TokenAuthenticator for std::sync::Arc<T> {
    async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthnError> {
        (**self).authenticate_token(token).await
    }
}

/// The `Authorization: Bearer` authenticator over the token authenticators, tried in order
/// (upstream's `bearertoken` over its token union): the first to recognise the token wins; a
/// token that none recognises is refused ("invalid bearer token"), never anonymous.
#[derive(Default)]
pub struct BearerTokenAuthenticator {
    authenticators: Vec<Box<dyn TokenAuthenticator>>,
}

impl BearerTokenAuthenticator {
    pub fn new(authenticators: Vec<Box<dyn TokenAuthenticator>>) -> Self {
        BearerTokenAuthenticator { authenticators }
    }

    /// The user a token names, as a TokenReview asks.
    pub async fn authenticate_token(&self, token: &str) -> Result<UserInfo, AuthnError> {
        let mut errors = Vec::new();
        for authenticator in &self.authenticators {
            match authenticator.authenticate_token(token).await {
                Ok(Some(user)) => return Ok(user),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        Err(match errors.len() {
            0 => AuthnError::InvalidBearerToken,
            1 => errors.remove(0),
            _ => AuthnError::Aggregate(errors),
        })
    }
}

#[async_trait]
impl Authenticator for BearerTokenAuthenticator {
    async fn authenticate(&self, req: &AuthnRequest<'_>) -> Result<Option<UserInfo>, AuthnError> {
        let Some(token) = bearer_token(req.headers) else {
            return Ok(None);
        };
        let Ok(token) = std::str::from_utf8(token) else {
            return Err(AuthnError::InvalidBearerToken);
        };
        self.authenticate_token(token).await.map(Some)
    }
}

/// The token of an `Authorization: Bearer <token>` header, read as upstream's bearer token
/// authenticator reads it: the first `Authorization` header, trimmed; the scheme matched
/// without regard to case; `None` for another scheme or an empty token (including the
/// `Bearer  token` case, which upstream ignores with a warning).
pub fn bearer_token(headers: &http::HeaderMap) -> Option<&[u8]> {
    let value = headers
        .get(http::header::AUTHORIZATION)?
        .as_bytes()
        .trim_ascii();
    let mut parts = value.splitn(3, |b| *b == b' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || token.is_empty() {
        return None;
    }
    Some(token)
}

/// Compares two byte strings in time that depends only on their lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A CSV syntax error: where it is (1-based line and byte column) and what it is, in Go's words.
#[derive(Debug, PartialEq, Eq)]
struct CsvError {
    line: usize,
    column: usize,
    message: &'static str,
}

const BARE_QUOTE: &str = "bare \" in non-quoted-field";
const QUOTE: &str = "extraneous or missing \" in quoted-field";

/// Splits CSV text into records following Go's `encoding/csv` with the options upstream uses
/// (comma separator, no comments, no lazy quotes, any number of fields per record): empty
/// lines are skipped, `\r\n` counts as `\n`, quoted fields may span lines, and a quote inside
/// an unquoted field is an error. Leading spaces are kept, as Go keeps them.
fn parse_csv(text: &str) -> Result<Vec<Vec<String>>, CsvError> {
    let mut lines = Lines {
        rest: text,
        number: 0,
    };
    let mut records = Vec::new();
    while let Some(mut line) = lines.next_line() {
        if line == "\n" {
            continue;
        }
        let mut fields = Vec::new();
        let mut pos = 0;
        loop {
            if !line[pos..].starts_with('"') {
                let rest = &line[pos..];
                let comma = rest.find(',');
                let field = match comma {
                    Some(i) => &rest[..i],
                    None => rest.strip_suffix('\n').unwrap_or(rest),
                };
                if let Some(q) = field.find('"') {
                    return Err(CsvError {
                        line: lines.number,
                        column: pos + q + 1,
                        message: BARE_QUOTE,
                    });
                }
                fields.push(field.to_string());
                match comma {
                    Some(i) => pos += i + 1,
                    None => break,
                }
                continue;
            }
            // A quoted field: runs to the next quote that is not doubled, across lines.
            pos += 1;
            let mut value = String::new();
            let end_of_record = loop {
                let rest = &line[pos..];
                if let Some(i) = rest.find('"') {
                    value.push_str(&rest[..i]);
                    pos += i + 1;
                    let after = &line[pos..];
                    if after.starts_with('"') {
                        value.push('"');
                        pos += 1;
                    } else if after.starts_with(',') {
                        pos += 1;
                        break false;
                    } else if after.is_empty() || after == "\n" {
                        break true;
                    } else {
                        return Err(CsvError {
                            line: lines.number,
                            column: pos + 1,
                            message: QUOTE,
                        });
                    }
                } else {
                    value.push_str(rest);
                    match lines.next_line() {
                        Some(next) => {
                            line = next;
                            pos = 0;
                        }
                        None => {
                            return Err(CsvError {
                                line: lines.number,
                                column: line.len() + 1,
                                message: QUOTE,
                            });
                        }
                    }
                }
            };
            fields.push(value);
            if end_of_record {
                break;
            }
        }
        records.push(fields);
    }
    Ok(records)
}

/// Hands out lines as Go's CSV reader sees them: each ends in `\n` (a `\r\n` ending becomes
/// `\n`), except a last line without a newline, which loses a trailing `\r`.
struct Lines<'a> {
    rest: &'a str,
    number: usize,
}

impl Lines<'_> {
    fn next_line(&mut self) -> Option<String> {
        if self.rest.is_empty() {
            return None;
        }
        self.number += 1;
        let (line, rest) = match self.rest.find('\n') {
            Some(i) => self.rest.split_at(i + 1),
            None => (self.rest, ""),
        };
        self.rest = rest;
        let line = match line.strip_suffix("\r\n") {
            Some(body) => format!("{body}\n"),
            None => line.strip_suffix('\r').unwrap_or(line).to_string(),
        };
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(text: &str) -> Vec<Vec<String>> {
        parse_csv(text).unwrap()
    }

    #[test]
    fn csv_follows_go_rules() {
        assert_eq!(
            csv("a,b,c\n\n\r\nd,\"e,f\",\"g\"\"h\"\r\ni, j ,\"k\nl\"\nlast"),
            vec![
                vec!["a", "b", "c"],
                vec!["d", "e,f", "g\"h"],
                vec!["i", " j ", "k\nl"],
                vec!["last"],
            ]
        );
        assert_eq!(csv("a,b,\n"), vec![vec!["a", "b", ""]]);
        assert_eq!(csv("a,\"\",c\r"), vec![vec!["a", "", "c"]]);
        assert_eq!(
            parse_csv("x\na,b\"c"),
            Err(CsvError {
                line: 2,
                column: 4,
                message: BARE_QUOTE
            })
        );
        assert_eq!(
            parse_csv("\"a\"b,c").unwrap_err().message,
            "extraneous or missing \" in quoted-field"
        );
        assert_eq!(parse_csv("\"open,c\n").unwrap_err().message, QUOTE);
    }

    const FILE: &str = "\
token1,alice,uid-1,\"dev,ops\"
token2,bob,uid-2
,ghost,uid-3
token3,carol,uid-4,,extra
token2,bobby,uid-5,admins
";

    #[test]
    fn token_file_parse_and_lookup() {
        let tokens = TokenFileAuthenticator::from_csv("tokens.csv", FILE).unwrap();
        assert_eq!(tokens.len(), 3, "the empty token is skipped");
        let alice = tokens.lookup(b"token1").unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.uid, "uid-1");
        assert_eq!(alice.groups, vec!["dev", "ops"]);
        let bobby = tokens.lookup(b"token2").unwrap();
        assert_eq!(
            (bobby.name.as_str(), bobby.groups.clone()),
            ("bobby", vec!["admins".to_string()]),
            "a repeated token replaces the earlier record"
        );
        assert_eq!(tokens.lookup(b"token3").unwrap().groups, vec![""]);
        assert!(tokens.lookup(b"token").is_none());
        assert!(tokens.lookup(b"").is_none());
    }

    #[test]
    fn token_file_needs_three_columns() {
        let err =
            TokenFileAuthenticator::from_csv("/etc/tokens.csv", "a,b,c\nonly,two\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "token file '/etc/tokens.csv' must have at least 3 columns (token, user name, user \
             uid), found 2"
        );
        let err = TokenFileAuthenticator::from_csv("t.csv", "a,b\"c,d\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "token file 't.csv': parse error on line 1, column 4: bare \" in non-quoted-field"
        );
    }

    #[test]
    fn token_file_from_disk() {
        let path = std::env::temp_dir().join(format!(
            "ironplane-token-test-{}-{}.csv",
            std::process::id(),
            line!()
        ));
        std::fs::write(&path, FILE).unwrap();
        let loaded = TokenFileAuthenticator::from_file(&path);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(loaded.unwrap().len(), 3);
        let missing = TokenFileAuthenticator::from_file("/nonexistent/tokens.csv").unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with("reading token file '/nonexistent/tokens.csv': ")
        );
    }

    fn headers(authorization: &str) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_str(authorization).unwrap(),
        );
        headers
    }

    #[test]
    fn bearer_header_parsing() {
        assert_eq!(bearer_token(&headers("Bearer abc")), Some(&b"abc"[..]));
        assert_eq!(
            bearer_token(&headers("bEaReR abc extra")),
            Some(&b"abc"[..])
        );
        assert_eq!(bearer_token(&headers("  Bearer abc  ")), Some(&b"abc"[..]));
        assert_eq!(bearer_token(&headers("Bearer  abc")), None);
        assert_eq!(bearer_token(&headers("Bearer")), None);
        assert_eq!(bearer_token(&headers("Basic abc")), None);
        assert_eq!(bearer_token(&http::HeaderMap::new()), None);
    }

    #[tokio::test]
    async fn bearer_tokens_known_to_nobody_are_refused() {
        let tokens = BearerTokenAuthenticator::new(vec![Box::new(
            TokenFileAuthenticator::from_csv("t.csv", FILE).unwrap(),
        )]);
        let authn = |h: http::HeaderMap| {
            let tokens = &tokens;
            async move {
                tokens
                    .authenticate(&AuthnRequest {
                        headers: &h,
                        peer_certificates: None,
                    })
                    .await
            }
        };
        let user = authn(headers("Bearer token1")).await.unwrap().unwrap();
        assert_eq!(user.name, "alice");
        assert!(matches!(
            authn(headers("Bearer nope")).await,
            Err(AuthnError::InvalidBearerToken)
        ));
        assert!(authn(http::HeaderMap::new()).await.unwrap().is_none());
        assert!(
            authn(headers("Basic dXNlcjpwYXNz"))
                .await
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn constant_time_eq_compares() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
