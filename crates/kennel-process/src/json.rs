//! [`JsonBytes`]: one JSON value as bytes, checked once and then forwarded
//! as they are (docs/internals.md): a job that arrives as JSON text and a
//! reply a worker wrote need no tree of values in between.

use std::fmt;
use std::ops::Range;

use serde_json::Value;
use serde_json::value::RawValue;

/// One JSON value as bytes, checked when made: valid JSON (UTF-8 included)
/// with nothing but whitespace around it. [`as_bytes`](Self::as_bytes) is
/// the value without that whitespace, byte for byte as it was given (key
/// order, number spelling and inner whitespace kept).
///
/// ```
/// use kennel_process::JsonBytes;
///
/// let job = JsonBytes::new(b" {\"b\": 1, \"a\": 2.50}\n".to_vec()).unwrap();
/// assert_eq!(job.as_str(), r#"{"b": 1, "a": 2.50}"#);
/// assert!(JsonBytes::new(b"{\"a\":".to_vec()).is_err());
/// ```
#[derive(Clone)]
pub struct JsonBytes<B = Vec<u8>> {
    bytes: B,
    /// Where the value is in `bytes`.
    span: Range<usize>,
}

impl<B: AsRef<[u8]>> JsonBytes<B> {
    /// Checks that `bytes` are one JSON value as serde_json reads a
    /// [`Value`] (nesting up to 128 levels, numbers in range, escapes of
    /// characters), and keeps them.
    ///
    /// # Errors
    ///
    /// serde_json's error when they are not (empty, cut short, bad UTF-8,
    /// more than one value, too deep, a number out of range, a lone
    /// surrogate).
    pub fn new(bytes: B) -> Result<Self, serde_json::Error> {
        serde_json::from_slice::<Value>(bytes.as_ref())?;
        Ok(Self::trimmed(bytes))
    }

    /// Checks the syntax only, as a [`RawValue`] does: what a worker's reply
    /// is held to. The bytes come back with the error.
    pub(crate) fn check(bytes: B) -> Result<Self, (serde_json::Error, B)> {
        match serde_json::from_slice::<&RawValue>(bytes.as_ref()) {
            Ok(_) => Ok(Self::trimmed(bytes)),
            Err(err) => Err((err, bytes)),
        }
    }

    /// `bytes`, the value being what is within the whitespace around.
    fn trimmed(bytes: B) -> Self {
        let all = bytes.as_ref();
        let start = all.iter().position(|b| !b.is_ascii_whitespace());
        let end = all.iter().rposition(|b| !b.is_ascii_whitespace());
        let span = start.unwrap_or(0)..end.map_or(0, |e| e + 1);
        Self { bytes, span }
    }

    /// The value's bytes, without the whitespace around it.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes.as_ref()[self.span.clone()]
    }

    /// The value's text.
    pub fn as_str(&self) -> &str {
        // Checked to be UTF-8 when made.
        std::str::from_utf8(self.as_bytes()).unwrap_or("null")
    }

    /// Parses the value into a tree (a copy; the bytes stay as they are).
    ///
    /// # Errors
    ///
    /// None in practice: the bytes were checked when made.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_slice(self.as_bytes())
    }

    /// The bytes as given and where the value is in them.
    pub fn into_parts(self) -> (B, Range<usize>) {
        (self.bytes, self.span)
    }
}

impl JsonBytes<Vec<u8>> {
    /// `value` written as compact JSON.
    ///
    /// # Errors
    ///
    /// serde_json's, for a map whose keys are not strings (never for a
    /// [`Value`]).
    pub fn from_value(value: &Value) -> Result<Self, serde_json::Error> {
        Ok(Self::trimmed(serde_json::to_vec(value)?))
    }

    /// The value's bytes, without the whitespace that was around them (no
    /// copy when there was none).
    pub fn into_bytes(self) -> Vec<u8> {
        let Self { mut bytes, span } = self;
        bytes.truncate(span.end);
        bytes.drain(..span.start);
        bytes
    }

    /// Takes `range` (of [`as_bytes`](Self::as_bytes)) out of the value:
    /// for a member of an object, with its comma, that leaves JSON.
    pub(crate) fn cut(&mut self, range: Range<usize>) {
        let at = self.span.start;
        self.bytes.drain(at + range.start..at + range.end);
        self.span.end -= range.len();
    }

    /// A [`RawValue`]'s bytes (no copy, no check).
    pub(crate) fn from_raw(raw: Box<RawValue>) -> Self {
        let text: Box<str> = raw.into();
        Self::trimmed(text.into_string().into_bytes())
    }

    /// The value's bytes in another buffer type made from a `Vec` (such as
    /// `bytes::Bytes`), without the whitespace that was around them.
    pub fn convert<C: From<Vec<u8>> + AsRef<[u8]>>(self) -> JsonBytes<C> {
        JsonBytes::trimmed(C::from(self.into_bytes()))
    }

    /// The value as a [`RawValue`] (a copy, checked again).
    pub fn into_raw(self) -> Box<RawValue> {
        let text = String::from_utf8(self.into_bytes()).unwrap_or_else(|_| "null".to_owned());
        RawValue::from_string(text).unwrap_or_else(|_| null())
    }
}

/// `null`, as a [`RawValue`].
pub(crate) fn null() -> Box<RawValue> {
    RawValue::from_string("null".to_owned()).unwrap_or_else(|_| unreachable!("null is JSON"))
}

impl<B: AsRef<[u8]>> fmt::Debug for JsonBytes<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("JsonBytes").field(&self.as_str()).finish()
    }
}

impl<B: AsRef<[u8]>> fmt::Display for JsonBytes<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<B: AsRef<[u8]>, C: AsRef<[u8]>> PartialEq<JsonBytes<C>> for JsonBytes<B> {
    fn eq(&self, other: &JsonBytes<C>) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_are_kept_as_given_without_the_whitespace_around() {
        let j = JsonBytes::new(b"\r\n  {\"z\":1,\n \"a\":[1.50, 2e3]}  \n".to_vec()).unwrap();
        assert_eq!(j.as_str(), "{\"z\":1,\n \"a\":[1.50, 2e3]}");
        assert_eq!(
            j.to_value().unwrap(),
            serde_json::json!({"a": [1.5, 2000.0], "z": 1})
        );
        let (bytes, span) = j.clone().into_parts();
        assert_eq!(&bytes[span], j.as_bytes());
        assert_eq!(j.into_bytes(), b"{\"z\":1,\n \"a\":[1.50, 2e3]}");
        assert_eq!(JsonBytes::new(&b"7"[..]).unwrap().as_str(), "7");
    }

    #[test]
    fn what_is_not_one_json_value_is_refused() {
        for bad in [
            &b""[..],
            b"   ",
            b"{",
            b"{} {}",
            b"[1,]",
            b"\"\xff\"",
            b"{\"a\":1}x",
            b"nul",
            b"\"\\ud800\"",
            b"1e999999",
        ] {
            assert!(
                JsonBytes::new(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(JsonBytes::new(deep.as_bytes()).is_err());
        // A reply is held to the syntax only, as before.
        assert!(JsonBytes::check(deep.as_bytes()).is_ok());
        assert!(JsonBytes::check(&b"[1e999999]"[..]).is_ok());
        assert!(JsonBytes::check(&b"[1,]"[..]).is_err());
    }

    #[test]
    fn a_value_is_written_compact_and_read_back_the_same() {
        let v = serde_json::json!({"b": [1, {"c": null}], "a": "x\ny"});
        let j = JsonBytes::from_value(&v).unwrap();
        assert!(!j.as_bytes().contains(&b'\n'));
        assert_eq!(j.to_value().unwrap(), v);
        assert_eq!(j.into_raw().get(), r#"{"a":"x\ny","b":[1,{"c":null}]}"#);
    }
}
