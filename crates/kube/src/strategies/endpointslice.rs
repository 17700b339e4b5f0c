//! EndpointSlices: a port is TCP unless it says otherwise, and has a name, empty by default
//! (`SetDefaults_EndpointPort`).

use apiserver::registry::Strategy;
use serde_json::{Value, json};

use super::set_default;

pub struct EndpointSliceStrategy;

impl Strategy for EndpointSliceStrategy {
    fn default(&self, obj: &mut Value) {
        for port in obj
            .get_mut("ports")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter(|p| p.is_object())
        {
            set_default(port, "protocol", json!("TCP"));
            set_default(port, "name", json!(""));
        }
    }
}
