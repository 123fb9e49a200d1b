//! The body of `PUT /pools/{name}/config`: a JSON merge patch (RFC 7386) of
//! the pool's live options, with a new sizing, eviction or group.

use kennel::{BuildError, Options, Reconfig};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::{ConfigError, Refusal, hinted, join, path_string, refusal, unknown_key};
use super::human::{Written, explain};
use super::keys::{OPTION_KEYS, names};
use super::policy::{EvictionConfig, SizingConfig};
use super::pool::check_name;

/// The `[[pool]]` keys beside kennel's options that a live change applies
/// (the keys of the body that are the service's, the fields of
/// [`ReconfigBody`] but its options); a reload changes a pool in place
/// when only these and options changed.
pub(crate) const LIVE_POLICIES: [&str; 3] = ["sizing", "eviction", "group"];

/// A change of a live pool, read from the body of `PUT /pools/{name}/config`.
///
/// The body is a JSON object, keys and values written as in a `[[pool]]`
/// entry. Its options are a merge patch of the pool's live options: a key
/// left out keeps its value, `null` sets an option back to its default
/// (none, for an optional limit). `sizing` and `eviction` are replaced
/// whole (`null`: kept); `group` moves the pool (`null`: no group).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) struct ReconfigBody {
    /// New sizing.
    pub sizing: Option<SizingConfig>,
    /// New eviction.
    pub eviction: Option<EvictionConfig>,
    /// New group (`Some(None)`: none).
    pub group: Option<Option<String>>,
    /// The options the pool takes: the live ones with the body's applied.
    pub options: Options,
}

impl ReconfigBody {
    /// Reads a JSON body as a change of a pool whose options are `live`,
    /// naming the key of the first bad value.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] with `file` `<request>`: a body that is not a JSON
    /// object, an unknown key, a value of the wrong type or out of range.
    pub(crate) fn from_json(bytes: &[u8], live: &Options) -> Result<Self, ConfigError> {
        Self::read(bytes, live).map_err(|(key, message)| ConfigError {
            file: "<request>".into(),
            message: hinted(&key, message),
            key,
            line: None,
        })
    }

    fn read(bytes: &[u8], live: &Options) -> Result<Self, Refusal> {
        let body: Value =
            serde_json::from_slice(bytes).map_err(|e| (String::new(), e.to_string()))?;
        let Value::Object(mut patch) = body else {
            return Err((
                String::new(),
                format!(
                    "the body is {} (allowed: a JSON object of the keys to change, such as {{\"job_timeout\": \"10s\"}})",
                    kind_of(&body)
                ),
            ));
        };
        if let Some(key) = patch
            .keys()
            .find(|k| !LIVE_POLICIES.contains(&k.as_str()) && !OPTION_KEYS.contains(k))
        {
            let mut allowed = LIVE_POLICIES.to_vec();
            allowed.extend(names(&OPTION_KEYS));
            return Err((key.clone(), unknown_key(key, &allowed)));
        }
        let sizing: Option<SizingConfig> = take(&mut patch, "sizing")?.flatten();
        if let Some(s) = &sizing {
            s.check()?;
        }
        let eviction: Option<EvictionConfig> = take(&mut patch, "eviction")?.flatten();
        if let Some(e) = eviction {
            e.check()?;
        }
        let group: Option<Option<String>> = take(&mut patch, "group")?;
        if let Some(Some(g)) = &group {
            check_name(g).map_err(|m| ("group".to_owned(), m))?;
        }
        let mut options = serde_json::to_value(live).expect("options write as JSON");
        merge(&mut options, Value::Object(patch.clone()));
        let options: Options = serde_path_to_error::deserialize(options).map_err(|e| {
            let key = path_string(e.path());
            let value = patch.get(&key).map_or(Written::Other, written);
            (key, explain(e.into_inner().to_string(), value))
        })?;
        options.validate().map_err(refusal)?;
        Ok(Self {
            sizing,
            eviction,
            group,
            options,
        })
    }

    /// The reconfiguration that makes the change.
    ///
    /// # Errors
    ///
    /// kennel's [`BuildError`] naming `eviction.after` out of range, which
    /// [`from_json`](Self::from_json) refused already.
    pub(crate) fn reconfig(&self) -> Result<Reconfig, BuildError> {
        let mut r = Reconfig::new().options(self.options.clone());
        if let Some(s) = self.sizing {
            r = s.apply(r);
        }
        if let Some(e) = self.eviction {
            r = e.apply(r)?;
        }
        if let Some(g) = &self.group {
            r = r.group(g.clone());
        }
        Ok(r)
    }
}

/// Removes `key` from the body and reads it, the key named on a refusal.
/// `Some(None)` is a `null`.
fn take<T: DeserializeOwned>(
    patch: &mut Map<String, Value>,
    key: &str,
) -> Result<Option<Option<T>>, Refusal> {
    let Some(value) = patch.remove(key) else {
        return Ok(None);
    };
    serde_path_to_error::deserialize(value)
        .map(Some)
        .map_err(|e| {
            (
                join(key, &path_string(e.path())),
                e.into_inner().to_string(),
            )
        })
}

/// Applies a JSON merge patch (RFC 7386): an object merges key by key, a
/// `null` removes the key, anything else replaces the target.
fn merge(target: &mut Value, patch: Value) {
    let Value::Object(patch) = patch else {
        *target = patch;
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let target = target.as_object_mut().expect("made an object above");
    for (key, value) in patch {
        if value.is_null() {
            target.remove(&key);
        } else {
            merge(target.entry(key).or_insert(Value::Null), value);
        }
    }
}

/// What a JSON value is, for a refusal.
pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A JSON value, as [`explain`] reads it.
fn written(value: &Value) -> Written<'_> {
    match value {
        Value::String(s) => Written::Text(s),
        Value::Number(n) => Written::Number(n),
        _ => Written::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_follows_rfc_7386() {
        let mut target = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge(&mut target, json!({"a": "z", "c": {"f": null}, "h": 1}));
        assert_eq!(target, json!({"a": "z", "c": {"d": "e"}, "h": 1}));
        let mut target = json!({"a": 1});
        merge(&mut target, json!(["x"]));
        assert_eq!(target, json!(["x"]));
    }
}
