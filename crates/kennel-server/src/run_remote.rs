//! `kennel run --server URL`: a batch sent to a running service as
//! asynchronous jobs, the results written in input order as `kennel run`
//! writes them (docs/SERVICE.md, "`kennel run`").
//!
//! Each line is one job named by an `Idempotency-Key`: the batch's name
//! (`--batch`, else a digest of the pool and the jobs) and the line's
//! number. Run again after an interruption, the same command submits
//! nothing twice: the server answers each line with the job it already
//! has, and results already there come back at once. The server keeps
//! them for its `result_ttl`.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::body::Bytes;
use axum::http::{Method, StatusCode};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::cli::RunArgs;
use crate::progress::Progress;
use crate::remote::Remote;

/// The longest wait between two looks at an unfinished job.
const MAX_POLL: Duration = Duration::from_millis(500);

/// Requests in flight at once, when `--concurrency` says none.
const DEFAULT_CONCURRENCY: usize = 16;

/// A job as `GET /jobs/{id}` shows it: only what the results need.
#[derive(Deserialize)]
struct JobState {
    state: String,
    result: Option<Box<RawValue>>,
    error: Option<Value>,
}

/// One line's job: its id on the server, or the error line it ended with.
enum Submitted {
    Id(String),
    Failed(String),
}

impl Remote {
    /// The pool `--pool` names, or the server's one pool.
    async fn pool(&self, asked: Option<&str>) -> anyhow::Result<String> {
        if let Some(name) = asked {
            return Ok(name.to_owned());
        }
        let (status, list) = self.call(Method::GET, "/pools", &[], Bytes::new()).await?;
        if !status.is_success() {
            bail!("{}/pools: HTTP {status}: {}", self.base, message(&list));
        }
        let names: Vec<&str> = list["pools"]
            .as_array()
            .map(|p| p.iter().filter_map(|p| p["name"].as_str()).collect())
            .unwrap_or_default();
        match names.as_slice() {
            [one] => Ok((*one).to_owned()),
            [] => bail!("the server has no pool to run the jobs on"),
            _ => bail!(
                "the server has {} pools: name one with --pool (allowed: {})",
                names.len(),
                names.join(", ")
            ),
        }
    }

    /// Submits line `n` as the job `idem`; its id, or its error line.
    async fn submit(
        &self,
        path: &str,
        key: Option<&str>,
        (n, idem, bytes): (u64, String, Bytes),
    ) -> anyhow::Result<Submitted> {
        let mut headers = vec![
            ("prefer", "respond-async"),
            ("content-type", "application/json"),
            ("idempotency-key", idem.as_str()),
        ];
        if let Some(k) = key {
            headers.push(("kennel-key", k));
        }
        let (status, body) = self.call(Method::POST, path, &headers, bytes).await?;
        match body["id"].as_str() {
            Some(id) if status == StatusCode::ACCEPTED => Ok(Submitted::Id(id.to_owned())),
            _ => Ok(Submitted::Failed(error_line(n, &body))),
        }
    }

    /// Waits for job `id` of line `n` to end: the worker's reply as it
    /// wrote it, or its error line.
    async fn collect(&self, n: u64, id: &str) -> anyhow::Result<(String, Option<String>)> {
        let path = format!("/jobs/{id}");
        let mut pause = Duration::from_millis(20);
        loop {
            let (status, body) = self.call(Method::GET, &path, &[], Bytes::new()).await?;
            if !status.is_success() {
                // Gone (past the server's result_ttl) or refused.
                let line = error_line(n, &body);
                return Ok((line, Some(kind(&body))));
            }
            let job: JobState = serde_json::from_value(body)
                .with_context(|| format!("{}{path}: not a job", self.base))?;
            match (job.state.as_str(), job.result) {
                ("done", Some(result)) => return Ok((result.get().to_owned(), None)),
                ("failed" | "cancelled" | "done", _) => {
                    let error = job.error.unwrap_or(Value::Null);
                    return Ok((error_line(n, &error), Some(kind(&error))));
                }
                _ => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_POLL);
                }
            }
        }
    }
}

fn message(body: &Value) -> &str {
    body["message"].as_str().unwrap_or("no message")
}

fn kind(body: &Value) -> String {
    body["error"].as_str().unwrap_or("internal").to_owned()
}

/// The error line of line `n`, as `kennel run` writes one.
fn error_line(n: u64, body: &Value) -> String {
    serde_json::json!({"error": kind(body), "message": message(body), "line": n}).to_string()
}

/// The batch's name when `--batch` gives none: a digest of the pool and the
/// jobs (FNV-1a, 64 bits), so that the same jobs on the same pool are the
/// same batch.
fn digest(pool: &str, jobs: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in pool.bytes().chain([0]).chain(jobs.iter().copied()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// `kennel run --server URL`.
///
/// # Errors
///
/// A server that cannot be reached or answers what is not a job, a
/// `--batch` name that cannot name jobs, and jobs or results that cannot
/// be read or written; a job that fails is a line of the output, not an
/// error.
///
/// # Cancel safety
///
/// Cancel safe: what was submitted stays on the server, and the same
/// command resumes it.
pub(crate) async fn run_remote(args: RunArgs, server: &str) -> anyhow::Result<ExitCode> {
    let (base, token) = crate::status::target(
        Some(server),
        args.config.as_deref(),
        args.token_env.as_deref(),
    )?;
    let remote = Remote::new(
        base,
        token,
        "is `kennel serve` running there? Run the same command again to resume",
    );
    let jobs = if args.jobs.as_os_str() == "-" {
        let mut all = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut all)
            .await
            .context("cannot read the jobs")?;
        all
    } else {
        tokio::fs::read(&args.jobs)
            .await
            .with_context(|| format!("cannot read {}", args.jobs.display()))?
    };
    let pool = remote.pool(args.pool.as_deref()).await?;
    let batch = args.batch.clone().unwrap_or_else(|| digest(&pool, &jobs));
    // It goes into each line's Idempotency-Key (at most 256 bytes of
    // printable ASCII, with the line's number).
    if batch.is_empty() || batch.len() > 200 || !batch.bytes().all(|b| b.is_ascii_graphic()) {
        bail!(
            "--batch {batch:?}: 1 to 200 printable ASCII characters without spaces (allowed: such as nightly-2026-12-06)"
        );
    }
    let lines: Vec<(u64, Bytes)> = jobs
        .split(|b| *b == b'\n')
        .zip(1u64..)
        .filter(|(l, _)| !l.iter().all(u8::is_ascii_whitespace))
        .map(|(l, n)| (n, Bytes::copy_from_slice(l)))
        .collect();
    let mut output: Box<dyn Write + Send> = match &args.output {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout())),
    };
    let concurrency = args.concurrency.map_or(DEFAULT_CONCURRENCY, |n| n as usize);
    let bar = Progress::new(Some(lines.len() as u64), args.quiet, concurrency);
    // The server's workers are its own: the rate counts from the start.
    bar.ready();
    let started = Instant::now();

    // Every line submitted first (each a quick 202), then the results
    // collected in input order while the server runs the jobs.
    let path = format!("/pools/{}/jobs", crate::status::percent_encode(&pool));
    let key = args.key.as_deref();
    let submitted: Vec<(u64, anyhow::Result<Submitted>)> = futures_util::stream::iter(lines)
        .map(|(n, bytes)| {
            let (remote, path, idem) = (&remote, &path, format!("kennel-run {batch} {n}"));
            async move { (n, remote.submit(path, key, (n, idem, bytes)).await) }
        })
        .buffered(concurrency)
        .collect()
        .await;
    let results = futures_util::stream::iter(submitted).map(|(n, s)| {
        let remote = &remote;
        async move {
            match s? {
                Submitted::Id(id) => remote.collect(n, &id).await,
                Submitted::Failed(line) => {
                    let kind = serde_json::from_str::<Value>(&line)
                        .map(|v| kind(&v))
                        .unwrap_or_default();
                    Ok((line, Some(kind)))
                }
            }
        }
    });
    let results = results.buffered(concurrency);
    tokio::pin!(results);
    let mut ok = 0u64;
    let mut failed: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    while let Some(result) = results.next().await {
        let (line, error) = result?;
        writeln!(output, "{line}").context("cannot write a result")?;
        match error {
            None => ok += 1,
            Some(kind) => *failed.entry(kind).or_default() += 1,
        }
        bar.inc();
    }
    output.flush().context("cannot write the results")?;
    bar.finish();
    let failures: u64 = failed.values().sum();
    let elapsed = started.elapsed();
    #[allow(clippy::cast_precision_loss)]
    let rate = (ok + failures) as f64 / elapsed.as_secs_f64().max(1e-3);
    let rate = format!(
        "{} jobs/s",
        crate::progress::rate_text(Some(rate)).trim_end_matches("/s")
    );
    let mut text = crate::run::summary(ok, &failed, elapsed, &rate);
    text.push_str(&format!(
        "\nbatch {batch} on {}: the same command again gives these results without running a job twice, while the server keeps them (its result_ttl)\n",
        remote.base
    ));
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
    Ok(ExitCode::from(u8::from(failures > 0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_jobs_on_the_same_pool_are_the_same_batch() {
        let a = digest("p", b"{\"n\":1}\n{\"n\":2}\n");
        assert_eq!(a, digest("p", b"{\"n\":1}\n{\"n\":2}\n"));
        assert_ne!(a, digest("q", b"{\"n\":1}\n{\"n\":2}\n"));
        assert_ne!(a, digest("p", b"{\"n\":1}\n{\"n\":3}\n"));
        assert_eq!(a.len(), 16);
    }
}
