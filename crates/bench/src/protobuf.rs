//! What the tool reads of Kubernetes' protobuf answers, without a schema: a message's fields by
//! number, and the object inside the `k8s\0` envelope (a `runtime.Unknown`). Enough to find a
//! watch event's type and resourceVersion, or a list's items and `continue`, as the scenarios
//! need; never a whole object.

/// The media type client-go asks for when it talks protobuf.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// What a request asks for: protobuf, as client-go's informers of built-in kinds ask, or JSON.
pub fn accept(protobuf: bool) -> &'static str {
    if protobuf {
        MEDIA_TYPE
    } else {
        crate::client::JSON
    }
}

/// The `encoding` parameter of a scenario's report.
pub fn encoding(protobuf: bool) -> &'static str {
    if protobuf { "protobuf" } else { "json" }
}

/// What starts an object's envelope.
const MAGIC: &[u8] = b"k8s\0";

/// A field of a message, as far as the tool reads one: varints, and everything else as bytes
/// (length-delimited values, and fixed-width ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = buf.split_first()?;
        *buf = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// The fields of `message` in order, as (number, value); `None` for the rest once it is
/// malformed.
pub fn fields(mut message: &[u8]) -> impl Iterator<Item = Option<(u64, Field<'_>)>> {
    std::iter::from_fn(move || {
        if message.is_empty() {
            return None;
        }
        let mut next = || {
            let key = varint(&mut message)?;
            let value = match key & 7 {
                0 => Field::Varint(varint(&mut message)?),
                1 | 5 => {
                    let width = if key & 7 == 1 { 8 } else { 4 };
                    let bytes = message.get(..width)?;
                    message = &message[width..];
                    Field::Bytes(bytes)
                }
                2 => {
                    let len = usize::try_from(varint(&mut message)?).ok()?;
                    let bytes = message.get(..len)?;
                    message = &message[len..];
                    Field::Bytes(bytes)
                }
                _ => return None,
            };
            Some((key >> 3, value))
        };
        let item = next();
        if item.is_none() {
            // Nothing after a malformed field can be read.
            message = &[];
        }
        Some(item)
    })
}

/// The first field numbered `number` of `message`; `None` when it has none or is malformed
/// before it.
pub fn field(message: &[u8], number: u64) -> Option<Field<'_>> {
    for item in fields(message) {
        let (n, value) = item?;
        if n == number {
            return Some(value);
        }
    }
    None
}

/// [`field`] when it holds bytes.
pub fn bytes_field(message: &[u8], number: u64) -> Option<&[u8]> {
    match field(message, number)? {
        Field::Bytes(bytes) => Some(bytes),
        Field::Varint(_) => None,
    }
}

/// The object message inside an envelope: `k8s\0`, then a `runtime.Unknown` whose field 2 is
/// the object.
pub fn envelope_object(envelope: &[u8]) -> Option<&[u8]> {
    bytes_field(envelope.strip_prefix(MAGIC)?, 2)
}

/// What the scenarios read of a list page in protobuf: its items, counted, and its
/// `ListMeta`'s `resourceVersion` (field 2), `continue` (field 3) and `remainingItemCount`
/// (field 4).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ListPage {
    pub items: u64,
    pub resource_version: Option<String>,
    pub continue_token: Option<String>,
    pub remaining_item_count: Option<u64>,
}

/// Reads a list answer in protobuf (an envelope around any `XxxList`: metadata is field 1,
/// items field 2).
pub fn list_page(envelope: &[u8]) -> Result<ListPage, String> {
    let list = envelope_object(envelope).ok_or("not a protobuf envelope")?;
    let mut page = ListPage::default();
    for item in fields(list) {
        match item.ok_or("a malformed list message")? {
            (1, Field::Bytes(meta)) => {
                if let Some(rv) = bytes_field(meta, 2) {
                    page.resource_version = Some(String::from_utf8_lossy(rv).into_owned());
                }
                if let Some(token) = bytes_field(meta, 3) {
                    page.continue_token = Some(String::from_utf8_lossy(token).into_owned());
                }
                if let Some(Field::Varint(n)) = field(meta, 4) {
                    page.remaining_item_count = Some(n);
                }
            }
            (2, _) => page.items += 1,
            _ => {}
        }
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list as the server's own encoder writes it, read back.
    #[test]
    fn a_list_page_is_counted_and_its_continue_read() {
        let item = |name: &str| {
            serde_json::json!({"metadata": {"name": name, "namespace": "n", "resourceVersion": "5"},
                "data": {"k": "v"}})
        };
        let list = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "9", "continue": "abc", "remainingItemCount": 7},
            "items": [item("a"), item("b"), item("c")],
        });
        let whole = ironplane_protobuf::encode(&list).unwrap();
        assert_eq!(
            list_page(&whole).unwrap(),
            ListPage {
                items: 3,
                resource_version: Some("9".to_string()),
                continue_token: Some("abc".to_string()),
                remaining_item_count: Some(7),
            }
        );
        let empty = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "9"}, "items": []});
        let bytes = ironplane_protobuf::encode(&empty).unwrap();
        // Go writes a non-pointer string even when it is empty: an empty `continue`.
        assert_eq!(
            list_page(&bytes).unwrap(),
            ListPage {
                resource_version: Some("9".to_string()),
                continue_token: Some(String::new()),
                ..ListPage::default()
            }
        );
        assert!(list_page(b"{\"kind\":\"ConfigMapList\"}").is_err());
        assert!(list_page(&whole[..whole.len() / 2]).is_err());
    }

    #[test]
    fn malformed_messages_end_the_fields() {
        // A length past the end, then an unknown wire type.
        assert_eq!(fields(b"\x0a\x05ab").collect::<Vec<_>>(), [None]);
        assert_eq!(
            fields(b"\x08\x01\x0f").collect::<Vec<_>>(),
            [Some((1, Field::Varint(1))), None]
        );
        assert_eq!(field(b"\x08\x96\x01\x12\x01x", 2), Some(Field::Bytes(b"x")));
    }
}
