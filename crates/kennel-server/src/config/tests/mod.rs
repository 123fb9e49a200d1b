//! Config tests: every key is read, every bad value is refused with the file
//! and the key named.

mod hints;
mod hostile_text;
mod key_rules;
mod keyed;
mod reading;
mod reconfig;
mod refusals;

use std::path::PathBuf;
use std::time::Duration;

use crate::config::{Config, ConfigError, HumanDuration, Source};

fn source() -> Source {
    Source {
        name: "test.toml".into(),
        dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")),
    }
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, &source())
}

fn refused(text: &str) -> ConfigError {
    match parse(text) {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(e) => {
            assert_eq!(e.file, "test.toml");
            e
        }
    }
}

/// A minimal pool, to which a test adds one line.
fn pool_with(line: &str) -> String {
    format!("[[pool]]\nname = \"p\"\nargv = [\"python3\", \"w.py\"]\n{line}\n")
}

fn secs(n: u64) -> HumanDuration {
    HumanDuration(Duration::from_secs(n))
}
