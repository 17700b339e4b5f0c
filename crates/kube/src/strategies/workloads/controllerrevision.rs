//! ControllerRevisions (apps/v1): `ValidateControllerRevision` (data present, revision not
//! negative) and `ValidateControllerRevisionUpdate` (data immutable, after the create rules).

use apimachinery::validation::{FieldError, FieldPath, validate_immutable_field};
use apiserver::registry::Strategy;
use serde_json::Value;

use super::{nonnegative, present};

pub struct ControllerRevisionStrategy;

impl Strategy for ControllerRevisionStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if present(obj, "data").is_none() {
            errs.push(FieldError::required(
                &FieldPath::new("data"),
                "data is mandatory",
            ));
        }
        errs.extend(nonnegative(obj, "revision", &FieldPath::nil()));
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errs = self.validate(new);
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
                "data: Required value: data is mandatory",
                "revision: Invalid value: -1: must be greater than or equal to 0"
            ]
        );
        let old = json!({"revision": 1, "data": {"a": 1}});
        let new = json!({"revision": 1, "data": {"a": 2}});
        assert_eq!(
            ControllerRevisionStrategy.validate_update(&new, &old)[0].to_string(),
            "data: Invalid value: {\"a\":2}: field is immutable"
        );
    }
}
