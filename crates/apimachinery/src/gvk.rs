//! Group, version, kind and resource names, and their textual forms (`apps/v1`, `deployments.apps`).

use std::fmt;

/// An API group and version; the core group is the empty string (`v1`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersion {
    pub group: String,
    pub version: String,
}

impl GroupVersion {
    pub fn new(group: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
        }
    }

    /// Parses an `apiVersion` string: `v1` or `apps/v1`.
    pub fn parse(api_version: &str) -> Option<Self> {
        match api_version.split_once('/') {
            None if !api_version.is_empty() => Some(Self::new("", api_version)),
            Some((g, v)) if !g.is_empty() && !v.is_empty() && !v.contains('/') => {
                Some(Self::new(g, v))
            }
            _ => None,
        }
    }

    /// The `apiVersion` form: `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn with_kind(&self, kind: impl Into<String>) -> GroupVersionKind {
        GroupVersionKind {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: kind.into(),
        }
    }
}

impl fmt::Display for GroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.api_version())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionKind {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl GroupVersionKind {
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    pub fn group_version(&self) -> GroupVersion {
        GroupVersion::new(self.group.clone(), self.version.clone())
    }

    pub fn api_version(&self) -> String {
        self.group_version().api_version()
    }
}

/// An `apiVersion` and kind as Go prints a `schema.GroupVersionKind` in messages:
/// `apps/v1, Kind=Deployment`, `/v1, Kind=ConfigMap` for the core group.
pub fn go_gvk_string(api_version: &str, kind: &str) -> String {
    match api_version.split_once('/') {
        Some((group, version)) => format!("{group}/{version}, Kind={kind}"),
        None => format!("/{api_version}, Kind={kind}"),
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionResource {
    pub group: String,
    pub version: String,
    pub resource: String,
}

impl GroupVersionResource {
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        resource: impl Into<String>,
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }

    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(self.group.clone(), self.resource.clone())
    }
}

/// A resource within a group; its display form is upstream's qualified name (`deployments.apps`,
/// `configmaps`), the form that error messages use.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_api_versions() {
        assert_eq!(GroupVersion::parse("v1"), Some(GroupVersion::new("", "v1")));
        assert_eq!(
            GroupVersion::parse("apps/v1"),
            Some(GroupVersion::new("apps", "v1"))
        );
        assert_eq!(GroupVersion::parse(""), None);
        assert_eq!(GroupVersion::parse("a/b/c"), None);
        assert_eq!(GroupVersion::parse("/v1"), None);
    }

    #[test]
    fn qualified_resource_names() {
        assert_eq!(
            GroupResource::new("apps", "deployments").to_string(),
            "deployments.apps"
        );
        assert_eq!(
            GroupResource::new("", "configmaps").to_string(),
            "configmaps"
        );
    }
}
