//! The `list` scenario: LIST of N ConfigMaps, whole and paginated, from the watch cache and
//! consistent.
//!
//! It owns the four variants: `full/cache` (`resourceVersion=0`), `full/consistent`
//! (`resourceVersion` unset), and the same two paginated with `limit=500`, following `continue`
//! until the end (the first page carries the variant's `resourceVersion`; later pages carry only
//! `continue`, which is what upstream allows). One measured operation is one whole traversal,
//! timed from each page's request to its last byte (the client's reading of a page is not the
//! server's time, and is left out of the clock). It creates objects first when the namespace
//! holds fewer than N. It must not count an answer with the wrong number of items as a success.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Method;
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::{
    ClientConfig, CommonOptions, CpuSpan, MAX_DURATION, MAX_ITERATIONS, MAX_OBJECTS, Meter,
    ObjectSpec, Tally, Workspace, check_common, check_duration, check_range, encode_query,
};
use crate::client::ApiClient;
use crate::error::BenchError;
use crate::progress::note;
use crate::report::{Row, ScenarioResult};
use crate::stats::Histogram;

/// The page size of the paginated variants.
pub const PAGE_SIZE: u32 = 500;
/// The most pages one traversal follows (a server that never ends a list must not loop us).
const MAX_PAGES: u64 = MAX_OBJECTS * 2 / PAGE_SIZE as u64 + 10;
const SETUP_CONCURRENCY: usize = 32;

#[derive(Clone, Debug)]
pub struct ListOptions {
    /// Objects the namespace must hold.
    pub objects: u64,
    /// Traversals per variant...
    pub iterations: u32,
    /// ...or at most this long per variant, whichever comes first.
    pub duration: Duration,
    /// What is listed: ConfigMaps, or custom resources of a CRD installed first.
    pub kind: super::create::CreateKind,
    /// List in protobuf, as client-go's informers of built-in kinds do (JSON otherwise).
    pub protobuf: bool,
    pub common: CommonOptions,
}

impl Default for ListOptions {
    fn default() -> Self {
        ListOptions {
            objects: 1000,
            iterations: 10,
            duration: Duration::from_secs(60),
            kind: super::create::CreateKind::Configmap,
            protobuf: false,
            common: CommonOptions::default(),
        }
    }
}

impl ListOptions {
    pub fn validate(&self) -> Result<(), BenchError> {
        check_common(&self.common)?;
        check_range("objects", self.objects, 1, MAX_OBJECTS)?;
        check_range("iterations", self.iterations, 1, MAX_ITERATIONS)?;
        if !matches!(
            self.kind,
            super::create::CreateKind::Configmap | super::create::CreateKind::CustomResource
        ) {
            return Err(BenchError::InvalidArgument(
                "list works on configmap or custom-resource".to_string(),
            ));
        }
        if self.protobuf && self.kind != super::create::CreateKind::Configmap {
            // Custom resources have no protobuf form (upstream answers them in JSON).
            return Err(BenchError::InvalidArgument(
                "--protobuf lists built-in kinds: configmap".to_string(),
            ));
        }
        check_duration("duration", self.duration, MAX_DURATION)
    }
}

#[derive(Deserialize, Default)]
struct ListMeta {
    #[serde(rename = "continue", default)]
    continue_token: Option<String>,
    #[serde(rename = "remainingItemCount", default)]
    remaining_item_count: Option<u64>,
}

/// A list page, read without building the items: only their number matters.
#[derive(Deserialize)]
struct ListPage {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default)]
    items: Vec<IgnoredAny>,
}

/// One traversal's outcome.
struct Traversal {
    items: u64,
    pages: u64,
    bytes: u64,
    /// The time its pages took to arrive: from each request's start to its answer's last byte.
    /// Reading the pages (to count their items and find `continue`) is the client's work, not
    /// the server's, and is left out.
    transfer: Duration,
}

/// A traversal that failed: the status of a non-2xx answer (with its body), and a message.
struct TraverseError {
    status: Option<u16>,
    body: Vec<u8>,
    message: String,
}

impl TraverseError {
    fn other(message: String) -> TraverseError {
        TraverseError {
            status: None,
            body: Vec::new(),
            message,
        }
    }
}

/// Lists everything under `path`, page by page when `limit` is given.
async fn traverse(
    client: &ApiClient,
    path: &str,
    resource_version: Option<&str>,
    limit: Option<u32>,
    protobuf: bool,
) -> Result<Traversal, TraverseError> {
    let mut traversal = Traversal {
        items: 0,
        pages: 0,
        bytes: 0,
        transfer: Duration::ZERO,
    };
    let mut continue_token: Option<String> = None;
    loop {
        let mut query = Vec::new();
        if let Some(limit) = limit {
            query.push(format!("limit={limit}"));
        }
        match &continue_token {
            Some(token) => query.push(format!("continue={}", encode_query(token))),
            None => {
                if let Some(rv) = resource_version {
                    query.push(format!("resourceVersion={rv}"));
                }
            }
        }
        let url = if query.is_empty() {
            path.to_string()
        } else {
            format!("{path}?{}", query.join("&"))
        };
        let sent = Instant::now();
        let response = if protobuf {
            client
                .get_accepting(&url, crate::protobuf::MEDIA_TYPE)
                .await
        } else {
            client.send(Method::GET, &url, None).await
        }
        .map_err(|e| TraverseError::other(format!("GET {path}: {e}")))?;
        traversal.transfer += sent.elapsed();
        if !response.is_success() {
            return Err(TraverseError {
                status: Some(response.status.as_u16()),
                body: response.body.to_vec(),
                message: format!(
                    "GET {path}: {} {}",
                    response.status.as_u16(),
                    crate::error::status_message(&response.body)
                ),
            });
        }
        let (items, continue_token_read) = if protobuf {
            let page = crate::protobuf::list_page(&response.body)
                .map_err(|e| TraverseError::other(format!("GET {path}: not a list: {e}")))?;
            (page.items, page.continue_token)
        } else {
            let page: ListPage = serde_json::from_slice(&response.body)
                .map_err(|e| TraverseError::other(format!("GET {path}: not a list: {e}")))?;
            (page.items.len() as u64, page.metadata.continue_token)
        };
        traversal.items += items;
        traversal.pages += 1;
        traversal.bytes += response.body.len() as u64;
        match continue_token_read.filter(|t| !t.is_empty()) {
            Some(token) if limit.is_some() => {
                if traversal.pages >= MAX_PAGES {
                    return Err(TraverseError::other(format!(
                        "GET {path}: more than {MAX_PAGES} pages"
                    )));
                }
                continue_token = Some(token);
            }
            _ => return Ok(traversal),
        }
    }
}

/// How many ConfigMaps the namespace holds, by a consistent `limit=1` list and its
/// `remainingItemCount`, or by a paginated count when the server does not give that.
/// Creates `n` custom resources (`generateName`) with a few concurrent clients.
async fn create_custom(
    workspace: &Workspace,
    options: &ListOptions,
    path: &str,
    n: u64,
) -> Result<u64, BenchError> {
    let body = options.kind.body(options.common.value_bytes(), workspace);
    let left = Arc::new(std::sync::atomic::AtomicU64::new(n));
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..SETUP_CONCURRENCY {
        let (client, body, path, left) = (
            workspace.client.clone(),
            body.clone(),
            path.to_string(),
            left.clone(),
        );
        workers.spawn(async move {
            let mut made = 0u64;
            while left
                .fetch_update(
                    std::sync::atomic::Ordering::Relaxed,
                    std::sync::atomic::Ordering::Relaxed,
                    |l| l.checked_sub(1),
                )
                .is_ok()
            {
                match client
                    .send_on(worker, http::Method::POST, &path, Some(body.clone()))
                    .await
                {
                    Ok(r) if r.is_success() => made += 1,
                    Ok(r) => {
                        return Err(BenchError::Protocol(format!(
                            "creating a custom resource: {}",
                            r.status
                        )));
                    }
                    Err(e) => return Err(client.unreachable(e)),
                }
            }
            Ok(made)
        });
    }
    let mut made = 0;
    while let Some(joined) = workers.join_next().await {
        made += joined.map_err(|e| BenchError::Protocol(format!("worker failed: {e}")))??;
    }
    Ok(made)
}

async fn count_objects(client: &ApiClient, path: &str) -> Result<u64, BenchError> {
    let body = client
        .expect_success(Method::GET, &format!("{path}?limit=1"), None)
        .await?;
    let page: ListPage = serde_json::from_slice(&body)
        .map_err(|e| BenchError::Protocol(format!("GET {path}: not a list: {e}")))?;
    let has_more = page
        .metadata
        .continue_token
        .as_deref()
        .is_some_and(|t| !t.is_empty());
    match (has_more, page.metadata.remaining_item_count) {
        (false, _) => Ok(page.items.len() as u64),
        (true, Some(remaining)) => Ok(page.items.len() as u64 + remaining),
        (true, None) => traverse(client, path, None, Some(PAGE_SIZE), false)
            .await
            .map(|t| t.items)
            .map_err(|e| BenchError::Protocol(e.message)),
    }
}

pub(crate) async fn run(
    cfg: &ClientConfig,
    options: &ListOptions,
) -> Result<ScenarioResult, BenchError> {
    let workspace = Workspace::open(cfg, &options.common).await?;
    let outcome = measure(&workspace, options).await;
    workspace.close(outcome).await
}

const VARIANTS: [(&str, Option<&str>, Option<u32>); 4] = [
    ("full/cache", Some("0"), None),
    ("full/consistent", None, None),
    ("paged500/cache", Some("0"), Some(PAGE_SIZE)),
    ("paged500/consistent", None, Some(PAGE_SIZE)),
];

async fn measure(
    workspace: &Workspace,
    options: &ListOptions,
) -> Result<ScenarioResult, BenchError> {
    use super::create::CreateKind;
    let client = workspace.client.clone();
    let custom = options.kind == CreateKind::CustomResource;
    let path = options.kind.collection(workspace);
    if custom {
        super::create::install_crd(workspace).await?;
        if let Ok(mut extra) = workspace.extra_collections.lock() {
            extra.push(path.clone());
            extra.push(super::crd::CRDS.to_string());
        }
    }
    let tally = Arc::new(Tally::new(client.server()));
    let existing = count_objects(&client, &path).await?;
    let mut created = 0;
    if custom && existing < options.objects {
        created = create_custom(workspace, options, &path, options.objects - existing).await?;
    } else if existing < options.objects {
        let spec = ObjectSpec {
            name_prefix: None,
            generate_name: "list-".to_string(),
            count: options.objects - existing,
            set: "list".to_string(),
            groups: 0,
            value_bytes: options.common.value_bytes(),
        };
        let (histogram, errors, _) = workspace
            .create_objects(spec, SETUP_CONCURRENCY, options.common.progress, &tally)
            .await?;
        if errors > 0 {
            return Err(BenchError::Protocol(format!(
                "{errors} objects could not be created: {}",
                tally.samples().join("; ")
            )));
        }
        created = histogram.count();
    }
    let expected = count_objects(&client, &path).await?;

    // The watch cache may trail the store by a moment after the creates; wait (bounded) until a
    // cached list sees every object, so that a late cache is not counted as wrong answers.
    let settle_deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match traverse(&client, &path, Some("0"), None, options.protobuf).await {
            Ok(t) if t.items == expected => break,
            _ if Instant::now() >= settle_deadline => break,
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }

    let mut result = ScenarioResult::new("list", client.server(), client.http2());
    result.param("objects", options.objects);
    result.param("iterations", options.iterations);
    result.param("value_bytes", options.common.value_bytes());
    result.param("encoding", crate::protobuf::encoding(options.protobuf));
    result.param("kind", format!("{:?}", options.kind).to_lowercase());
    result.figure("objects_in_namespace", expected as f64);
    result.figure("objects_created", created as f64);
    let meter = Meter::start(&options.common);
    let mut requests = 0u64;
    for (label, resource_version, limit) in VARIANTS {
        note(
            options.common.progress,
            &format!(
                "[list] {label}: {} traversals of {expected} objects",
                options.iterations
            ),
        );
        let mut histogram = Histogram::new();
        let mut errors = 0u64;
        let mut bytes = 0u64;
        let mut measured = Duration::ZERO;
        let mut traversals = 0u64;
        // Each variant takes its own path through the server (the cache, or storage), so each
        // gets its own CPU figures beside the phase's.
        let cpu = CpuSpan::start(&options.common);
        let started = Instant::now();
        for _ in 0..options.iterations {
            if started.elapsed() >= options.duration {
                break;
            }
            let outcome = traverse(&client, &path, resource_version, limit, options.protobuf).await;
            traversals += 1;
            match outcome {
                Ok(t) => {
                    requests += t.pages;
                    if t.items == expected {
                        histogram.record_duration(t.transfer);
                        bytes += t.bytes;
                        measured += t.transfer;
                    } else {
                        errors += 1;
                        tally.note(format!("{label}: {} items, expected {expected}", t.items));
                    }
                }
                Err(error) => {
                    requests += 1;
                    errors += 1;
                    if let Some(status @ (401 | 403)) = error.status {
                        return Err(BenchError::from_status(
                            client.server(),
                            "GET",
                            &path,
                            status,
                            &error.body,
                        ));
                    }
                    tally.note(format!("{label}: {}", error.message));
                }
            }
        }
        cpu.finish(&mut result, "traversal", label, traversals);
        // Traversals run one after another; the rate is of their transfer time (see
        // `Traversal::transfer`).
        let mut row = Row::from_histogram(label, &histogram, errors, measured);
        row.bytes_per_second = Some(if measured.is_zero() {
            0.0
        } else {
            bytes as f64 / measured.as_secs_f64()
        });
        result.rows.push(row);
    }
    meter.finish(&mut result, requests);
    result.error_samples = tally.samples();
    Ok(result)
}
