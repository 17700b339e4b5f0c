//! `--admission-control-config-file` (upstream: k8s.io/apiserver/pkg/admission/config.go): an
//! `AdmissionConfiguration` (`apiserver.config.k8s.io/v1`, or the older
//! `apiserver.k8s.io/v1alpha1`) in YAML or JSON, with one entry per plugin that has its
//! configuration inline (`configuration`) or in a file (`path`, relative to the configuration
//! file). [`AdmissionConfig::config_for`] hands a plugin its configuration, as upstream's
//! `ConfigFor` hands it a reader; a plugin with no entry gets `None` and its defaults.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The accepted `apiVersion`s of an `AdmissionConfiguration`.
const VERSIONS: &[&str] = &["apiserver.config.k8s.io/v1", "apiserver.k8s.io/v1alpha1"];

#[derive(Clone, Debug, PartialEq)]
enum Source {
    Inline(Value),
    File(PathBuf),
    Nothing,
}

/// The plugins' configurations, in the order the file lists them.
#[derive(Clone, Debug, Default)]
pub struct AdmissionConfig {
    plugins: Vec<(String, Source)>,
}

/// YAML or JSON (JSON is YAML) into a JSON value.
pub fn parse_yaml(data: &[u8]) -> Result<Value, String> {
    serde_yaml_ng::from_slice::<Value>(data).map_err(|e| e.to_string())
}

impl AdmissionConfig {
    /// Reads and checks the file. Unknown fields are refused, as upstream decodes strictly.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let data = std::fs::read(path).map_err(|e| {
            format!(
                "unable to read admission control configuration from {:?} [{e}]",
                path.display().to_string()
            )
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::parse(&data, base)
            .map_err(|e| format!("admission control configuration {}: {e}", path.display()))
    }

    /// The configuration in `data`; relative plugin paths are taken from `base`.
    pub fn parse(data: &[u8], base: &Path) -> Result<Self, String> {
        let doc = parse_yaml(data)?;
        let obj = doc
            .as_object()
            .ok_or("expected an AdmissionConfiguration object")?;
        check_type(obj, "AdmissionConfiguration", VERSIONS)?;
        strict(obj, &["apiVersion", "kind", "plugins"], "")?;
        let mut plugins = Vec::new();
        let entries = match obj.get("plugins") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(a)) => a.as_slice(),
            Some(_) => return Err("plugins: expected a list".into()),
        };
        for (i, p) in entries.iter().enumerate() {
            let p = p
                .as_object()
                .ok_or_else(|| format!("plugins[{i}]: expected an object"))?;
            for k in p.keys() {
                if !["name", "path", "configuration"].contains(&k.as_str()) {
                    return Err(format!(
                        "strict decoding error: unknown field \"plugins[{i}].{k}\""
                    ));
                }
            }
            let text = |f: &str| match p.get(f) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(format!("plugins[{i}].{f}: expected a string")),
            };
            let name = text("name")?;
            let path = text("path")?;
            let source = match p.get("configuration") {
                Some(c) if !c.is_null() => Source::Inline(c.clone()),
                _ if !path.is_empty() => Source::File(base.join(path)),
                _ => Source::Nothing,
            };
            plugins.push((name, source));
        }
        Ok(Self { plugins })
    }

    /// The configuration of the first entry naming `plugin`: the inline object, or the
    /// contents of its file, parsed. `None` when no entry names it or the entry is empty.
    pub fn config_for(&self, plugin: &str) -> Result<Option<Value>, String> {
        let Some((_, source)) = self.plugins.iter().find(|(n, _)| n == plugin) else {
            return Ok(None);
        };
        match source {
            Source::Inline(v) => Ok(Some(v.clone())),
            Source::File(path) => {
                let data = std::fs::read(path).map_err(|e| {
                    format!(
                        "couldn't open admission plugin configuration {}: {e}",
                        path.display()
                    )
                })?;
                if data.iter().all(u8::is_ascii_whitespace) {
                    return Ok(None);
                }
                parse_yaml(&data)
                    .map(Some)
                    .map_err(|e| format!("{}: {e}", path.display()))
            }
            Source::Nothing => Ok(None),
        }
    }
}

/// A configuration file's `apiVersion` and `kind`, checked as upstream's decoder checks them
/// (missing, or not a kind registered in one of `versions`).
pub(super) fn check_type(
    obj: &serde_json::Map<String, Value>,
    kind: &str,
    versions: &[&str],
) -> Result<(), String> {
    let got_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let got_kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if got_version.is_empty() {
        return Err("Object 'apiVersion' is missing".into());
    }
    if got_kind.is_empty() {
        return Err("Object 'Kind' is missing".into());
    }
    if got_kind != kind || !versions.contains(&got_version) {
        return Err(format!(
            "no kind \"{got_kind}\" is registered for version \"{got_version}\""
        ));
    }
    Ok(())
}

/// Strict decoding: the first field not in `allowed`, named under `prefix`, is an error.
pub(super) fn strict(
    obj: &serde_json::Map<String, Value>,
    allowed: &[&str],
    prefix: &str,
) -> Result<(), String> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "strict decoding error: unknown field \"{prefix}{k}\""
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_file_configurations() {
        let dir = std::env::temp_dir().join(format!("ironplane-admission-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ps.yaml"), "kind: X\n").unwrap();
        let yaml = br#"
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    kind: PodSecurityConfiguration
- name: Other
  path: ps.yaml
- name: Empty
"#;
        let c = AdmissionConfig::parse(yaml, &dir).unwrap();
        assert_eq!(
            c.config_for("PodSecurity").unwrap(),
            Some(serde_json::json!({"kind": "PodSecurityConfiguration"}))
        );
        assert_eq!(
            c.config_for("Other").unwrap(),
            Some(serde_json::json!({"kind": "X"}))
        );
        assert_eq!(c.config_for("Empty").unwrap(), None);
        assert_eq!(c.config_for("Missing").unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_files_are_refused() {
        let base = Path::new(".");
        let legacy = b"apiVersion: apiserver.k8s.io/v1alpha1\nkind: AdmissionConfiguration\n";
        assert!(AdmissionConfig::parse(legacy, base).is_ok());
        for bad in [
            &b"kind: AdmissionConfiguration\n"[..],
            b"apiVersion: apiserver.config.k8s.io/v1alpha1\nkind: AdmissionConfiguration\n",
            b"apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugin: []\n",
            b"apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- nam: x\n",
            b"[",
        ] {
            assert!(AdmissionConfig::parse(bad, base).is_err(), "{bad:?}");
        }
    }
}
