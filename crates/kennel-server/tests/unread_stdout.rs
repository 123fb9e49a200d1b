//! Output that never blocks: `kennel serve` with its stdout on a pipe
//! nobody reads and a start-up summary far larger than the pipe holds (3,000
//! pools) answers `/livez` and stops on SIGTERM within its grace.

#![cfg(target_os = "linux")]

mod served;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use served::{LIMIT, TempDir};

/// How long one `/livez` may take to be answered.
const ANSWER: Duration = Duration::from_secs(1);

/// The server's shutdown grace.
const GRACE: Duration = Duration::from_secs(5);

/// `GET /livez`, waiting at most [`ANSWER`] for each step; `None` when the
/// server does not answer in time (or is not listening yet).
fn livez(addr: SocketAddr) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, ANSWER).ok()?;
    s.set_read_timeout(Some(ANSWER)).ok()?;
    s.set_write_timeout(Some(ANSWER)).ok()?;
    write!(
        s,
        "GET /livez HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

#[test]
fn an_unread_stdout_never_stalls_serving_or_the_stop() {
    let dir = TempDir::new("unread-stdout");
    // Its stdout is never read, so its port is chosen here.
    let port = served::free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // 3,000 pools that start no worker before a job: each one a line of
    // the summary, 180 KiB in all, beyond a pipe's 64 KiB.
    let mut toml = format!(
        "[server]\nlisten = \"{addr}\"\nrun_dir = {:?}\nshutdown_grace = \"{}s\"\n",
        dir.0.join("run"),
        GRACE.as_secs()
    );
    for i in 0..3_000 {
        toml.push_str(&format!(
            "[[pool]]\nname = \"a-pool-with-a-name-long-enough-to-fill-the-pipe-{i:04}\"\nargv = [\"@kennel\", \"worker\", \"demo\"]\nstartup = \"on-demand\"\n"
        ));
    }
    let config = dir.0.join("kennel.toml");
    std::fs::write(&config, toml).unwrap();
    let mut child = Running(
        Command::new(served::kennel_bin())
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Held open, never read.
    let _stdout = child.0.stdout.take();

    // Served: /livez answered, each try within a second (the 3,000 pools
    // take their time to start in a debug build, hence the outer bound).
    let started = Instant::now();
    while livez(addr) != Some(200) {
        assert!(
            started.elapsed() < LIMIT * 4,
            "/livez was not answered within {ANSWER:?} while stdout is not read"
        );
        assert!(child.0.try_wait().unwrap().is_none(), "the server exited");
    }
    for _ in 0..5 {
        assert_eq!(livez(addr), Some(200), "/livez took over {ANSWER:?}");
    }

    // Stopped within the grace (and the time to close 3,000 idle pools).
    kill(
        Pid::from_raw(i32::try_from(child.0.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    let asked = Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            asked.elapsed() < GRACE + LIMIT,
            "SIGTERM did not stop the server while stdout is not read"
        );
        std::thread::yield_now();
    };
    assert!(status.success(), "{status:?}");
}

/// The server, killed on drop if it still runs (a failed test).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
