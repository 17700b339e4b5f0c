//! Device selectors' CEL (upstream: k8s.io/dynamic-resource-allocation/cel, compile.go, as
//! pkg/apis/resource/validation's `validateCELSelector` uses it): an expression is compiled in
//! the DRA environment — Kubernetes' base libraries and one variable, `device`
//! (`kubernetes.DRADevice`: `driver`, `allowMultipleAllocations` with DRAConsumableCapacity, on
//! by default in v1.36, `attributes` and `capacity`, maps of domains to maps of identifiers) —
//! must give a bool or the unknown type, and its worst-case cost, estimated from the sizes the
//! API allows, must stay within `CELSelectorExpressionMaxCost`.
//!
//! The list-typed attributes of the DRAListTypeAttributes gate (off in v1.36) and their
//! `includes` function are not declared, as upstream's environment leaves them out;
//! `cel.bind` (cel-go's bindings extension) is. A
//! selector that is stored (a DeviceClass update that keeps its selectors) is compiled in
//! upstream's StoredExpressions environment: in v1.36 it declares the same libraries as the
//! NewExpressions one (the newest, ext.Lists v3, came in 1.34, before the 1.35 compatibility
//! version), so both are checked alike here.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use apiserver::cel::{Checked, DeclKind, DeclType, Extensions, SizeEstimate, SizeEstimator, Type};

/// `CELSelectorExpressionMaxCost`.
pub const SELECTOR_MAX_COST: u64 = 1_000_000;

/// `DriverNameMaxLength`, `DeviceMaxDomainLength`, `DeviceMaxIDLength`,
/// `DeviceAttributeMaxValueLength`, `ResourceSliceMaxAttributesAndCapacitiesPerDevice`.
const DRIVER_MAX: u64 = 63;
const DOMAIN_MAX: u64 = 63;
const ID_MAX: u64 = 32;
const ATTRIBUTE_VALUE_MAX: u64 = 64;
const PER_DEVICE_MAX: u64 = 32;

/// Why an expression is refused, with the field error upstream gives for it.
#[derive(Debug, PartialEq)]
pub enum SelectorError {
    /// `field.Invalid(path, expression, detail)`.
    Invalid(String),
    /// `field.Forbidden(path, "too complex, exceeds cost limit")`.
    TooComplex,
}

/// Compiles one selector expression as `CompileCELExpression` does and checks its cost
/// against the selector limit (`validateCELSelector`).
pub fn check_selector(expression: &str) -> Result<(), SelectorError> {
    let checked = compile(expression)
        .map_err(|issues| SelectorError::Invalid(format!("compilation failed: {issues}")))?;
    let out = checked.output();
    // `any` is the type of an attribute's value, known only when it is read. The checker gives
    // `dyn` in places cel-go knows better, so `dyn` is left to the evaluation as well.
    if !matches!(out, Type::Bool | Type::Any | Type::Dyn) {
        return Err(SelectorError::Invalid(format!(
            "must evaluate to bool or the unknown type, not {out}"
        )));
    }
    if estimated_cost(&checked) > SELECTOR_MAX_COST {
        return Err(SelectorError::TooComplex);
    }
    Ok(())
}

/// Parses and checks in the DRA environment: the base libraries, `cel.bind` and `device`.
fn compile(expression: &str) -> Result<Checked, String> {
    let extensions = Extensions { bindings: true };
    apiserver::cel::compile_with(expression, &[("device", device_type())], extensions)
}

fn estimated_cost(checked: &Checked) -> u64 {
    apiserver::cel::estimate(checked, &DeviceSizes).max
}

/// The CEL type of `device`.
fn device_type() -> Type {
    static DEVICE: OnceLock<Arc<DeclType>> = OnceLock::new();
    let decl = DEVICE.get_or_init(|| {
        let leaf = |kind| {
            Arc::new(DeclType {
                kind,
                max_elements: 0,
                min_serialized_size: 0,
            })
        };
        let map = |elem| leaf(DeclKind::Map(elem));
        let fields = BTreeMap::from([
            ("driver".to_string(), leaf(DeclKind::String)),
            ("allowMultipleAllocations".to_string(), leaf(DeclKind::Bool)),
            ("attributes".to_string(), map(map(leaf(DeclKind::Any)))),
            (
                "capacity".to_string(),
                map(map(leaf(DeclKind::Opaque("kubernetes.Quantity")))),
            ),
        ]);
        leaf(DeclKind::Object(fields))
    });
    Type::of_decl(decl, "kubernetes.DRADevice")
}

/// The sizes the cost estimator sees under `device` (upstream's `sizeEstimator` over the
/// newest `kubernetes.DRADevice`): the driver name and map keys at their length limits, the
/// maps at the most attributes and capacities a device has, an attribute's value at the
/// longest a string value may be. A field selected on a map of attributes is an attribute.
struct DeviceSizes;

#[derive(Clone, Copy)]
enum Node {
    Device,
    Driver,
    MultiAlloc,
    /// Domains to identifiers to values; `attributes` says which.
    Outer {
        attributes: bool,
    },
    Inner {
        attributes: bool,
    },
    Domain,
    Id,
    Attribute,
    Quantity,
}

impl Node {
    fn max(self) -> u64 {
        match self {
            Node::Device | Node::Quantity => 0,
            Node::Driver => DRIVER_MAX,
            Node::MultiAlloc => 1,
            Node::Outer { .. } | Node::Inner { .. } => PER_DEVICE_MAX,
            Node::Domain => DOMAIN_MAX,
            Node::Id => ID_MAX,
            Node::Attribute => ATTRIBUTE_VALUE_MAX,
        }
    }

    fn step(self, step: &str) -> Option<Node> {
        Some(match (self, step) {
            (Node::Device, "driver") => Node::Driver,
            (Node::Device, "allowMultipleAllocations") => Node::MultiAlloc,
            (Node::Device, "attributes") => Node::Outer { attributes: true },
            (Node::Device, "capacity") => Node::Outer { attributes: false },
            (Node::Outer { .. } | Node::Inner { .. }, "@items") => return None,
            (Node::Outer { attributes }, "@values") => Node::Inner { attributes },
            (Node::Outer { .. }, "@keys") => Node::Domain,
            (Node::Inner { attributes: true }, "@values") => Node::Attribute,
            (Node::Inner { attributes: false }, "@values") => Node::Quantity,
            (Node::Inner { .. }, "@keys") => Node::Id,
            // Any identifier of an attribute map names an attribute.
            (Node::Inner { attributes: true }, _) => Node::Attribute,
            _ => return None,
        })
    }
}

impl SizeEstimator for DeviceSizes {
    fn estimate_size(&self, path: &[String]) -> Option<SizeEstimate> {
        let (root, steps) = path.split_first()?;
        if root != "device" {
            return None;
        }
        let mut node = Node::Device;
        for step in steps {
            node = node.step(step)?;
        }
        Some(SizeEstimate {
            min: 0,
            max: node.max(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(expression: &str) -> u64 {
        let checked = compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}"));
        estimated_cost(&checked)
    }

    /// The worst-case costs upstream's compile_test.go expects (list-typed attributes off).
    #[test]
    fn estimated_costs_are_upstreams() {
        for (expression, want) in [
            ("true", 0),
            (
                r#"device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))"#,
                6,
            ),
            (
                r#"device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))"#,
                6,
            ),
            (r#""no-such-domain" in device.attributes"#, 3),
            (r#"device.driver == """#, 2),
            (r#"device.driver == "dra.example.com""#, 4),
            (r#"device.attributes["dra.example.com"].name"#, 4),
            (r#"device.attributes["dra.example.com"]["name"]"#, 4),
            (
                r#"cel.bind(dra, device.attributes["dra.example.com"], dra.name)"#,
                15,
            ),
            (r#"device.attributes["dra.example.com"].name > 0"#, 5),
            (r#"device.attributes["dra.example.com"].name == "fish""#, 5),
            (
                r#"device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))"#,
                6,
            ),
            (
                r#"device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#,
                6,
            ),
            (
                r#""name" in device.capacity["dra.example.com"] && device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#,
                10,
            ),
            (
                r#"!("name" in device.capacity["dra.example.com"]) || device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#,
                11,
            ),
            (
                r#"device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b && device.attributes["dra.example.com"].c"#,
                12,
            ),
            (
                r#"device.attributes.exists_one(x, x == "dra.example.com")"#,
                164,
            ),
            (
                r#"device.attributes["dra.example.com"].exists_one(x, x == "services")"#,
                133,
            ),
            (
                r#"device.attributes["dra.example.com"].services.split("example").size() >= 2"#,
                19,
            ),
            (
                r#"device.attributes["dra.example.com"].services.matches("[^a]?sym")"#,
                18,
            ),
            (
                r#"device.capacity.exists_one(x, x == "dra.example.com")"#,
                164,
            ),
            (
                r#"device.capacity["dra.example.com"].exists_one(x, x == "memory")"#,
                133,
            ),
            (
                "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z4, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1'.find('[0-9]*')) < 100)))))))",
                85_555_551,
            ),
            ("device.allowMultipleAllocations == true", 3),
        ] {
            assert_eq!(cost(expression), want, "{expression}");
        }
    }

    #[test]
    fn refusals_are_upstreams() {
        assert_eq!(
            check_selector("noSuchVar"),
            Err(SelectorError::Invalid(
                "compilation failed: ERROR: <input>:1:1: undeclared reference to 'noSuchVar' (in container '')\n | noSuchVar\n | ^".into()
            ))
        );
        assert_eq!(
            check_selector("device.attributes[true].someBoolean"),
            Err(SelectorError::Invalid(
                "compilation failed: ERROR: <input>:1:18: found no matching overload for '_[_]' applied to '(map(string, map(string, any)), bool)'\n | device.attributes[true].someBoolean\n | .................^".into()
            ))
        );
        assert_eq!(
            check_selector("1"),
            Err(SelectorError::Invalid(
                "must evaluate to bool or the unknown type, not int".into()
            ))
        );
        let Err(SelectorError::Invalid(e)) =
            check_selector(r#"device.attributes["dra.example.com"].name.includes("fish")"#)
        else {
            panic!("includes is not declared without list-typed attributes");
        };
        assert!(e.contains("undeclared reference to 'includes'"), "{e}");
        assert_eq!(
            check_selector(
                "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z4, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1'.find('[0-9]*')) < 100)))))))"
            ),
            Err(SelectorError::TooComplex)
        );
        for ok in [
            "true",
            r#"device.driver == "dra.example.com""#,
            r#"device.attributes["dra.example.com"].name"#,
            r#"cel.bind(dra, device.attributes["dra.example.com"], dra.name)"#,
            "device.allowMultipleAllocations",
        ] {
            assert_eq!(check_selector(ok), Ok(()), "{ok}");
        }
    }
}
