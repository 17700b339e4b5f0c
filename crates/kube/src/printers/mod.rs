//! Server-side Table printing for the built-in kinds: what `kubectl get` shows comes from the
//! server's `meta.k8s.io/v1` Table, whose column definitions and row cells this module owns.
//!
//! Column definitions are data: those kube-apiserver v1.36 answered for every listable built-in
//! resource, recorded into `data/tables/columns.json` and loaded once. Row cells come from one print
//! function per resource, registered in `PRINTERS`; each fills every column (tables are always
//! generated wide on the server, as upstream's `TableConvertor` does) with the same words and JSON
//! types as upstream's `pkg/printers/internalversion/printers.go`. A resource without a print function
//! gets upstream's default table (`k8s.io/apiserver/pkg/registry/rest/table.go`): Name and Created At.
//!
//! This module only reads objects. It does not build the Table envelope (list metadata, row
//! `object`, `includeObject`), filter columns, or know about custom resources' printer columns.

use std::collections::HashMap;
use std::sync::LazyLock;

use apimachinery::object::ObjectExt;
use chrono::{DateTime, Utc};
use serde_json::Value;

/// Builds a row from cell expressions, each turned into JSON as Go's encoder would write the
/// printer's value (`&str`/`String` → string, `i64` → number, `bool` → boolean).
macro_rules! cells {
    ($($cell:expr),* $(,)?) => {
        vec![$(::serde_json::Value::from($cell)),*]
    };
}

mod admission;
mod apps;
mod autoscaling;
mod batch;
mod cluster;
mod core;
mod dra;
mod events;
mod field;
mod format;
mod networking;
mod pod;
mod storage;

pub use format::human_duration;

/// A print function: the cells of one object's row, ages measured up to `now`.
pub type PrintRow = fn(&Value, DateTime<Utc>) -> Vec<Value>;

/// The print function of every resource whose table is not the default one, keyed
/// `group/version/resource` (the core group is empty). A resource served in several versions
/// lists each version, reading that version's fields.
static PRINTERS: &[(&str, PrintRow)] = &[
    // core
    ("/v1/componentstatuses", core::component_status),
    ("/v1/configmaps", core::config_map),
    ("/v1/endpoints", core::endpoints),
    ("/v1/events", events::core_event),
    ("/v1/namespaces", core::namespace),
    ("/v1/nodes", core::node),
    ("/v1/persistentvolumeclaims", core::persistent_volume_claim),
    ("/v1/persistentvolumes", core::persistent_volume),
    ("/v1/pods", pod::pod),
    ("/v1/podtemplates", core::pod_template),
    ("/v1/replicationcontrollers", core::replication_controller),
    ("/v1/resourcequotas", core::resource_quota),
    ("/v1/secrets", core::secret),
    ("/v1/serviceaccounts", core::service_account),
    ("/v1/services", core::service),
    // admissionregistration.k8s.io
    (
        "admissionregistration.k8s.io/v1/mutatingadmissionpolicies",
        admission::mutating_admission_policy,
    ),
    (
        "admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings",
        admission::policy_binding,
    ),
    (
        "admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        admission::webhook_configuration,
    ),
    (
        "admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        admission::validating_admission_policy,
    ),
    (
        "admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        admission::policy_binding,
    ),
    (
        "admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        admission::webhook_configuration,
    ),
    // apiregistration.k8s.io
    (
        "apiregistration.k8s.io/v1/apiservices",
        cluster::api_service,
    ),
    // apps
    ("apps/v1/controllerrevisions", apps::controller_revision),
    ("apps/v1/daemonsets", apps::daemon_set),
    ("apps/v1/deployments", apps::deployment),
    ("apps/v1/replicasets", apps::replica_set),
    ("apps/v1/statefulsets", apps::stateful_set),
    // autoscaling
    (
        "autoscaling/v1/horizontalpodautoscalers",
        autoscaling::horizontal_pod_autoscaler_v1,
    ),
    (
        "autoscaling/v2/horizontalpodautoscalers",
        autoscaling::horizontal_pod_autoscaler_v2,
    ),
    // batch
    ("batch/v1/cronjobs", batch::cron_job),
    ("batch/v1/jobs", batch::job),
    // certificates.k8s.io
    (
        "certificates.k8s.io/v1/certificatesigningrequests",
        cluster::certificate_signing_request,
    ),
    // coordination.k8s.io
    ("coordination.k8s.io/v1/leases", cluster::lease),
    // discovery.k8s.io
    (
        "discovery.k8s.io/v1/endpointslices",
        networking::endpoint_slice,
    ),
    // events.k8s.io
    ("events.k8s.io/v1/events", events::events_v1_event),
    // flowcontrol.apiserver.k8s.io
    (
        "flowcontrol.apiserver.k8s.io/v1/flowschemas",
        cluster::flow_schema,
    ),
    (
        "flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
        cluster::priority_level_configuration,
    ),
    // networking.k8s.io
    (
        "networking.k8s.io/v1/ingressclasses",
        networking::ingress_class,
    ),
    ("networking.k8s.io/v1/ingresses", networking::ingress),
    ("networking.k8s.io/v1/ipaddresses", networking::ip_address),
    (
        "networking.k8s.io/v1/networkpolicies",
        networking::network_policy,
    ),
    (
        "networking.k8s.io/v1/servicecidrs",
        networking::service_cidr,
    ),
    // node.k8s.io
    ("node.k8s.io/v1/runtimeclasses", cluster::runtime_class),
    // policy
    (
        "policy/v1/poddisruptionbudgets",
        cluster::pod_disruption_budget,
    ),
    // rbac.authorization.k8s.io (roles and cluster roles keep the default table)
    (
        "rbac.authorization.k8s.io/v1/clusterrolebindings",
        cluster::role_binding,
    ),
    (
        "rbac.authorization.k8s.io/v1/rolebindings",
        cluster::role_binding,
    ),
    // resource.k8s.io
    ("resource.k8s.io/v1/deviceclasses", dra::device_class),
    ("resource.k8s.io/v1/resourceclaims", dra::resource_claim),
    (
        "resource.k8s.io/v1/resourceclaimtemplates",
        dra::resource_claim_template,
    ),
    ("resource.k8s.io/v1/resourceslices", dra::resource_slice),
    // scheduling.k8s.io
    (
        "scheduling.k8s.io/v1/priorityclasses",
        cluster::priority_class,
    ),
    // storage.k8s.io (csistoragecapacities keep the default table)
    ("storage.k8s.io/v1/csidrivers", storage::csi_driver),
    ("storage.k8s.io/v1/csinodes", storage::csi_node),
    ("storage.k8s.io/v1/storageclasses", storage::storage_class),
    (
        "storage.k8s.io/v1/volumeattachments",
        storage::volume_attachment,
    ),
    (
        "storage.k8s.io/v1/volumeattributesclasses",
        storage::volume_attributes_class,
    ),
];

/// The recorded column definitions, parsed once.
struct Columns {
    default: Value,
    resources: HashMap<String, Value>,
}

static COLUMNS: LazyLock<Columns> = LazyLock::new(|| {
    // The file is ours and checked by the tests below; an unreadable one yields the default table
    // everywhere rather than a panic in a request.
    let mut data: Value =
        serde_json::from_str(include_str!("../../data/tables/columns.json")).unwrap_or_default();
    let default = data.get_mut("default").map(Value::take).unwrap_or_default();
    let resources = match data.get_mut("resources").map(Value::take) {
        Some(Value::Object(map)) => map.into_iter().collect(),
        _ => HashMap::new(),
    };
    Columns { default, resources }
});

static PRINTER_INDEX: LazyLock<HashMap<&'static str, PrintRow>> =
    LazyLock::new(|| PRINTERS.iter().copied().collect());

fn key(group: &str, version: &str, resource: &str) -> String {
    format!("{group}/{version}/{resource}")
}

/// The `columnDefinitions` array of a resource's Table: each entry has `name`, `type`, `format`,
/// `description` and `priority`, as upstream sends them.
#[derive(Clone, Copy, Debug)]
pub struct TableColumns(&'static Value);

impl TableColumns {
    /// The recorded columns of a resource, or upstream's default table (Name, Created At) for a
    /// resource without recorded columns.
    pub fn of(group: &str, version: &str, resource: &str) -> TableColumns {
        let columns = &*COLUMNS;
        TableColumns(
            columns
                .resources
                .get(&key(group, version, resource))
                .unwrap_or(&columns.default),
        )
    }

    /// Upstream's default table columns: Name and Created At.
    pub fn default_table() -> TableColumns {
        TableColumns(&COLUMNS.default)
    }

    /// The JSON array, ready to be placed in a Table.
    pub fn as_value(&self) -> &'static Value {
        self.0
    }

    pub fn len(&self) -> usize {
        self.0.as_array().map_or(0, Vec::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The column names, in order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + use<> {
        let columns: &'static Value = self.0;
        columns
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .map(|c| c.get("name").and_then(Value::as_str).unwrap_or(""))
    }
}

/// The `group/version/resource` keys of every resource with recorded columns, sorted.
pub fn recorded_resources() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = COLUMNS.resources.keys().map(String::as_str).collect();
    keys.sort_unstable();
    keys
}

/// The column definitions of a resource's Table: the recorded ones, or upstream's default table
/// (Name, Created At) for anything unknown.
pub fn column_definitions(group: &str, version: &str, resource: &str) -> Value {
    TableColumns::of(group, version, resource)
        .as_value()
        .clone()
}

/// The print function for a resource; look it up once per list rather than once per row.
pub fn row_printer(group: &str, version: &str, resource: &str) -> PrintRow {
    PRINTER_INDEX
        .get(key(group, version, resource).as_str())
        .copied()
        .unwrap_or(default_row)
}

/// The cells of one object's row, one per column of [`column_definitions`], as upstream's print
/// function for that resource fills them; `obj` is in the version named. Ages are measured up to
/// `now`.
pub fn row_cells(
    group: &str,
    version: &str,
    resource: &str,
    obj: &Value,
    now: DateTime<Utc>,
) -> Vec<Value> {
    row_printer(group, version, resource)(obj, now)
}

/// The `conditions` of an object's row, where upstream sets any: only Pods that have finished
/// (phase Succeeded or Failed) get one, `Completed`. `None` means the row has no conditions.
pub fn row_conditions(group: &str, version: &str, resource: &str, obj: &Value) -> Option<Value> {
    match (group, version, resource) {
        ("", "v1", "pods") => pod::pod_row_conditions(obj),
        _ => None,
    }
}

/// Upstream's default table row: the name and the creation time in RFC 3339 (UTC).
fn default_row(obj: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    cells![
        obj.name(),
        format::rfc3339(format::time_at(obj, &["metadata", "creationTimestamp"])),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn split(key: &str) -> (&str, &str, &str) {
        let mut parts = key.splitn(3, '/');
        let group = parts.next().unwrap_or_default();
        let version = parts.next().unwrap_or_default();
        let resource = parts.next().unwrap_or_default();
        (group, version, resource)
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2025-06-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn every_recorded_resource_has_columns() {
        let keys = recorded_resources();
        assert_eq!(keys.len(), 61);
        for key in keys {
            let (g, v, r) = split(key);
            let columns = TableColumns::of(g, v, r);
            assert!(!columns.is_empty(), "{key}");
            for column in columns.as_value().as_array().unwrap() {
                for field in ["name", "type", "format", "description", "priority"] {
                    assert!(column.get(field).is_some(), "{key}: {column} lacks {field}");
                }
            }
        }
    }

    #[test]
    fn every_printer_has_recorded_columns() {
        for (key, _) in PRINTERS {
            assert!(
                COLUMNS.resources.contains_key(*key),
                "{key} has a printer but no columns"
            );
        }
    }

    #[test]
    fn resources_without_a_printer_have_the_default_columns() {
        let default: Vec<_> = TableColumns::default_table().names().collect();
        assert_eq!(default, ["Name", "Created At"]);
        for key in recorded_resources() {
            let (g, v, r) = split(key);
            if !PRINTER_INDEX.contains_key(key) {
                let names: Vec<_> = TableColumns::of(g, v, r).names().collect();
                assert_eq!(names, default, "{key} has custom columns but no printer");
            }
        }
    }

    #[test]
    fn minimal_objects_fill_every_column() {
        let obj = json!({"metadata": {"name": "x", "namespace": "ns", "creationTimestamp": "2025-06-01T11:00:00Z"}});
        for key in recorded_resources() {
            let (g, v, r) = split(key);
            let cells = row_cells(g, v, r, &obj, now());
            let columns = TableColumns::of(g, v, r);
            // Upstream's IPAddress printer writes an Age cell that has no column; kubectl ignores
            // cells past the last column, and we keep upstream's rows as they are.
            let expected = if key == "networking.k8s.io/v1/ipaddresses" {
                3
            } else {
                columns.len()
            };
            assert_eq!(cells.len(), expected, "{key}: {cells:?}");
            let names: Vec<_> = columns.names().collect();
            let name_at = names.iter().position(|n| *n == "Name");
            if let Some(i) = name_at {
                assert_eq!(cells[i], json!("x"), "{key}");
            }
            if let Some(i) = names.iter().position(|n| *n == "Age") {
                assert_eq!(cells[i], json!("60m"), "{key}");
            }
        }
    }

    #[test]
    fn odd_objects_do_not_panic() {
        let odd = [
            json!(null),
            json!([]),
            json!("x"),
            json!({"metadata": 5, "spec": [], "status": "x"}),
            json!({"spec": {"containers": 3, "ports": [null, 1, "a"], "selector": []},
                   "status": {"conditions": [null], "containerStatuses": [1]}}),
        ];
        for key in recorded_resources() {
            let (g, v, r) = split(key);
            let len = TableColumns::of(g, v, r).len();
            for obj in &odd {
                let cells = row_cells(g, v, r, obj, now());
                assert!(cells.len() >= len, "{key}");
            }
        }
    }

    #[test]
    fn unknown_resources_get_the_default_table() {
        let columns = column_definitions("example.com", "v1", "widgets");
        assert_eq!(columns, TableColumns::default_table().as_value().clone());
        assert_eq!(columns[1]["type"], "date");
        let obj = json!({"metadata": {"name": "w", "creationTimestamp": "2025-06-01T11:00:00Z"}});
        assert_eq!(
            row_cells("example.com", "v1", "widgets", &obj, now()),
            vec![json!("w"), json!("2025-06-01T11:00:00Z")]
        );
        assert_eq!(
            row_cells(
                "rbac.authorization.k8s.io",
                "v1",
                "roles",
                &json!({}),
                now()
            ),
            vec![json!(""), json!("0001-01-01T00:00:00Z")]
        );
    }

    #[test]
    fn only_finished_pods_have_row_conditions() {
        let done = json!({"status": {"phase": "Failed"}});
        assert!(row_conditions("", "v1", "pods", &done).is_some());
        assert!(row_conditions("batch", "v1", "jobs", &done).is_none());
    }

    #[test]
    fn recorded_columns_are_upstream_ones() {
        let names: Vec<_> = TableColumns::of("", "v1", "pods").names().collect();
        assert_eq!(
            names,
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        let configmaps = column_definitions("", "v1", "configmaps");
        assert_eq!(configmaps[1]["name"], "Data");
        assert_eq!(configmaps[0]["format"], "name");
        assert_eq!(column_definitions("", "v1", "pods")[5]["priority"], 1);
    }
}
