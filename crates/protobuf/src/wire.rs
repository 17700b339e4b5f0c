//! The protobuf wire format: varints, field tags, and a reader over one message's fields.
//!
//! Only what Kubernetes messages use (proto2: varints, 64-bit doubles, length-delimited fields);
//! groups are rejected. This module knows no schema.

/// A field's payload as it appears on the wire.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WireValue<'a> {
    Varint(u64),
    Fixed64(u64),
    /// A 32-bit value; no Kubernetes field uses one, so it is only skipped.
    Fixed32,
    Bytes(&'a [u8]),
}

pub(crate) const VARINT: u8 = 0;
pub(crate) const FIXED64: u8 = 1;
pub(crate) const LENGTH_DELIMITED: u8 = 2;

/// Iterates over the fields of one encoded message.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// The next field number and value, None at the end of the message.
    pub(crate) fn next_field(&mut self) -> Result<Option<(u32, WireValue<'a>)>, String> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|n| *n != 0 && *n < 1 << 29)
            .ok_or_else(|| format!("invalid field number {}", key >> 3))?;
        let value = match (key & 7) as u8 {
            VARINT => WireValue::Varint(self.varint()?),
            FIXED64 => WireValue::Fixed64(u64::from_le_bytes(self.take_array()?)),
            LENGTH_DELIMITED => {
                let len = usize::try_from(self.varint()?).map_err(|_| "length overflows")?;
                let end = self
                    .pos
                    .checked_add(len)
                    .filter(|end| *end <= self.buf.len())
                    .ok_or_else(|| format!("field {number}: length {len} past the end"))?;
                let bytes = &self.buf[self.pos..end];
                self.pos = end;
                WireValue::Bytes(bytes)
            }
            5 => {
                self.take_array::<4>()?;
                WireValue::Fixed32
            }
            other => return Err(format!("field {number}: unsupported wire type {other}")),
        };
        Ok(Some((number, value)))
    }

    pub(crate) fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.buf.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err("varint longer than ten bytes".to_string())
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let bytes = self
            .buf
            .get(self.pos..self.pos + N)
            .ok_or_else(|| format!("truncated {N}-byte value"))?;
        self.pos += N;
        let mut array = [0u8; N];
        array.copy_from_slice(bytes);
        Ok(array)
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

pub(crate) fn put_tag(out: &mut Vec<u8>, number: u32, wire_type: u8) {
    put_varint(out, (u64::from(number) << 3) | u64::from(wire_type));
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_tag(out, number, LENGTH_DELIMITED);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

pub(crate) fn put_varint_field(out: &mut Vec<u8>, number: u32, value: u64) {
    put_tag(out, number, VARINT);
    put_varint(out, value);
}

/// Writes a length-delimited field whose contents `write` appends, without a scratch buffer:
/// one byte is reserved for the length and widened afterwards if the contents need more.
pub(crate) fn put_nested<E>(
    out: &mut Vec<u8>,
    number: u32,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    put_tag(out, number, LENGTH_DELIMITED);
    let at = out.len();
    out.push(0);
    write(out)?;
    let len = out.len() - at - 1;
    if len < 0x80 {
        out[at] = len as u8;
    } else {
        let mut prefix = Vec::with_capacity(4);
        put_varint(&mut prefix, len as u64);
        out.splice(at..=at, prefix);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for value in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(Reader::new(&out).varint(), Ok(value));
        }
        // Go writes a negative int32 sign-extended to ten bytes.
        let mut out = Vec::new();
        put_varint(&mut out, -1i64 as u64);
        assert_eq!(out.len(), 10);
    }

    #[test]
    fn nested_lengths_widen() {
        let mut out = Vec::new();
        put_nested::<()>(&mut out, 1, |out| {
            out.extend(std::iter::repeat_n(7u8, 300));
            Ok(())
        })
        .ok();
        assert_eq!(&out[..3], &[0x0a, 0xac, 0x02]);
        assert_eq!(out.len(), 303);
        let mut reader = Reader::new(&out);
        let Ok(Some((1, WireValue::Bytes(bytes)))) = reader.next_field() else {
            panic!("expected field 1");
        };
        assert_eq!(bytes.len(), 300);
        assert!(reader.at_end());
    }

    #[test]
    fn truncated_input_is_an_error() {
        assert!(Reader::new(&[0x0a, 0x05, 1]).next_field().is_err());
        assert!(Reader::new(&[0x08]).next_field().is_err());
        assert!(Reader::new(&[0x0b]).next_field().is_err());
        assert!(Reader::new(&[0x00, 0x00]).next_field().is_err());
    }
}
