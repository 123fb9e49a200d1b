//! `kennel run --server URL` against a real `kennel serve`: a batch sent
//! as asynchronous jobs, the results in input order, and a run cut short
//! (`kill -9` of the client) then run again: every line answered, each job
//! run once (counted by the worker).

mod served;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;
use served::{Server, Stderr, kennel_bin};

fn count_worker() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/async_workers/count.py")
}

fn start(name: &str) -> Server {
    let toml = format!(
        r#"[server]
listen = "127.0.0.1:0"
state_dir = "{{dir}}/state"

[[pool]]
name = "count"
argv = ["python3", "{}"]
env = {{ COUNT_FILE = "{{dir}}/count" }}
startup = "parallel"
sizing = {{ kind = "fixed", workers = 2 }}
"#,
        count_worker().display()
    );
    Server::start(name, &toml, &[], &[], Stderr::Collected)
}

fn jobs_file(server: &Server, n: usize, ms: u64) -> PathBuf {
    let path = server.dir.0.join("jobs.jsonl");
    let mut text = String::new();
    for i in 1..=n {
        text.push_str(&format!("{{\"n\":{i},\"ms\":{ms}}}\n"));
        if i == 3 {
            // A blank line and a line that is not JSON, in their places.
            text.push_str("\nnot json\n");
        }
    }
    std::fs::write(&path, text).unwrap();
    path
}

fn run(server: &Server, jobs: &PathBuf, out: &str) -> Command {
    let mut c = Command::new(kennel_bin());
    c.args(["run", "--quiet", "--server"])
        .arg(format!("http://{}", server.addr))
        .arg("--output")
        .arg(server.dir.0.join(out))
        .arg(jobs)
        .stdin(Stdio::null());
    c
}

fn counted(server: &Server) -> Vec<u64> {
    let text = std::fs::read_to_string(server.dir.0.join("count")).unwrap_or_default();
    let mut n: Vec<u64> = text.lines().map(|l| l.parse().unwrap()).collect();
    n.sort_unstable();
    n
}

fn results(server: &Server, out: &str) -> Vec<Value> {
    std::fs::read_to_string(server.dir.0.join(out))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_batch_sent_to_a_server_comes_back_in_input_order() {
    let server = start("run-server");
    let jobs = jobs_file(&server, 30, 5);
    let out = run(&server, &jobs, "a.jsonl").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // One line failed (not JSON): exit code 1, as `kennel run` on a pool.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("31 jobs: 30 ok, 1 failed"), "{stderr}");
    assert!(stderr.contains("the same command again"), "{stderr}");
    let got = results(&server, "a.jsonl");
    assert_eq!(got.len(), 31);
    let ns: Vec<u64> = got.iter().filter_map(|v| v["n"].as_u64()).collect();
    assert_eq!(ns, (1..=30).collect::<Vec<_>>(), "in input order");
    assert_eq!(got[3]["error"], "bad-json", "{}", got[3]);
    assert_eq!(got[3]["line"], 5, "the line's number in the file");
    // The same command again: the same results, no job run again.
    let again = run(&server, &jobs, "b.jsonl").output().unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(results(&server, "b.jsonl"), got);
    assert_eq!(counted(&server), (1..=30).collect::<Vec<_>>());
}

#[test]
fn a_batch_cut_short_and_run_again_runs_each_job_once() {
    let server = start("run-server-resume");
    let jobs = jobs_file(&server, 40, 100);
    let mut first = run(&server, &jobs, "first.jsonl").spawn().unwrap();
    // Cut it short once some jobs ran: some submitted, some not, none
    // collected in full.
    server.eventually("four jobs ran", || counted(&server).len() >= 4);
    first.kill().unwrap();
    first.wait().unwrap();
    let again = run(&server, &jobs, "again.jsonl").output().unwrap();
    assert_eq!(
        again.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let got = results(&server, "again.jsonl");
    let ns: Vec<u64> = got.iter().filter_map(|v| v["n"].as_u64()).collect();
    assert_eq!(
        ns,
        (1..=40).collect::<Vec<_>>(),
        "every line answered, in order"
    );
    assert_eq!(
        counted(&server),
        (1..=40).collect::<Vec<_>>(),
        "each job ran once"
    );
}
