//! The query parameters of resource requests, parsed once with upstream's names and errors.

use apimachinery::Status;
use storage::{ResourceVersion, ResourceVersionMatch};

#[derive(Clone, Debug, Default)]
pub struct Query {
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub limit: i64,
    pub continue_token: Option<String>,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub watch: bool,
    pub timeout_seconds: Option<u64>,
    pub allow_watch_bookmarks: bool,
    pub send_initial_events: Option<bool>,
    pub dry_run: bool,
    pub field_validation: FieldValidation,
    pub field_manager: Option<String>,
    pub propagation_policy: Option<String>,
    pub grace_period_seconds: Option<i64>,
    pub pretty: bool,
}

/// `fieldValidation`: what to do with fields the schema does not know.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    /// Upstream's default since v1.27: drop them and say so in a `Warning` header.
    #[default]
    Warn,
    Strict,
}

fn boolean(v: &str) -> bool {
    matches!(v, "true" | "1" | "True" | "TRUE")
}

impl Query {
    pub fn parse(query: &str) -> Result<Query, Status> {
        let mut q = Query::default();
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            match k.as_ref() {
                "resourceVersion" => q.resource_version = Some(v.into_owned()),
                "resourceVersionMatch" => q.resource_version_match = Some(v.into_owned()),
                "limit" => {
                    q.limit = v
                        .parse()
                        .map_err(|_| Status::bad_request(format!("invalid limit {v:?}")))?
                }
                "continue" => q.continue_token = Some(v.into_owned()).filter(|s| !s.is_empty()),
                "labelSelector" => {
                    q.label_selector = Some(v.into_owned()).filter(|s| !s.is_empty())
                }
                "fieldSelector" => {
                    q.field_selector = Some(v.into_owned()).filter(|s| !s.is_empty())
                }
                "watch" => q.watch = boolean(&v),
                "timeoutSeconds" => q.timeout_seconds = v.parse().ok(),
                "allowWatchBookmarks" => q.allow_watch_bookmarks = boolean(&v),
                "sendInitialEvents" => q.send_initial_events = Some(boolean(&v)),
                "dryRun" => {
                    if v != "All" {
                        return Err(Status::bad_request(format!(
                            "Invalid dryRun value: {v:?}, supported values: \"All\""
                        )));
                    }
                    q.dry_run = true;
                }
                "fieldValidation" => {
                    q.field_validation = match v.as_ref() {
                        "Ignore" => FieldValidation::Ignore,
                        "Warn" | "" => FieldValidation::Warn,
                        "Strict" => FieldValidation::Strict,
                        other => {
                            return Err(Status::bad_request(format!(
                                "fieldValidation parameter unsupported: {other}, supported values: Ignore, Warn, Strict"
                            )));
                        }
                    }
                }
                "fieldManager" => q.field_manager = Some(v.into_owned()),
                "propagationPolicy" => q.propagation_policy = Some(v.into_owned()),
                "gracePeriodSeconds" => q.grace_period_seconds = v.parse().ok(),
                "pretty" => q.pretty = boolean(&v),
                _ => {}
            }
        }
        Ok(q)
    }

    /// `resourceVersion` as the storage layer reads it.
    pub fn storage_resource_version(&self) -> Result<ResourceVersion, Status> {
        match self.resource_version.as_deref() {
            None | Some("") => Ok(ResourceVersion::Unset),
            Some("0") => Ok(ResourceVersion::Any),
            Some(v) => v
                .parse::<i64>()
                .ok()
                .filter(|n| *n > 0)
                .map(ResourceVersion::Exact)
                .ok_or_else(|| Status::bad_request(format!("invalid resource version: {v}"))),
        }
    }

    pub fn storage_resource_version_match(&self) -> Result<Option<ResourceVersionMatch>, Status> {
        match self.resource_version_match.as_deref() {
            None | Some("") => Ok(None),
            Some("NotOlderThan") => Ok(Some(ResourceVersionMatch::NotOlderThan)),
            Some("Exact") => Ok(Some(ResourceVersionMatch::Exact)),
            Some(other) => Err(Status::bad_request(format!(
                "invalid resourceVersionMatch: {other}, supported values: Exact, NotOlderThan"
            ))),
        }
    }
}
