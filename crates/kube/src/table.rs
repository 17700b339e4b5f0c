//! Adapts the built-in printers to the generic server's `TableConvertor`.

use apiserver::endpoints::TableConvertor;
use apiserver::registry::ResourceInfo;
use serde_json::Value;

pub struct BuiltinTables;

impl TableConvertor for BuiltinTables {
    fn column_definitions(&self, info: &ResourceInfo) -> Value {
        crate::printers::column_definitions(&info.group, &info.version, &info.resource)
    }

    fn cells(
        &self,
        info: &ResourceInfo,
        obj: &Value,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Vec<Value> {
        crate::printers::row_cells(&info.group, &info.version, &info.resource, obj, now)
    }
}
