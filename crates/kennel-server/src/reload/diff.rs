//! Which keys of a `[[pool]]` changed in a way a live reconfiguration does
//! not apply, and what a reload did, pool by pool.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::config::{LIVE_POLICIES, PoolConfig};

/// The keys of `[[pool]]` a reload applies in place: the policies of
/// `PUT /pools/{name}/config`, every option of [`kennel::Options`], and
/// `key` and `key_pattern`, read from the pool's recorded entry at each
/// job.
fn live_keys() -> BTreeSet<String> {
    let mut keys: BTreeSet<String> = LIVE_POLICIES.iter().map(|k| (*k).to_owned()).collect();
    keys.extend(["key".to_owned(), "key_pattern".to_owned()]);
    if let Ok(Value::Object(options)) = serde_json::to_value(kennel::Options::default()) {
        keys.extend(options.into_iter().map(|(k, _)| k));
    }
    keys
}

/// The keys whose values differ between `old` and `new` as they write
/// (JSON), sorted, less those in `skip`; `None` when one does not write as
/// an object.
pub(crate) fn changed_keys(
    old: &impl Serialize,
    new: &impl Serialize,
    skip: &BTreeSet<String>,
) -> Option<Vec<String>> {
    let (Ok(Value::Object(a)), Ok(Value::Object(b))) =
        (serde_json::to_value(old), serde_json::to_value(new))
    else {
        return None;
    };
    let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let changed = names
        .into_iter()
        .filter(|k| !skip.contains(*k) && a.get(*k) != b.get(*k));
    Some(changed.cloned().collect())
}

/// The keys whose change a live reconfiguration does not apply, sorted:
/// every key but the live ones, so that a key added later replaces the
/// pool until it is made live. Empty when only live keys changed.
pub(crate) fn replace_keys(old: &PoolConfig, new: &PoolConfig) -> Vec<String> {
    // Not written as JSON: nothing can be said to be the same.
    changed_keys(old, new, &live_keys()).unwrap_or_else(|| vec!["(every key)".to_owned()])
}

/// What a reload did to one pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "done", rename_all = "kebab-case")]
pub(crate) enum PoolChange {
    /// A new `[[pool]]`: started.
    Added,
    /// No longer in the file: taken out and closed (its jobs get its
    /// `job_grace`).
    Removed,
    /// A key that a live change does not apply changed: a new pool under
    /// the name, the old one closed.
    Replaced {
        /// The keys that changed.
        keys: Vec<String>,
    },
    /// Only live keys changed: changed in place, as
    /// `PUT /pools/{name}/config` does.
    Reconfigured {
        /// What was done.
        actions: Vec<String>,
    },
    /// Could not be changed: it runs as before.
    Refused {
        /// Why.
        why: String,
    },
}

/// What a reload did, pool by pool (pools that did not change are not
/// named).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Reloaded {
    /// By pool name.
    pub pools: BTreeMap<String, PoolChange>,
    /// `[server]` keys that changed and take effect at the next start.
    pub server_keys_not_applied: Vec<String>,
}

impl PoolChange {
    /// Its word and its detail in a reload's summary.
    fn summary(&self) -> (&'static str, String) {
        match self {
            Self::Added => ("added", String::new()),
            Self::Removed => ("removed", String::new()),
            Self::Replaced { keys } => ("replaced", keys.join(", ")),
            Self::Reconfigured { actions } => ("reconfigured", actions.join(", ")),
            Self::Refused { why } => ("refused", why.clone()),
        }
    }
}

impl fmt::Display for Reloaded {
    /// `added: a; replaced: b (protocol); reconfigured: c (resize 1 -> 3);
    /// removed: d; refused: e (why); [server] keys not applied: x`, the
    /// empty parts left out (`nothing changed` when all are).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        for word in ["added", "replaced", "reconfigured", "removed", "refused"] {
            let items: Vec<String> = self
                .pools
                .iter()
                .filter_map(|(name, change)| match change.summary() {
                    (w, _) if w != word => None,
                    (_, d) if d.is_empty() => Some(name.clone()),
                    (_, d) => Some(format!("{name} ({d})")),
                })
                .collect();
            if !items.is_empty() {
                parts.push(format!("{word}: {}", items.join(", ")));
            }
        }
        if !self.server_keys_not_applied.is_empty() {
            parts.push(format!(
                "[server] keys not applied (next start): {}",
                self.server_keys_not_applied.join(", ")
            ));
        }
        if parts.is_empty() {
            f.write_str("nothing changed")
        } else {
            f.write_str(&parts.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::SizingConfig;

    #[test]
    fn only_live_keys_changed_means_nothing_to_replace() {
        let old = PoolConfig::new("p", ["a"]);
        let mut new = old.clone();
        new.sizing = Some(SizingConfig::Fixed { workers: 3 });
        new.group = Some("g".into());
        new.options.job_timeout = Some(Duration::from_secs(1));
        new.options.max_waiting = Some(7);
        new.key = Some("/model".into());
        new.key_pattern = Some(crate::config::KeyPattern::new("[a-z]+").unwrap());
        assert_eq!(replace_keys(&old, &new), Vec::<String>::new());
    }

    #[test]
    fn any_other_key_replaces_and_is_named() {
        let old = PoolConfig::new("p", ["a"]);
        let mut new = old.clone();
        new.argv = vec!["b".into()];
        new.pin = true;
        new.load_method = Some("kennel/load".into());
        new.options.job_timeout = Some(Duration::from_secs(1));
        assert_eq!(replace_keys(&old, &new), ["argv", "load_method", "pin"]);
    }

    #[test]
    fn the_answer_reads_pool_by_pool() {
        let mut done = Reloaded::default();
        done.pools.insert("a".into(), PoolChange::Added);
        done.pools.insert(
            "b".into(),
            PoolChange::Replaced {
                keys: vec!["protocol".into()],
            },
        );
        assert_eq!(done.to_string(), "added: a; replaced: b (protocol)");
        assert_eq!(
            serde_json::to_value(&done).unwrap(),
            serde_json::json!({
                "pools": {"a": {"done": "added"}, "b": {"done": "replaced", "keys": ["protocol"]}},
                "server_keys_not_applied": []
            })
        );
        assert_eq!(Reloaded::default().to_string(), "nothing changed");
    }
}
