//! Tables read only as tables: serde's derived structs also take a
//! sequence and fill their fields by position (`sizing = ["fixed", 3]`,
//! a JSON array in `PUT /pools/{name}/config`), which a config never
//! means. [`Table`] reads a map and refuses anything else.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// `T`, read from a map only.
#[derive(Debug)]
pub(crate) struct Table<T>(pub(crate) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Table<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Table<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of keys and values (not a list)")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Table<T>, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Table)
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// For `#[serde(deserialize_with)]`: `T` from a map only.
pub(crate) fn table<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Table::<T>::deserialize(d).map(|t| t.0)
}
