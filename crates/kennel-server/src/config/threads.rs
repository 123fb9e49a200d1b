//! `threads`: the CPU budget of each worker of a pool.

use std::num::NonZeroUsize;

use kennel_process::ThreadBudget;
use serde::{Deserialize, Deserializer};

/// `threads`: `"auto"` (the default: the host's cores shared out among the
/// pool's running workers, told to each through `OMP_NUM_THREADS`,
/// `MKL_NUM_THREADS`, … and `KENNEL_THREADS`), a number of threads for each
/// worker, or `"off"` (the variables are left as they are).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum ThreadsConfig {
    /// `"auto"`: cores / size, at least 1.
    #[default]
    Auto,
    /// `"off"`: no budget.
    Off,
    /// `n`: this many for each worker.
    PerWorker(NonZeroUsize),
}

impl ThreadsConfig {
    /// The budget for the workers' spec, if any.
    pub(crate) fn budget(self) -> Option<ThreadBudget> {
        match self {
            Self::Auto => Some(ThreadBudget::Share),
            Self::Off => None,
            Self::PerWorker(n) => Some(ThreadBudget::PerWorker(n)),
        }
    }
}

/// `Display`, `Serialize` and `Deserialize` for a setting written as a
/// number of threads (its `$count` variant) or one of its words.
macro_rules! count_or_words {
    ($ty:ident, $count:ident, $allowed:literal, $($word:literal => $variant:ident),+) => {
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self {
                    Self::$count(n) => write!(f, "{n}"),
                    $(Self::$variant => f.write_str($word),)+
                }
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    Self::$count(n) => s.serialize_u64(n.get() as u64),
                    other => s.collect_str(other),
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                use $crate::config::threads::{CountOrWord, count_or_word};
                match count_or_word(d, $allowed)? {
                    CountOrWord::Count(n) => Ok(Self::$count(n)),
                    $(CountOrWord::Word(t) if t == $word => Ok(Self::$variant),)+
                    CountOrWord::Word(t) => Err(serde::de::Error::custom(format!(
                        "invalid value {t:?} ({})",
                        $allowed
                    ))),
                }
            }
        }
    };
}
pub(super) use count_or_words;

count_or_words!(
    ThreadsConfig,
    PerWorker,
    "allowed: \"auto\", \"off\" or a number of threads from 1 to 1024",
    "auto" => Auto,
    "off" => Off
);

/// A number of threads (1 to [`MAX_THREADS`]) or a word, as written.
pub(super) enum CountOrWord {
    /// A number in range.
    Count(NonZeroUsize),
    /// A word, for the caller to match.
    Word(String),
}

/// The most threads a count of threads may say.
pub(super) const MAX_THREADS: usize = 1024;

/// Reads a number of threads or a word; a number out of range is refused
/// with `allowed`.
pub(super) fn count_or_word<'de, D: Deserializer<'de>>(
    d: D,
    allowed: &str,
) -> Result<CountOrWord, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(i64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Text(t) => Ok(CountOrWord::Word(t)),
        Raw::Number(n) => usize::try_from(n)
            .ok()
            .filter(|n| *n <= MAX_THREADS)
            .and_then(NonZeroUsize::new)
            .map(CountOrWord::Count)
            .ok_or_else(|| serde::de::Error::custom(format!("{n} is out of range ({allowed})"))),
    }
}
