//! A real `kennel serve` process for the tests that need one: started on a
//! free loopback port from a TOML file written for the test, talked to
//! over raw TCP, stopped with a signal, killed if a test fails.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{Id, WaitPidFlag, waitid};
use nix::unistd::Pid;
use serde_json::Value;

pub mod mcp;
// The same files as `support`'s: a test binary with both has each twice.
#[allow(clippy::duplicate_mod)]
#[path = "../support/http_client.rs"]
mod http_client;
#[allow(clippy::duplicate_mod)]
#[path = "../support/ports.rs"]
mod ports;
#[allow(clippy::duplicate_mod)]
#[path = "../support/temp_dir.rs"]
mod temp_dir;

pub use http_client::{Answer, http};
// Not every test binary takes a port or a directory.
#[allow(unused_imports)]
pub use ports::free_port;
#[allow(unused_imports)]
pub use temp_dir::TempDir;

pub const LIMIT: Duration = Duration::from_secs(30);

/// The `args` of [`Server::start`] for a config that names no address.
pub const LISTEN: [&str; 2] = ["--listen", "127.0.0.1:0"];

pub fn kennel_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_kennel"))
}

/// `kennel check` on `toml`, written to `dir/kennel.toml`: its exit code,
/// stdout and stderr.
pub fn check(dir: &TempDir, toml: &str) -> (Option<i32>, String, String) {
    let path = dir.0.join("kennel.toml");
    std::fs::write(&path, toml).unwrap();
    let out = Command::new(kennel_bin())
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// How the server's stderr is treated.
#[derive(Clone, Copy)]
pub enum Stderr {
    /// Read by a thread into [`Server::log`].
    Collected,
    /// A pipe nobody reads: held open, never drained.
    NeverRead,
    /// The test's own stderr (shown with a failed test's output).
    Inherited,
}

pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub config: PathBuf,
    log: Arc<Mutex<String>>,
    /// What it printed on stdout after its first line, and a wake-up for
    /// each line.
    printed: Arc<(Mutex<Vec<String>>, Condvar)>,
    /// Held, never read, for [`Stderr::NeverRead`].
    _stalled: Option<ChildStderr>,
    pub dir: TempDir,
}

impl Server {
    /// Starts `kennel serve --config <dir>/kennel.toml` with `toml` (which
    /// should listen on `127.0.0.1:0`, or `args` say `--listen`), extra
    /// `args` and `env`. A `{dir}` in `toml` is the test's directory.
    pub fn start(
        name: &str,
        toml: &str,
        args: &[&str],
        env: &[(&str, &str)],
        stderr: Stderr,
    ) -> Self {
        let dir = TempDir::new(name);
        let config = dir.0.join("kennel.toml");
        std::fs::write(&config, toml.replace("{dir}", &dir.0.display().to_string())).unwrap();
        let mut command = Command::new(kennel_bin());
        command
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(match stderr {
                Stderr::Inherited => Stdio::inherit(),
                Stderr::Collected | Stderr::NeverRead => Stdio::piped(),
            })
            // A run directory the config does not name goes in the test's
            // directory and is removed with it (by default it would stay
            // behind in /run/kennel/<port>, one for each port a test took).
            .env("XDG_RUNTIME_DIR", &dir.0);
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let printed = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
        let keep = printed.clone();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(first)) = lines.next() {
                let _ = tx.send(first);
            }
            for line in lines.map_while(Result::ok) {
                keep.0.lock().unwrap().push(line);
                keep.1.notify_all();
            }
        });
        let log = Arc::new(Mutex::new(String::new()));
        let stalled = match stderr {
            Stderr::Inherited => None,
            Stderr::NeverRead => child.stderr.take(),
            Stderr::Collected => {
                let err = child.stderr.take().unwrap();
                let log = log.clone();
                std::thread::spawn(move || {
                    for line in BufReader::new(err).lines().map_while(Result::ok) {
                        let mut l = log.lock().unwrap();
                        l.push_str(&line);
                        l.push('\n');
                    }
                });
                None
            }
        };
        let Ok(first) = rx.recv_timeout(LIMIT) else {
            let _ = child.kill();
            panic!("kennel serve did not start: {}", log.lock().unwrap());
        };
        let addr = first
            .strip_prefix("kennel listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .parse()
            .unwrap();
        Self {
            child,
            addr,
            config,
            log,
            printed,
            _stalled: stalled,
            dir,
        }
    }

    /// What the server wrote on stderr so far (with [`Stderr::Collected`]).
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The first line it printed on stdout after the first that starts
    /// with `prefix`, waiting for it at most [`LIMIT`].
    pub fn printed_line(&self, prefix: &str) -> String {
        let (lines, printed) = &*self.printed;
        let found = |lines: &Vec<String>| lines.iter().find(|l| l.starts_with(prefix)).cloned();
        let (lines, _) = printed
            .wait_timeout_while(lines.lock().unwrap(), LIMIT, |lines| found(lines).is_none())
            .unwrap();
        found(&lines).unwrap_or_else(|| {
            panic!("kennel serve printed no line starting with {prefix:?}: {lines:?}")
        })
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).unwrap())
    }

    pub fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).unwrap();
    }

    /// Waits for the exit, at most `limit`: a thread blocks until the
    /// process has exited (`waitid` with `WNOWAIT`, which leaves it to be
    /// reaped here), this one on its word.
    pub fn exit_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        let pid = self.pid();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
            let _ = tx.send(waitid(Id::Pid(pid), flags));
        });
        match rx.recv_timeout(limit) {
            Ok(_) => Some(self.child.wait().unwrap()),
            Err(_) => None,
        }
    }

    /// Waits until `what` holds, at most `LIMIT`.
    pub fn eventually(&self, what: &str, mut holds: impl FnMut() -> bool) {
        let started = Instant::now();
        while !holds() {
            assert!(
                started.elapsed() < LIMIT,
                "never: {what}\nlog:\n{}",
                self.log()
            );
            // Each check is a request to the server or a read of its log:
            // the next one follows at once.
            std::thread::yield_now();
        }
    }

    /// SIGTERM, and whether the server then exits with status 0 (within
    /// `LIMIT`).
    pub fn stop(mut self) -> bool {
        self.signal(Signal::SIGTERM);
        self.exit_within(LIMIT)
            .unwrap_or_else(|| panic!("the server did not stop within {LIMIT:?} of SIGTERM"))
            .success()
    }

    /// Asks for a pool's stats until `count` (`idle`, `lent`, ...) is `n`,
    /// with `headers` (a token); each request paced by the one before.
    pub fn wait_count(&self, pool: &str, count: &str, n: u64, headers: &[(&str, &str)]) {
        let started = Instant::now();
        loop {
            let a = self.http("GET", &format!("/pools/{pool}/stats"), headers, "");
            if a.status == 200 && a.json()[count] == n {
                return;
            }
            assert!(
                started.elapsed() < LIMIT,
                "{pool} never had {count} = {n}: {} {}\nlog:\n{}",
                a.status,
                a.body,
                self.log()
            );
            std::thread::yield_now();
        }
    }

    /// One request with `Connection: close`.
    pub fn http(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
        http(self.addr, method, path, headers, body)
    }

    /// `GET path`, the body as JSON.
    pub fn get_json(&self, path: &str) -> Value {
        let a = self.http("GET", path, &[], "");
        assert_eq!(a.status, 200, "{path}: {}", a.body);
        a.json()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The value of the sample `name` (with its labels as written) in
/// Prometheus text, or 0.
pub fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

/// The environment of a process, from /proc.
pub fn environ(pid: u32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    raw.split(|b| *b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

/// The demo pool, as a TOML entry.
pub fn demo_pool(name: &str, workers: usize) -> String {
    format!(
        "[[pool]]\nname = \"{name}\"\nargv = [\"@kennel\", \"worker\", \"demo\", \"--warmup\", \"10ms\"]\nstartup = \"parallel\"\nsizing = {{ kind = \"fixed\", workers = {workers} }}\n"
    )
}

/// Two demo pools whose workers warm up in `warmup`: `demo` (2 workers,
/// group `web`) and `batch` (1).
pub fn web_and_batch(warmup: &str) -> String {
    format!(
        "[[pool]]\nname = \"demo\"\nargv = [\"@kennel\", \"worker\", \"demo\", \"--warmup\", \"{warmup}\"]\ngroup = \"web\"\nstartup = \"parallel\"\nsizing = {{ kind = \"fixed\", workers = 2 }}\n\n[[pool]]\nname = \"batch\"\nargv = [\"@kennel\", \"worker\", \"demo\", \"--warmup\", \"{warmup}\"]\nstartup = \"parallel\"\nsizing = {{ kind = \"fixed\", workers = 1 }}\n"
    )
}

/// Every descendant of `pid`, from /proc.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let Some(after) = stat.rsplit_once(')').map(|(_, a)| a) else {
            continue;
        };
        if let Some(ppid) = after.split_whitespace().nth(1).and_then(|s| s.parse().ok()) {
            parents.push((p, ppid));
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for &(p, pp) in &parents {
            if pp == parent && !found.contains(&p) {
                found.push(p);
                frontier.push(p);
            }
        }
    }
    found
}

/// Whether `pid` still runs (a zombie does not count).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, a)| a.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Whether `pid` is a server's reaper (`kennel reaper DIR`), not a worker.
pub fn is_reaper(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(b"reaper".as_slice()))
}

/// The worker processes below a server: its descendants but its reaper.
pub fn workers_of(pid: u32) -> Vec<u32> {
    descendants(pid)
        .into_iter()
        .filter(|&p| !is_reaper(p))
        .collect()
}
