//! A value built from a configuration file and built again when the file changes, as upstream
//! reloads `--authentication-config` and `--authorization-config`: the file is looked at every
//! interval ([`RELOAD_INTERVAL`] for those); changed content that builds replaces the value, content that does not
//! is logged and the running value kept.

use std::sync::{Arc, RwLock};
use std::time::Duration;

/// How often a watched file is looked at.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(5);

/// Builds the value from the file's content.
pub type Build<T> = dyn Fn(&str) -> Result<Arc<T>, String> + Send + Sync;

pub struct Reloading<T: ?Sized> {
    current: RwLock<Arc<T>>,
}

impl<T: ?Sized + Send + Sync + 'static> Reloading<T> {
    /// Builds the value from `path` and starts looking at the file every `interval` (until the
    /// value is dropped); `what` names the configuration in the log.
    pub fn start(
        path: String,
        what: &'static str,
        interval: Duration,
        build: Box<Build<T>>,
    ) -> Result<Arc<Self>, String> {
        let mut seen = std::fs::read_to_string(&path)
            .map_err(|e| format!("failed to read {what} file {path:?}: {e}"))?;
        let this = Arc::new(Reloading {
            current: RwLock::new(build(&seen)?),
        });
        let weak = Arc::downgrade(&this);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let Some(this) = weak.upgrade() else { return };
                let Ok(text) = std::fs::read_to_string(&path) else {
                    continue;
                };
                if text == seen {
                    continue;
                }
                match build(&text) {
                    Ok(value) => {
                        *this.current.write().unwrap_or_else(|e| e.into_inner()) = value;
                        tracing::info!(file = %path, "reloaded the {what}");
                    }
                    Err(e) => {
                        tracing::error!(file = %path, error = %e, "the changed {what} is not used");
                    }
                }
                seen = text;
            }
        });
        Ok(this)
    }

    /// The value in force.
    pub fn current(&self) -> Arc<T> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_changed_file_replaces_the_value_unless_it_does_not_build() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n.txt");
        std::fs::write(&path, "1").unwrap();
        let parse: Box<Build<u32>> = Box::new(|text| {
            text.trim()
                .parse()
                .map(Arc::new)
                .map_err(|e| format!("{e}"))
        });
        let every = Duration::from_millis(20);
        let value = Reloading::start(path.display().to_string(), "number", every, parse).unwrap();
        assert_eq!(*value.current(), 1);
        std::fs::write(&path, "x").unwrap();
        tokio::time::sleep(every * 5).await;
        assert_eq!(*value.current(), 1);
        std::fs::write(&path, "2").unwrap();
        tokio::time::sleep(every * 5).await;
        assert_eq!(*value.current(), 2);
    }
}
