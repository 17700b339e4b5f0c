//! The `priority-and-fairness-config-producer` post-start hook (upstream: pkg/registry/
//! flowcontrol/rest/storage_flowcontrol.go and its `ensurer`): the mandatory and suggested
//! FlowSchemas and PriorityLevelConfigurations of `apiserver::flowcontrol::bootstrap` created
//! when missing and kept up to date, at start and then every minute.
//!
//! Mandatory objects always get the shipped spec back. A suggested object is kept up to date
//! only while its `apf.kubernetes.io/autoupdate-spec` annotation says `true` (or, without a
//! readable annotation, while it was never changed: generation 1); the annotation is then set
//! to what was decided, so that an administrator who edits a suggested object and sets it to
//! `false` keeps the edit. Objects that carry the annotation as `true` but that this version no
//! longer ships are deleted. Writes use upstream's field manager.

use std::sync::Arc;
use std::time::Duration;

use apiserver::endpoints::ApiResources;
use apiserver::flowcontrol::bootstrap::{
    AUTO_UPDATE_ANNOTATION, mandatory_flow_schemas, mandatory_priority_levels,
    suggested_flow_schemas, suggested_priority_levels,
};
use apiserver::registry::{DeleteOptions, RegistryStore, Requester, UpdateOptions};
use serde_json::Value;
use storage::{ListOptions, ResourceVersion};

use crate::controllers::controller_user;

/// The hook's name, as upstream's readiness check shows it.
pub const HOOK: &str = "priority-and-fairness-config-producer";

/// Upstream's field manager of the bootstrap writes.
pub const FIELD_MANAGER: &str = "api-priority-and-fairness-config-producer-v1";

const GROUP: &str = "flowcontrol.apiserver.k8s.io";
const RECONCILE_PERIOD: Duration = Duration::from_secs(60);

/// Go's `strconv.ParseBool`.
fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

fn annotation(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(AUTO_UPDATE_ANNOTATION))
        .and_then(Value::as_str)
}

/// The spec with what Go's encoder leaves out (false, empty lists and maps) left out, so that
/// the shipped spec and the stored Go form compare equal when they mean the same (upstream's
/// `SpecEqualish` compares the defaulted Go values).
fn equalish_form(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| {
                    !matches!(v, Value::Bool(false))
                        && !v.as_array().is_some_and(Vec::is_empty)
                        && !v.as_object().is_some_and(serde_json::Map::is_empty)
                })
                .map(|(k, v)| (k.clone(), equalish_form(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(equalish_form).collect()),
        other => other.clone(),
    }
}

/// What upstream's strategy decides for a stored object: the revised object to write, or
/// `None` when it is up to date. `mandatory` objects always take the shipped spec.
pub fn revise(current: &Value, shipped: &Value, mandatory: bool) -> Option<Value> {
    let parsed = annotation(current).and_then(parse_bool);
    let auto_update = mandatory
        || parsed.unwrap_or_else(|| {
            current
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                == Some(1)
        });
    let update_annotation = parsed != Some(auto_update);
    let spec_changed = auto_update
        && equalish_form(current.get("spec").unwrap_or(&Value::Null))
            != equalish_form(shipped.get("spec").unwrap_or(&Value::Null));
    if !update_annotation && !spec_changed {
        return None;
    }
    let mut revised = current.clone();
    if spec_changed {
        revised["spec"] = shipped["spec"].clone();
    }
    if update_annotation {
        let metadata = &mut revised["metadata"];
        if !metadata.get("annotations").is_some_and(Value::is_object) {
            metadata["annotations"] = Value::Object(Default::default());
        }
        metadata["annotations"][AUTO_UPDATE_ANNOTATION] = Value::String(auto_update.to_string());
    }
    Some(revised)
}

fn store(api: &ApiResources, resource: &str) -> Result<Arc<RegistryStore>, String> {
    api.get(GROUP, "v1", resource)
        .cloned()
        .ok_or_else(|| format!("{GROUP}/v1 {resource} are not served"))
}

fn name_of(v: &Value) -> String {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Creates or revises one shipped object.
async fn ensure_one(
    api: &ApiResources,
    store: &Arc<RegistryStore>,
    shipped: &Value,
    mandatory: bool,
) -> Result<(), String> {
    let user = controller_user();
    let requester = Requester { user: &user };
    let name = name_of(shipped);
    let resource = &store.info.resource;
    loop {
        let current = match store.get("", &name, ResourceVersion::Any).await {
            Ok(o) => o.value().map_err(|e| e.to_string())?,
            Err(s) if s.code == 404 => {
                let write = api.internal_write(store, FIELD_MANAGER);
                match store.create(&requester, "", shipped.clone(), &write).await {
                    Ok(_) => return Ok(()),
                    // Created meanwhile: read it and check it.
                    Err(s) if s.code == 409 => continue,
                    Err(s) => return Err(format!("creating {resource} {name}: {}", s.message)),
                }
            }
            Err(s) => return Err(format!("reading {resource} {name}: {}", s.message)),
        };
        let Some(revised) = revise(&current, shipped, mandatory) else {
            return Ok(());
        };
        tracing::info!(%resource, %name, "updating an API Priority and Fairness bootstrap object");
        let opts = UpdateOptions {
            write: api.internal_write(store, FIELD_MANAGER),
            ..UpdateOptions::default()
        };
        // The resourceVersion read above rides along: a concurrent change is a conflict, and
        // the next round looks again, as upstream's ensurer does.
        let mut updater = |_: Option<&Value>| Ok(revised.clone());
        return match store
            .update(&requester, "", &name, &mut updater, &opts)
            .await
        {
            Ok(_) => Ok(()),
            Err(s) if s.code == 409 => Ok(()),
            Err(s) => Err(format!("updating {resource} {name}: {}", s.message)),
        };
    }
}

/// Deletes the objects that say they are kept up to date but that this version does not ship.
async fn remove_unwanted(store: &Arc<RegistryStore>, shipped: &[Value]) -> Result<(), String> {
    let user = controller_user();
    let requester = Requester { user: &user };
    let listed = store
        .list("", &ListOptions::default())
        .await
        .map_err(|s| s.message)?;
    for object in listed.items {
        let Ok(value) = object.value() else { continue };
        let name = name_of(&value);
        if shipped.iter().any(|s| name_of(s) == name) {
            continue;
        }
        if annotation(&value).and_then(parse_bool) != Some(true) {
            continue;
        }
        match store
            .delete(&requester, "", &name, &DeleteOptions::default())
            .await
        {
            Ok(_) => {}
            Err(s) if s.code == 404 || s.code == 409 => {}
            Err(s) => return Err(format!("deleting {name}: {}", s.message)),
        }
    }
    Ok(())
}

/// One round: suggested objects first, then mandatory ones, then the unwanted removed, in
/// upstream's order.
pub async fn ensure(api: &ApiResources) -> Result<(), String> {
    let levels = store(api, "prioritylevelconfigurations")?;
    let schemas = store(api, "flowschemas")?;
    // Each set's objects side by side (each read and write waits on the store; at a first
    // start they are thirty creates on the way to ready); the sets in upstream's order.
    let ensure_all = |store: &Arc<RegistryStore>, objects: Vec<Value>, mandatory: bool| {
        let store = store.clone();
        async move {
            let each = objects
                .iter()
                .map(|object| ensure_one(api, &store, object, mandatory));
            futures_util::future::try_join_all(each).await.map(drop)
        }
    };
    ensure_all(&levels, suggested_priority_levels(), false).await?;
    ensure_all(&schemas, suggested_flow_schemas(), false).await?;
    ensure_all(&levels, mandatory_priority_levels(), true).await?;
    ensure_all(&schemas, mandatory_flow_schemas(), true).await?;
    let all_schemas: Vec<Value> = mandatory_flow_schemas()
        .into_iter()
        .chain(suggested_flow_schemas())
        .collect();
    remove_unwanted(&schemas, &all_schemas).await?;
    let all_levels: Vec<Value> = mandatory_priority_levels()
        .into_iter()
        .chain(suggested_priority_levels())
        .collect();
    remove_unwanted(&levels, &all_levels).await
}

/// Runs the hook: a round every second until one succeeds (then `ready`), then a round every
/// minute until the process ends.
pub async fn run(api: Arc<ApiResources>, ready: impl FnOnce() + Send) {
    while let Err(e) = ensure(&api).await {
        tracing::warn!(error = %e, "APF bootstrap ensurer ran into an error; retrying");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    ready();
    loop {
        tokio::time::sleep(RECONCILE_PERIOD).await;
        if let Err(e) = ensure(&api).await {
            tracing::warn!(error = %e, "APF bootstrap ensurer ran into an error; retrying later");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shipped() -> Value {
        suggested_priority_levels().remove(0)
    }

    #[test]
    fn suggested_objects_follow_their_annotation() {
        let mut current = shipped();
        current["metadata"]["generation"] = json!(2);
        current["spec"]["limited"]["nominalConcurrencyShares"] = json!(99);
        // Annotated true: the spec comes back.
        let revised = revise(&current, &shipped(), false).expect("revised");
        assert_eq!(revised["spec"], shipped()["spec"]);
        // Annotated false: left alone.
        current["metadata"]["annotations"][AUTO_UPDATE_ANNOTATION] = json!("false");
        assert!(revise(&current, &shipped(), false).is_none());
        // ...unless mandatory, which also sets the annotation back.
        let revised = revise(&current, &shipped(), true).expect("revised");
        assert_eq!(
            revised["metadata"]["annotations"][AUTO_UPDATE_ANNOTATION],
            "true"
        );
        assert_eq!(revised["spec"], shipped()["spec"]);
        // Without the annotation, an edited object (generation 2) is kept and marked false;
        // a never-edited one is kept up to date and marked true.
        current["metadata"]["annotations"] = json!({});
        let revised = revise(&current, &shipped(), false).expect("annotated");
        assert_eq!(
            (
                revised["metadata"]["annotations"][AUTO_UPDATE_ANNOTATION].as_str(),
                revised["spec"]["limited"]["nominalConcurrencyShares"].as_i64()
            ),
            (Some("false"), Some(99))
        );
        current["metadata"]["generation"] = json!(1);
        let revised = revise(&current, &shipped(), false).expect("revised");
        assert_eq!(
            revised["metadata"]["annotations"][AUTO_UPDATE_ANNOTATION],
            "true"
        );
        assert_eq!(revised["spec"], shipped()["spec"]);
    }

    #[test]
    fn an_up_to_date_object_in_gos_form_is_not_rewritten() {
        // The stored form drops false and empty fields.
        let mut stored = suggested_flow_schemas().remove(1);
        stored["metadata"]["generation"] = json!(1);
        assert!(revise(&stored, &suggested_flow_schemas()[1], false).is_none());
        stored["spec"]["rules"][0]["resourceRules"][1]["clusterScope"] = json!(false);
        assert!(revise(&stored, &suggested_flow_schemas()[1], false).is_none());
        assert_eq!(parse_bool("T"), Some(true));
        assert_eq!(parse_bool("yes"), None);
    }
}
