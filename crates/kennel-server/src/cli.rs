//! The command line: `kennel serve|run|check|status|completions`, and the
//! hidden `worker demo`.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::config::LogFormat;
use clap::{Parser, Subcommand};

/// The most jobs `kennel run --concurrency` may keep in the pool at once.
pub(crate) const MAX_CONCURRENCY: u32 = 100_000;

/// kennel: lend long-lived, costly-to-start workers to jobs.
///
/// With no command, `kennel` runs `serve`: with no config, one demo pool on
/// 127.0.0.1:7878.
#[derive(Debug, Parser)]
#[command(name = "kennel", version = env!("KENNEL_VERSION"), about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serves the pools of a config over HTTP (the demo pool without one).
    Serve(ServeArgs),
    /// Streams the jobs of a JSON-lines file through a pool and writes the
    /// results as JSON lines, in input order.
    Run(RunArgs),
    /// Checks a config and prints what `serve` would start.
    Check(CheckArgs),
    /// Prints a running server's pools and their workers as a table.
    Status(StatusArgs),
    /// Prints a completion script for a shell (bash, zsh, fish, elvish,
    /// powershell) on stdout.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Runs a built-in worker on stdin/stdout (used by pools).
    #[command(hide = true, subcommand)]
    Worker(WorkerCommand),
    /// The reaper `serve` starts beside itself: when its stdin ends (the
    /// server is gone), kills the worker groups left in the run directory.
    #[command(hide = true)]
    Reaper {
        /// The server's run directory.
        run_dir: PathBuf,
    },
}

#[derive(Debug, Default, clap::Args)]
pub(crate) struct ServeArgs {
    /// The TOML config (default: the built-in demo pool).
    #[arg(long, short, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// The address to listen on, over the config's `server.listen`
    /// (port 0 picks a free port; the address is printed).
    #[arg(long, short, value_name = "ADDR", value_parser = crate::config::parse_listen)]
    pub(crate) listen: Option<SocketAddr>,
    /// How log lines are written, over the config's `server.log_format`.
    #[arg(long, value_name = "FORMAT", value_parser = parse_log_format)]
    pub(crate) log_format: Option<LogFormat>,
    /// Logs one line per request (as `server.access_log = true`).
    #[arg(long)]
    pub(crate) access_log: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The pool to run the jobs on (may be left out when the config has
    /// one pool).
    #[arg(long, short, value_name = "NAME")]
    pub(crate) pool: Option<String>,
    /// The TOML config (default: the built-in demo pool).
    #[arg(long, short, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Where to write the results (default: stdout).
    #[arg(long, short, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
    /// How many jobs to send to the pool at once (default: twice its
    /// capacity).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_CONCURRENCY)))]
    pub(crate) concurrency: Option<u32>,
    /// Hide the progress bar.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// The key of every job, as the `Kennel-Key` header gives it (default:
    /// each line's value at the pool's `key` pointer, if it has one).
    #[arg(long, value_name = "KEY")]
    pub(crate) key: Option<String>,
    /// Send the jobs to a running server at this URL instead, as
    /// asynchronous jobs: the same command run again after an
    /// interruption runs no job twice (docs/SERVICE.md, "`kennel run`").
    #[arg(long, value_name = "URL")]
    pub(crate) server: Option<String>,
    /// With `--server`: the batch's name, which names each line's job on
    /// the server (default: a digest of the pool and the jobs).
    #[arg(long, value_name = "NAME", requires = "server")]
    pub(crate) batch: Option<String>,
    /// With `--server`: the variable that holds the server's bearer token
    /// (over the config's `server.token_env`).
    #[arg(long, value_name = "NAME", requires = "server")]
    pub(crate) token_env: Option<String>,
    /// The jobs: one JSON value per line (`-` for stdin).
    #[arg(value_name = "JOBS.jsonl")]
    pub(crate) jobs: PathBuf,
}

#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// The TOML config to check (default: the built-in demo config).
    #[arg(long, short, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    /// The server's URL (default: the config's `server.listen`, else
    /// http://127.0.0.1:7878).
    #[arg(long, short, value_name = "URL")]
    pub(crate) url: Option<String>,
    /// The config the server runs: its listen address and token variable.
    #[arg(long, short, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// The variable that holds the bearer token (over the config's
    /// `server.token_env`).
    #[arg(long, value_name = "NAME")]
    pub(crate) token_env: Option<String>,
    /// The pool to show (default: every pool).
    #[arg(value_name = "POOL")]
    pub(crate) pool: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum WorkerCommand {
    /// The demo worker: a costly warm-up, then sum of sqrt(i) for
    /// i < iterations per job.
    Demo {
        /// How long the warm-up takes.
        #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
        warmup: std::time::Duration,
    },
}

fn parse_log_format(s: &str) -> Result<LogFormat, String> {
    match s {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        _ => Err(format!("{s:?} is not a log format (allowed: text, json)")),
    }
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    s.parse::<crate::config::HumanDuration>().map(|d| d.0)
}
