//! The one error type of the bench tool.
//!
//! It owns the wording of every fatal error the user sees (the server is unreachable, the
//! credentials were rejected, a flag is out of bounds). It must not decide what is fatal: a failed
//! request inside a measured loop is counted by the scenario, never turned into a `BenchError`.

use std::path::PathBuf;

/// A fatal error: the run stops and `main` exits non-zero with this message.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The kubeconfig could not be read, parsed, or resolved to a server and credentials.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig { path: PathBuf, message: String },

    /// The TLS client configuration could not be built from the kubeconfig's material.
    #[error("TLS setup: {0}")]
    Tls(String),

    /// No HTTP answer came back from the server (connection refused, TLS handshake failure,
    /// DNS failure, timeout).
    #[error("server {server} is unreachable: {message}")]
    Unreachable { server: String, message: String },

    /// The server answered 401 or 403 to a request the scenario needs.
    #[error("server {server} rejected the credentials: {status} on {method} {path}: {message}")]
    Rejected {
        server: String,
        status: u16,
        method: String,
        path: String,
        message: String,
    },

    /// The server answered a setup request (not a measured one) with an unexpected status.
    #[error("{method} {path} answered {status}: {message}")]
    Status {
        method: String,
        path: String,
        status: u16,
        message: String,
    },

    /// A flag or scenario parameter is outside what the tool allows.
    #[error("invalid arguments: {0}")]
    InvalidArgument(String),

    /// The startup scenario could not start, observe or stop the server process.
    #[error("startup: {0}")]
    Startup(String),

    /// A result file could not be read or written.
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },

    /// Something the server sent could not be understood.
    #[error("unexpected answer: {0}")]
    Protocol(String),
}

impl BenchError {
    /// Builds the error for a setup request answered with a non-2xx status, singling out 401 and
    /// 403 so that the user is told plainly that the credentials are the problem.
    pub fn from_status(server: &str, method: &str, path: &str, status: u16, body: &[u8]) -> Self {
        let message = status_message(body);
        if status == 401 || status == 403 {
            BenchError::Rejected {
                server: server.to_string(),
                status,
                method: method.to_string(),
                path: path.to_string(),
                message,
            }
        } else {
            BenchError::Status {
                method: method.to_string(),
                path: path.to_string(),
                status,
                message,
            }
        }
    }
}

/// Extracts the `message` of a `metav1.Status` body, or a short prefix of the raw body when it is
/// not one (a proxy's HTML page, for instance).
pub fn status_message(body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body)
        && let Some(message) = value.get("message").and_then(|m| m.as_str())
    {
        return message.to_string();
    }
    let text = String::from_utf8_lossy(body);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return "(empty body)".to_string();
    }
    trimmed.chars().take(200).collect()
}

/// Joins an error and its chain of sources into one line, because hyper's top-level errors
/// ("client error (Connect)") hide the useful cause ("Connection refused").
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_body_message_is_used() {
        let body = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;
        let err = BenchError::from_status("https://127.0.0.1:6443", "GET", "/api", 401, body);
        assert!(matches!(err, BenchError::Rejected { status: 401, .. }));
        assert_eq!(
            err.to_string(),
            "server https://127.0.0.1:6443 rejected the credentials: 401 on GET /api: Unauthorized"
        );
    }

    #[test]
    fn non_status_body_is_quoted() {
        assert_eq!(status_message(b"  oops \n"), "oops");
        assert_eq!(status_message(b""), "(empty body)");
        let err = BenchError::from_status("s", "POST", "/x", 500, b"boom");
        assert!(matches!(err, BenchError::Status { status: 500, .. }));
    }
}
