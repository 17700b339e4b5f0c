//! The proxy client certificate, read again when its files change (upstream: the
//! `aggregator-reload-proxy-client-cert` post-start hook runs a `DynamicCertKeyPairContent`
//! controller on `--proxy-client-cert-file` and `--proxy-client-key-file`). Certificates are
//! rotated by rewriting the files, and an extension server must not start refusing the
//! aggregator when the old one expires.
//!
//! The files' metadata is looked at every second, which sees a rewrite and an atomic rename
//! alike (upstream watches the files and reads them again every minute); their contents are
//! also read again every minute, as upstream's are. A pair that does not load (half written, a
//! key that is not the certificate's) is logged and the one in use kept, to be tried again at
//! the next change or minute.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::Aggregator;

/// Where the proxy client certificate and key are read from.
#[derive(Clone, Debug)]
pub struct ProxyCertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// How often the files' metadata is looked at.
const STAT_INTERVAL: Duration = Duration::from_secs(1);

/// How often the contents are read whatever the metadata says (upstream's
/// `FileRefreshDuration`).
const REFRESH_INTERVAL: Duration = Duration::from_secs(60);

impl ProxyCertFiles {
    /// Both files' contents (certificate, key). Empty content is an error, as upstream's
    /// "missing content" is.
    pub fn read(&self) -> Result<(Vec<u8>, Vec<u8>), String> {
        let read = |p: &PathBuf| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
        let (cert, key) = (read(&self.cert)?, read(&self.key)?);
        if cert.is_empty() || key.is_empty() {
            return Err("missing content for serving cert \"aggregator-proxy-cert\"".into());
        }
        Ok((cert, key))
    }

    /// What changes when a file is rewritten or replaced: modification time, length, inode.
    fn stamp(&self) -> Vec<Option<(SystemTime, u64, u64)>> {
        use std::os::unix::fs::MetadataExt;
        [&self.cert, &self.key]
            .iter()
            .map(|p| {
                let m = std::fs::metadata(p).ok()?;
                Some((m.modified().ok()?, m.len(), m.ino()))
            })
            .collect()
    }
}

/// Runs for as long as the process does, replacing the identity the proxy presents whenever the
/// files hold a new pair that loads.
pub(crate) async fn run(agg: Arc<Aggregator>, files: ProxyCertFiles) {
    let mut stamp = files.stamp();
    let mut last_read = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(STAT_INTERVAL).await;
        let now = files.stamp();
        if now == stamp && last_read.elapsed() < REFRESH_INTERVAL {
            continue;
        }
        stamp = now;
        last_read = tokio::time::Instant::now();
        match files
            .read()
            .and_then(|pair| agg.transports.replace_identity(pair))
        {
            Ok(true) => {
                tracing::info!(name = "aggregator-proxy-cert", "Loaded a new cert/key pair")
            }
            Ok(false) => {}
            // Tried again when the files change next, or at the minute.
            Err(e) => {
                tracing::error!(name = "aggregator-proxy-cert", error = %e, "loading the proxy client certificate failed; keeping the one in use")
            }
        }
    }
}
