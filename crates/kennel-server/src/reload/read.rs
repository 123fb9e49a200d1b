//! Reading a config file for a reload only once it has settled: an editor
//! that rewrites the file in place leaves it half written for a while, and
//! a half-written file may still parse.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::config::{Config, ConfigError, Source};

/// How long the file must stay the same (size, modification time and
/// bytes) between two reads.
pub(crate) const SETTLE: Duration = Duration::from_millis(50);

/// How many pairs of reads before the reload is refused.
pub(crate) const TRIES: u32 = 5;

/// What one read saw.
#[derive(PartialEq, Eq)]
struct Seen {
    len: u64,
    modified: Option<SystemTime>,
    bytes: Vec<u8>,
}

fn see(path: &Path) -> std::io::Result<Seen> {
    let meta = std::fs::metadata(path)?;
    let bytes = std::fs::read(path)?;
    Ok(Seen {
        len: meta.len(),
        modified: meta.modified().ok(),
        bytes,
    })
}

/// Reads and checks the config at `path` once it has settled: two reads
/// [`SETTLE`] apart see the same size, modification time and bytes, and
/// those bytes parse. Up to [`TRIES`] pairs of reads.
///
/// # Errors
///
/// The error a start gives for the last settled text that does not pass,
/// or a file that cannot be read; or, when the file changed between every
/// pair of reads, one that says so.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub(crate) async fn read_settled(path: &Path) -> Result<Config, ConfigError> {
    let source = Source::file(path);
    let error = |message: String| ConfigError::whole(&source.name, message);
    let mut last = None;
    for _ in 0..TRIES {
        let before = see(path);
        tokio::time::sleep(SETTLE).await;
        let after = see(path).map_err(|e| error(format!("cannot read the file: {e}")))?;
        if before.is_ok_and(|b| b == after) {
            let parsed = String::from_utf8(after.bytes)
                .map_err(|_| error("the file is not UTF-8".into()))
                .and_then(|text| Config::parse(&text, &source));
            match parsed {
                Ok(config) => return Ok(config),
                Err(e) => last = Some(e),
            }
        } else {
            last = None;
        }
    }
    Err(last.unwrap_or_else(|| {
        error(format!(
            "the file kept changing while it was read ({TRIES} pairs of reads {} ms apart); the running config is kept",
            SETTLE.as_millis()
        ))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config file holding `text` in a directory removed on drop.
    fn temp(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::Builder::new()
            .prefix("kennel-read-")
            .tempdir()
            .unwrap();
        let path = dir.path().join("kennel.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[tokio::test(start_paused = true)]
    async fn a_settled_file_is_read_and_a_broken_one_refused_with_the_start_error() {
        let (_dir, path) = temp("[[pool]]\nname = \"a\"\nargv = [\"cat\"]\n");
        assert_eq!(read_settled(&path).await.unwrap().pools[0].name, "a");
        std::fs::write(
            &path,
            "[[pool]]\nname = \"a\"\nargv = [\"cat\"]\nsizng = 1\n",
        )
        .unwrap();
        let err = read_settled(&path).await.unwrap_err();
        assert_eq!(err, Config::load(&path).unwrap_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_file_that_keeps_changing_is_refused() {
        let (_dir, path) = temp("");
        let writer = {
            let path = path.clone();
            tokio::spawn(async move {
                for i in 0u32.. {
                    std::fs::write(&path, format!("# {i}\n")).unwrap();
                    tokio::time::sleep(SETTLE / 2).await;
                }
            })
        };
        let err = read_settled(&path).await.unwrap_err();
        writer.abort();
        // Stopped before the directory goes.
        assert!(writer.await.unwrap_err().is_cancelled());
        assert!(err.message.contains("kept changing"), "{err}");
    }
}
