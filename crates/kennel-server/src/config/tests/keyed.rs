//! The keys for jobs that carry a key: `key`, `key_pattern`, `load_method`
//! and `unload_method`, read, written back, and refused with their key.

use super::{parse, pool_with, refused};

#[test]
fn the_key_settings_are_read_and_written_back_as_given() {
    let text = "protocol = \"json-rpc\"\nkey = \"/model\"\nkey_pattern = \"^[a-z0-9._-]+$\"\nload_method = \"kennel/load\"\nunload_method = \"kennel/unload\"\nkey_binding = \"load\"\nkeys_per_worker = 2";
    let config = parse(&pool_with(text)).expect("accepted");
    let pool = &config.pools[0];
    assert_eq!(pool.key.as_deref(), Some("/model"));
    assert!(pool.key_pattern.as_ref().unwrap().matches("model-a.1"));
    assert_eq!(pool.load_method.as_deref(), Some("kennel/load"));
    let json = serde_json::to_value(pool).unwrap();
    assert_eq!(json["key_pattern"], "^[a-z0-9._-]+$");
    assert_eq!(json["unload_method"], "kennel/unload");
    assert_eq!(json["keys_per_worker"], 2);
}

#[test]
fn a_key_in_the_argv_or_env_requires_a_key_pattern() {
    let argv = "[[pool]]\nname = \"p\"\nargv = [\"python3\", \"w.py\", \"--model\", \"/m/{key}.bin\"]\nkey_binding = \"spawn\"\n";
    let e = refused(argv);
    assert_eq!(e.key, "pool[0].key_pattern", "{e}");
    assert!(
        e.message.contains("is required when the argv holds {key}"),
        "{e}"
    );
    let e = refused(&pool_with("env = { MODEL = \"{key}\" }"));
    assert_eq!(e.key, "pool[0].key_pattern", "{e}");
    assert!(e.message.contains("the env holds {key}"), "{e}");
    parse(&format!("{argv}key_pattern = \"[a-z]+\"\n")).expect("with a pattern, accepted");
}

#[test]
fn a_key_pattern_that_does_not_compile_is_refused_with_the_regex_error() {
    let e = refused(&pool_with("key_pattern = \"[a-\""));
    assert_eq!(e.key, "pool[0].key_pattern", "{e}");
    assert!(e.message.contains("is not a regular expression: "), "{e}");
    assert!(e.message.contains("unclosed character class"), "{e}");
}

#[test]
fn load_and_unload_methods_are_for_the_json_rpc_framings() {
    for key in ["load_method", "unload_method"] {
        let e = refused(&pool_with(&format!("{key} = \"kennel/load\"")));
        assert_eq!(e.key, format!("pool[0].{key}"), "{e}");
        assert!(e.message.contains("is for the JSON-RPC protocols"), "{e}");
        let e = refused(&pool_with(&format!(
            "protocol = \"json-rpc\"\n{key} = \"\""
        )));
        assert!(e.message.contains("is empty"), "{e}");
    }
}

#[test]
fn a_key_that_is_not_a_json_pointer_is_refused() {
    let e = refused(&pool_with("key = \"model\""));
    assert_eq!(e.key, "pool[0].key", "{e}");
    assert!(e.message.contains("is not a JSON pointer"), "{e}");
    parse(&pool_with("key = \"\"")).expect("the whole body is a pointer too");
}
