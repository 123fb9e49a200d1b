//! Durations and sizes written the humane way, and the words that say what
//! is allowed when one is not.
//!
//! kennel's own options read their durations through `humantime-serde`; the
//! server's settings (`shutdown_grace`, `eviction.after`, `body_limit`,
//! `memory_per_worker`, `max_reply`) through [`HumanDuration`] and
//! [`HumanSize`]. Both take the same forms, and a refusal of either reads
//! the same (see [`explain`]).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

/// A duration written the humane way: `"500ms"`, `"30s"`, `"5m"`, `"1h 30m"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct HumanDuration(pub Duration);

const DURATION_ALLOWED: &str =
    "a number with a unit, such as \"500ms\", \"30s\", \"5m\", \"1h 30m\"";

impl FromStr for HumanDuration {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        humantime::parse_duration(s.trim())
            .map(Self)
            .map_err(|e| format!("invalid duration {s:?}: {e} (allowed: {DURATION_ALLOWED})"))
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl Serialize for HumanDuration {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Refuses a duration longer than kennel's longest, [`kennel::MAX_DURATION`].
pub(crate) fn at_most_longest(d: HumanDuration) -> Result<(), String> {
    if d.0 > kennel::MAX_DURATION {
        return Err(format!(
            "{d} is out of range (allowed: 0 to {})",
            HumanDuration(kennel::MAX_DURATION)
        ));
    }
    Ok(())
}

/// The refusal of a duration written as a bare number.
fn bare_number(n: impl fmt::Display) -> String {
    format!("a bare number ({n}) has no unit (allowed: {DURATION_ALLOWED})")
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = HumanDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(DURATION_ALLOWED)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<HumanDuration, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<HumanDuration, E> {
                Err(E::custom(bare_number(n)))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<HumanDuration, E> {
                Err(E::custom(bare_number(n)))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<HumanDuration, E> {
                Err(E::custom(bare_number(n)))
            }
        }
        d.deserialize_any(V)
    }
}

/// A value as written, as much of it as a refusal needs to explain itself.
#[derive(Clone, Copy)]
pub(crate) enum Written<'a> {
    /// A string.
    Text(&'a str),
    /// A number, as written.
    Number(&'a dyn fmt::Display),
    /// Anything else.
    Other,
}

/// A refusal of one of kennel's options, in the words the server's own
/// settings use. `humantime-serde` says only `expected a duration`; this
/// says why (`unknown time unit "x"`, no unit) and what is allowed.
pub(crate) fn explain(message: String, value: Written<'_>) -> String {
    if !message.ends_with("expected a duration") {
        return message;
    }
    match value {
        Written::Text(s) => match s.parse::<HumanDuration>() {
            Err(why) => why,
            Ok(_) => message,
        },
        Written::Number(n) => bare_number(n),
        Written::Other => format!("{message} (allowed: {DURATION_ALLOWED})"),
    }
}

/// A size in bytes written the humane way: `"512MiB"`, `"2GiB"`, `"1.5 GB"`,
/// or a plain number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct HumanSize(pub u64);

const SIZE_ALLOWED: &str = "a size such as \"512KiB\", \"2GiB\", \"1.5 GB\", or a number of bytes";

impl FromStr for HumanSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.trim()
            .parse::<bytesize::ByteSize>()
            .map(|b| Self(b.as_u64()))
            .map_err(|e| format!("invalid size {s:?}: {e} (allowed: {SIZE_ALLOWED})"))
    }
}

impl fmt::Display for HumanSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", bytesize::ByteSize::b(self.0).display().iec())
    }
}

impl Serialize for HumanSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HumanSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = HumanSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(SIZE_ALLOWED)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<HumanSize, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<HumanSize, E> {
                Ok(HumanSize(n))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<HumanSize, E> {
                u64::try_from(n)
                    .map(HumanSize)
                    .map_err(|_| E::custom(format!("{n} is negative (allowed: {SIZE_ALLOWED})")))
            }
        }
        d.deserialize_any(V)
    }
}
