//! WATCH: a chunked stream of events. An event's frame is made once for all the watchers it is
//! delivered to (see `storage::Object::shared_encoding`), and a JSON frame is the envelope
//! around the object's bytes as the watch cache holds them.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use apimachinery::Status;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, StatusCode, header};
use hyper::body::Frame;
use rand::Rng;
use serde_json::{Value, json};
use storage::{Object, WatchEvent, WatchOptions};

use super::get::accept;
use super::list::predicate;
use super::negotiation::{Encoding, Negotiated, View, negotiate};
use super::query::Query;
use super::{ApiRequest, ApiResources, Response};
use crate::registry::{RegistryStore, ResourceInfo};

/// Upstream's `--min-request-timeout` default: a watch without `timeoutSeconds` lasts between
/// this and twice this, so that clients spread their re-watches.
const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1800);

pub async fn handle(
    api: &ApiResources,
    store: &Arc<RegistryStore>,
    req: ApiRequest,
) -> Result<Response, Status> {
    let n =
        negotiate(accept(&req), &[View::Object, View::Table])?.with_table_options(&req.query)?;
    let q = Query::parse(&req.query)?;
    q.validate_list_options(true)?;
    let mut pred_query = q.clone();
    if !req.info.name.is_empty() && pred_query.field_selector.is_none() {
        // A watch on one object (`/watch/.../name` or `.../name?watch=1`) is a watch on the
        // collection narrowed to that name.
        pred_query.field_selector = Some(format!("metadata.name={}", req.info.name));
    }
    let opts = WatchOptions {
        resource_version: q.read_resource_version()?,
        send_initial_events: q.send_initial_events,
        allow_bookmarks: q.allow_watch_bookmarks,
        predicate: predicate(&store.info, &pred_query)?,
    };
    let events = store.watch(&req.info.namespace, &opts).await?;
    // `timeoutSeconds=0` (or none) is the server's default, as upstream reads it.
    let timeout = match q.timeout_seconds.filter(|&s| s != 0) {
        Some(s) => Duration::from_secs(s.max(0).unsigned_abs()),
        None => {
            MIN_REQUEST_TIMEOUT
                + Duration::from_secs(rand::rng().random_range(0..MIN_REQUEST_TIMEOUT.as_secs()))
        }
    };
    // The body is the watch itself: the connection polls it when it can write, and each poll
    // takes the next event and encodes it. No task or channel of frames sits between the watch
    // and the connection, so an event costs one wake-up fewer per watcher, and a client that
    // does not read holds the watch's own queues back until the cacher closes it as too slow.
    let shutdown = api.shutdown.subscribe();
    let mut waiting_for_shutdown = shutdown.clone();
    let body = EventStream {
        events,
        deadline: Box::pin(tokio::time::sleep(timeout)),
        shutdown_signal: Box::pin(async move {
            // A change, or the sender gone: either way the server is going away.
            let _ = waiting_for_shutdown.changed().await;
        }),
        shutdown,
        registered: None,
        info: store.info.clone(),
        tables: api.tables.clone(),
        negotiated: n,
        first_table: true,
        sent: super::metrics::WatchEventMetrics::new(
            &store.info.group,
            &store.info.version,
            &store.info.resource,
        ),
        ended: false,
    };
    let mut r = http::Response::new(super::response::Body::stream(body));
    *r.status_mut() = StatusCode::OK;
    let ct = match n.encoding {
        Encoding::Protobuf => "application/vnd.kubernetes.protobuf;stream=watch",
        other => other.media_type(),
    };
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    Ok(r)
}

/// One watch's response body: its events, until the timeout, the server's shutdown or an ERROR
/// event ends it.
struct EventStream {
    events: storage::WatchStream,
    deadline: Pin<Box<tokio::time::Sleep>>,
    /// Read without waiting (`has_changed`) whenever the watch has nothing to send.
    shutdown: tokio::sync::watch::Receiver<bool>,
    /// Waits for the shutdown; polled only to register a waker.
    shutdown_signal: Pin<Box<dyn Future<Output = ()> + Send + Sync>>,
    /// The waker `deadline` and `shutdown_signal` were last polled with. Polling them registers
    /// the waker again (for the shutdown, under a lock every watch shares), so when the watch has
    /// nothing to send they are polled only for a waker they do not know; otherwise they are
    /// read, which costs nothing.
    registered: Option<Waker>,
    info: Arc<ResourceInfo>,
    tables: Arc<dyn super::TableConvertor>,
    negotiated: Negotiated,
    first_table: bool,
    sent: super::metrics::WatchEventMetrics,
    /// The last frame was sent: an ERROR event, or the watch is over.
    ended: bool,
}

impl EventStream {
    /// Whether the timeout passed or the server is shutting down, registering `cx`'s waker with
    /// both if they do not know it yet.
    fn over(&mut self, cx: &mut Context<'_>) -> bool {
        if self.deadline.is_elapsed() || !matches!(self.shutdown.has_changed(), Ok(false)) {
            return true;
        }
        if self
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            return false;
        }
        if self.deadline.as_mut().poll(cx).is_ready()
            || self.shutdown_signal.as_mut().poll(cx).is_ready()
        {
            return true;
        }
        self.registered = Some(cx.waker().clone());
        false
    }
}

impl http_body::Body for EventStream {
    type Data = Bytes;
    type Error = Infallible;

    /// The next frame, or `None` when the watch is over. The watch is polled first; the timeout
    /// and the shutdown only when it has nothing to send.
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        let event = match this.events.poll_recv(cx) {
            Poll::Ready(Some(event)) => event,
            Poll::Pending if !this.over(cx) => return Poll::Pending,
            Poll::Ready(None) | Poll::Pending => {
                this.ended = true;
                return Poll::Ready(None);
            }
        };
        this.ended = matches!(event, WatchEvent::Error(_));
        let frame = encode_event(
            &this.info,
            this.tables.as_ref(),
            &event,
            this.negotiated,
            &mut this.first_table,
        );
        match frame {
            Ok(frame) => {
                this.sent.sent(frame.len());
                Poll::Ready(Some(Ok(Frame::data(frame))))
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot encode watch event");
                this.ended = true;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }
}

fn bookmark(info: &ResourceInfo, rv: i64, initial_events_end: bool) -> Value {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_events_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"kind": info.kind, "apiVersion": info.api_version(), "metadata": meta})
}

fn encode_event(
    info: &ResourceInfo,
    tables: &dyn super::TableConvertor,
    event: &WatchEvent,
    n: Negotiated,
    first_table: &mut bool,
) -> Result<Bytes, Status> {
    // The names an object's frame is shared under (`Object::shared_encoding`), JSON's and
    // protobuf's: the encoding and the event's type, the two things besides the object that
    // its bytes depend on.
    let (kind, obj, shared_as): (&str, Option<&Object>, [&'static str; 2]) = match event {
        WatchEvent::Added(o) => ("ADDED", Some(o), ["json ADDED", "protobuf ADDED"]),
        WatchEvent::Modified(o) => ("MODIFIED", Some(o), ["json MODIFIED", "protobuf MODIFIED"]),
        WatchEvent::Deleted(o) => ("DELETED", Some(o), ["json DELETED", "protobuf DELETED"]),
        WatchEvent::Bookmark { .. } => ("BOOKMARK", None, [""; 2]),
        WatchEvent::Error(_) => ("ERROR", None, [""; 2]),
    };
    // The object's own frame, JSON or protobuf, is made once for all the watchers an event is
    // delivered to (`Object::shared_encoding`); JSON objects are spliced in as stored.
    if let (Some(o), View::Object) = (obj, n.view) {
        match n.encoding {
            Encoding::Json => {
                return o.shared_encoding(shared_as[0], |o| {
                    let mut out = BytesMut::with_capacity(o.bytes.len() + 32);
                    out.put_slice(b"{\"type\":\"");
                    out.put_slice(kind.as_bytes());
                    out.put_slice(b"\",\"object\":");
                    out.put_slice(&o.bytes);
                    out.put_slice(b"}\n");
                    Ok(out.freeze())
                });
            }
            Encoding::Protobuf => {
                return o.shared_encoding(shared_as[1], |o| {
                    let value = o.value().map_err(Status::internal)?;
                    ironplane_protobuf::encode_watch_event(kind, &value)
                        .map(Bytes::from)
                        .map_err(|e| Status::internal(e.to_string()))
                });
            }
            _ => {}
        }
    }
    let value = match event {
        WatchEvent::Bookmark {
            resource_version,
            initial_events_end,
        } => bookmark(info, *resource_version, *initial_events_end),
        WatchEvent::Error(e) => {
            let s = match e {
                storage::StorageError::Expired(m) => Status::expired(m.clone()),
                other => Status::internal(other),
            };
            s.to_json()
        }
        _ => {
            let v = obj
                .map(Object::value)
                .transpose()
                .map_err(Status::internal)?
                .unwrap_or(Value::Null);
            if n.view == View::Table {
                let now = chrono::Utc::now();
                let mut t = json!({
                    "kind": "Table",
                    "apiVersion": format!("meta.k8s.io/{}", n.view_version),
                    "metadata": {"resourceVersion": v.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null)},
                    "rows": [{
                        "cells": tables.cells(info, &v, now),
                        "object": super::table::row_object(&v, n.view_version, n.include_object),
                    }],
                });
                // Column definitions travel with the first table of the stream only.
                if *first_table {
                    t["columnDefinitions"] = tables.column_definitions(info);
                    *first_table = false;
                } else {
                    t["columnDefinitions"] = json!([]);
                }
                t
            } else {
                v
            }
        }
    };
    match n.encoding {
        Encoding::Protobuf => ironplane_protobuf::encode_watch_event(kind, &value)
            .map(Bytes::from)
            .map_err(|e| Status::internal(e.to_string())),
        _ => {
            // metav1.WatchEvent's fields in Go's order, the object as its kind writes it.
            let mut b = Vec::with_capacity(256);
            b.extend_from_slice(b"{\"type\":\"");
            b.extend_from_slice(kind.as_bytes());
            b.extend_from_slice(b"\",\"object\":");
            ironplane_protobuf::write_json(&value, &mut b);
            b.extend_from_slice(b"}\n");
            Ok(Bytes::from(b))
        }
    }
}
