//! Answers: objects, lists, tables and `Status` errors in the negotiated encoding. Objects from
//! storage are already JSON with their resourceVersion set, so a JSON answer writes their bytes
//! as they are and a list splices item bytes into its envelope: the hot read path never
//! re-encodes an object.

use std::convert::Infallible;

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use serde_json::{Value, json};
use storage::Object;

use super::ApiResources;
use super::negotiation::{Encoding, Negotiated, View};
use crate::registry::ResourceInfo;

pub type Response = http::Response<Body>;

/// A response's body: its bytes, or a stream (a watch, a long list, a proxied answer), and what
/// is to run once it is over. An answer's bytes are held as they are, not boxed; the filters
/// that hear when a response ends add to its list rather than wrap it, so a watch event goes
/// through one body, not one per filter.
pub struct Body {
    inner: Inner,
    /// Called once each, in the order added, when the body has been sent to its end or is
    /// dropped (the client went away), whichever comes first.
    on_end: Vec<Box<dyn FnOnce() + Send + Sync>>,
}

enum Inner {
    Full(Full<Bytes>),
    Stream(BoxBody<Bytes, Infallible>),
}

impl Body {
    /// A streamed body.
    pub fn stream<B>(body: B) -> Body
    where
        B: http_body::Body<Data = Bytes, Error = Infallible> + Send + Sync + 'static,
    {
        Body {
            inner: Inner::Stream(body.boxed()),
            on_end: Vec::new(),
        }
    }

    /// Whether the body is made while it is sent (a watch, a long list, a proxied answer) rather
    /// than held whole.
    pub fn is_stream(&self) -> bool {
        matches!(self.inner, Inner::Stream(_))
    }

    fn finish(&mut self) {
        for f in self.on_end.drain(..) {
            f();
        }
    }
}

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Body {
        inner: Inner::Full(Full::new(bytes.into())),
        on_end: Vec::new(),
    }
}

pub fn empty() -> Body {
    full(Bytes::new())
}

/// `body`, calling `on_end` once when it has been sent to its end or is dropped (the client went
/// away), whichever comes first: how long-running responses report that they are over.
pub fn completing(mut body: Body, on_end: Box<dyn FnOnce() + Send + Sync>) -> Body {
    body.on_end.push(on_end);
    body
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        let polled = match &mut self.inner {
            Inner::Full(b) => std::pin::Pin::new(b).poll_frame(cx),
            Inner::Stream(b) => std::pin::Pin::new(b).poll_frame(cx),
        };
        if let std::task::Poll::Ready(None) = polled {
            self.finish();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Full(b) => b.is_end_stream(),
            Inner::Stream(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match &self.inner {
            Inner::Full(b) => b.size_hint(),
            Inner::Stream(b) => b.size_hint(),
        }
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Marks a response written as upstream's `WriteObjectNegotiated` writes one, in JSON: objects,
/// lists, `Status` errors and discovery, which upstream indents for a pretty request. Watch
/// streams, OpenAPI documents, proxied answers and plain text are not marked.
#[derive(Clone, Copy, Debug)]
pub struct NegotiatedJson;

/// Upstream's `isPrettyPrint`: the `pretty` parameter when it is given, else a browser's or a
/// command-line HTTP tool's user agent.
pub fn is_pretty_print(query: &str, user_agent: Option<&str>) -> bool {
    if query.contains("pretty")
        && let Some((_, v)) = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "pretty")
        && !v.is_empty()
    {
        return matches!(&*v, "1" | "t" | "T" | "true" | "TRUE" | "True");
    }
    user_agent.is_some_and(|ua| {
        ua.starts_with("curl") || ua.starts_with("Wget") || ua.starts_with("Mozilla/5.0")
    })
}

/// The response indented with two spaces and no final newline, as Go's `json.Indent` leaves
/// it (members in the order and with the escapes they have), when it is marked
/// [`NegotiatedJson`]; any other response is returned as it is.
pub async fn pretty_print(r: Response) -> Response {
    if r.extensions().get::<NegotiatedJson>().is_none() {
        return r;
    }
    let (mut parts, body) = r.into_parts();
    let Ok(collected) = body.collect().await;
    let bytes = collected.to_bytes();
    let body = match apimachinery::gojson::indent(&bytes, "  ") {
        Some(out) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            Bytes::from(out)
        }
        None => bytes,
    };
    http::Response::from_parts(parts, full(body))
}

/// A negotiated answer already encoded: marked [`NegotiatedJson`] when it is JSON, which ends
/// with a newline, as upstream's serializer ends every JSON answer (Go's `json.Encoder`).
pub fn negotiated(code: StatusCode, encoding: Encoding, body: impl Into<Bytes>) -> Response {
    if encoding != Encoding::Json {
        return raw(code, encoding.media_type(), body);
    }
    let body: Bytes = body.into();
    // A body written for this answer has no other owner and grows in place; one shared with the
    // watch cache is copied.
    let mut ended = body
        .try_into_mut()
        .unwrap_or_else(|shared| bytes::BytesMut::from(&shared[..]));
    ended.extend_from_slice(b"\n");
    let mut r = raw(code, encoding.media_type(), ended.freeze());
    r.extensions_mut().insert(NegotiatedJson);
    r
}

/// A response with a body already encoded as `content_type`.
pub fn raw(code: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response {
    let mut r = http::Response::new(full(body));
    *r.status_mut() = code;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

/// Encodes a JSON value in the negotiated encoding.
pub fn encode_value(v: &Value, encoding: Encoding) -> Result<Bytes, Status> {
    match encoding {
        Encoding::Json => Ok(Bytes::from(ironplane_protobuf::to_json(v))),
        Encoding::Yaml => serde_yaml_ng::to_string(v)
            .map(Bytes::from)
            .map_err(Status::internal),
        Encoding::Protobuf => ironplane_protobuf::encode(v)
            .map(Bytes::from)
            .map_err(|e| Status::internal(e.to_string())),
    }
}

pub fn value(code: StatusCode, v: &Value, n: Negotiated) -> Result<Response, Status> {
    Ok(negotiated(code, n.encoding, encode_value(v, n.encoding)?))
}

/// The `metav1.Status` answer of a failed request: JSON unless the client asked for YAML or
/// protobuf, with the Status' code as the HTTP code.
pub fn status(s: &Status, encoding: Encoding) -> Response {
    let code = StatusCode::from_u16(s.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let object = s.to_json();
    // JSON always encodes a Status; should another encoding fail, answer in JSON rather than
    // not at all.
    let (encoding, body) = match encode_value(&object, encoding) {
        Ok(b) => (encoding, b),
        Err(_) => (
            Encoding::Json,
            encode_value(&object, Encoding::Json).unwrap_or_default(),
        ),
    };
    let mut r = negotiated(code, encoding, body);
    if (s.code == 429 || s.code == 504)
        && let Some(secs) = s
            .details
            .as_ref()
            .map(|d| d.retry_after_seconds)
            .filter(|s| *s > 0)
    {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    r
}

/// `PartialObjectMetadata` of one object.
fn partial_metadata(obj: &Value, version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// One stored object in the negotiated view and encoding.
pub fn object(
    api: &ApiResources,
    info: &ResourceInfo,
    code: StatusCode,
    obj: &Object,
    n: Negotiated,
) -> Result<Response, Status> {
    match (n.view, n.encoding) {
        (View::Object, Encoding::Json) => Ok(negotiated(code, n.encoding, obj.bytes.clone())),
        (View::Object, _) => value(code, &obj.value().map_err(Status::internal)?, n),
        (View::Table, _) => {
            let v = obj.value().map_err(Status::internal)?;
            // Upstream's table generator gives one object's Table that object's
            // resourceVersion (`meta.CommonAccessor`).
            let rv = v.resource_version();
            let meta = (!rv.is_empty()).then(|| json!({ "resourceVersion": rv }));
            let table = super::table::table(
                api,
                info,
                std::slice::from_ref(&v),
                meta,
                n.view_version,
                true,
                n.include_object,
            );
            value(code, &table, n)
        }
        (View::PartialObjectMetadata, _) => value(
            code,
            &partial_metadata(&obj.value().map_err(Status::internal)?, n.view_version),
            n,
        ),
        _ => Err(Status::not_acceptable(
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        )),
    }
}

/// The `metadata` of a list: resourceVersion, and continue / remainingItemCount when paging.
pub fn list_metadata(
    resource_version: i64,
    continue_token: Option<&str>,
    remaining: Option<i64>,
) -> Value {
    let mut m = json!({"resourceVersion": resource_version.to_string()});
    if let Some(c) = continue_token {
        m["continue"] = json!(c);
    }
    if let Some(r) = remaining {
        m["remainingItemCount"] = json!(r);
    }
    m
}

/// A list in the negotiated view and encoding. Items of built-in kinds are written without
/// `apiVersion` and `kind`, as upstream's typed lists are (only the list names its kind);
/// custom resources' items keep theirs, as upstream's unstructured lists do.
///
/// The items are taken so that the JSON path can let go of each once it is written, while its
/// reference count is still in the processor's cache.
pub fn list(
    api: &ApiResources,
    info: &ResourceInfo,
    items: Vec<Object>,
    meta: Value,
    n: Negotiated,
) -> Result<Response, Status> {
    match (n.view, n.encoding) {
        (View::Object, Encoding::Json) => Ok(json_list(info, items, &meta)),
        // Custom resources never get here in protobuf: `dispatch` strikes it from their accept.
        (View::Object, Encoding::Protobuf) => {
            // Item by item, each parsed only when it is encoded: no list of every item's JSON
            // value, and no second encoding of the whole list to leave out an item that has no
            // protobuf form.
            let mut unreadable = None;
            let values = items.iter().map_while(|o| match o.value() {
                Ok(v) => Some(v),
                Err(e) => {
                    unreadable = Some(e);
                    None
                }
            });
            let encoded = ironplane_protobuf::encode_list(
                &info.api_version(),
                &info.list_kind(),
                &meta,
                values,
                |item, e| {
                    // An object stored before the type checks existed may not fit its Go
                    // type, and so has no protobuf form: it is left out (and logged) rather
                    // than failing the list.
                    tracing::error!(name = %item.name(), namespace = %item.namespace(), error = %e,
                        "a stored object has no protobuf form; left out of the list");
                },
            );
            if let Some(e) = unreadable {
                return Err(Status::internal(e));
            }
            let encoded = encoded.map_err(|e| Status::internal(e.to_string()))?;
            Ok(negotiated(StatusCode::OK, n.encoding, Bytes::from(encoded)))
        }
        (View::Object, _) => {
            // YAML: the JSON form as values.
            let mut values: Vec<Value> = items
                .iter()
                .map(Object::value)
                .collect::<Result<_, _>>()
                .map_err(Status::internal)?;
            if !info.unstructured {
                for v in &mut values {
                    if let Some(o) = v.as_object_mut() {
                        o.remove("apiVersion");
                        o.remove("kind");
                    }
                }
            }
            let list = json!({"kind": info.list_kind(), "apiVersion": info.api_version(), "metadata": meta, "items": values});
            value(StatusCode::OK, &list, n)
        }
        (View::Table, _) => {
            let values: Result<Vec<Value>, _> = items.iter().map(Object::value).collect();
            let t = super::table::table(
                api,
                info,
                &values.map_err(Status::internal)?,
                Some(meta),
                n.view_version,
                true,
                n.include_object,
            );
            value(StatusCode::OK, &t, n)
        }
        (View::PartialObjectMetadataList | View::PartialObjectMetadata, _) => {
            let mut out = Vec::with_capacity(items.len());
            for o in items {
                out.push(partial_metadata(
                    &o.value().map_err(Status::internal)?,
                    n.view_version,
                ));
            }
            let v = json!({"kind": "PartialObjectMetadataList", "apiVersion": format!("meta.k8s.io/{}", n.view_version), "metadata": meta, "items": out});
            value(StatusCode::OK, &v, n)
        }
        _ => Err(Status::not_acceptable(
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        )),
    }
}

/// A list in JSON: its items' bytes spliced into the envelope, whole when it is short, else
/// written while it is sent ([`JsonListBody`]).
fn json_list(info: &ResourceInfo, items: Vec<Object>, meta: &Value) -> Response {
    let (head, tail) = json_list_envelope(info, meta);
    // One pass over the items before any is written: the answer's size, exact when every
    // item's is known without a scan.
    let mut size = head.len() + tail.len() + items.len().saturating_sub(1);
    let mut exact = true;
    for o in &items {
        match (info.unstructured, o.list_item_len()) {
            (true, _) => size += o.bytes.len(),
            (false, Some(len)) => size += len,
            (false, None) => {
                size += o.bytes.len();
                exact = false;
            }
        }
    }
    let mut list = JsonListBody {
        out: head,
        items: items.into_iter(),
        unstructured: info.unstructured,
        first: true,
        tail: Some(tail),
        left: exact.then_some(size as u64),
    };
    if size <= LIST_CHUNK {
        list.out.reserve(size - list.out.len());
        list.fill(usize::MAX);
        // The envelope's newline is added here, as to every JSON answer.
        list.out.pop();
        return negotiated(StatusCode::OK, Encoding::Json, Bytes::from(list.out));
    }
    let mut r = http::Response::new(Body::stream(list));
    if let Ok(v) = HeaderValue::from_str(Encoding::Json.media_type()) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r.extensions_mut().insert(NegotiatedJson);
    r
}

/// A JSON list longer than this is written while it is sent, in chunks of this size, rather
/// than whole before its first byte (upstream streams its list encoding too): the server never
/// holds a second copy of the whole list, and the client can read the first items while the
/// next are copied. A chunk is large enough that the connection's task is woken a few times per
/// list, not once per item (each chunk waits for the one before to be taken).
const LIST_CHUNK: usize = 1 << 20;

/// A JSON list's envelope: what comes before its first item (ending in `"items":[`), and what
/// comes after its last, ending in the newline every JSON answer ends with. Typed lists write
/// their fields in Go's order, `items` last; an unstructured list is a map, members sorted, as
/// upstream writes it.
fn json_list_envelope(info: &ResourceInfo, meta: &Value) -> (Vec<u8>, Vec<u8>) {
    let mut head = Vec::with_capacity(256);
    let mut tail = Vec::with_capacity(256);
    if info.unstructured {
        head.extend_from_slice(b"{\"apiVersion\":");
        apimachinery::gojson::write_str(&info.api_version(), &mut head);
        head.extend_from_slice(b",\"items\":[");
        tail.extend_from_slice(b"],\"kind\":");
        apimachinery::gojson::write_str(&info.list_kind(), &mut tail);
        tail.extend_from_slice(b",\"metadata\":");
        apimachinery::gojson::write(meta, &mut tail);
        tail.extend_from_slice(b"}\n");
    } else {
        // The envelope is a closed JSON object, reopened to append the items.
        let envelope =
            json!({"kind": info.list_kind(), "apiVersion": info.api_version(), "metadata": meta});
        ironplane_protobuf::write_json(&envelope, &mut head);
        head.pop();
        head.extend_from_slice(b",\"items\":[");
        tail.extend_from_slice(b"]}\n");
    }
    (head, tail)
}

/// A JSON list written as it is sent. Each item is let go once written, while its reference
/// count is still in the processor's cache.
struct JsonListBody {
    /// What is written and not yet sent: the envelope's head at first.
    out: Vec<u8>,
    items: std::vec::IntoIter<Object>,
    unstructured: bool,
    first: bool,
    /// The envelope's end, until it is written.
    tail: Option<Vec<u8>>,
    /// Bytes not yet sent, when the list's size is exact.
    left: Option<u64>,
}

impl JsonListBody {
    /// Writes items until `out` holds `limit` bytes or the list is written to its end.
    fn fill(&mut self, limit: usize) {
        while self.out.len() < limit {
            let Some(o) = self.items.next() else {
                if let Some(tail) = self.tail.take() {
                    self.out.extend_from_slice(&tail);
                }
                return;
            };
            if !std::mem::take(&mut self.first) {
                self.out.push(b',');
            }
            if self.unstructured {
                self.out.extend_from_slice(&o.bytes);
            } else {
                o.extend_list_item(&mut self.out);
            }
        }
    }
}

impl http_body::Body for JsonListBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        if self.is_end_stream() {
            return std::task::Poll::Ready(None);
        }
        self.out.reserve(LIST_CHUNK);
        self.fill(LIST_CHUNK);
        let chunk = std::mem::take(&mut self.out);
        if let Some(left) = &mut self.left {
            *left = left.saturating_sub(chunk.len() as u64);
        }
        std::task::Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from(chunk)))))
    }

    fn is_end_stream(&self) -> bool {
        self.out.is_empty() && self.tail.is_none()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self.left {
            Some(left) => http_body::SizeHint::with_exact(left),
            None => http_body::SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use futures_util::StreamExt;

    use super::*;

    fn recording(
        log: &Arc<Mutex<Vec<&'static str>>>,
        name: &'static str,
    ) -> Box<dyn FnOnce() + Send + Sync> {
        let log = log.clone();
        Box::new(move || log.lock().unwrap().push(name))
    }

    #[tokio::test]
    async fn what_runs_at_a_bodys_end_runs_once_in_order_at_its_end_or_its_drop() {
        // Sent to its end: each once, in the order added, once the last frame is out.
        let log = Arc::new(Mutex::new(Vec::new()));
        let body = completing(full("answer"), recording(&log, "metrics"));
        let body = completing(body, recording(&log, "audit"));
        assert_eq!(
            http_body::Body::size_hint(&body).exact(),
            Some(6),
            "the bytes' length is kept"
        );
        let Ok(collected) = body.collect().await;
        assert_eq!(collected.to_bytes(), "answer");
        assert_eq!(*log.lock().unwrap(), ["metrics", "audit"]);

        // A stream the client left before its end: run when the body is dropped.
        let log = Arc::new(Mutex::new(Vec::new()));
        let frames = futures_util::stream::iter([Ok(http_body::Frame::data(Bytes::from("a")))])
            .chain(futures_util::stream::pending());
        let body = Body::stream(http_body_util::StreamBody::new(frames));
        let mut body = completing(body, recording(&log, "watch over"));
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, "a");
        assert!(
            log.lock().unwrap().is_empty(),
            "not over while it may still send"
        );
        drop(body);
        assert_eq!(*log.lock().unwrap(), ["watch over"]);
    }

    fn object(json: String) -> Object {
        Object::new(
            Arc::from("/k"),
            Bytes::from(json),
            1,
            Arc::new(storage::Attrs::default()),
        )
    }

    /// Every frame of `body`, and the size it said it had before the first.
    async fn frames(body: Body) -> (Vec<Bytes>, Option<u64>) {
        let size = http_body::Body::size_hint(&body).exact();
        let mut body = body;
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            out.push(frame.unwrap().into_data().unwrap());
        }
        (out, size)
    }

    #[tokio::test]
    async fn a_long_json_list_is_written_while_it_is_sent_and_reads_as_a_short_one_does() {
        let configmaps = ResourceInfo {
            kind: "ConfigMap".into(),
            version: "v1".into(),
            ..Default::default()
        };
        let meta = json!({"resourceVersion": "5"});
        let stored = |i: usize| {
            format!(
                r#"{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"name":"c{i}"}},"data":{{"k":"{}"}}}}"#,
                "v".repeat(500)
            )
        };
        // Written here without the list code: items without their type meta, Go's field order.
        let expected = |n: usize| {
            let items: Vec<String> = (0..n)
                .map(|i| {
                    format!(
                        r#"{{"metadata":{{"name":"c{i}"}},"data":{{"k":"{}"}}}}"#,
                        "v".repeat(500)
                    )
                })
                .collect();
            format!(
                r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"5"}},"items":[{}]}}"#,
                items.join(",")
            ) + "\n"
        };

        // 3,000 items (1.7 MB): streamed, in more than one chunk, its exact size told first.
        let r = json_list(
            &configmaps,
            (0..3000).map(|i| object(stored(i))).collect(),
            &meta,
        );
        assert!(r.extensions().get::<NegotiatedJson>().is_some());
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
        assert!(r.body().is_stream());
        let (chunks, size) = frames(r.into_body()).await;
        let whole: Vec<u8> = chunks.concat();
        assert!(chunks.len() >= 2, "{} chunks", chunks.len());
        assert!(chunks.iter().all(|c| c.len() <= LIST_CHUNK + 1024));
        assert_eq!(size, Some(whole.len() as u64));
        assert_eq!(String::from_utf8(whole).unwrap(), expected(3000));

        // Two items: whole, and the same bytes.
        let r = json_list(
            &configmaps,
            (0..2).map(|i| object(stored(i))).collect(),
            &meta,
        );
        assert!(!r.body().is_stream());
        let (chunks, size) = frames(r.into_body()).await;
        assert_eq!(size, Some(chunks.concat().len() as u64));
        assert_eq!(String::from_utf8(chunks.concat()).unwrap(), expected(2));
        let (chunks, _) = frames(json_list(&configmaps, Vec::new(), &meta).into_body()).await;
        assert_eq!(String::from_utf8(chunks.concat()).unwrap(), expected(0));

        // An item whose type meta does not lead is scanned as it is written: the size is not
        // known before, and the answer is the same.
        let mut items: Vec<Object> = (0..3000).map(|i| object(stored(i))).collect();
        items[1] = object(format!(
            r#"{{"metadata":{{"name":"c1"}},"kind":"ConfigMap","data":{{"k":"{}"}},"apiVersion":"v1"}}"#,
            "v".repeat(500)
        ));
        let (chunks, size) = frames(json_list(&configmaps, items, &meta).into_body()).await;
        assert_eq!(size, None);
        assert_eq!(String::from_utf8(chunks.concat()).unwrap(), expected(3000));

        // A custom resource's list keeps its items' type meta, and is a map with sorted members.
        let widgets = ResourceInfo {
            kind: "Widget".into(),
            group: "example.com".into(),
            version: "v1".into(),
            unstructured: true,
            ..Default::default()
        };
        let widget = |i: usize| {
            format!(
                r#"{{"apiVersion":"example.com/v1","kind":"Widget","metadata":{{"name":"w{i}"}},"spec":"{}"}}"#,
                "s".repeat(600)
            )
        };
        let r = json_list(
            &widgets,
            (0..2000).map(|i| object(widget(i))).collect(),
            &meta,
        );
        assert!(r.body().is_stream());
        let (chunks, size) = frames(r.into_body()).await;
        let whole = String::from_utf8(chunks.concat()).unwrap();
        assert_eq!(size, Some(whole.len() as u64));
        let items: Vec<String> = (0..2000).map(widget).collect();
        assert_eq!(
            whole,
            format!(
                r#"{{"apiVersion":"example.com/v1","items":[{}],"kind":"WidgetList","metadata":{{"resourceVersion":"5"}}}}"#,
                items.join(",")
            ) + "\n"
        );
    }
}
