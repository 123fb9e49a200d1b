//! A real `kennel serve` process on a free loopback port, from a config
//! written to a directory of its own, and a tiny HTTP/1.1 client for it.
//! Dropping the server stops it (SIGTERM, then SIGKILL if it lingers).

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

pub const LIMIT: Duration = Duration::from_secs(30);

pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub dir: PathBuf,
}

impl Server {
    /// Starts `kennel serve --config <dir>/kennel.toml --listen 127.0.0.1:0`
    /// with `config` (its `{dir}` replaced by the directory) and `envs`. The
    /// run directory is the default one of its port (a config that names
    /// one in the directory would race its reaper with the removal).
    pub fn start(name: &str, config: &str, envs: &[(&str, &str)]) -> Self {
        let dir = std::env::temp_dir().join(format!("kennel-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("kennel.toml");
        std::fs::write(&path, config.replace("{dir}", &dir.display().to_string())).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_kennel"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&path)
            .env("RUST_LOG", "warn")
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let addr = first
            .trim()
            .strip_prefix("kennel listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line: {first:?}"))
            .parse()
            .unwrap();
        // Keep draining stdout so the server never blocks on it.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while stdout.read_line(&mut sink).is_ok_and(|n| n > 0) {
                sink.clear();
            }
        });
        Self { child, addr, dir }
    }

    /// One exchange: status and body.
    pub fn http(&self, method: &str, path: &str, body: &str, token: Option<&str>) -> (u16, String) {
        let mut stream = TcpStream::connect_timeout(&self.addr, LIMIT).unwrap();
        stream.set_read_timeout(Some(LIMIT)).unwrap();
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{auth}Content-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        )
        .unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let raw = String::from_utf8(raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").expect("no end of headers");
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            unchunk(body)
        } else {
            body.to_owned()
        };
        (status, body)
    }

    /// `GET path` as JSON, which must answer 200.
    pub fn json(&self, path: &str, token: Option<&str>) -> Value {
        let (status, body) = self.http("GET", path, "", token);
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: not JSON ({e}): {body}"))
    }

    /// Asks for a pool's stats until `idle` is `n` (each request paced by
    /// the one before).
    pub fn wait_idle(&self, pool: &str, n: u64, token: Option<&str>) {
        let start = Instant::now();
        loop {
            let stats = self.json(&format!("/pools/{pool}/stats"), token);
            if stats["idle"] == n {
                return;
            }
            assert!(
                start.elapsed() < LIMIT,
                "{pool} never had {n} idle: {stats}"
            );
            std::thread::yield_now();
        }
    }

    /// SIGTERM, and whether it then exited with status 0 (within `LIMIT`).
    pub fn stop(self) -> bool {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        let _ = kill(pid, Signal::SIGTERM);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(nix::sys::wait::waitpid(pid, None));
        });
        match rx.recv_timeout(LIMIT) {
            Ok(Ok(nix::sys::wait::WaitStatus::Exited(_, code))) => code == 0,
            Ok(other) => panic!("the server did not exit: {other:?}"),
            Err(_) => panic!("the server did not stop within {LIMIT:?} of SIGTERM"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A failed test must not leave the server (and its workers) behind.
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn unchunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}
