//! The `kennel` command: `kennel serve|run|check|status|completions`. With
//! no arguments it serves the built-in demo pool on 127.0.0.1:7878.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::Config;
use clap::{CommandFactory, Parser};

use crate::cli::{Cli, Command, WorkerCommand};
use crate::{check, cli, run, serve, status};

/// Runs the `kennel` command line: what the binary's `main` does.
#[must_use]
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = cli
        .command
        .unwrap_or_else(|| Command::Serve(cli::ServeArgs::default()));
    if let Command::Worker(WorkerCommand::Demo { warmup }) = command {
        // A worker process: no runtime, no logging on stdout (the protocol).
        return match crate::demo::run_worker(warmup) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("demo worker: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Command::Completions { shell } = command {
        // Into memory first: clap_complete panics on a failed write (a
        // closed pipe), this answers it with an exit code.
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "kennel", &mut script);
        let mut stdout = std::io::stdout().lock();
        return match stdout.write_all(&script).and_then(|()| stdout.flush()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kennel completions: cannot write the script: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Command::Reaper { run_dir } = &command {
        // Beside a server, until it ends: no runtime, nothing on stdout.
        return reap(run_dir);
    }
    // `serve` sets up its logging once its config is read; `run` and
    // `check` keep stderr for their progress bar and report, and log only
    // warnings.
    let _log = (!matches!(command, Command::Serve(_)))
        .then(|| crate::logs::init(crate::config::LogFormat::Text, "warn"));
    // `serve` reads its config before its runtime starts: the config sizes
    // the runtime (`server.runtime_threads`).
    let config = match &command {
        Command::Serve(args) => match load_config(args.config.as_ref()) {
            Ok(config) => Some(config),
            Err(e) => {
                crate::logs::eprint_bounded(&format!("kennel: {e:#}\n"));
                return ExitCode::from(2);
            }
        },
        _ => None,
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(config) = &config {
        builder.worker_threads(config.server.runtime_threads.here());
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kennel: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match command {
            Command::Serve(args) => {
                let config = config.expect("read above for serve");
                serve::serve(args, config).await
            }
            Command::Run(args) => run::run(args).await,
            Command::Check(args) => check::check(args).await,
            Command::Status(args) => status::status(args).await,
            Command::Worker(_) | Command::Completions { .. } | Command::Reaper { .. } => {
                unreachable!("handled above")
            }
        }
    });
    match result {
        Ok(code) => code,
        // Bounded: a stderr nobody reads does not keep a server from ending.
        Err(e) => {
            crate::logs::eprint_bounded(&format!("kennel: {e:#}\n"));
            ExitCode::from(2)
        }
    }
}

/// `kennel reaper DIR`: waits for the server to end, then kills the worker
/// groups it left (see `crate::reaper`).
fn reap(run_dir: &std::path::Path) -> ExitCode {
    match crate::reaper::watch(run_dir) {
        Ok(Some(reaped)) if !reaped.groups.is_empty() => {
            eprintln!(
                "kennel reaper: the server ended; killed {} process group(s) it left: {:?}",
                reaped.groups.len(),
                reaped.groups
            );
            ExitCode::SUCCESS
        }
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kennel reaper: cannot reap {}: {e}", run_dir.display());
            ExitCode::FAILURE
        }
    }
}

/// The config of `--config FILE`, or the built-in demo config.
pub(crate) fn load_config(path: Option<&PathBuf>) -> anyhow::Result<Config> {
    Ok(path.map_or_else(|| Ok(Config::demo()), |p| Config::load(p))?)
}

/// The path `@kennel` stands for: this binary.
pub(crate) fn self_exe() -> anyhow::Result<PathBuf> {
    std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot find the kennel binary's own path: {e}"))
}
