//! `kennel status [POOL]`: a running server's pools and their workers as
//! a table, read from `GET /pools` and `GET /pools/{name}/workers`
//! (docs/SERVICE.md, "`kennel status`", shows one).

use std::io::Write;
use std::process::ExitCode;

use crate::ops::openapi::{PoolEntryBody, PoolList};
use crate::ops::workers::{WorkerJson, WorkersBody};
use anyhow::{Context, bail};

use crate::cli::StatusArgs;

pub(crate) async fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let (base, token) = target(
        args.url.as_deref(),
        args.config.as_deref(),
        args.token_env.as_deref(),
    )?;
    let remote = crate::remote::Remote::new(base, token, "is `kennel serve` running there?");
    let base = &remote.base;
    let get = async |path: &str| remote.get(path).await;
    let list: PoolList = serde_json::from_value(get("/pools").await?)
        .with_context(|| format!("{base}/pools: not a list of pools"))?;
    let chosen: Vec<&PoolEntryBody> = list
        .pools
        .iter()
        .filter(|p| args.pool.as_ref().is_none_or(|n| p.name == *n))
        .collect();
    if let Some(name) = &args.pool
        && chosen.is_empty()
    {
        let names: Vec<&str> = list.pools.iter().map(|p| p.name.as_str()).collect();
        bail!("no pool named `{name}` (pools: {})", names.join(", "));
    }
    let mut out = String::new();
    if chosen.is_empty() {
        out.push_str("no pool is configured\n");
    }
    for pool in chosen {
        let segment = percent_encode(&pool.name);
        let workers: WorkersBody = serde_json::from_value(
            get(&format!("/pools/{segment}/workers")).await?,
        )
        .with_context(|| format!("{base}/pools/{segment}/workers: not a list of workers"))?;
        out.push_str(&pool_line(pool));
        out.push_str(&table(&workers.workers));
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The server's base URL and the token to send.
/// The server's base URL and bearer token: `url`, else the `server.listen`
/// of `config`, else http://127.0.0.1:7878; the token from `token_env`,
/// else from the config's `server.token_env`.
pub(crate) fn target(
    url: Option<&str>,
    config: Option<&std::path::Path>,
    token_env: Option<&str>,
) -> anyhow::Result<(String, Option<String>)> {
    let config = match config {
        Some(p) => Some(crate::Config::load(p)?),
        None => None,
    };
    let base = match (url, &config) {
        (Some(url), _) => {
            let url = url.trim_end_matches('/');
            if url.contains("://") {
                url.to_owned()
            } else {
                format!("http://{url}")
            }
        }
        (None, Some(c)) => {
            let mut addr = c.listen();
            if addr.ip().is_unspecified() {
                addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            format!("http://{addr}")
        }
        (None, None) => "http://127.0.0.1:7878".to_owned(),
    };
    if !base.starts_with("http://") {
        bail!("`{base}`: only http:// URLs are read (allowed: such as http://127.0.0.1:7878)");
    }
    let token = match (token_env, &config) {
        (Some(var), _) => Some(std::env::var(var).with_context(|| {
            format!("--token-env: the variable {var} is not set (allowed: a variable that holds the token)")
        })?),
        (None, Some(c)) => c.server.token().map_err(anyhow::Error::msg)?,
        (None, None) => None,
    };
    Ok((base, token))
}

/// The innermost error, which says what went wrong ("Connection refused").
pub(crate) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    std::iter::successors(Some(e), |e| e.source())
        .last()
        .map_or_else(String::new, ToString::to_string)
}

/// A pool name as a path segment (names are letters, digits, `-`, `_`,
/// `.`; anything else is escaped).
pub(crate) fn percent_encode(name: &str) -> String {
    name.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `pool NAME (group G): capacity …, size … | starting …, … | healthy`.
fn pool_line(pool: &PoolEntryBody) -> String {
    let s = &pool.stats;
    format!(
        "pool {}{}: capacity {}, size {} | starting {}, idle {}, lent {}, waiting {}, kept {} | {}\n",
        pool.name,
        in_group(pool.group.as_deref()),
        s.capacity,
        s.size,
        s.starting,
        s.idle,
        s.lent,
        s.waiting,
        s.kept,
        if s.healthy { "healthy" } else { "unhealthy" },
    )
}

/// ` (group G)` after a pool's name, or nothing.
pub(crate) fn in_group(group: Option<&str>) -> String {
    group.map(|g| format!(" (group {g})")).unwrap_or_default()
}

/// A duration in milliseconds, short: `0.4ms`, `15ms`, `1.2s`, `4m10s`, `2h05m`.
fn short(ms: Option<f64>) -> String {
    let Some(ms) = ms else {
        return "-".into();
    };
    if ms < 10.0 {
        return format!("{ms:.1}ms");
    }
    if ms < 1000.0 {
        return format!("{ms:.0}ms");
    }
    let s = ms / 1000.0;
    if s < 60.0 {
        return format!("{s:.1}s");
    }
    // Whole seconds from here: truncation is what is meant.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let whole = s as u64;
    if whole < 3600 {
        format!("{}m{:02}s", whole / 60, whole % 60)
    } else {
        format!("{}h{:02}m", whole / 3600, whole / 60 % 60)
    }
}

/// A worker's keys, short: the first three, each cut to 24 characters,
/// then how many more; `-` for none.
fn keys_text(keys: &[String]) -> String {
    if keys.is_empty() {
        return "-".to_owned();
    }
    let cut = |k: &String| match k.char_indices().nth(24) {
        Some((at, _)) => format!("{}…", &k[..at]),
        None => k.clone(),
    };
    let mut text = keys.iter().take(3).map(cut).collect::<Vec<_>>().join(",");
    if keys.len() > 3 {
        text.push_str(&format!(",+{}", keys.len() - 3));
    }
    text
}

/// A worker's GPU: its id and the memory it holds there.
fn gpu_text(gpu: Option<&crate::ops::workers::GpuJson>) -> String {
    gpu.map_or_else(
        || "-".to_owned(),
        |g| match g.memory_bytes {
            Some(b) => format!("{} {}", g.id, bytesize::ByteSize(b).display().iec()),
            None => g.id.clone(),
        },
    )
}

/// The rows of a pool's workers, columns aligned; a `gpu` column after
/// `memory` where a worker was placed on one.
fn table(workers: &[WorkerJson]) -> String {
    let mut rows = vec![
        [
            "slot",
            "state",
            "pid",
            "gen",
            "jobs",
            "running",
            "warm-up",
            "last job",
            "memory",
            "threads",
            "retire due",
            "keys",
            "about",
        ]
        .map(str::to_owned),
    ];
    for w in workers {
        let retire = w.retire_due.as_ref().map_or_else(
            || "-".to_owned(),
            |d| match (d.in_ms, d.jobs_left) {
                (Some(ms), _) => format!("{} in {}", d.reason, short(Some(ms))),
                (None, Some(n)) => format!("{} in {n} job(s)", d.reason),
                (None, None) => d.reason.clone(),
            },
        );
        rows.push([
            w.slot.to_string(),
            w.state.clone(),
            w.pid.map_or_else(|| "-".to_owned(), |p| p.to_string()),
            w.generation.to_string(),
            w.jobs.to_string(),
            short(w.running_for_ms),
            short(w.ready_after_ms),
            short(w.last_job_ms),
            w.memory_bytes.map_or_else(
                || "-".to_owned(),
                |b| bytesize::ByteSize(b).display().iec().to_string(),
            ),
            w.threads.as_ref().map_or_else(
                || "-".to_owned(),
                |t| {
                    let over = if t.oversubscribed { " over" } else { "" };
                    format!("{}/{}{over}", t.working, t.budget)
                },
            ),
            retire,
            keys_text(&w.keys),
            w.about
                .as_ref()
                .map_or_else(|| "-".to_owned(), ToString::to_string),
        ]);
    }
    let mut rows: Vec<Vec<String>> = rows.into_iter().map(Vec::from).collect();
    if workers.iter().any(|w| w.gpu.is_some()) {
        rows[0].insert(9, "gpu".to_owned());
        for (row, w) in rows[1..].iter_mut().zip(workers) {
            row.insert(9, gpu_text(w.gpu.as_ref()));
        }
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str("  ");
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    for w in workers {
        if let Some(t) = w.threads.as_ref().filter(|t| t.oversubscribed) {
            out.push_str(&format!(
                "  slot {} is oversubscribed: {} threads worked during its jobs on a budget of {} ({:.2} cores busy); {}\n",
                w.slot,
                t.working,
                t.budget,
                t.cores,
                t.fix.as_deref().unwrap_or_default()
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_short_and_a_missing_one_is_a_dash() {
        assert_eq!(short(None), "-");
        assert_eq!(short(Some(0.44)), "0.4ms");
        assert_eq!(short(Some(15.4)), "15ms");
        assert_eq!(short(Some(1234.0)), "1.2s");
        assert_eq!(short(Some(250_000.0)), "4m10s");
        assert_eq!(short(Some(7_500_000.0)), "2h05m");
    }

    #[test]
    fn keys_are_shown_short() {
        assert_eq!(keys_text(&[]), "-");
        let keys: Vec<String> = ["a", "b", "c", "d", "e"].map(Into::into).to_vec();
        assert_eq!(keys_text(&keys), "a,b,c,+2");
        assert_eq!(keys_text(&["k".repeat(30)]), format!("{}…", "k".repeat(24)));
    }

    #[test]
    fn a_gpu_column_shows_where_a_worker_was_placed() {
        let row = |slot: usize, gpu: Option<(&str, Option<u64>)>| {
            let mut w: WorkerJson = serde_json::from_value(serde_json::json!({
                "slot": slot, "state": "idle", "generation": 1, "pid": 7, "running_for_ms": null,
                "ready_after_ms": null, "jobs": 0, "last_job_ms": null, "early_exits": 0,
                "memory_bytes": null, "retire_due": null, "about": null
            }))
            .unwrap();
            w.gpu = gpu.map(|(id, memory_bytes)| crate::ops::workers::GpuJson {
                id: id.to_owned(),
                uuid: format!("GPU-{id}"),
                memory_bytes,
            });
            w
        };
        let plain = table(&[row(0, None)]);
        assert!(!plain.contains("gpu"), "{plain}");
        let placed = table(&[
            row(0, Some(("0", Some(3 << 30)))),
            row(1, Some(("1", None))),
        ]);
        let lines: Vec<&str> = placed.lines().collect();
        assert!(lines[0].contains("memory  gpu"), "{placed}");
        assert!(lines[1].contains(" 0 3.0 GiB "), "{placed}");
        assert!(lines[2].contains(" 1 "), "{placed}");
    }

    #[test]
    fn a_name_outside_the_allowed_letters_is_escaped_as_a_segment() {
        assert_eq!(percent_encode("demo-1.a_b"), "demo-1.a_b");
        assert_eq!(percent_encode("a b/c"), "a%20b%2Fc");
    }
}
