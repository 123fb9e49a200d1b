//! [`Key`]: what a job needs its worker to hold (a model, a workspace, a
//! session), and [`KeyBinding`]: how a pool's workers come to hold keys.

use std::fmt;
use std::sync::Arc;

/// The longest key, in bytes.
pub const MAX_KEY_LEN: usize = 256;

/// A job's key: jobs of one key go to a worker that holds it.
///
/// Keys come from the network, so a key is checked when made: 1 to
/// [`MAX_KEY_LEN`] bytes of printable ASCII (space to `~`). It is never
/// read by a shell; a pool that puts it into a worker's argv restricts it
/// further with its own pattern.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(Arc<str>);

impl Key {
    /// Checks `key` and makes it a [`Key`].
    ///
    /// # Errors
    ///
    /// [`KeyError`] when it is empty, longer than [`MAX_KEY_LEN`] bytes,
    /// or holds a byte outside printable ASCII; its text says which.
    pub fn new(key: &str) -> Result<Self, KeyError> {
        if key.is_empty() {
            return Err(KeyError(
                "a key is 1 or more bytes; this one is empty".into(),
            ));
        }
        if key.len() > MAX_KEY_LEN {
            return Err(KeyError(format!(
                "a key is at most {MAX_KEY_LEN} bytes; this one is {}",
                key.len()
            )));
        }
        if let Some((at, c)) = key.char_indices().find(|(_, c)| !(' '..='~').contains(c)) {
            return Err(KeyError(format!(
                "a key is printable ASCII (space to `~`); byte {at} is {c:?}"
            )));
        }
        Ok(Self(key.into()))
    }

    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Key {
    type Err = KeyError;

    fn from_str(s: &str) -> Result<Self, KeyError> {
        Self::new(s)
    }
}

impl TryFrom<&str> for Key {
    type Error = KeyError;

    fn try_from(s: &str) -> Result<Self, KeyError> {
        Self::new(s)
    }
}

impl AsRef<str> for Key {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Key {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Self::new(&s).map_err(serde::de::Error::custom)
    }
}

/// A key that breaks the rules of [`Key::new`], with what rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeyError(String);

/// How a pool's workers come to hold keys.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
#[non_exhaustive]
pub enum KeyBinding {
    /// A worker holds up to `keys_per_worker` keys, loaded through
    /// [`Worker::load`](crate::Worker::load) before a job of a key it
    /// lacks, the one used least lately unloaded when it is full (the
    /// default).
    #[default]
    Load,
    /// A worker is started for one key ([`SlotInfo::key`](crate::SlotInfo::key));
    /// moving it to another key ends it and starts one for that key. One the
    /// pool renews (its lifetime, its `max_jobs`, its memory) is started
    /// again for its key; one that crashed is replaced by one for no key.
    Spawn,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_printable_ascii_of_bounded_length() {
        assert_eq!(
            Key::new("llama-3.1/8b q4")
                .map(|k| k.to_string())
                .ok()
                .as_deref(),
            Some("llama-3.1/8b q4")
        );
        assert!(Key::new("").is_err());
        assert!(Key::new(&"a".repeat(MAX_KEY_LEN)).is_ok());
        let long = Key::new(&"a".repeat(MAX_KEY_LEN + 1)).unwrap_err();
        assert!(long.to_string().contains("at most 256 bytes"), "{long}");
        let bad = Key::new("a\nb").unwrap_err();
        assert!(bad.to_string().contains("byte 1"), "{bad}");
        assert!(Key::new("modèle").is_err());
    }
}
