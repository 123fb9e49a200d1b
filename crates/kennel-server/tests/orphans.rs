//! No orphans, whatever kills the server: after `kill -9` of `kennel serve`
//! its workers die with it (the death signal) and its reaper kills their
//! own children; if the reaper was killed too, the next server on the same
//! port and run directory kills the groups the first one left; after
//! SIGTERM the server stops gracefully and leaves no worker.

#![cfg(target_os = "linux")]

#[allow(unreachable_pub)]
#[path = "support/ports.rs"]
mod ports;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const LIMIT: Duration = Duration::from_secs(30);

/// The fields of `/proc/<pid>/stat` after the command: the state first.
fn stat(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = text.rsplit_once(')')?;
    Some(after.split_whitespace().map(str::to_owned).collect())
}

/// A live process: its pid and start time, so that a reused pid is told
/// from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Proc {
    pid: u32,
    started: u64,
}

impl Proc {
    fn alive(self) -> bool {
        stat(self.pid).is_some_and(|f| {
            !matches!(f[0].as_str(), "Z" | "X") && f[19].parse() == Ok(self.started)
        })
    }
}

/// Whether `pid` is a server's reaper (`kennel reaper DIR`).
fn is_reaper(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|&b| b == 0).nth(1) == Some(b"reaper"))
}

/// Every live descendant of `pid`.
fn descendants(pid: u32) -> BTreeSet<Proc> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Some(f) = stat(p)
            && !matches!(f[0].as_str(), "Z" | "X")
        {
            all.push((p, f[1].parse::<u32>().unwrap(), f[19].parse().unwrap()));
        }
    }
    let mut found = BTreeSet::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for &(p, pp, started) in &all {
            if pp == parent && found.insert(Proc { pid: p, started }) {
                frontier.push(p);
            }
        }
    }
    found
}

/// Polls `condition` until it holds or `limit` has passed.
fn poll(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::yield_now();
    }
    condition()
}

struct Server {
    child: Child,
    /// The lines it printed on stdout.
    stdout: mpsc::Receiver<String>,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(dir: &Path, port: u16) -> Self {
        let run_dir = dir.join("run");
        let config = format!(
            r#"
[server]
listen = "127.0.0.1:{port}"
run_dir = {run_dir:?}

# Each worker starts a child of its own, then serves.
[[pool]]
name = "kids"
argv = ["sh", "-c", "sleep 1000 & echo '{{\"ready\":true}}'; exec cat"]
startup = "parallel"
sizing = {{ kind = "fixed", workers = 2 }}

# This one starts its child and never becomes ready.
[[pool]]
name = "stuck"
argv = ["sh", "-c", "sleep 1000 & exec sleep 1001"]
startup = "parallel"
sizing = {{ kind = "fixed", workers = 1 }}
"#
        );
        let path = dir.join(format!("kennel-{port}.toml"));
        std::fs::write(&path, config).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_kennel"))
            .args(["serve", "--config"])
            .arg(&path)
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, stdout) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let first = stdout.recv_timeout(LIMIT).expect("no first line");
        let port = first
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line: {first:?}"));
        Self {
            child,
            stdout,
            port,
        }
    }

    /// The lines of its announcement after the first.
    fn announcement(&self) -> Vec<String> {
        let mut lines = Vec::new();
        while let Ok(line) = self.stdout.recv_timeout(Duration::from_secs(2)) {
            let last = line.starts_with("  pool stuck");
            lines.push(line);
            if last {
                break;
            }
        }
        lines
    }

    /// Waits until its 3 workers and their 3 children run; those six, and
    /// its reaper.
    fn wait_for_workers(&self) -> (BTreeSet<Proc>, Proc) {
        let pid = self.child.id();
        let mut procs = BTreeSet::new();
        assert!(
            poll(LIMIT, || {
                procs = descendants(pid);
                procs.len() >= 7
            }),
            "the workers never all ran: {procs:?}"
        );
        let reaper = *procs
            .iter()
            .find(|p| is_reaper(p.pid))
            .expect("the server's reaper");
        procs.remove(&reaper);
        (procs, reaper)
    }

    fn signal(&self, signal: Signal) {
        kill(
            Pid::from_raw(i32::try_from(self.child.id()).unwrap()),
            signal,
        )
        .unwrap();
    }

    fn exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::yield_now();
        }
    }
}

fn groups_recorded(run_dir: &Path) -> usize {
    std::fs::read_dir(run_dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("group-"))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn after_kill_9_no_worker_or_grandchild_outlives_the_server_nor_the_next_start_and_sigterm_leaves_none()
 {
    let dir: PathBuf = std::env::temp_dir().join(format!("kennel-orphans-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let run_dir = dir.join("run");

    // kill -9 of the server: its workers die with it, its reaper kills
    // their children. (Its port is one no other socket takes while no
    // server holds it: the next servers listen there again.)
    let mut first = Server::start(&dir, ports::free_port());
    let port = first.port;
    let (procs, reaper) = first.wait_for_workers();
    assert!(poll(LIMIT, || groups_recorded(&run_dir) == 3));
    let workers: BTreeSet<Proc> = procs
        .iter()
        .copied()
        .filter(|p| stat(p.pid).is_some_and(|f| f[1] == first.child.id().to_string()))
        .collect();
    assert_eq!(workers.len(), 3, "{procs:?}");

    first.signal(Signal::SIGKILL);
    let killed = Instant::now();
    first.exit();
    assert!(
        poll(Duration::from_secs(2), || workers
            .iter()
            .all(|p| !p.alive())),
        "workers outlived the server: {workers:?}"
    );
    let workers_gone = killed.elapsed();
    assert!(
        poll(
            Duration::from_secs(2).saturating_sub(killed.elapsed()),
            || { procs.iter().all(|p| !p.alive()) }
        ),
        "still alive 2 s after kill -9: {:?}",
        procs.iter().filter(|p| p.alive()).collect::<Vec<_>>()
    );
    let all_gone = killed.elapsed();
    assert!(poll(LIMIT, || !reaper.alive()), "the reaper stayed");
    assert_eq!(groups_recorded(&run_dir), 0, "the reaper removed the files");
    eprintln!("after kill -9: workers gone in {workers_gone:?}, all gone in {all_gone:?}");

    // The next server finds nothing left to reap. Then kill -9 of it and of
    // its reaper: the server after it reaps what they left.
    let mut second = Server::start(&dir, port);
    assert_eq!(second.port, port);
    let said = second.announcement();
    assert!(!said.iter().any(|l| l.contains("killed")), "{said:?}");
    let (procs, reaper) = second.wait_for_workers();
    kill(
        Pid::from_raw(i32::try_from(reaper.pid).unwrap()),
        Signal::SIGKILL,
    )
    .unwrap();
    assert!(poll(LIMIT, || !reaper.alive()));
    second.signal(Signal::SIGKILL);
    let killed = Instant::now();
    second.exit();

    let mut third = Server::start(&dir, port);
    let said = third.announcement();
    eprintln!(
        "the server after a killed server and reaper said:\n{}",
        said.join("\n")
    );
    // How many groups are left depends on how far each worker had got;
    // what counts is that none of their processes survives (below).
    assert!(
        said.iter().any(|l| l.starts_with("  killed ")
            && l.contains(" process group(s) left by a previous run")),
        "{said:?}"
    );
    assert!(
        poll(
            Duration::from_secs(2).saturating_sub(killed.elapsed()),
            || { procs.iter().all(|p| !p.alive()) }
        ),
        "still alive 2 s after kill -9: {:?}",
        procs.iter().filter(|p| p.alive()).collect::<Vec<_>>()
    );
    eprintln!("reaped by the next start in {:?}", killed.elapsed());

    // SIGTERM: a graceful stop, no worker left, no group left recorded.
    let (procs, reaper) = third.wait_for_workers();
    third.signal(Signal::SIGTERM);
    let hup = Instant::now();
    let status = third.exit();
    assert!(status.success(), "{status:?}");
    assert!(procs.iter().all(|p| !p.alive()), "{procs:?}");
    assert_eq!(groups_recorded(&run_dir), 0);
    assert!(poll(LIMIT, || !reaper.alive()), "the reaper stayed");
    eprintln!("SIGTERM: stopped in {:?}", hup.elapsed());

    // So a fourth server finds nothing to reap.
    let mut fourth = Server::start(&dir, port);
    let said = fourth.announcement();
    assert!(!said.iter().any(|l| l.contains("killed")), "{said:?}");
    fourth.signal(Signal::SIGTERM);
    assert!(fourth.exit().success());
    let _ = std::fs::remove_dir_all(&dir);
}
