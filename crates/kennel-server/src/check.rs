//! `kennel check --config FILE`: validates a config and prints what `serve`
//! would start, without starting any worker.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use crate::config::{Config, PoolConfig, SELF_EXE, StartupKind, written_name};
use crate::pools::build_pool;
use crate::watch::Watch;

use crate::cli::CheckArgs;

pub(crate) async fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let source = args.config.as_ref().map_or_else(
        || "the built-in demo config".to_owned(),
        |p| p.display().to_string(),
    );
    let config = match crate::command::load_config(args.config.as_ref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("invalid: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let self_exe = crate::command::self_exe()?;
    let mut out = String::new();
    let mut warnings = Vec::new();
    let mut invalid = Vec::new();
    describe_server(&config, &mut out, &mut warnings);
    for (i, pool) in config.pools.iter().enumerate() {
        // The core's own checks run when a pool is built; built on demand,
        // a pool starts no worker.
        let mut dry = pool.clone();
        dry.startup = StartupKind::OnDemand;
        let capacity = match build_pool(&dry, &self_exe, &Watch::default()) {
            Ok(p) => {
                let c = p.stats().capacity;
                p.close().await;
                Some(c)
            }
            Err(e) => {
                invalid.push(format!("{source}: `pool[{i}]` ({:?}): {e}", pool.name));
                None
            }
        };
        describe_pool(pool, capacity, &self_exe, &mut out, &mut warnings);
    }
    if config.pools.is_empty() {
        warnings.push("no [[pool]]: every job will be answered 501 not-supported".to_owned());
    }
    print!("{out}");
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    if invalid.is_empty() {
        println!("{source}: valid");
        Ok(ExitCode::SUCCESS)
    } else {
        for e in &invalid {
            eprintln!("invalid: {e}");
        }
        Ok(ExitCode::from(2))
    }
}

fn describe_server(config: &Config, out: &mut String, warnings: &mut Vec<String>) {
    let s = &config.server;
    let _ = writeln!(out, "server");
    let _ = writeln!(out, "  listen          http://{}", config.listen());
    let _ = writeln!(out, "  body_limit      {}", s.body_limit);
    match &s.token_env {
        Some(name) => {
            let state = match std::env::var(name) {
                Ok(v) if !v.is_empty() => "set",
                _ => {
                    warnings.push(format!(
                        "`server.token_env`: {name} is not set here; serve refuses to start without it"
                    ));
                    "NOT SET"
                }
            };
            let _ = writeln!(out, "  token           bearer, from ${name} ({state})");
        }
        None => {
            let _ = writeln!(out, "  token           none");
            if !config.listen().ip().is_loopback() {
                warnings.push("listening beyond loopback with no bearer token".into());
            }
        }
    }
    let _ = writeln!(out, "  shutdown_grace  {}", s.shutdown_grace);
    let listen = config.listen();
    let hosts = crate::http::HostPolicy::new(listen, &s.allowed_hosts, &s.allowed_origins);
    let _ = writeln!(out, "  allowed_hosts   {}", hosts.describe());
    if !s.allowed_origins.is_empty() {
        let _ = writeln!(out, "  allowed_origins {}", s.allowed_origins.join(", "));
    }
    let _ = writeln!(
        out,
        "  timeouts        header {}, idle {}, body {}, write {}",
        s.header_timeout, s.idle_timeout, s.body_timeout, s.write_timeout
    );
    let _ = writeln!(out, "  max_connections {}", s.max_connections);
    let _ = writeln!(out, "  max_bodies      {}", s.max_bodies);
    let threads = s.runtime_threads.describe(s.runtime_threads.here());
    let _ = writeln!(out, "  runtime_threads {threads}");
    let format = written_name(&s.log_format);
    let access = if s.access_log { "on" } else { "off" };
    let _ = writeln!(out, "  logs            {format}, access log {access}");
}

fn describe_pool(
    pool: &PoolConfig,
    capacity: Option<usize>,
    self_exe: &Path,
    out: &mut String,
    warnings: &mut Vec<String>,
) {
    let group = crate::status::in_group(pool.group.as_deref());
    let _ = writeln!(out, "pool {}{group}", pool.name);
    let argv = pool.argv.join(" ");
    let _ = writeln!(out, "  argv            {argv}");
    if pool.argv[0] == SELF_EXE {
        let exe = self_exe.display();
        let _ = writeln!(out, "                  ({SELF_EXE} is {exe})");
    } else if let Some(cwd) = &pool.cwd
        && !program_found(&pool.argv[0], cwd)
    {
        warnings.push(format!(
            "pool {}: the program `{}` is not found (on PATH, or from {})",
            pool.name,
            pool.argv[0],
            cwd.display()
        ));
    }
    if let Some(cwd) = &pool.cwd {
        let _ = writeln!(out, "  cwd             {}", cwd.display());
    }
    if pool.env_clear {
        let kept = pool.kept_env().join(", ");
        let _ = writeln!(out, "  env_clear       inherits only {kept}");
    }
    for k in &pool.env_remove {
        let _ = writeln!(out, "  env_remove      {k} (the bearer token's variable)");
    }
    for (k, v) in &pool.env {
        let _ = writeln!(out, "  env             {k}={v}");
    }
    let _ = writeln!(out, "  startup         {}", written_name(&pool.startup));
    let sizing = pool.sizing.map_or_else(
        || {
            format!(
                "fixed, {} worker(s) (the default: costly workers are not multiplied by the CPUs; set `sizing` for more)",
                crate::pools::DEFAULT_WORKERS
            )
        },
        |s| s.to_string(),
    );
    let _ = writeln!(out, "  sizing          {sizing}");
    if let Some(c) = capacity {
        let _ = writeln!(out, "  capacity        {c}");
    }
    let _ = writeln!(out, "  eviction        {}", pool.eviction);
    let o = &pool.options;
    let opt = |d: Option<std::time::Duration>| {
        d.map_or_else(
            || "none".to_owned(),
            |d| humantime::format_duration(d).to_string(),
        )
    };
    let _ = writeln!(out, "  job_timeout     {}", opt(o.job_timeout));
    let _ = writeln!(out, "  warmup_timeout  {}", opt(o.warmup_timeout));
    let _ = writeln!(
        out,
        "  max_waiting     {}",
        o.max_waiting
            .map_or_else(|| "8 x capacity (default)".to_owned(), |n| n.to_string())
    );
    let _ = writeln!(out, "  max_queue_wait  {}", opt(o.max_queue_wait));
    let _ = writeln!(
        out,
        "  job_grace       {} (lent jobs, when the pool closes)",
        humantime::format_duration(o.job_grace)
    );
    let _ = writeln!(
        out,
        "  worker_close    {} per step (stdin closed, SIGTERM, SIGKILL)",
        pool.worker_close_grace
    );
    if o.max_lifetime.is_some() {
        let _ = writeln!(
            out,
            "  max_lifetime    {} (jitter {})",
            opt(o.max_lifetime),
            opt(Some(o.max_lifetime_jitter).filter(|j| !j.is_zero()))
        );
    }
    if let Some(n) = o.auto_grow_threshold {
        let _ = writeln!(out, "  auto_grow       when idle workers drop to {n}");
    }
    if pool.key.is_some() || pool.key_pattern.is_some() {
        let from = pool.key.as_ref().map_or_else(
            || "the Kennel-Key header".to_owned(),
            |p| format!("the Kennel-Key header, else the body at {p:?}"),
        );
        let pattern = pool.key_pattern.as_ref().map_or("any", |p| p.as_str());
        let binding = match o.key_binding {
            kennel::KeyBinding::Load => format!("load, {} per worker", o.keys_per_worker),
            _ => written_name(&o.key_binding),
        };
        let _ = writeln!(
            out,
            "  keys            from {from}; matching {pattern}; {binding}"
        );
    }
    if let Some(per_worker) = o.gpus_per_worker {
        for line in describe_gpus(per_worker, o) {
            let _ = writeln!(out, "  {line}");
        }
    }
    if let Some(queue) = &pool.queue {
        for line in queue.describe(&pool.name) {
            let _ = writeln!(out, "  {line}");
        }
        if o.job_timeout.is_none() {
            warnings.push(format!("pool {}: a queued pool without job_timeout: a job that hangs keeps its message by in-progress acks until it ends", pool.name));
        }
    }
}

/// The plan's lines for a pool placed on GPUs: what each worker gets, and
/// the devices of this machine it may go to (or why there are none).
fn describe_gpus(per_worker: kennel::GpusPerWorker, o: &kennel::Options) -> Vec<String> {
    use kennel::Computer;
    let size = |b: u64| bytesize::ByteSize(b).to_string();
    let each = match per_worker {
        kennel::GpusPerWorker::Share { share, memory } => format!(
            "{share} of a device per worker ({} a device), each needing {} free",
            per_worker.per_device(),
            size(memory)
        ),
        kennel::GpusPerWorker::Devices(_) => "a device of its own per worker".to_owned(),
    };
    let mut lines = vec![format!("gpus            {each}")];
    match kennel::SystemComputer.gpus() {
        Ok(gpus) => {
            let named = |g: &kennel::Gpu| {
                o.gpus.is_empty() || o.gpus.iter().any(|n| *n == g.id || *n == g.uuid)
            };
            for g in gpus.iter().filter(|g| named(g)) {
                lines.push(format!(
                    "  on GPU {:<7} {} ({}), {} free of {}",
                    g.id,
                    g.name,
                    g.uuid,
                    size(g.free),
                    size(g.total)
                ));
            }
        }
        Err(e) => lines.push(format!("  none here: {e}")),
    }
    if let Some(m) = o.max_gpu_memory {
        lines.push(format!("max_gpu_memory  {}", size(m)));
    }
    lines
}

/// Whether `program` can be started: a path (from `cwd`) that exists, or a
/// name found on `PATH`.
fn program_found(program: &str, cwd: &Path) -> bool {
    if program.contains('/') {
        return cwd.join(program).exists();
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}
