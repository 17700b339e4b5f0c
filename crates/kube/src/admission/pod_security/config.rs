//! The plugin's configuration, `PodSecurityConfiguration` of
//! `pod-security.admission.config.k8s.io` (v1, v1beta1 and v1alpha1 have the same fields):
//! the default policy of namespaces without labels, and the users, namespaces and runtime
//! classes that are exempt. Defaulted (every mode privileged at latest) and validated as
//! upstream's loader and `ValidatePodSecurityConfiguration` do; no configuration at all is the
//! defaults.

use std::collections::BTreeSet;

use apimachinery::validation::{
    FieldError, FieldPath, aggregate_message, is_dns1123_label, is_dns1123_subdomain,
};
use serde_json::{Map, Value};

use super::api::{Level, LevelVersion, Mode, Policy, Version};
use crate::admission::config::{check_type, strict};

const VERSIONS: &[&str] = &[
    "pod-security.admission.config.k8s.io/v1",
    "pod-security.admission.config.k8s.io/v1beta1",
    "pod-security.admission.config.k8s.io/v1alpha1",
];

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub defaults: Policy,
    pub exempt_usernames: Vec<String>,
    pub exempt_namespaces: Vec<String>,
    pub exempt_runtime_classes: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        let privileged = LevelVersion {
            level: Level::Privileged,
            version: Version::Latest,
        };
        Config {
            defaults: Policy {
                enforce: privileged,
                audit: privileged,
                warn: privileged,
            },
            exempt_usernames: Vec::new(),
            exempt_namespaces: Vec::new(),
            exempt_runtime_classes: Vec::new(),
        }
    }
}

fn object<'a>(v: Option<&'a Value>, field: &str) -> Result<Option<&'a Map<String, Value>>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(_) => Err(format!("{field}: expected an object")),
    }
}

fn strings(obj: Option<&Map<String, Value>>, field: &str) -> Result<Vec<String>, String> {
    match obj.and_then(|o| o.get(field)) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(String::from)
                    .ok_or_else(|| format!("exemptions.{field}: expected strings"))
            })
            .collect(),
        Some(_) => Err(format!("exemptions.{field}: expected a list")),
    }
}

impl Config {
    /// The configuration the plugin entry gives (`None`: no entry, the defaults), or why it is
    /// refused, in upstream's words where upstream has them.
    pub fn load(raw: Option<&Value>) -> Result<Config, String> {
        let Some(raw) = raw else {
            return Ok(Config::default());
        };
        let obj = raw
            .as_object()
            .ok_or("expected a PodSecurityConfiguration object")?;
        check_type(obj, "PodSecurityConfiguration", VERSIONS)?;
        strict(obj, &["apiVersion", "kind", "defaults", "exemptions"], "")?;
        let defaults = object(obj.get("defaults"), "defaults")?;
        let exemptions = object(obj.get("exemptions"), "exemptions")?;
        let mut fields = Vec::new();
        for mode in Mode::ALL {
            fields.push(mode.name().to_string());
            fields.push(format!("{}-version", mode.name()));
        }
        let field_names: Vec<&str> = fields.iter().map(String::as_str).collect();
        if let Some(d) = defaults {
            strict(d, &field_names, "defaults.")?;
        }
        if let Some(e) = exemptions {
            strict(
                e,
                &["usernames", "namespaces", "runtimeClasses"],
                "exemptions.",
            )?;
        }
        // Defaulting: an empty level is privileged, an empty version latest.
        let default_of = |field: &str| -> Result<String, String> {
            match defaults.and_then(|d| d.get(field)) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(format!("defaults.{field}: expected a string")),
            }
        };
        let mut config = Config::default();
        let mut errs = Vec::new();
        for mode in Mode::ALL {
            let level = default_of(mode.name())?;
            let level = if level.is_empty() {
                "privileged".to_string()
            } else {
                level
            };
            let version_field = format!("{}-version", mode.name());
            let version = default_of(&version_field)?;
            let version = if version.is_empty() {
                "latest".to_string()
            } else {
                version
            };
            let lv = mode.of(&mut config.defaults);
            match Level::parse(&level) {
                Ok(l) => lv.level = l,
                Err(e) => errs.push(format!("{}: {e}", mode.name())),
            }
            match Version::parse(&version) {
                Ok(v) => lv.version = v,
                Err(e) => errs.push(format!("{version_field}: {e}")),
            }
        }
        // `ToPolicy`, run first when the plugin is completed, reports bad defaults.
        if !errs.is_empty() {
            return Err(format!(
                "PodSecurity configuration error: {}",
                aggregate(&errs)
            ));
        }
        config.exempt_usernames = strings(exemptions, "usernames")?;
        config.exempt_namespaces = strings(exemptions, "namespaces")?;
        config.exempt_runtime_classes = strings(exemptions, "runtimeClasses")?;
        let field_errs = config.validate();
        if !field_errs.is_empty() {
            return Err(format!(
                "PodSecurity invalid: {}",
                aggregate_message(&field_errs)
            ));
        }
        Ok(config)
    }

    /// Upstream's checks of the exemptions: valid names, no repeats, no empty user.
    fn validate(&self) -> Vec<FieldError> {
        let exemptions = FieldPath::new("exemptions");
        let mut errs = Vec::new();
        let lists: [(&str, &Vec<String>, NameCheck); 3] = [
            ("namespaces", &self.exempt_namespaces, is_dns1123_label),
            (
                "runtimeClasses",
                &self.exempt_runtime_classes,
                is_dns1123_subdomain,
            ),
            ("usernames", &self.exempt_usernames, |u| {
                if u.is_empty() {
                    vec!["username must not be empty".to_string()]
                } else {
                    Vec::new()
                }
            }),
        ];
        for (field, items, check) in lists {
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let path = exemptions.child(field).index(i);
                let problems = check(item);
                if !problems.is_empty() {
                    errs.push(FieldError::invalid(
                        &path,
                        item.as_str(),
                        problems.join(", "),
                    ));
                } else if !seen.insert(item.as_str()) {
                    errs.push(FieldError::duplicate(&path, item.as_str()));
                }
            }
        }
        errs
    }

    pub fn exempt_namespace(&self, ns: &str) -> bool {
        !ns.is_empty() && self.exempt_namespaces.iter().any(|n| n == ns)
    }

    pub fn exempt_user(&self, user: &str) -> bool {
        !user.is_empty() && self.exempt_usernames.iter().any(|u| u == user)
    }

    pub fn exempt_runtime_class(&self, class: Option<&str>) -> bool {
        matches!(class, Some(c) if !c.is_empty() && self.exempt_runtime_classes.iter().any(|r| r == c))
    }
}

/// What is wrong with an exempted name.
type NameCheck = fn(&str) -> Vec<String>;

/// Go's `utilerrors.NewAggregate(...).Error()`: one message as it is, several in brackets.
fn aggregate(messages: &[String]) -> String {
    if messages.len() == 1 {
        messages[0].clone()
    } else {
        format!("[{}]", messages.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_fill_what_is_left_out() {
        let c = Config::load(Some(&json!({
            "apiVersion": "pod-security.admission.config.k8s.io/v1",
            "kind": "PodSecurityConfiguration",
            "defaults": {"enforce": "baseline", "warn-version": "v1.30"},
            "exemptions": {"usernames": ["admin"]},
        })))
        .unwrap();
        assert_eq!(c.defaults.enforce.to_string(), "baseline:latest");
        assert_eq!(c.defaults.warn.to_string(), "privileged:v1.30");
        assert_eq!(c.defaults.audit.to_string(), "privileged:latest");
        assert!(c.exempt_user("admin"));
        assert_eq!(Config::load(None).unwrap(), Config::default());
    }

    #[test]
    fn bad_configurations_are_refused_in_upstream_words() {
        let load = |v: Value| Config::load(Some(&v)).unwrap_err();
        let base = |extra: Value| {
            let mut v = json!({
                "apiVersion": "pod-security.admission.config.k8s.io/v1",
                "kind": "PodSecurityConfiguration",
            });
            v.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            v
        };
        assert_eq!(
            load(base(json!({"defaults": {"enforce": "strict"}}))),
            "PodSecurity configuration error: enforce: must be one of privileged, baseline, restricted"
        );
        assert_eq!(
            load(base(
                json!({"defaults": {"audit-version": "1.2", "warn": "x"}})
            )),
            "PodSecurity configuration error: [audit-version: must be \"latest\" or \"v1.x\", warn: must be one of privileged, baseline, restricted]"
        );
        assert_eq!(
            load(base(
                json!({"exemptions": {"namespaces": ["a", "a"], "usernames": [""]}})
            )),
            "PodSecurity invalid: [exemptions.namespaces[1]: Duplicate value: \"a\", exemptions.usernames[0]: Invalid value: \"\": username must not be empty]"
        );
        assert!(load(base(json!({"default": {}}))).contains("unknown field \"default\""));
        assert!(
            load(json!({"apiVersion": "v1", "kind": "PodSecurityConfiguration"}))
                .contains("no kind")
        );
    }
}
