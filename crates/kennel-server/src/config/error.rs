//! [`ConfigError`]: the file, the key and what is wrong and allowed; and the
//! helpers that place a refusal in the text and add a hint where one helps
//! (the closest allowed name for a misspelt one, `[[pool]]` for `[pool]`).

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

impl ConfigError {
    /// A refusal of the whole of `file`, at no key.
    pub(crate) fn whole(file: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            file: file.into(),
            key: String::new(),
            message: message.into(),
            line: None,
        }
    }
}

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

/// The least likeness (normalized Damerau-Levenshtein, 0 to 1) at which
/// an allowed name is offered for an unknown one: a letter or two off in
/// a name of seven, a transposition in a name of four.
const LIKE_ENOUGH: f64 = 0.7;

/// `message`, refused at `key`, with a hint where one helps:
///
/// - an unknown field or variant (serde's wording, "unknown field `x`,
///   expected one of `a`, `b`") names the allowed one closest to it:
///   "unknown field `job_timout`, did you mean `job_timeout`? (expected
///   one of …)";
/// - `[pool]` written for `[[pool]]`, and `[[server]]` for `[server]`,
///   say which brackets the table takes.
pub(crate) fn hinted(key: &str, message: String) -> String {
    if let Some(closer) = did_you_mean(&message) {
        return closer;
    }
    let last = key.rsplit('.').next().unwrap_or(key);
    if last == "pool" && message.starts_with("invalid type: map") {
        return format!(
            "{message}: each pool is a `[[pool]]` table (two brackets), one per pool, not `[pool]`"
        );
    }
    if key == "server" && message.starts_with("invalid type: sequence") {
        return format!("{message}: the server's table is written `[server]` (one bracket), once");
    }
    message
}

/// serde's refusal of an unknown field or variant, rewritten to name the
/// allowed name closest to the one written; `None` when `message` is not
/// one or no allowed name is close.
fn did_you_mean(message: &str) -> Option<String> {
    let (what, rest) = ["unknown field `", "unknown variant `"]
        .iter()
        .find_map(|p| {
            message
                .strip_prefix(p)
                .map(|rest| (&p[..p.len() - 2], rest))
        })?;
    let (written, allowed) = rest.split_once('`')?;
    let allowed = allowed.strip_prefix(", ").unwrap_or(allowed);
    let closest = allowed
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|name| (strsim::normalized_damerau_levenshtein(written, name), name))
        .filter(|&(like, name)| like >= LIKE_ENOUGH && name != written)
        .max_by(|a, b| a.0.total_cmp(&b.0))?
        .1;
    Some(format!(
        "{what} `{written}`, did you mean `{closest}`? ({allowed})"
    ))
}

/// 1-based line and column of `key` (a path: `pool[1].sizing.workers`,
/// `server.listen`) in `text`: of the deepest part of it written there (a
/// value kennel filled in is placed at its table). `None` when the text is
/// not TOML or holds no part of the key.
pub(crate) fn locate(text: &str, key: &str) -> Option<(usize, usize)> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(text).ok()?;
    let mut table = doc.get_ref();
    let mut at = None;
    for part in key.split('.') {
        let (name, index) = match part.split_once('[') {
            Some((name, i)) => (name, Some(i.strip_suffix(']')?.parse::<usize>().ok()?)),
            None => (part, None),
        };
        let Some((written, mut value)) = table.get_key_value(name) else {
            break;
        };
        at = Some(written.span().start);
        if let Some(i) = index {
            let DeValue::Array(items) = value.get_ref() else {
                break;
            };
            let Some(item) = items.get(i) else {
                break;
            };
            at = Some(item.span().start);
            value = item;
        }
        match value.get_ref() {
            DeValue::Table(inner) => table = inner,
            _ => break,
        }
    }
    at.map(|offset| line_col(text, offset))
}
