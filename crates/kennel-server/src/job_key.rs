//! A job's key (docs/SERVICE.md, "Keys"): the `Kennel-Key` header, else
//! the string at the pool's `key` pointer into the job's body, checked by
//! kennel's rules ([`kennel::Key::new`]) and then the pool's `key_pattern`.
//! A key is untrusted input: a refusal quotes at most a short prefix of it.

use kennel::Key;
use serde_json::Value;

use crate::config::{KeyPattern, PoolConfig};
use crate::error::ApiError;

/// The request header that gives a job's key; it wins over the pool's
/// pointer.
pub(crate) const KEY_HEADER: &str = "kennel-key";

/// The most bytes of a key a refusal quotes.
const QUOTED: usize = 32;

/// How a pool reads its jobs' keys.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyRules {
    /// `key`: a JSON pointer into the body.
    pointer: Option<String>,
    /// `key_pattern`.
    pattern: Option<KeyPattern>,
}

impl KeyRules {
    /// The rules of a `[[pool]]` entry.
    pub(crate) fn of(config: &PoolConfig) -> Self {
        Self {
            pointer: config.key.clone(),
            pattern: config.key_pattern.clone(),
        }
    }

    /// Whether a job's key can come from its body (the pool has a pointer).
    pub(crate) fn reads_body(&self) -> bool {
        self.pointer.is_some()
    }

    /// The key of an HTTP job: its `Kennel-Key` header, else its body at
    /// the pointer (read only then).
    ///
    /// # Errors
    ///
    /// As [`key`](Self::key).
    pub(crate) fn of_request(
        &self,
        headers: &axum::http::HeaderMap,
        body: &kennel_process::JsonBytes<bytes::Bytes>,
    ) -> Result<Option<Key>, ApiError> {
        let header = headers
            .get(KEY_HEADER)
            .map(axum::http::HeaderValue::as_bytes);
        let value = match header {
            None if self.reads_body() => body.to_value().ok(),
            _ => None,
        };
        self.key(header, value.as_ref())
    }

    /// The job's key: `header` when given, else the string at the pool's
    /// pointer in `body` (`None` there, or `null`: no key). `None` when
    /// neither gives one: the job runs without a key.
    ///
    /// # Errors
    ///
    /// [`ApiError::BadKey`] when the header is not text, the pointer's
    /// value is not a string, or the key breaks kennel's rules or the
    /// pool's `key_pattern`.
    pub(crate) fn key(
        &self,
        header: Option<&[u8]>,
        body: Option<&Value>,
    ) -> Result<Option<Key>, ApiError> {
        match (header, &self.pointer) {
            (Some(bytes), _) => {
                let text = std::str::from_utf8(bytes).map_err(|_| ApiError::BadKey {
                    message:
                        "the Kennel-Key header is not text (a key is printable ASCII, space to `~`)"
                            .into(),
                })?;
                self.check(text, "the Kennel-Key header").map(Some)
            }
            (None, Some(pointer)) => match body.and_then(|b| b.pointer(pointer)) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => {
                    self.check(s, &format!("the body at {pointer}")).map(Some)
                }
                Some(other) => Err(ApiError::BadKey {
                    message: format!(
                        "the job's key at {pointer} is {} (allowed: a string)",
                        crate::config::kind_of(other)
                    ),
                }),
            },
            (None, None) => Ok(None),
        }
    }

    /// Checks `text`, a key given by `from` (`the Kennel-Key header`,
    /// `--key`), by kennel's rules and then the pool's `key_pattern`.
    ///
    /// # Errors
    ///
    /// [`ApiError::BadKey`], naming the rule broken and `from`.
    pub(crate) fn check(&self, text: &str, from: &str) -> Result<Key, ApiError> {
        let bad = |message: String| ApiError::BadKey { message };
        let key = Key::new(text).map_err(|e| bad(format!("the job's key ({from}): {e}")))?;
        if let Some(pattern) = &self.pattern
            && !pattern.matches(key.as_str())
        {
            return Err(bad(format!(
                "the job's key ({from}) does not match the pool's key_pattern {:?}; it begins {}",
                pattern.as_str(),
                quoted(key.as_str()),
            )));
        }
        Ok(key)
    }
}

/// `"…"`: at most [`QUOTED`] bytes of a checked key (printable ASCII), an
/// ellipsis after it when cut.
fn quoted(key: &str) -> String {
    match key.get(..QUOTED) {
        Some(head) if head.len() < key.len() => format!("{head:?}…"),
        _ => format!("{key:?}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rules(pointer: Option<&str>, pattern: Option<&str>) -> KeyRules {
        KeyRules {
            pointer: pointer.map(Into::into),
            pattern: pattern.map(|p| KeyPattern::new(p).unwrap()),
        }
    }

    fn refusal(r: Result<Option<Key>, ApiError>) -> String {
        match r {
            Err(e @ ApiError::BadKey { .. }) => e.message(),
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn the_header_wins_over_the_pointer() {
        let r = rules(Some("/model"), None);
        let body = json!({"model": "b"});
        let key = r.key(Some(b"a"), Some(&body)).unwrap();
        assert_eq!(key.unwrap().as_str(), "a");
        assert_eq!(r.key(None, Some(&body)).unwrap().unwrap().as_str(), "b");
    }

    #[test]
    fn no_header_and_no_value_at_the_pointer_is_a_job_without_a_key() {
        assert_eq!(rules(None, None).key(None, None).unwrap(), None);
        let r = rules(Some("/model"), None);
        assert_eq!(r.key(None, Some(&json!({"x": 1}))).unwrap(), None);
        assert_eq!(r.key(None, Some(&json!({"model": null}))).unwrap(), None);
    }

    #[test]
    fn a_value_that_is_not_a_string_is_refused_by_its_kind() {
        let r = rules(Some("/model"), None);
        let m = refusal(r.key(None, Some(&json!({"model": 7}))));
        assert_eq!(m, "the job's key at /model is a number (allowed: a string)");
    }

    #[test]
    fn kennels_rules_are_named_with_where_the_key_came_from() {
        let r = rules(None, None);
        let long = "k".repeat(300);
        let m = refusal(r.key(Some(long.as_bytes()), None));
        assert_eq!(
            m,
            "the job's key (the Kennel-Key header): a key is at most 256 bytes; this one is 300"
        );
        assert!(refusal(r.key(Some(b"a\x1bb"), None)).contains("printable ASCII"));
        assert!(refusal(r.key(Some(b""), None)).contains("empty"));
        assert!(refusal(r.key(Some(&[0xff]), None)).contains("not text"));
    }

    #[test]
    fn a_key_outside_the_pattern_is_refused_quoting_a_short_prefix() {
        let r = rules(Some("/m"), Some("[a-z]+"));
        assert!(r.key(Some(b"abc"), None).unwrap().is_some());
        let long = format!("{}/{}", "a".repeat(100), "b".repeat(100));
        let m = refusal(r.key(None, Some(&json!({ "m": long }))));
        assert_eq!(
            m,
            format!(
                "the job's key (the body at /m) does not match the pool's key_pattern \"[a-z]+\"; it begins \"{}\"…",
                "a".repeat(32)
            )
        );
        assert!(refusal(r.key(Some(b"../x"), None)).ends_with("it begins \"../x\""));
    }
}
