//! The keys of a `[[pool]]` entry, and kennel's options read at their own
//! key.
//!
//! The options sit in the pool's table beside its own keys (serde's
//! `flatten`). Through `flatten`, serde would report a bad option at the
//! pool (`pool[0]`) and an unknown key without the keys allowed. So each
//! pool table is first read as written: a key that is neither the pool's
//! nor an option is refused at its place, and the options alone are read,
//! each bad value named at its key (`pool[0].job_timeout`).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::LazyLock;

use kennel::Options;
use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use toml::Spanned;

use super::error::{join, path_string, unknown_key};
use super::human::{Written, explain};
use super::pool::PoolConfig;

/// The keys of kennel's options, as [`Options`] writes them.
pub(crate) static OPTION_KEYS: LazyLock<Vec<String>> =
    LazyLock::new(|| keys_written(&Options::default()));

/// Every key a `[[pool]]` takes, as [`PoolConfig`] writes them: its own,
/// then kennel's options.
pub(crate) static POOL_KEYS: LazyLock<Vec<String>> =
    LazyLock::new(|| keys_written(&PoolConfig::new("p", ["p"])));

/// The keys `value` writes, in the order it writes them (a `None` is
/// written too, as `null`).
fn keys_written(value: &impl serde::Serialize) -> Vec<String> {
    struct Keys(Vec<String>);
    impl<'de> Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Keys;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some((key, IgnoredAny)) = map.next_entry::<String, IgnoredAny>()? {
                        keys.push(key);
                    }
                    Ok(Keys(keys))
                }
            }
            d.deserialize_map(V)
        }
    }
    let json = serde_json::to_string(value).expect("a config writes as JSON");
    serde_json::from_str::<Keys>(&json)
        .expect("a config writes an object")
        .0
}

/// `keys` as `&str`, for [`unknown_key`].
pub(crate) fn names(keys: &[String]) -> Vec<&str> {
    keys.iter().map(String::as_str).collect()
}

/// A refusal in the text: the key, the message, the byte offset.
#[derive(Debug)]
pub(crate) struct Located {
    pub(crate) key: String,
    pub(crate) message: String,
    pub(crate) offset: usize,
}

/// The `[[pool]]` tables as written, each key and value with its place.
#[derive(Deserialize)]
struct Tables {
    #[serde(default)]
    pool: Vec<BTreeMap<Spanned<String>, Spanned<toml::Value>>>,
}

/// Refuses, in each `[[pool]]` of `text`, a key that is not a pool's, and
/// the first option kennel cannot read, at its key. Text that is not TOML
/// or not shaped as a config passes: the typed read names what is wrong.
pub(crate) fn check_pools(text: &str) -> Result<(), Located> {
    let Ok(de) = toml::Deserializer::parse(text) else {
        return Ok(());
    };
    let Ok(tables) = Tables::deserialize(de) else {
        return Ok(());
    };
    for (i, table) in tables.pool.iter().enumerate() {
        let at = format!("pool[{i}]");
        if let Some(key) = table.keys().find(|k| !POOL_KEYS.contains(k.get_ref())) {
            return Err(Located {
                key: join(&at, key.get_ref()),
                message: unknown_key(key.get_ref(), &names(&POOL_KEYS)),
                offset: key.span().start,
            });
        }
        let options: toml::Table = table
            .iter()
            .filter(|(k, _)| OPTION_KEYS.contains(k.get_ref()))
            .map(|(k, v)| (k.get_ref().clone(), v.get_ref().clone()))
            .collect();
        if let Err(e) = serde_path_to_error::deserialize::<_, Options>(toml::Value::Table(options))
        {
            let key = path_string(e.path());
            let value = table.get(key.as_str());
            let message = e.into_inner().message().trim().to_owned();
            return Err(Located {
                message: explain(
                    message,
                    value.map_or(Written::Other, |v| written(v.get_ref())),
                ),
                offset: value.map_or(0, |v| v.span().start),
                key: join(&at, &key),
            });
        }
    }
    Ok(())
}

/// A TOML value, as [`explain`] reads it.
fn written(value: &toml::Value) -> Written<'_> {
    match value {
        toml::Value::String(s) => Written::Text(s),
        toml::Value::Integer(n) => Written::Number(n),
        toml::Value::Float(n) => Written::Number(n),
        _ => Written::Other,
    }
}
