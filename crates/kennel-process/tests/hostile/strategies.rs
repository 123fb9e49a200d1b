//! Generators of hostile output: JSON values, blank lines, invalid UTF-8,
//! odd error and ready lines, random bytes, lines around the limit.

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::LIMIT;

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
        Just(json!("nul \u{0} inside")),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("error".to_owned()),
                    Just("message".to_owned()),
                    "[a-z]{1,6}"
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// One piece of hostile output.
pub(crate) fn atom() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => json_value().prop_map(|v| v.to_string().into_bytes()),
        3 => prop_oneof![
            Just(b"\n".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b" \t ".to_vec()),
            Just(b"\r".to_vec()),
        ],
        2 => prop_oneof![
            Just(vec![0u8]),
            Just(vec![0xff]),
            Just(vec![0xc3]),
            Just(vec![0xe2, 0x82]),
            Just(vec![0xed, 0xa0, 0x80]),
        ],
        2 => prop_oneof![
            Just(br#"{"error":true}"#.to_vec()),
            Just(br#"{"error":true,"message":"boom"}"#.to_vec()),
            Just(br#"{"error":true,"message":null}"#.to_vec()),
            Just(br#"{"error":true,"message":[1,{"a":2}]}"#.to_vec()),
            Just(br#"{"error":"true"}"#.to_vec()),
            Just(br#"{"ready":true}"#.to_vec()),
            Just(br#"{"partial":"#.to_vec()),
        ],
        2 => "[a-z{}\\[\\]\":, 0-9]{0,24}".prop_map(String::into_bytes),
        2 => prop::collection::vec(any::<u8>(), 0..48),
        1 => (LIMIT - 2..LIMIT + 3).prop_map(|n| vec![b'x'; n]),
        // A JSON line right at the limit, with and without a `\r`.
        1 => (LIMIT - 3..LIMIT + 1, any::<bool>()).prop_map(|(n, cr)| {
            let mut v = b"\"".to_vec();
            v.extend(std::iter::repeat_n(b'z', n - 2));
            v.push(b'"');
            if cr {
                v.push(b'\r');
            }
            v.push(b'\n');
            v
        }),
        1 => (LIMIT..3 * LIMIT).prop_map(|n| {
            let mut v = b"\"".to_vec();
            v.extend(std::iter::repeat_n(b'y', n));
            v.push(b'"');
            v
        }),
    ]
}

pub(crate) fn output() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::collection::vec(atom(), 0..7).prop_map(|v| v.concat()),
        1 => prop::collection::vec(any::<u8>(), 0..700),
    ]
}
