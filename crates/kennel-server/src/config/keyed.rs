//! A pool's keys for jobs that carry a key (`key`, `key_pattern`,
//! `load_method`, `unload_method`) and the links between them and the
//! other keys of the pool. How a job's key is read: [`crate::job_key`].

use std::fmt;

use regex::Regex;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::error::Refusal;
use super::pool::PoolConfig;
use super::protocol::ProtocolKind;

/// The text that stands for the key in a pool's argv and env values.
const KEY_PLACEHOLDER: &str = "{key}";

/// `key_pattern`: a regular expression a job's key must match in full.
/// Written back as given; compiled once, when read.
#[derive(Clone)]
pub(crate) struct KeyPattern {
    /// As the config wrote it.
    text: String,
    /// `^(?:text)$`: the whole key must match.
    whole: Regex,
}

impl KeyPattern {
    /// Compiles `text`.
    ///
    /// # Errors
    ///
    /// The regex crate's message, for a pattern that does not compile.
    pub(crate) fn new(text: &str) -> Result<Self, String> {
        // Compiled alone first, so that an error shows the pattern as written.
        Regex::new(text).map_err(|e| format!("is not a regular expression: {e}"))?;
        let whole = Regex::new(&format!("^(?:{text})$"))
            .map_err(|e| format!("is not a regular expression: {e}"))?;
        Ok(Self {
            text: text.to_owned(),
            whole,
        })
    }

    /// Whether `key` matches the whole pattern.
    pub(crate) fn matches(&self, key: &str) -> bool {
        self.whole.is_match(key)
    }

    /// The pattern as the config wrote it.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for KeyPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text, f)
    }
}

impl PartialEq for KeyPattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Serialize for KeyPattern {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for KeyPattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::new(&text).map_err(serde::de::Error::custom)
    }
}

/// The links of the key settings: `key` is a JSON pointer, `key_pattern`
/// is required where a key goes into the argv or env, the load and unload
/// methods are for the JSON-RPC framings.
pub(crate) fn check(pool: &PoolConfig) -> Result<(), Refusal> {
    if let Some(pointer) = &pool.key
        && !pointer.is_empty()
        && !pointer.starts_with('/')
    {
        return Err((
            "key".into(),
            format!(
                "{pointer:?} is not a JSON pointer (allowed: \"\" for the whole body, or a pointer starting with '/', such as \"/model\")"
            ),
        ));
    }
    let in_argv = pool.argv.iter().any(|a| a.contains(KEY_PLACEHOLDER));
    let in_env = pool.env.values().any(|v| v.contains(KEY_PLACEHOLDER));
    if (in_argv || in_env) && pool.key_pattern.is_none() {
        let place = if in_argv { "argv" } else { "env" };
        return Err((
            "key_pattern".into(),
            format!(
                "is required when the {place} holds {KEY_PLACEHOLDER}: a key from a request would go into the worker's {place} (allowed: a pattern such as \"^[a-z0-9._-]+$\")"
            ),
        ));
    }
    for (key, method) in [
        ("load_method", &pool.load_method),
        ("unload_method", &pool.unload_method),
    ] {
        match method.as_deref() {
            Some(_) if pool.protocol == ProtocolKind::JsonLines => {
                return Err((key.into(), "is for the JSON-RPC protocols (allowed: with protocol = \"json-rpc\" or \"content-length\"; json-lines workers get {\"kennel_load\": key})".into()));
            }
            Some("") => {
                return Err((
                    key.into(),
                    "is empty (allowed: a method name such as \"kennel/load\")".into(),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_matches_the_whole_key() {
        let p = KeyPattern::new("[a-z]+").unwrap();
        assert!(p.matches("model"));
        assert!(!p.matches("model-a"));
        assert!(!p.matches("../x"));
        assert_eq!(p.as_str(), "[a-z]+");
        let alternation = KeyPattern::new("a|b").unwrap();
        assert!(
            !alternation.matches("ab"),
            "the anchors hold the alternation"
        );
    }

    #[test]
    fn a_pattern_that_does_not_compile_says_why() {
        let e = KeyPattern::new("[a-").unwrap_err();
        assert!(e.starts_with("is not a regular expression: "), "{e}");
        assert!(e.contains("[a-"), "{e}");
    }
}
