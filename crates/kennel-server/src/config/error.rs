//! [`ConfigError`]: the file, the key and what is wrong and allowed; and the
//! helpers that place a refusal in the text.

use std::fmt;

/// A configuration error: the file, the key and what is wrong and allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, or `<built-in>` / `<request>` for a config that is not one.
    pub file: String,
    /// The key, as a path: `server.listen`, `pool[0].sizing.workers`.
    pub key: String,
    /// What is wrong, and what is allowed.
    pub message: String,
    /// Where in the file, when known (1-based line and column).
    pub line: Option<(usize, usize)>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some((line, col)) = self.line {
            write!(f, ":{line}:{col}")?;
        }
        if self.key.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": `{}`: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// A refusal found while checking: the key (a path from the table checked)
/// and the message.
pub(crate) type Refusal = (String, String);

/// The refusal of kennel's own check, [`kennel::BuildError`], at the key it
/// names (`job_timeout`, `eviction.after`).
pub(crate) fn refusal(e: kennel::BuildError) -> Refusal {
    (e.option.to_owned(), e.message)
}

/// A key path from serde, `""` for the whole document.
pub(crate) fn path_string(path: &serde_path_to_error::Path) -> String {
    let s = path.to_string();
    if s == "." { String::new() } else { s }
}

/// `key` after `prefix`: `pool[0]` and `job_timeout` make
/// `pool[0].job_timeout`.
pub(crate) fn join(prefix: &str, key: &str) -> String {
    match (prefix.is_empty(), key.is_empty()) {
        (true, _) => key.to_owned(),
        (false, true) => prefix.to_owned(),
        (false, false) => format!("{prefix}.{key}"),
    }
}

/// The keys a refusal of an unknown key offers, as serde words it.
pub(crate) fn unknown_key(key: &str, allowed: &[&str]) -> String {
    if key == "close_grace" {
        return "`close_grace` was two settings and is now split (allowed: `job_grace`, how long lent jobs may finish when the pool closes, default 30s; `worker_close_grace`, each step of one worker's close, default 5s)".into();
    }
    let list: Vec<String> = allowed.iter().map(|k| format!("`{k}`")).collect();
    format!("unknown field `{key}`, expected one of {}", list.join(", "))
}

/// 1-based line and column of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}
