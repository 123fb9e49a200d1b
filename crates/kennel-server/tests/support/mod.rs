//! What the queue tests share: a real `nats-server -js` on a free loopback
//! port with a store of its own, real `kennel serve` processes, a tiny
//! HTTP/1.1 client (the one the served helper has too), and a NATS client that publishes jobs and gathers
//! their answers.

#![allow(dead_code, unreachable_pub)]

pub mod counted;
pub mod http_client;
pub mod outside;
pub mod ports;
pub mod temp_dir;

pub use http_client::{Answer, http};
// Not every test binary takes a port or a directory.
#[allow(unused_imports)]
pub use ports::free_port;
#[allow(unused_imports)]
pub use temp_dir::TempDir;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

/// The bound of every wait of these tests.
pub const LIMIT: Duration = Duration::from_secs(60);

/// `nats-server -js` on a free loopback port, killed on drop.
pub struct Nats {
    child: Child,
    pub port: u16,
    pub url: String,
    store: TempDir,
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nats {
    /// Starts the server; when `nats-server` is not installed, fails the
    /// test or, with `KENNEL_ALLOW_SKIP=1`, returns `None` (see
    /// [`outside`]).
    pub fn start(test: &str) -> Option<Self> {
        let installed = Command::new("nats-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        outside::needed(
            test,
            "nats-server",
            "install it (apt-get install nats-server)",
            installed.then_some(()),
        )?;
        let store = TempDir::new("nats");
        // The picked port may still be taken before the server listens
        // (by a program outside this test run, or by the kernel where its
        // ephemeral range leaves no room outside it): the first start moves
        // on to another port then; a restart must keep its port.
        let mut tries = 0;
        let (port, child) = loop {
            let port = free_port();
            match Self::spawn(port, &store) {
                Ok(child) => break (port, child),
                Err(why) if tries < 5 => {
                    tries += 1;
                    eprintln!("{why}; trying another port");
                }
                Err(why) => panic!("{why}"),
            }
        };
        Some(Self {
            child,
            port,
            url: format!("nats://127.0.0.1:{port}"),
            store,
        })
    }

    /// Starts `nats-server` on `port` and waits until it is the one that
    /// answers there (its greeting names it), so that a test never talks
    /// to another test's server.
    ///
    /// # Errors
    ///
    /// Another program answers on `port`, or the server ended before it
    /// listened (the port was taken).
    fn spawn(port: u16, store: &TempDir) -> Result<Child, String> {
        let name = format!("kennel-test-{}-{port}", std::process::id());
        let mut child = Command::new("nats-server")
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-n",
                &name,
                "-sd",
            ])
            .arg(&store.0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + LIMIT;
        // Each refused connection is answered at once: the attempts pace
        // themselves.
        loop {
            if let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) {
                stream.set_read_timeout(Some(LIMIT)).unwrap();
                let mut greeting = String::new();
                let _ = BufReader::new(stream).read_line(&mut greeting);
                if greeting.contains(&format!("\"server_name\":\"{name}\"")) {
                    return Ok(child);
                }
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "port {port} is answered by another server: {greeting:?}"
                ));
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "nats-server could not start on port {port}: {status}"
                ));
            }
            assert!(Instant::now() < deadline, "nats-server did not listen");
            std::thread::yield_now();
        }
    }

    /// Stops the server (SIGKILL); its store stays on disk.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops the server as an operator would (SIGTERM: it shuts down
    /// gracefully); its store stays on disk.
    pub fn terminate(&mut self) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        let _ = kill(pid, Signal::SIGTERM);
        let _ = self.child.wait();
    }

    /// Starts it again on the same port with the same store.
    pub fn restart(&mut self) {
        self.child = Self::spawn(self.port, &self.store).unwrap_or_else(|why| panic!("{why}"));
    }
}

/// One `kennel serve` process, killed on drop.
pub struct Instance {
    pub child: Child,
    pub addr: SocketAddr,
    pub name: String,
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Instance {
    /// Starts `kennel serve` with `config` (a `[[pool]]` list; the server
    /// table is added: a free port, a run directory under `dir`).
    pub fn start(dir: &Path, name: &str, config: &str) -> Self {
        let run_dir = dir.join(format!("run-{name}"));
        let text = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nrun_dir = {run_dir:?}\nshutdown_grace = \"20s\"\n\n{config}"
        );
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_kennel"))
            .args(["serve", "--config"])
            .arg(&path)
            .env("RUST_LOG", "warn,kennel_server=info")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let addr: SocketAddr = line
            .trim()
            .strip_prefix("kennel listening on http://")
            .unwrap_or_else(|| panic!("{name} did not start: {line:?}"))
            .parse()
            .unwrap();
        // Keep reading stdout so that the server never blocks on it.
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = out.read_to_end(&mut sink);
        });
        Self {
            child,
            addr,
            name: name.to_owned(),
        }
    }

    /// The pid, as `Kennel-Instance` names it after the host.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(i32::try_from(self.pid()).unwrap()), signal).unwrap();
    }

    /// GET `path` as JSON.
    pub fn get(&self, path: &str) -> Value {
        let Answer { body, .. } = http(self.addr, "GET", path, &[], "");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }

    /// The value of a metric line `name{pool="POOL"...}` (0 when absent).
    pub fn metric(&self, name: &str, pool: &str) -> f64 {
        let Answer { body, .. } = http(self.addr, "GET", "/metrics", &[], "");
        metric_in(&body, name, pool)
    }

    /// Polls a metric (as [`metric`](Self::metric)) until it is `value`:
    /// for a count a message's task takes apart from the answer the test
    /// waited for.
    pub fn wait_metric(&self, name: &str, pool: &str, value: f64) {
        let deadline = Instant::now() + LIMIT;
        loop {
            let now = self.metric(name, pool);
            if now == value {
                return;
            }
            // Each request paces the next one.
            assert!(
                Instant::now() < deadline,
                "{name} stayed {now}, not {value}"
            );
        }
    }

    /// Polls the pool's stats until `lent` is `n`.
    pub fn wait_lent(&self, pool: &str, n: u64) {
        let deadline = Instant::now() + LIMIT;
        loop {
            let stats = self.get(&format!("/pools/{pool}/stats"));
            if stats["lent"] == n {
                return;
            }
            // Each request paces the next one.
            assert!(Instant::now() < deadline, "lent never reached {n}: {stats}");
        }
    }
}

/// The sum of a metric's lines for `pool` in Prometheus text.
pub fn metric_in(text: &str, name: &str, pool: &str) -> f64 {
    let label = format!("pool=\"{pool}\"");
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(&label))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum()
}

/// A queued pool of `workers` demo workers (no warm-up) on `nats`.
pub fn queued_pool(nats: &str, workers: usize, queue_extra: &str) -> String {
    format!(
        r#"[[pool]]
name = "q"
argv = ["@kennel", "worker", "demo", "--warmup", "0s"]
startup = "parallel"
sizing = {{ kind = "fixed", workers = {workers} }}
job_timeout = "5m"

[pool.queue]
nats = "{nats}"
stream = "JOBS"
subject = "jobs.q"
{queue_extra}
"#
    )
}

/// One answer over NATS, as it came back.
#[derive(Debug, Clone)]
pub struct NatsAnswer {
    pub status: u16,
    pub instance: String,
    pub delivery: u64,
    pub body: Value,
}

/// The answers by job id, and a signal for each new one.
type Gathered = (Mutex<BTreeMap<String, Vec<NatsAnswer>>>, Condvar);

/// A NATS client in a runtime of its own: publishes jobs with a reply
/// subject and gathers the answers by job id.
pub struct Client {
    pub rt: tokio::runtime::Runtime,
    pub nats: async_nats::Client,
    answers: Arc<Gathered>,
    pub reply_to: String,
}

impl Client {
    pub fn connect(url: &str) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let nats = rt.block_on(async_nats::connect(url)).unwrap();
        let reply_to = nats.new_inbox();
        let answers: Arc<Gathered> = Arc::default();
        let mut sub = rt.block_on(nats.subscribe(reply_to.clone())).unwrap();
        let into = answers.clone();
        rt.spawn(async move {
            while let Some(m) = sub.next().await {
                let h = |n: &str| {
                    m.headers
                        .as_ref()
                        .and_then(|h| h.get(n))
                        .map(|v| v.as_str().to_owned())
                        .unwrap_or_default()
                };
                let answer = NatsAnswer {
                    status: h("Kennel-Status").parse().unwrap_or(0),
                    instance: h("Kennel-Instance"),
                    delivery: h("Kennel-Delivery").parse().unwrap_or(0),
                    body: serde_json::from_slice(&m.payload).unwrap_or(Value::Null),
                };
                into.0
                    .lock()
                    .unwrap()
                    .entry(h("Kennel-Job-Id"))
                    .or_default()
                    .push(answer);
                into.1.notify_all();
            }
        });
        Self {
            rt,
            nats,
            answers,
            reply_to,
        }
    }

    /// Publishes `body` to `subject` as job `id`, stored by the stream.
    pub fn publish(&self, subject: &str, id: &str, body: &str) {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", id);
        headers.insert("Kennel-Reply-To", self.reply_to.as_str());
        self.rt.block_on(async {
            let js = async_nats::jetstream::new(self.nats.clone());
            js.publish_with_headers(subject.to_owned(), headers, body.to_owned().into())
                .await
                .unwrap()
                .await
                .unwrap();
        });
    }

    /// The answers so far, by job id.
    pub fn answers(&self) -> BTreeMap<String, Vec<NatsAnswer>> {
        self.answers.0.lock().unwrap().clone()
    }

    /// Waits until `n` distinct jobs have an answer (or [`LIMIT`]).
    pub fn wait_answered(&self, n: usize) -> BTreeMap<String, Vec<NatsAnswer>> {
        let (lock, answered) = &*self.answers;
        let (answers, _) = answered
            .wait_timeout_while(lock.lock().unwrap(), LIMIT, |a| a.len() < n)
            .unwrap();
        answers.clone()
    }

    /// The stream's message count and the consumer's pending and
    /// unacknowledged counts.
    pub fn backlog(&self, stream: &str, consumer: &str) -> (u64, u64, usize) {
        self.rt.block_on(async {
            let js = async_nats::jetstream::new(self.nats.clone());
            let mut s = js.get_stream(stream).await.unwrap();
            let messages = s.info().await.unwrap().state.messages;
            let c = s.consumer_info(consumer).await.unwrap();
            (messages, c.num_pending, c.num_ack_pending)
        })
    }
}
