//! Encryption at rest for the server (upstream: `EtcdOptions.maybeApplyResourceTransformers`):
//! loads `--encryption-provider-config`, wraps the backend in the encryption decorator, and
//! makes the `kms-providers` health check and, with
//! `--encryption-provider-config-automatic-reload`, the reload controller and its post-start
//! hook. The transformers themselves live in `storage::value`.

use std::sync::Arc;
use std::time::Duration;

use apiserver::health::Check;
use storage::Kv;
use storage::value::GroupResource;
use storage::value::config::{self, DynamicTransformers, KMS_HEALTH_CHECK_NAME};
use storage::value::kv::{KeyResources, TransformingKv};

use crate::options::Options;

/// How often the health flag is refreshed from the KMS probes (which keep their own answers for
/// 20 s when healthy and 3 s when not, as upstream's).
const HEALTH_REFRESH: Duration = Duration::from_secs(1);

/// What encryption adds to the server.
pub struct Encryption {
    /// `kms-providers` in /healthz and /readyz (not /livez, as upstream), when there is one.
    pub health: Option<Check>,
    /// `poststarthook/start-encryption-provider-config-automatic-reload`, with reload on.
    pub reload_hook: Option<Check>,
}

/// The backend with encryption applied, or as it is without a configuration.
/// `overrides` (the stores of `--etcd-servers-overrides`) are wrapped alike.
pub async fn setup(
    opts: &Options,
    kv: Arc<dyn Kv>,
    overrides: &mut [ironplane_kube::KvOverride],
) -> Result<(Arc<dyn Kv>, Encryption), String> {
    let none = Encryption {
        health: None,
        reload_hook: None,
    };
    let Some(path) = &opts.encryption_provider_config else {
        return Ok((kv, none));
    };
    let reload = opts.encryption_provider_config_automatic_reload;
    let loaded = config::load(path, reload).await?;
    let hash = loaded.content_hash.clone();
    let dynamic = DynamicTransformers::new(loaded);
    // Built-in resources by their storage root; custom resources resolve by their key.
    let roots = ironplane_kube::catalog::builtin_resources()
        .iter()
        .map(|info| {
            (
                info.storage_key.clone(),
                GroupResource::new(info.group.clone(), info.resource.clone()),
            )
        })
        .collect::<Vec<_>>();
    let resources = KeyResources::new(&opts.etcd_prefix, roots);
    for o in overrides.iter_mut() {
        o.kv = Arc::new(TransformingKv::new(
            o.kv.clone(),
            dynamic.clone(),
            resources.clone(),
        ));
    }
    let kv: Arc<dyn Kv> = Arc::new(TransformingKv::new(kv, dynamic.clone(), resources));

    let health = dynamic.has_health_check().then(|| {
        let check = Check::new(KMS_HEALTH_CHECK_NAME, false);
        let dynamic = dynamic.clone();
        let flag = check.clone();
        tokio::spawn(async move {
            loop {
                flag.set(dynamic.check().await.is_ok());
                tokio::time::sleep(HEALTH_REFRESH).await;
            }
        });
        check
    });
    let reload_hook = reload.then(|| {
        tokio::spawn(config::run_reload(
            path.clone(),
            dynamic,
            hash,
            opts.encryption_provider_config_reload_interval,
        ));
        Check::new(
            "poststarthook/start-encryption-provider-config-automatic-reload",
            true,
        )
    });
    Ok((
        kv,
        Encryption {
            health,
            reload_hook,
        },
    ))
}
