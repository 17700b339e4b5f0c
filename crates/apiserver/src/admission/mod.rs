//! The admission framework: mutating plugins run first, in order, then the object is defaulted
//! and validated by its strategy, then validating plugins run (upstream:
//! k8s.io/apiserver/pkg/admission). Plugins that need to know kinds (e.g. namespace lifecycle)
//! live with the kinds, in crate `ironplane-kube`; webhooks will live here.

use std::sync::Arc;

use apimachinery::Status;
use async_trait::async_trait;
use serde_json::Value;

use crate::authentication::UserInfo;
use crate::registry::ResourceInfo;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// What an admission plugin sees of a request.
pub struct Attributes<'a> {
    pub operation: Operation,
    pub resource: &'a ResourceInfo,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub user: &'a UserInfo,
    pub dry_run: bool,
    pub old_object: Option<&'a Value>,
}

#[async_trait]
pub trait MutatingPlugin: Send + Sync {
    fn name(&self) -> &'static str;
    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status>;
}

#[async_trait]
pub trait ValidatingPlugin: Send + Sync {
    fn name(&self) -> &'static str;
    /// `obj` is the new object for create and update, the stored one for delete.
    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status>;
}

/// The configured plugins, in the order they run.
#[derive(Clone, Default)]
pub struct Admission {
    mutating: Vec<Arc<dyn MutatingPlugin>>,
    validating: Vec<Arc<dyn ValidatingPlugin>>,
}

impl Admission {
    pub fn with_mutating(mut self, p: Arc<dyn MutatingPlugin>) -> Self {
        self.mutating.push(p);
        self
    }

    pub fn with_validating(mut self, p: Arc<dyn ValidatingPlugin>) -> Self {
        self.validating.push(p);
        self
    }

    pub async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<(), Status> {
        for p in &self.mutating {
            p.admit(attrs, obj).await?;
        }
        Ok(())
    }

    pub async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), Status> {
        for p in &self.validating {
            p.validate(attrs, obj).await?;
        }
        Ok(())
    }
}
