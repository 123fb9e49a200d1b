//! Sizes in humane form (`"2GiB"`, `"512 MB"`) or a number of bytes, for
//! the options that are sizes (`max_memory`).

use serde::{Deserialize, Deserializer, Serializer};

pub(crate) fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(n) => s.serialize_str(&bytesize::ByteSize(*n).to_string()),
        None => s.serialize_none(),
    }
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    match Option::<Size>::deserialize(d)? {
        None => Ok(None),
        Some(Size::Bytes(n)) => Ok(Some(n)),
        Some(Size::Text(t)) => t
            .trim()
            .parse::<bytesize::ByteSize>()
            .map(|b| Some(b.as_u64()))
            .map_err(|e| {
                serde::de::Error::custom(format!(
                    "invalid size {t:?}: {e} (allowed: a size such as \"512MiB\" or \"2GB\", or a number of bytes)"
                ))
            }),
    }
}
