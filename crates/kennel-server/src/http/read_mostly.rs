//! A map read on every request and written once per key: the HTTP
//! metrics' series handles ([`super::series`]) and the routes' labels
//! ([`super::labels`]), both by keys from closed sets.
//!
//! Its keys are hashed with foldhash, not the standard library's SipHash:
//! a request looks up three of them, and SipHash cost about 1,000
//! instructions a request for the three. SipHash's strength against
//! chosen keys buys nothing here: only the service inserts keys, each one
//! from a closed set (a route's pattern, a method, a status), so no request
//! can make the map grow or its keys collide on purpose.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::{PoisonError, RwLock};

/// A map read on every request and written once per key.
pub(crate) type ReadMostly<K, V> = RwLock<HashMap<K, V, foldhash::fast::RandomState>>;

/// Runs `f` on the value of `key` in `map`, found under a read lock; the
/// first time, `make` gives the entry (its owned key and its value),
/// inserted under the write lock unless another thread did it first.
pub(crate) fn with_entry<K, Q, V, S, R>(
    map: &RwLock<HashMap<K, V, S>>,
    key: &Q,
    make: impl FnOnce() -> (K, V),
    f: impl FnOnce(&V) -> R,
) -> R
where
    K: Borrow<Q> + Eq + Hash,
    Q: Eq + Hash + ?Sized,
    S: BuildHasher,
{
    if let Some(v) = map.read().unwrap_or_else(PoisonError::into_inner).get(key) {
        return f(v);
    }
    let mut map = map.write().unwrap_or_else(PoisonError::into_inner);
    if let Some(v) = map.get(key) {
        return f(v);
    }
    let (k, v) = make();
    f(map.entry(k).or_insert(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_made_once_and_found_after() {
        let map = ReadMostly::<String, usize>::default();
        let mut made = 0;
        for _ in 0..3 {
            let v = with_entry(
                &map,
                "a",
                || {
                    made += 1;
                    ("a".to_owned(), 7)
                },
                |v| *v,
            );
            assert_eq!(v, 7);
        }
        assert_eq!(made, 1);
    }
}
