//! ControllerRevisions (apps/v1): `ValidateControllerRevisionCreate` (revision not negative,
//! then data present and a JSON object) and `ValidateControllerRevisionUpdate` (revision not
//! negative, data immutable; an update does not check data's presence again).

use apimachinery::validation::{FieldError, FieldPath, validate_immutable_field};
use apiserver::registry::Strategy;
use serde_json::Value;

use super::{nonnegative, present};

pub struct ControllerRevisionStrategy;

impl Strategy for ControllerRevisionStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = nonnegative(obj, "revision", &FieldPath::nil());
        let path = FieldPath::new("data");
        match present(obj, "data") {
            // A JSON `null` leaves the RawExtension empty, as an absent field does.
            None => errs.push(FieldError::required(&path, "data is mandatory")),
            Some(Value::Object(_)) => {}
            Some(_) => errs.push(FieldError::required(
                &path,
                "data must be a valid JSON object",
            )),
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = nonnegative(new, "revision", &FieldPath::nil());
        let data = |o: &Value| present(o, "data").cloned().unwrap_or(Value::Null);
        errs.extend(validate_immutable_field(
            &data(new),
            &data(old),
            &FieldPath::new("data"),
        ));
        errs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn data_is_mandatory_and_immutable() {
        let errs = ControllerRevisionStrategy.validate(&json!({"revision": -1}));
        let msgs: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            msgs,
            [
                "revision: Invalid value: -1: must be greater than or equal to 0",
                "data: Required value: data is mandatory",
            ]
        );
        let errs = ControllerRevisionStrategy.validate(&json!({"data": [1]}));
        assert_eq!(
            errs[0].to_string(),
            "data: Required value: data must be a valid JSON object"
        );
        // An update checks immutability only: no second "data is mandatory".
        let errs = ControllerRevisionStrategy.validate_update(&json!({}), &json!({}));
        assert!(errs.is_empty(), "{errs:?}");
        let old = json!({"revision": 1, "data": {"a": 1}});
        let new = json!({"revision": 1, "data": {"a": 2}});
        assert_eq!(
            ControllerRevisionStrategy.validate_update(&new, &old)[0].to_string(),
            "data: Invalid value: {\"a\":2}: field is immutable"
        );
    }
}
