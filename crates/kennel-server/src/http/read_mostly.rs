//! A map read on every request and written once per key: the HTTP
//! metrics' series handles ([`super::series`]) and the routes' labels
//! ([`super::labels`]), both by keys from closed sets.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{PoisonError, RwLock};

/// Runs `f` on the value of `key` in `map`, found under a read lock; the
/// first time, `make` gives the entry (its owned key and its value),
/// inserted under the write lock unless another thread did it first.
pub(crate) fn with_entry<K, Q, V, R>(
    map: &RwLock<HashMap<K, V>>,
    key: &Q,
    make: impl FnOnce() -> (K, V),
    f: impl FnOnce(&V) -> R,
) -> R
where
    K: Borrow<Q> + Eq + Hash,
    Q: Eq + Hash + ?Sized,
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
        let map = RwLock::new(HashMap::<String, usize>::new());
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
