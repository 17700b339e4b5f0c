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
    /// As sent; `0` means the server's default, as upstream reads it.
    pub timeout_seconds: Option<i64>,
    pub allow_watch_bookmarks: bool,
    pub send_initial_events: Option<bool>,
    /// `dryRun` is `All`; the values as sent are in `dry_run_values`, checked by
    /// [`Query::validate_write_options`].
    pub dry_run: bool,
    pub dry_run_values: Vec<String>,
    pub field_validation: FieldValidation,
    /// `fieldValidation` as sent, when it is none of upstream's values.
    pub field_validation_unsupported: Option<String>,
    /// `force`, present at all (upstream forbids it on every patch but apply).
    pub force: Option<bool>,
    pub field_manager: Option<String>,
    pub propagation_policy: Option<String>,
    pub grace_period_seconds: Option<i64>,
    /// `ignoreStoreReadErrorWithClusterBreakingPotential`, of DeleteOptions.
    pub ignore_store_read_error: bool,
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

/// A boolean query parameter as upstream's parameter codec reads it: present means true unless
/// it is `0` or `false` (any case); an empty value is true.
pub(crate) fn boolean(v: &str) -> bool {
    !(v == "0" || v.eq_ignore_ascii_case("false"))
}

/// An integer query parameter, refused with the message Go's `strconv.ParseInt` gives, which is
/// what upstream's parameter codec answers (400).
fn integer(v: &str) -> Result<i64, Status> {
    v.parse::<i64>().map_err(|e| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                "value out of range"
            }
            _ => "invalid syntax",
        };
        Status::bad_request(format!(
            "strconv.ParseInt: parsing {}: {why}",
            serde_json::Value::from(v)
        ))
    })
}

impl Query {
    pub fn parse(query: &str) -> Result<Query, Status> {
        let mut q = Query::default();
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            match k.as_ref() {
                "resourceVersion" => q.resource_version = Some(v.into_owned()),
                "resourceVersionMatch" => q.resource_version_match = Some(v.into_owned()),
                "limit" => q.limit = integer(&v)?,
                "continue" => q.continue_token = Some(v.into_owned()).filter(|s| !s.is_empty()),
                "labelSelector" => {
                    q.label_selector = Some(v.into_owned()).filter(|s| !s.is_empty())
                }
                "fieldSelector" => {
                    q.field_selector = Some(v.into_owned()).filter(|s| !s.is_empty())
                }
                "watch" => q.watch = boolean(&v),
                "timeoutSeconds" => q.timeout_seconds = Some(integer(&v)?),
                "allowWatchBookmarks" => q.allow_watch_bookmarks = boolean(&v),
                "sendInitialEvents" => q.send_initial_events = Some(boolean(&v)),
                "dryRun" => {
                    q.dry_run = q.dry_run || v == "All";
                    q.dry_run_values.push(v.into_owned());
                }
                "fieldValidation" => match v.as_ref() {
                    "Ignore" => q.field_validation = FieldValidation::Ignore,
                    "Warn" | "" => q.field_validation = FieldValidation::Warn,
                    "Strict" => q.field_validation = FieldValidation::Strict,
                    other => q.field_validation_unsupported = Some(other.to_string()),
                },
                "force" => q.force = Some(boolean(&v)),
                "fieldManager" => q.field_manager = Some(v.into_owned()),
                "propagationPolicy" => q.propagation_policy = Some(v.into_owned()),
                "gracePeriodSeconds" => q.grace_period_seconds = Some(integer(&v)?),
                "pretty" => q.pretty = boolean(&v),
                "ignoreStoreReadErrorWithClusterBreakingPotential" => {
                    q.ignore_store_read_error = boolean(&v)
                }
                _ => {}
            }
        }
        Ok(q)
    }

    /// Upstream's `ValidateListOptions` for a list (`watch` false) or a watch: the combinations
    /// of `resourceVersionMatch`, `resourceVersion`, `continue` and `sendInitialEvents` it
    /// refuses, all at once, as a 422 on `ListOptions.meta.k8s.io`.
    pub fn validate_list_options(&self, watch: bool) -> Result<(), Status> {
        use apimachinery::validation::{FieldError, FieldPath, invalid_status};
        let path = FieldPath::new("resourceVersionMatch");
        let rv = self.resource_version.as_deref().unwrap_or("");
        let has_continue = self.continue_token.is_some();
        let mut errs = Vec::new();
        let rv_match = self
            .resource_version_match
            .as_deref()
            .filter(|m| !m.is_empty());
        if watch {
            if self.send_initial_events.is_some() && rv_match != Some("NotOlderThan") {
                errs.push(FieldError::forbidden(
                    &path,
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if let Some(m) = rv_match {
                if self.send_initial_events.is_none() {
                    errs.push(FieldError::forbidden(
                        &path,
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if m != "NotOlderThan" {
                    errs.push(FieldError::not_supported(&path, m, &["NotOlderThan"]));
                }
                if has_continue {
                    errs.push(FieldError::forbidden(
                        &path,
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
            }
        } else {
            if let Some(m) = rv_match {
                if rv.is_empty() {
                    errs.push(FieldError::forbidden(
                        &path,
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
                if has_continue {
                    errs.push(FieldError::forbidden(
                        &path,
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
                if m != "Exact" && m != "NotOlderThan" {
                    errs.push(FieldError::not_supported(
                        &path,
                        m,
                        &["Exact", "NotOlderThan", ""],
                    ));
                }
                if m == "Exact" && rv == "0" {
                    errs.push(FieldError::forbidden(
                        &path,
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    ));
                }
            }
            if self.send_initial_events.is_some() {
                errs.push(FieldError::forbidden(
                    &FieldPath::new("sendInitialEvents"),
                    "sendInitialEvents is forbidden for list",
                ));
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(invalid_status("meta.k8s.io", "ListOptions", "", &errs))
        }
    }

    /// Upstream's `ValidateCreateOptions`, `ValidateUpdateOptions` and `ValidatePatchOptions`
    /// (`kind` names which, `apply` whether the patch is server-side apply): `fieldManager` at
    /// most 128 printable bytes, `dryRun` only `All`, a known `fieldValidation`, and `force` only
    /// with apply. All errors at once, as a 422 on `<kind>.meta.k8s.io`.
    pub fn validate_write_options(&self, kind: &str, apply: bool) -> Result<(), Status> {
        use apimachinery::validation::{FieldError, FieldPath, invalid_status};
        let mut errs = Vec::new();
        if kind == "PatchOptions" && !apply && self.force.is_some() {
            errs.push(FieldError::forbidden(
                &FieldPath::new("force"),
                "may not be specified for non-apply patch",
            ));
        }
        if kind == "PatchOptions" && apply && self.field_manager.as_deref().unwrap_or("").is_empty()
        {
            // kubectl sends `kubectl`; controllers must name themselves.
            errs.push(FieldError::required(
                &FieldPath::new("fieldManager"),
                "is required for apply patch",
            ));
        }
        if let Some(manager) = &self.field_manager {
            errs.extend(apimachinery::validation::validate_field_manager(
                manager,
                &FieldPath::new("fieldManager"),
            ));
        }
        errs.extend(self.validate_dry_run());
        if let Some(other) = &self.field_validation_unsupported {
            errs.push(FieldError::not_supported(
                &FieldPath::new("fieldValidation"),
                other.as_str(),
                &["", "Ignore", "Strict", "Warn"],
            ));
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(invalid_status("meta.k8s.io", kind, "", &errs))
        }
    }

    /// Upstream's `ValidateDryRun` of the query's `dryRun` values (see [`dry_run_error`]).
    pub fn validate_dry_run(&self) -> Option<apimachinery::validation::FieldError> {
        dry_run_error(&self.dry_run_values)
    }

    /// `resourceVersion` as the storage layer reads it, or the field error upstream's storage
    /// gives for one that is not an unsigned integer (`ParseResourceVersion`, with Go's
    /// `strconv.ParseUint` words).
    fn parsed_resource_version(&self) -> Result<ResourceVersion, String> {
        let v = match self.resource_version.as_deref() {
            None | Some("") => return Ok(ResourceVersion::Unset),
            Some(v) => v,
        };
        let why = if !v.bytes().all(|b| b.is_ascii_digit()) {
            "invalid syntax"
        } else {
            match v.parse::<i64>() {
                Ok(0) => return Ok(ResourceVersion::Any),
                Ok(n) => return Ok(ResourceVersion::Exact(n)),
                Err(_) => "value out of range",
            }
        };
        Err(format!(
            "resourceVersion: Invalid value: {v:?}: strconv.ParseUint: parsing {v:?}: {why}"
        ))
    }

    /// `resourceVersion` of a LIST: one storage cannot read is a 400, as upstream's list
    /// handler answers it.
    pub fn list_resource_version(&self) -> Result<ResourceVersion, Status> {
        self.parsed_resource_version()
            .map_err(|why| Status::bad_request(format!("invalid resource version: {why}")))
    }

    /// `resourceVersion` of a GET or a watch: one storage cannot read is passed on as upstream's
    /// handlers pass storage's error, a 500 without a reason.
    pub fn read_resource_version(&self) -> Result<ResourceVersion, Status> {
        self.parsed_resource_version().map_err(Status::unknown)
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

/// Upstream's `ValidateDryRun`: every value must be `All`. The bad value is the whole list,
/// printed as its JSON (as `field.Error` prints a `[]string`).
pub(crate) fn dry_run_error(values: &[String]) -> Option<apimachinery::validation::FieldError> {
    use apimachinery::validation::{FieldError, FieldPath};
    if values.iter().all(|v| v == "All") {
        return None;
    }
    Some(FieldError::not_supported_rendered(
        &FieldPath::new("dryRun"),
        &serde_json::to_string(values).unwrap_or_default(),
        &["All"],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(query: &str) -> String {
        Query::parse(query)
            .err()
            .map(|s| s.message)
            .unwrap_or_default()
    }

    #[test]
    fn integers_are_refused_with_go_parse_errors() {
        assert_eq!(
            message("timeoutSeconds=abc"),
            r#"strconv.ParseInt: parsing "abc": invalid syntax"#
        );
        assert_eq!(
            message("gracePeriodSeconds=1.5"),
            r#"strconv.ParseInt: parsing "1.5": invalid syntax"#
        );
        assert_eq!(
            message("limit=99999999999999999999"),
            r#"strconv.ParseInt: parsing "99999999999999999999": value out of range"#
        );
        let q = Query::parse("timeoutSeconds=0&gracePeriodSeconds=-1&limit=5").expect("valid");
        assert_eq!(
            (q.timeout_seconds, q.grace_period_seconds, q.limit),
            (Some(0), Some(-1), 5)
        );
    }

    #[test]
    fn resource_versions_storage_cannot_read_are_answered_per_verb() {
        let q = |rv: &str| Query::parse(&format!("resourceVersion={rv}")).expect("parses");
        let list = q("abc").list_resource_version().expect_err("refused");
        assert_eq!(
            (list.code, list.message.as_str()),
            (
                400,
                r#"invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax"#
            )
        );
        let read = q("-1").read_resource_version().expect_err("refused");
        assert_eq!(
            (read.code, read.message.as_str()),
            (
                500,
                r#"resourceVersion: Invalid value: "-1": strconv.ParseUint: parsing "-1": invalid syntax"#
            )
        );
        let big = q("99999999999999999999999")
            .list_resource_version()
            .expect_err("refused");
        assert!(
            big.message.ends_with("value out of range"),
            "{}",
            big.message
        );
        assert_eq!(
            q("0").read_resource_version().ok(),
            Some(ResourceVersion::Any)
        );
        assert_eq!(
            q("7").list_resource_version().ok(),
            Some(ResourceVersion::Exact(7))
        );
    }

    fn write_error(query: &str, kind: &str) -> String {
        let q = Query::parse(query).expect("parses");
        q.validate_write_options(kind, false)
            .err()
            .map(|s| s.message)
            .unwrap_or_default()
    }

    #[test]
    fn write_options_are_validated_as_upstream() {
        assert_eq!(
            write_error("dryRun=Bogus", "CreateOptions"),
            r#"CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Bogus"]: supported values: "All""#
        );
        assert_eq!(
            write_error("fieldValidation=Bogus", "UpdateOptions"),
            r#"UpdateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Bogus": supported values: "", "Ignore", "Strict", "Warn""#
        );
        assert_eq!(
            write_error("force=false", "PatchOptions"),
            r#"PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch"#
        );
        assert_eq!(
            write_error(
                &format!("fieldManager={}", "m".repeat(129)),
                "CreateOptions"
            ),
            r#"CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 bytes"#
        );
        assert_eq!(
            write_error(
                "dryRun=All&fieldManager=kubectl&fieldValidation=Strict",
                "CreateOptions"
            ),
            ""
        );
    }

    fn invalid(query: &str, watch: bool) -> (u16, String) {
        let q = Query::parse(query).expect("parses");
        match q.validate_list_options(watch) {
            Ok(()) => (200, String::new()),
            Err(s) => (s.code, s.message),
        }
    }

    #[test]
    fn list_options_are_validated_as_upstream() {
        assert_eq!(
            invalid("resourceVersionMatch=Exact&resourceVersion=0", false),
            (
                422,
                r#"ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0""#
                    .to_string()
            )
        );
        assert_eq!(
            invalid("resourceVersionMatch=NotOlderThan", false),
            (
                422,
                r#"ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"#
                    .to_string()
            )
        );
        assert_eq!(
            invalid("resourceVersionMatch=Newest&resourceVersion=5", false),
            (
                422,
                r#"ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", """#
                    .to_string()
            )
        );
        assert_eq!(
            invalid("resourceVersionMatch=Exact&resourceVersion=5", false).0,
            200
        );
        assert_eq!(invalid("sendInitialEvents=true", false).0, 422);
        assert_eq!(
            invalid(
                "sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan",
                true
            )
            .0,
            200
        );
        // v1.36 no longer asks for bookmarks with sendInitialEvents (checked against a real
        // kube-apiserver v1.36.2): without them, no bookmark ends the initial events.
        assert_eq!(
            invalid(
                "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
                true
            )
            .0,
            200
        );
        let (code, message) = invalid("sendInitialEvents=true", true);
        assert_eq!(code, 422);
        assert_eq!(
            message,
            r#"ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"#
        );
        assert_eq!(invalid("resourceVersionMatch=NotOlderThan", true).0, 422);
    }
}
