//! LIST of a collection, with label and field selectors, paging and resourceVersion semantics.

use std::sync::Arc;

use apimachinery::Status;
use apimachinery::fields::FieldSelector;
use apimachinery::labels::Selector;
use storage::{ListOptions, Predicate};

use super::get::accept;
use super::negotiation::{View, negotiate};
use super::query::Query;
use super::{ApiRequest, ApiResources, Response, response};
use crate::registry::{RegistryStore, ResourceInfo};

const LIST_VIEWS: &[View] = &[
    View::Object,
    View::Table,
    View::PartialObjectMetadataList,
    View::PartialObjectMetadata,
];

/// Builds the storage predicate from `labelSelector` and `fieldSelector`, rejecting fields the
/// kind cannot select on with upstream's message.
pub fn predicate(info: &ResourceInfo, q: &Query) -> Result<Predicate, Status> {
    let labels = match q.label_selector.as_deref() {
        Some(s) => Some(Selector::parse(s).map_err(Status::bad_request)?),
        None => None,
    };
    let fields = match q.field_selector.as_deref() {
        Some(s) => {
            let f = FieldSelector::parse(s).map_err(Status::bad_request)?;
            let known = info.field_selector_names();
            // Upstream's kinds with field selectors of their own (pods, events, secrets, ...)
            // reject an unknown field with another message than the generic default, and so
            // do custom resources (the CRD handler's conversion), selectable fields or not.
            let checked = if info.selectable_fields.is_empty() && !info.unstructured {
                f.check_known(&known)
            } else {
                f.check_supported(&known, info.field_label_message.as_deref())
            };
            checked.map_err(Status::bad_request)?;
            // Selectors read the stored object's attributes, under their indexed names.
            let f = f
                .transform(|field, value| Ok((info.field_index(field), value.to_string())))
                .map_err(Status::bad_request)?;
            Some(f)
        }
        None => None,
    };
    let labels = labels.filter(|l| !l.is_empty());
    let fields = fields.filter(|f| !f.is_empty());
    if labels.is_none() && fields.is_none() {
        return Ok(None);
    }
    Ok(Some(Arc::new(move |attrs: &storage::Attrs| {
        labels.as_ref().is_none_or(|l| l.matches(&attrs.labels))
            && fields.as_ref().is_none_or(|f| f.matches(&attrs.fields))
    })))
}

pub async fn handle(
    api: &ApiResources,
    store: &Arc<RegistryStore>,
    req: ApiRequest,
) -> Result<Response, Status> {
    let n = negotiate(accept(&req), LIST_VIEWS)?.with_table_options(&req.query)?;
    let q = Query::parse(&req.query)?;
    q.validate_list_options(false)?;
    let opts = ListOptions {
        resource_version: q.list_resource_version()?,
        resource_version_match: q.storage_resource_version_match()?,
        limit: q.limit.max(0),
        continue_token: q.continue_token.clone(),
        predicate: predicate(&store.info, &q)?,
    };
    let result = store.list(&req.info.namespace, &opts).await?;
    let meta = response::list_metadata(
        result.resource_version,
        result.continue_token.as_deref(),
        result.remaining_item_count,
    );
    response::list(api, &store.info, result.items, meta, n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::SelectableField;

    fn query(field_selector: &str) -> Query {
        Query::parse(&format!("fieldSelector={field_selector}")).unwrap()
    }

    #[test]
    fn unknown_field_selectors_get_the_kinds_message() {
        let plain = ResourceInfo {
            resource: "configmaps".into(),
            ..Default::default()
        };
        let err = predicate(&plain, &query("spec.nope%3Dx")).err().unwrap();
        assert_eq!(
            err.message,
            "\"spec.nope\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        let pods = ResourceInfo {
            resource: "pods".into(),
            selectable_fields: vec![SelectableField {
                name: "spec.nodeName".into(),
                path: vec!["spec".into(), "nodeName".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        let err = predicate(&pods, &query("spec.nope%3Dx")).err().unwrap();
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "field label not supported: spec.nope")
        );
        assert!(
            predicate(&pods, &query("spec.nodeName%3Dn1"))
                .unwrap()
                .is_some()
        );
        // A custom resource without selectable fields (checked against kube-apiserver v1.36.2).
        let widgets = ResourceInfo {
            resource: "widgets".into(),
            unstructured: true,
            ..Default::default()
        };
        let err = predicate(&widgets, &query("spec.color%3Dred"))
            .err()
            .unwrap();
        assert_eq!(err.message, "field label not supported: spec.color");
        assert!(
            predicate(&widgets, &query("metadata.name%3Dw"))
                .unwrap()
                .is_some()
        );
    }
}
