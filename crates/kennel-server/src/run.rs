//! `kennel run [--pool NAME] jobs.jsonl`: streams jobs through one pool,
//! each non-blank line one job, and writes the results as JSON lines in
//! input order (docs/SERVICE.md, "`kennel run`"). A pool with
//! `retry_on_crash` runs each job through `Pool::run_idempotent`.
//!
//! A batch applies back-pressure instead of queue limits: it reads a line
//! only while fewer than `--concurrency` jobs are in the pool, and the pool
//! is built without `max_queue_wait` and with a queue that holds them all.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::config::{Config, PoolConfig};
use crate::error::ApiError;
use crate::job_key::KeyRules;
use crate::pools::build_pool;
use crate::watch::{Watch, run_request};
use anyhow::Context;
use futures_util::StreamExt;
use kennel::Pool;
use kennel_process::Coprocess;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::task::AbortOnDropHandle;

use crate::cli::RunArgs;
use crate::progress::{Progress, rate_text};

/// One job's outcome: the line to write, and the error kind if it failed.
struct Outcome {
    line: String,
    failed: Option<&'static str>,
    /// The last words of the worker that failed the job.
    stderr: Vec<String>,
    /// The input line of the job.
    number: u64,
}

/// The pool `--pool` names, or the config's one pool when it names none.
fn choose_pool<'a>(config: &'a Config, asked: Option<&str>) -> anyhow::Result<&'a PoolConfig> {
    let names: Vec<&str> = config.pools.iter().map(|p| p.name.as_str()).collect();
    let allowed = if names.is_empty() {
        "none, the config has no pool".to_owned()
    } else {
        names.join(", ")
    };
    match asked {
        Some(name) => config.pools.iter().find(|p| p.name == name).ok_or_else(|| {
            anyhow::anyhow!("no pool named `{name}` in the config (allowed: {allowed})")
        }),
        None => match config.pools.as_slice() {
            [one] => Ok(one),
            [] => anyhow::bail!("the config has no pool to run the jobs on"),
            _ => anyhow::bail!(
                "the config has {} pools: name one with --pool (allowed: {allowed})",
                names.len()
            ),
        },
    }
}

/// Refuses an `--output` that is the jobs file itself: it would be
/// emptied before a job is read.
fn refuse_output_over_input(jobs: &Path, output: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let (Ok(a), Ok(b)) = (std::fs::metadata(jobs), std::fs::metadata(output)) else {
        return Ok(());
    };
    if a.dev() == b.dev() && a.ino() == b.ino() {
        anyhow::bail!(
            "--output {} is the jobs file: writing the results would erase the jobs (allowed: another file)",
            output.display()
        );
    }
    Ok(())
}

pub(crate) async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(server) = args.server.clone() {
        return crate::run_remote::run_remote(args, &server).await;
    }
    let config = crate::command::load_config(args.config.as_ref())?;
    let pool_config = choose_pool(&config, args.pool.as_deref())?;
    let from_stdin = args.jobs.as_os_str() == "-";
    if let (false, Some(output)) = (from_stdin, &args.output) {
        refuse_output_over_input(&args.jobs, output)?;
    }

    // Count the lines first, for the bar's length and ETA (not for stdin).
    let total = if from_stdin {
        None
    } else {
        let text = tokio::fs::read(&args.jobs)
            .await
            .with_context(|| format!("cannot read {}", args.jobs.display()))?;
        Some(
            text.split(|b| *b == b'\n')
                .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
                .count() as u64,
        )
    };
    let input: Box<dyn tokio::io::AsyncRead + Unpin + Send> = if from_stdin {
        Box::new(tokio::io::stdin())
    } else {
        Box::new(
            tokio::fs::File::open(&args.jobs)
                .await
                .with_context(|| format!("cannot open {}", args.jobs.display()))?,
        )
    };
    let mut output: Box<dyn Write + Send> = match &args.output {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout())),
    };

    let mut batch_config = pool_config.clone();
    batch_config.options.max_queue_wait = None;
    batch_config.options.max_waiting = Some(crate::cli::MAX_CONCURRENCY as usize);
    let watch = Watch::default();
    let pool = build_pool(&batch_config, &crate::command::self_exe()?, &watch)
        .map_err(|e| anyhow::anyhow!("`pool` {:?}: {e}", pool_config.name))?;
    let rules = KeyRules::of(pool_config);
    // `--key` is checked once, as a header would be: every job has it.
    let fixed = match &args.key {
        Some(k) => Some(
            rules
                .check(k, "--key")
                .map_err(|e| anyhow::anyhow!(e.message()))?,
        ),
        None => None,
    };
    let capacity = pool.stats().capacity.max(1);
    let concurrency = args.concurrency.map_or(capacity * 2, |n| n as usize);

    let bar = Progress::new(total, args.quiet, capacity);
    // Until the pool closes: the first ready worker starts the bar's rate;
    // the first worker found oversubscribing its threads is named in the
    // summary.
    let watching = {
        let mut events = pool.events();
        let bar = bar.clone();
        AbortOnDropHandle::new(tokio::spawn(async move {
            let mut over = None;
            loop {
                match events.recv().await {
                    Ok(kennel::Event::Ready { .. }) => bar.ready(),
                    Ok(kennel::Event::Oversubscribed { slot, usage, .. }) => {
                        over = over.or(Some((slot, usage)));
                    }
                    Ok(kennel::Event::Closed)
                    | Err(tokio::sync::broadcast::error::RecvError::Closed) => break over,
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                }
            }
        }))
    };
    let started = Instant::now();
    // Lines as bytes: one that is not UTF-8 fails alone, as bad JSON.
    let mut lines = BufReader::new(input).split(b'\n');
    let mut line_no = 0u64;
    let jobs = futures_util::stream::poll_fn(move |cx| {
        std::pin::Pin::new(&mut lines)
            .poll_next_segment(cx)
            .map(Result::transpose)
    })
    .filter_map(move |r| {
        line_no += 1;
        let n = line_no;
        std::future::ready(match r {
            Ok(l) if l.iter().all(u8::is_ascii_whitespace) => None,
            other => Some((n, other)),
        })
    })
    .map(|(n, line)| {
        let pool = pool.clone();
        let watch = watch.clone();
        let (rules, fixed) = (rules.clone(), fixed.clone());
        async move {
            match line {
                Ok(line) => run_one(&pool, &watch, (&rules, fixed), n, &line).await,
                Err(e) => Err(e),
            }
        }
    })
    .buffered(concurrency);
    tokio::pin!(jobs);

    let mut ok = 0u64;
    let mut failed: BTreeMap<String, u64> = BTreeMap::new();
    let mut last_words: Option<(u64, &'static str, Vec<String>)> = None;
    while let Some(outcome) = jobs.next().await {
        let outcome = outcome.context("cannot read the jobs")?;
        writeln!(output, "{}", outcome.line).context("cannot write a result")?;
        match outcome.failed {
            None => {
                // A reply: a worker was ready, whether or not its event
                // was read yet.
                bar.ready();
                ok += 1;
            }
            Some(kind) => {
                *failed.entry(kind.to_owned()).or_default() += 1;
                if !outcome.stderr.is_empty() {
                    last_words = Some((outcome.number, kind, outcome.stderr));
                }
            }
        }
        bar.inc();
    }
    output.flush().context("cannot write the results")?;
    bar.finish();
    pool.close().await;
    let over = watching.await.ok().flatten();

    let elapsed = started.elapsed();
    let failures: u64 = failed.values().sum();
    // One write, so that a worker's log line (a warm-up that fails as the
    // pool closes, say) cannot land between the summary's lines.
    let rate = match bar.measured(ok + failures) {
        Some((warmup, rate)) => format!(
            "{} jobs/s after a {:.1}s warm-up",
            rate_text(Some(rate)).trim_end_matches("/s"),
            warmup.as_secs_f64()
        ),
        None => "no worker was ready".to_owned(),
    };
    let mut text = summary(ok, &failed, elapsed, &rate);
    text.push('\n');
    if let Some((slot, usage)) = over {
        let _ = writeln!(
            text,
            "worker {slot} oversubscribed its threads: {usage}; {}",
            kennel::ThreadUse::FIX
        );
    }
    if let Some((line, kind, stderr)) = last_words {
        let _ = writeln!(
            text,
            "last words of the worker that failed line {line} ({kind}):"
        );
        for l in stderr {
            let _ = writeln!(text, "  {l}");
        }
    }
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
    // 0 when every job succeeded, 1 when some failed.
    Ok(ExitCode::from(u8::from(failures > 0)))
}

/// Runs the job of one input line, with the key `--key` gave, else its
/// own at the pool's pointer.
async fn run_one(
    pool: &Pool<Coprocess>,
    watch: &Watch,
    (rules, fixed): (&KeyRules, Option<kennel::Key>),
    line: u64,
    bytes: &[u8],
) -> std::io::Result<Outcome> {
    let request = std::str::from_utf8(bytes)
        .map_err(|e| format!("the line is not UTF-8: {e}"))
        .and_then(|text| serde_json::from_str::<Value>(text).map_err(|e| e.to_string()));
    let request = match request {
        Ok(v) => v,
        Err(message) => return Ok(error_line(line, &ApiError::BadJson { message })),
    };
    let key = match fixed.map_or_else(|| rules.key(None, Some(&request)), |k| Ok(Some(k))) {
        Ok(key) => key,
        Err(e) => return Ok(error_line(line, &e)),
    };
    Ok(
        match run_request(pool, Some(watch), request, key, || {}, None).await {
            Ok(reply) => Outcome {
                line: reply.to_string(),
                failed: None,
                stderr: Vec::new(),
                number: line,
            },
            Err(e) => error_line(line, &e),
        },
    )
}

fn error_line(line: u64, e: &ApiError) -> Outcome {
    let mut json = json!({ "error": e.kind(), "message": e.message(), "line": line });
    if !e.stderr().is_empty() {
        json["stderr"] = e.stderr().into();
    }
    Outcome {
        line: json.to_string(),
        failed: Some(e.kind()),
        stderr: e.stderr().to_vec(),
        number: line,
    }
}

/// The last line: counts, time, and `rate` (what it says of the rate).
pub(crate) fn summary(
    ok: u64,
    failed: &BTreeMap<String, u64>,
    elapsed: Duration,
    rate: &str,
) -> String {
    let failures: u64 = failed.values().sum();
    let total = ok + failures;
    let mut s = format!(
        "{total} jobs: {ok} ok, {failures} failed in {:.2}s ({rate})",
        elapsed.as_secs_f64()
    );
    if failures > 0 {
        let kinds: Vec<String> = failed.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        s.push_str(&format!(" [{}]", kinds.join(", ")));
    }
    s
}
