//! The Events the in-process controllers record, written as kube-controller-manager's
//! controllers write theirs: each controller has a [`Recorder`] (client-go's `record`
//! package: an `EventBroadcaster` with a recorder for `v1.EventSource{Component: <name>}`,
//! recording to a sink over the core/v1 Events API), and the Events land in the object's
//! namespace (`default` for an object without one) through the server's internal write path,
//! as the controller's service account and with the field manager `kube-controller-manager`.
//!
//! What upstream's namesakes record (v1.36, pkg/controller/...; every one of them uses the
//! core/v1 `record` broadcaster, none the events.k8s.io/v1 `events` one, so `source.component`
//! and `reportingComponent` are the component below and `reportingInstance` is empty):
//!
//! | controller | component | type, reason: message | on |
//! |---|---|---|---|
//! | garbage collector | `garbage-collector-controller` | Warning `OwnerRefInvalidNamespace`: `ownerRef [<apiVersion>/<kind>, namespace: <ns>, name: <name>, uid: <uid>] does not exist in namespace "<ns>"` — a dependent names, by uid, an owner a watch has seen in another namespace | the dependent (no resourceVersion) |
//! | endpoints | `endpoint-controller` | Warning `FailedToCreateEndpoint`: `Failed to create endpoint for service <ns>/<name>: <error>` (not when the namespace is terminating) | the Endpoints, whose reference has no namespace, so the Event goes to `default` |
//! | endpoints | `endpoint-controller` | Warning `FailedToUpdateEndpoint`: `Failed to update endpoint <ns>/<name>: <error>` | the Endpoints |
//! | endpointslice | `endpoint-slice-controller` | Warning `FailedToUpdateEndpointSlices`: `Error updating Endpoint Slices for Service <ns>/<name>: <error>` (e.g. `skipping Pod <pod> for Service <ns>/<name>: Node <node> Not Found`) | the Service |
//! | endpointslice | `endpoint-slice-controller` | Warning `FailedToListPods`, `FailedToListEndpointSlices` (reads of local caches, which cannot fail here); Warning `TopologyAwareHintsDisabled`, Normal `TopologyAwareHintsEnabled` (topology-aware hints, which Ironplane does not compute: not recorded) | the Service |
//! | endpointslice mirroring | `endpoint-slice-mirroring-controller` | Warning `InvalidIPAddress`: `Skipped <n> invalid IP addresses when mirroring to EndpointSlices` | the Endpoints |
//! | endpointslice mirroring | `endpoint-slice-mirroring-controller` | Warning `TooManyAddressesToMirror`: `A max of <max> addresses can be mirrored to EndpointSlices per Endpoints subset. <n> addresses were skipped` | the Endpoints |
//! | service-cidr | `service-cidr-controller` | Warning `KubernetesServiceCIDRError`: `The ServiceCIDR Status can not be set to Ready=True` — writing `Ready=True` failed | the ServiceCIDR (cluster-scoped: `default`) |
//! | ttl-after-finished | `ttl-after-finished-controller` | a recorder is made, nothing is recorded | — |
//! | namespace, serviceaccount, serviceaccount-token, root-ca-cert-publisher, resourcequota, pv/pvc/vac protection, bootstrap-signer, token-cleaner, CSR approving/signing/cleaner, clusterrole-aggregation, validatingadmissionpolicy-status, legacy-serviceaccount-token-cleaner | — | none | — |
//!
//! What a reader of the Events sees is client-go's: the name `<object name>.<hex unix
//! nanoseconds>` (a UUID when that is no DNS subdomain), `involvedObject` as `GetReference`
//! makes it (apiVersion, kind, namespace, name, uid, resourceVersion), `firstTimestamp`,
//! `lastTimestamp` and `count`, and the `EventCorrelator`'s behaviour: an Event identical to
//! one recorded before (same source, object, type, reason and message) PATCHes that Event's
//! `count`, `lastTimestamp` and `message` instead of creating another (and creates it again if
//! it was deleted); ten Events differing only in message within ten minutes become one
//! `(combined from similar events): <message>` Event; a source may record 25 Events per object
//! and type, then one per five minutes (a token bucket per object, as upstream's spam filter).
//! The caches are upstream's size (4096 entries) but forget the entry used least recently by a
//! scan, not a list.
//!
//! What it must not do: block or fail the controller. [`Recorder::event`] only queues (up to
//! 1000 Events per recorder, upstream's `maxQueuedEvents`; past that the Event is dropped and
//! logged, as upstream's broadcaster drops on overflow), and one task per recorder writes them
//! one at a time. A write the server refuses is dropped, as upstream's recorder drops an Event
//! the API server rejected; there is no network to retry over.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apimachinery::validation::is_dns1123_subdomain;
use apiserver::authentication::UserInfo;
use apiserver::endpoints::ApiResources;
use apiserver::registry::{RegistryStore, Requester, UpdateOptions, WriteOptions};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// `maxQueuedEvents`: what a recorder holds before it drops.
const MAX_QUEUED_EVENTS: usize = 1000;
/// `maxLruCacheEntries`.
const CACHE_ENTRIES: usize = 4096;
/// `defaultAggregateMaxEvents` and `defaultAggregateIntervalInSeconds`.
const AGGREGATE_MAX_EVENTS: usize = 10;
const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
/// `defaultSpamBurst` and `defaultSpamQPS`.
const SPAM_BURST: f64 = 25.0;
const SPAM_QPS: f64 = 1.0 / 300.0;
/// `EventAggregatorByReasonMessageFunc`'s prefix.
const COMBINED: &str = "(combined from similar events): ";

/// `v1.EventTypeNormal` and `v1.EventTypeWarning`, the only types a recorder accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Leader election's `LeaderElection` Events (upstream's only other Normal Event in this
    /// set, `TopologyAwareHintsEnabled`, is about hints Ironplane does not compute).
    Normal,
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// core/v1 `ObjectReference`: what an Event is about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectReference {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
}

impl ObjectReference {
    /// client-go's `GetReference` of `obj`, whose kind is `api_version`/`kind` (what the
    /// scheme says of a typed object).
    pub fn to(api_version: &str, kind: &str, obj: &Value) -> ObjectReference {
        ObjectReference {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            namespace: obj.namespace().to_string(),
            name: obj.name().to_string(),
            uid: obj.uid().to_string(),
            resource_version: obj.resource_version().to_string(),
        }
    }

    /// Go's JSON of the reference (every field `omitempty`).
    fn to_value(&self) -> Value {
        let mut m = serde_json::Map::new();
        for (k, v) in [
            ("kind", &self.kind),
            ("namespace", &self.namespace),
            ("name", &self.name),
            ("uid", &self.uid),
            ("apiVersion", &self.api_version),
            ("resourceVersion", &self.resource_version),
        ] {
            if !v.is_empty() {
                m.insert(k.into(), Value::from(v.as_str()));
            }
        }
        Value::Object(m)
    }
}

/// One core/v1 Event, in the fields a recorder fills.
#[derive(Clone, Debug, PartialEq)]
struct Event {
    name: String,
    namespace: String,
    resource_version: String,
    involved: ObjectReference,
    reason: String,
    message: String,
    /// `source.component`.
    component: String,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    count: i32,
    event_type: EventType,
    reporting_component: String,
}

fn go_time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn unix_nanos(t: &DateTime<Utc>) -> i64 {
    t.timestamp_nanos_opt().unwrap_or_default()
}

/// `util.GenerateEventName`: `<name>.<hex nanoseconds>`, or a UUID when that is not a valid
/// object name (a long or odd referenced name).
fn event_name(object_name: &str, at: &DateTime<Utc>) -> String {
    let name = format!("{object_name}.{:x}", unix_nanos(at));
    if is_dns1123_subdomain(&name).is_empty() {
        name
    } else {
        uuid::Uuid::new_v4().to_string()
    }
}

impl Event {
    /// `makeEvent` with the recorder's source.
    fn new(
        component: &str,
        object: &ObjectReference,
        event_type: EventType,
        reason: &str,
        message: String,
        now: DateTime<Utc>,
    ) -> Event {
        let namespace = match object.namespace.as_str() {
            "" => "default".to_string(),
            ns => ns.to_string(),
        };
        Event {
            name: event_name(&object.name, &now),
            namespace,
            resource_version: String::new(),
            involved: object.clone(),
            reason: reason.to_string(),
            message,
            component: component.to_string(),
            first: now,
            last: now,
            count: 1,
            event_type,
            reporting_component: component.to_string(),
        }
    }

    /// `getEventKey`: what makes two Events the same one.
    fn key(&self) -> String {
        format!("{}\0{}\0{}", self.spam_key(), self.reason, self.message)
    }

    /// `getSpamKey`: the source, the object and the type.
    fn spam_key(&self) -> String {
        let i = &self.involved;
        [
            self.component.as_str(),
            &i.kind,
            &i.namespace,
            &i.name,
            &i.uid,
            &i.api_version,
            self.event_type.as_str(),
        ]
        .join("\0")
    }

    /// `EventAggregatorByReasonFunc`: the group of Events that differ only in message, and
    /// the message.
    fn aggregate_key(&self) -> String {
        format!(
            "{}\0{}\0{}",
            self.spam_key(),
            self.reason,
            self.reporting_component
        )
    }

    /// The Event as it is created.
    fn to_value(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "involvedObject": self.involved.to_value(),
            "reason": self.reason,
            "message": self.message,
            "source": {"component": self.component},
            "firstTimestamp": go_time(&self.first),
            "lastTimestamp": go_time(&self.last),
            "count": self.count,
            "type": self.event_type.as_str(),
            "eventTime": null,
            "reportingComponent": self.reporting_component,
            "reportingInstance": "",
        })
    }
}

/// A map that forgets the entry used least recently past `capacity` (`lru.Cache`).
struct Lru<V> {
    entries: HashMap<String, (V, u64)>,
    tick: u64,
    capacity: usize,
}

impl<V> Lru<V> {
    fn new(capacity: usize) -> Self {
        Lru {
            entries: HashMap::new(),
            tick: 0,
            capacity,
        }
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(key).map(|(v, used)| {
            *used = tick;
            v
        })
    }

    fn insert(&mut self, key: String, value: V) {
        self.tick += 1;
        self.entries.insert(key, (value, self.tick));
        if self.entries.len() > self.capacity {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.entries.remove(&k);
            }
        }
    }
}

/// `aggregateRecord`.
struct AggregateRecord {
    messages: HashSet<String>,
    last: DateTime<Utc>,
}

/// `eventLog`: the Event last written under a key.
#[derive(Clone)]
struct EventLog {
    count: i32,
    first: DateTime<Utc>,
    name: String,
    resource_version: String,
}

/// One source-and-object's token bucket (`spamRecord`).
struct Bucket {
    tokens: f64,
    at: DateTime<Utc>,
}

/// client-go's `EventCorrelator` with its default options: aggregation, counting and the spam
/// filter, in that order.
struct Correlator {
    aggregates: Lru<AggregateRecord>,
    logs: Lru<EventLog>,
    spam: Lru<Bucket>,
}

impl Default for Correlator {
    fn default() -> Self {
        Correlator {
            aggregates: Lru::new(CACHE_ENTRIES),
            logs: Lru::new(CACHE_ENTRIES),
            spam: Lru::new(CACHE_ENTRIES),
        }
    }
}

impl Correlator {
    /// `EventCorrelate`: the Event to write (`count > 1`: a PATCH of the existing one), or
    /// `None` when the spam filter drops it.
    fn correlate(&mut self, event: Event, now: DateTime<Utc>) -> Option<Event> {
        let (event, key) = self.aggregate(event, now);
        let event = self.observe(event, key);
        (!self.filtered(&event, now)).then_some(event)
    }

    /// `EventAggregate`: the Event itself and its key, or, once the tenth distinct message of
    /// a group arrives within the interval, a new combined Event keyed by the group.
    fn aggregate(&mut self, event: Event, now: DateTime<Utc>) -> (Event, String) {
        let key = event.key();
        let group = event.aggregate_key();
        // A group not seen within the interval starts afresh.
        let stale = self
            .aggregates
            .get_mut(&group)
            .is_none_or(|r| (now - r.last).to_std().unwrap_or_default() > AGGREGATE_INTERVAL);
        if stale {
            let fresh = AggregateRecord {
                messages: HashSet::new(),
                last: now,
            };
            self.aggregates.insert(group.clone(), fresh);
        }
        let Some(record) = self.aggregates.get_mut(&group) else {
            return (event, key);
        };
        record.messages.insert(event.message.clone());
        record.last = now;
        if record.messages.len() < AGGREGATE_MAX_EVENTS {
            return (event, key);
        }
        // The set stays below the threshold, so every later message of the group is combined.
        if let Some(any) = record.messages.iter().next().cloned() {
            record.messages.remove(&any);
        }
        // Upstream's combined Event names its object without the name check and carries no
        // reporting component.
        let combined = Event {
            name: format!("{}.{:x}", event.involved.name, unix_nanos(&now)),
            resource_version: String::new(),
            message: format!("{COMBINED}{}", event.message),
            first: now,
            last: now,
            count: 1,
            reporting_component: String::new(),
            ..event
        };
        (combined, group)
    }

    /// `eventObserve`: an Event seen before under `key` takes that Event's name,
    /// resourceVersion and first time, and counts one more.
    fn observe(&mut self, mut event: Event, key: String) -> Event {
        if let Some(last) = self.logs.get_mut(&key).filter(|l| l.count > 0) {
            event.name = last.name.clone();
            event.resource_version = last.resource_version.clone();
            event.first = last.first;
            event.count = last.count + 1;
        }
        self.logs.insert(key, Self::log_of(&event));
        event
    }

    /// `EventSourceObjectSpamFilter.Filter`: true when the object's source has no token left.
    fn filtered(&mut self, event: &Event, now: DateTime<Utc>) -> bool {
        let key = event.spam_key();
        if self.spam.get_mut(&key).is_none() {
            self.spam.insert(
                key.clone(),
                Bucket {
                    tokens: SPAM_BURST,
                    at: now,
                },
            );
        }
        let Some(bucket) = self.spam.get_mut(&key) else {
            return false;
        };
        let elapsed = (now - bucket.at).to_std().unwrap_or_default();
        bucket.tokens = (bucket.tokens + elapsed.as_secs_f64() * SPAM_QPS).min(SPAM_BURST);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            false
        } else {
            true
        }
    }

    /// `UpdateState`: what the server answered becomes what the next identical Event patches.
    fn written(&mut self, event: &Event) {
        self.logs.insert(event.key(), Self::log_of(event));
    }

    fn log_of(event: &Event) -> EventLog {
        EventLog {
            count: event.count,
            first: event.first,
            name: event.name.clone(),
            resource_version: event.resource_version.clone(),
        }
    }
}

/// Where Events are written (client-go's `EventSink`).
trait Sink {
    /// Creates the Event; the stored object.
    async fn create(&self, event: &Event) -> Result<Value, Status>;
    /// The correlator's strategic merge patch of an existing Event: its count, last time and
    /// message.
    async fn patch(&self, event: &Event) -> Result<Value, Status>;
}

/// The API server's Events, written as a controller.
struct StoreSink {
    store: Arc<RegistryStore>,
    write: WriteOptions,
    user: UserInfo,
}

impl Sink for StoreSink {
    async fn create(&self, event: &Event) -> Result<Value, Status> {
        let requester = Requester { user: &self.user };
        let created = self
            .store
            .create(&requester, &event.namespace, event.to_value(), &self.write)
            .await?;
        created.value().map_err(Status::internal)
    }

    async fn patch(&self, event: &Event) -> Result<Value, Status> {
        let requester = Requester { user: &self.user };
        let (count, last, message) = (event.count, go_time(&event.last), event.message.clone());
        let mut updater = |current: Option<&Value>| -> Result<Value, Status> {
            let mut v = current.cloned().unwrap_or_default();
            v["count"] = json!(count);
            v["lastTimestamp"] = json!(last);
            v["message"] = json!(message);
            // The patch names no resourceVersion: it applies to whatever is stored.
            v.remove_meta("resourceVersion");
            Ok(v)
        };
        let opts = UpdateOptions {
            write: self.write.clone(),
            ..UpdateOptions::default()
        };
        let (patched, _) = self
            .store
            .update(
                &requester,
                &event.namespace,
                &event.name,
                &mut updater,
                &opts,
            )
            .await?;
        patched.value().map_err(Status::internal)
    }
}

/// `recordEvent`: a PATCH for an Event seen before (a create if it is gone), else a create;
/// the stored Event, or why the server refused it.
async fn record(sink: &impl Sink, event: &mut Event) -> Result<(), Status> {
    let stored = if event.count > 1 {
        match sink.patch(event).await {
            Err(s) if s.code == 404 => {
                event.resource_version.clear();
                sink.create(event).await
            }
            other => other,
        }
    } else {
        event.resource_version.clear();
        sink.create(event).await
    }?;
    event.resource_version = stored.resource_version().to_string();
    if let Some(count) = stored.get("count").and_then(Value::as_i64) {
        event.count = i32::try_from(count).unwrap_or(event.count);
    }
    Ok(())
}

/// Writes queued Events one at a time, for as long as the recorder lives.
async fn run_sink(sink: impl Sink, mut queue: mpsc::Receiver<Event>) {
    let mut correlator = Correlator::default();
    while let Some(event) = queue.recv().await {
        let Some(mut event) = correlator.correlate(event, Utc::now()) else {
            continue;
        };
        tracing::debug!(
            object = %format!("{}/{}", event.involved.namespace, event.involved.name),
            kind = %event.involved.kind,
            r#type = event.event_type.as_str(),
            reason = %event.reason,
            message = %event.message,
            "Event occurred"
        );
        match record(&sink, &mut event).await {
            Ok(()) => correlator.written(&event),
            Err(s) => {
                // Upstream logs these quietly: an Event that already exists, or one in a
                // namespace being deleted.
                let quiet = s.code == 409
                    || s.details.as_ref().is_some_and(|d| {
                        d.causes.iter().any(|c| c.reason == "NamespaceTerminating")
                    });
                if quiet {
                    tracing::debug!(event = %event.name, error = %s.message, "Server rejected event (will not retry!)");
                } else {
                    tracing::warn!(event = %event.name, error = %s.message, "Server rejected event (will not retry!)");
                }
            }
        }
    }
}

/// A controller's event recorder: cheap to clone, never blocks.
#[derive(Clone)]
pub struct Recorder {
    component: &'static str,
    queue: mpsc::Sender<Event>,
}

impl Recorder {
    /// A recorder for upstream's controller `component`, writing as the service account
    /// `kube-system/<account>`. Without an Events resource (never, for the built-in API) the
    /// Events are dropped.
    pub fn start(api: &ApiResources, component: &'static str, account: &str) -> Recorder {
        Self::start_as(
            api,
            component,
            super::kube_system_account(account),
            super::CONTROLLER_MANAGER,
        )
    }

    /// A recorder for `component` writing as `user` with the field manager `manager`: the API
    /// server's own controllers record as its loopback client (`system:apiserver`,
    /// `kube-apiserver`).
    pub fn start_as(
        api: &ApiResources,
        component: &'static str,
        user: UserInfo,
        manager: &str,
    ) -> Recorder {
        let (tx, rx) = mpsc::channel(MAX_QUEUED_EVENTS);
        if let Some(store) = api.get("", "v1", "events").cloned() {
            let sink = StoreSink {
                write: api.internal_write(&store, manager),
                store,
                user,
            };
            tokio::spawn(run_sink(sink, rx));
        }
        Recorder {
            component,
            queue: tx,
        }
    }

    /// Records a Warning about `object`.
    pub fn warning(&self, object: &ObjectReference, reason: &str, message: impl Into<String>) {
        self.event(object, EventType::Warning, reason, message.into());
    }

    /// `Event`: queues the Event, or drops it when the queue is full.
    pub fn event(
        &self,
        object: &ObjectReference,
        event_type: EventType,
        reason: &str,
        message: String,
    ) {
        let event = Event::new(
            self.component,
            object,
            event_type,
            reason,
            message,
            Utc::now(),
        );
        if let Err(mpsc::error::TrySendError::Full(e)) = self.queue.try_send(event) {
            tracing::error!(reason = %e.reason, object = %e.involved.name, "Unable to record event: too many queued events, dropped event");
        }
    }
}

/// `utilerrors.NewAggregate(errs).Error()`: one message as it is, several distinct ones in
/// brackets, joined by `, `.
pub fn aggregate_errors(errors: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.as_slice() {
        [one] => (*one).to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + secs, 123_456_789).unwrap()
    }

    fn pod() -> ObjectReference {
        ObjectReference::to(
            "v1",
            "Pod",
            &json!({"metadata": {"name": "web", "namespace": "ns", "uid": "u1", "resourceVersion": "7"}}),
        )
    }

    fn warning(message: &str, now: DateTime<Utc>) -> Event {
        Event::new(
            "endpoint-controller",
            &pod(),
            EventType::Warning,
            "Failed",
            message.to_string(),
            now,
        )
    }

    #[test]
    fn events_are_named_and_filled_as_client_go_makes_them() {
        let e = warning("boom", at(0));
        // <name>.<hex of the Unix time in nanoseconds>.
        assert_eq!(e.name, format!("web.{:x}", 1_700_000_000_123_456_789_i64));
        assert_eq!(e.name, "web.17979cfe3d85cd15");
        let v = e.to_value();
        assert_eq!(v["metadata"]["namespace"], "ns");
        assert_eq!(
            v["involvedObject"],
            json!({"kind": "Pod", "namespace": "ns", "name": "web", "uid": "u1",
                   "apiVersion": "v1", "resourceVersion": "7"})
        );
        assert_eq!(v["source"], json!({"component": "endpoint-controller"}));
        assert_eq!(v["reportingComponent"], "endpoint-controller");
        assert_eq!(v["reportingInstance"], "");
        assert_eq!(v["firstTimestamp"], "2023-11-14T22:13:20Z");
        assert_eq!(v["lastTimestamp"], v["firstTimestamp"]);
        assert_eq!(
            (v["count"].clone(), v["type"].clone()),
            (json!(1), json!("Warning"))
        );
        // An object without a namespace is reported in `default`; a name that would make no
        // valid Event name gets a UUID.
        let cidr = ObjectReference {
            kind: "ServiceCIDR".into(),
            name: "kubernetes".into(),
            ..Default::default()
        };
        let e = Event::new("c", &cidr, EventType::Warning, "R", String::new(), at(0));
        assert_eq!(e.namespace, "default");
        assert!(e.to_value()["involvedObject"].get("namespace").is_none());
        let long = ObjectReference {
            name: "a".repeat(250),
            ..pod()
        };
        let e = Event::new("c", &long, EventType::Normal, "R", String::new(), at(0));
        assert!(uuid::Uuid::parse_str(&e.name).is_ok(), "{}", e.name);
    }

    #[test]
    fn an_identical_event_counts_up_the_first_one() {
        let mut c = Correlator::default();
        let first = c.correlate(warning("boom", at(0)), at(0)).unwrap();
        assert_eq!(first.count, 1);
        let mut stored = first.clone();
        stored.resource_version = "100".into();
        c.written(&stored);
        let again = c.correlate(warning("boom", at(5)), at(5)).unwrap();
        assert_eq!(again.count, 2);
        assert_eq!(again.name, first.name, "the same Event is patched");
        assert_eq!(again.resource_version, "100");
        assert_eq!((again.first, again.last), (at(0), at(5)));
        // Another message is another Event.
        let other = c.correlate(warning("bang", at(6)), at(6)).unwrap();
        assert_eq!(other.count, 1);
        assert_ne!(other.name, first.name);
    }

    #[test]
    fn the_tenth_distinct_message_is_combined() {
        let mut c = Correlator::default();
        for i in 0..9 {
            let e = c
                .correlate(warning(&format!("m{i}"), at(i)), at(i))
                .unwrap();
            assert_eq!(e.message, format!("m{i}"));
        }
        let combined = c.correlate(warning("m9", at(9)), at(9)).unwrap();
        assert_eq!(combined.message, "(combined from similar events): m9");
        assert_eq!(combined.reporting_component, "");
        assert_eq!(combined.count, 1);
        let next = c.correlate(warning("m10", at(10)), at(10)).unwrap();
        assert_eq!(next.message, "(combined from similar events): m10");
        assert_eq!((next.count, next.name), (2, combined.name));
        // Ten minutes later the group starts afresh.
        let later = at(10 + 601);
        assert_eq!(
            c.correlate(warning("m11", later), later).unwrap().message,
            "m11"
        );
    }

    #[test]
    fn a_source_gets_25_events_per_object_then_one_per_five_minutes() {
        let mut c = Correlator::default();
        let sent = (0..30)
            .filter(|i| {
                c.correlate(warning(&format!("x{}", i % 3), at(0)), at(0))
                    .is_some()
            })
            .count();
        assert_eq!(sent, 25);
        assert!(c.correlate(warning("x", at(299)), at(299)).is_none());
        assert!(c.correlate(warning("x", at(301)), at(301)).is_some());
        assert!(c.correlate(warning("x", at(302)), at(302)).is_none());
    }

    #[derive(Default)]
    struct FakeSink {
        stored: Mutex<HashMap<String, Value>>,
        calls: Mutex<Vec<String>>,
    }

    impl Sink for FakeSink {
        async fn create(&self, event: &Event) -> Result<Value, Status> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("create {}", event.name));
            let mut v = event.to_value();
            v.set_meta("resourceVersion", "1");
            self.stored
                .lock()
                .unwrap()
                .insert(event.name.clone(), v.clone());
            Ok(v)
        }

        async fn patch(&self, event: &Event) -> Result<Value, Status> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("patch {} count={}", event.name, event.count));
            let mut stored = self.stored.lock().unwrap();
            let Some(v) = stored.get_mut(&event.name) else {
                return Err(Status::not_found(
                    &apimachinery::GroupResource::new("", "events"),
                    &event.name,
                ));
            };
            v["count"] = json!(event.count);
            v["lastTimestamp"] = json!(go_time(&event.last));
            v.set_meta("resourceVersion", "2");
            Ok(v.clone())
        }
    }

    #[tokio::test]
    async fn repeats_patch_the_stored_event_and_a_deleted_one_is_created_again() {
        let sink = FakeSink::default();
        let mut c = Correlator::default();
        for (i, delete_first) in [(0, false), (1, false), (2, true)] {
            if delete_first {
                sink.stored.lock().unwrap().clear();
            }
            let mut e = c.correlate(warning("boom", at(i)), at(i)).unwrap();
            record(&sink, &mut e).await.unwrap();
            c.written(&e);
        }
        let name = warning("boom", at(0)).name;
        assert_eq!(
            *sink.calls.lock().unwrap(),
            vec![
                format!("create {name}"),
                format!("patch {name} count=2"),
                format!("patch {name} count=3"),
                format!("create {name}"),
            ]
        );
        let stored = sink.stored.lock().unwrap()[&name].clone();
        assert_eq!(stored["count"], 3, "created again with the count so far");
    }

    #[tokio::test]
    async fn a_full_queue_drops_instead_of_blocking() {
        let (tx, mut rx) = mpsc::channel(MAX_QUEUED_EVENTS);
        let recorder = Recorder {
            component: "c",
            queue: tx,
        };
        // Nothing drains the queue: every call returns at once, and what does not fit goes.
        for i in 0..MAX_QUEUED_EVENTS + 5 {
            recorder.warning(&pod(), "R", format!("{i}"));
        }
        let mut queued = 0;
        while let Ok(e) = rx.try_recv() {
            assert_eq!(
                e.message,
                queued.to_string(),
                "the first ones are kept, in order"
            );
            queued += 1;
        }
        assert_eq!(queued, MAX_QUEUED_EVENTS);
    }

    #[test]
    fn errors_aggregate_as_go() {
        assert_eq!(aggregate_errors(&["a".into()]), "a");
        assert_eq!(aggregate_errors(&["a".into(), "a".into()]), "a");
        assert_eq!(aggregate_errors(&["a".into(), "b".into()]), "[a, b]");
    }

    #[test]
    fn the_cache_forgets_the_least_recently_used() {
        let mut lru = Lru::new(2);
        lru.insert("a".into(), 1);
        lru.insert("b".into(), 2);
        assert!(lru.get_mut("a").is_some());
        lru.insert("c".into(), 3);
        assert!(lru.get_mut("b").is_none());
        assert!(lru.get_mut("a").is_some() && lru.get_mut("c").is_some());
    }
}
