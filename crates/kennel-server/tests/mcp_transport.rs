//! `/mcp/{pool}` over raw HTTP, against a small MCP server of ours
//! (tests/mcp_clients/mcp_small.py) pooled by the real `kennel serve`: the
//! transport's rules (sessions, versions, bad messages), an idle session's
//! end, a cancelled call and a hang-up, 2,000 sessions with 30% of them cut
//! mid-call, and a tenant's session. The official SDK clients are in
//! `mcp_gateway.rs`.

mod served;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use served::mcp::{clients, pids, serve};
use served::{Server, Stderr};

/// One MCP POST over its own connection: status, head, body.
fn post(
    addr: SocketAddr,
    session: Option<&str>,
    headers: &[(&str, &str)],
    body: &Value,
) -> served::Answer {
    let mut all = vec![
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
    ];
    if let Some(s) = session {
        all.push(("Mcp-Session-Id", s));
    }
    all.extend_from_slice(headers);
    served::http(addr, "POST", "/mcp/small", &all, &body.to_string())
}

/// A DELETE of `session` with `headers` (a bearer token): its end.
fn delete(addr: SocketAddr, session: &str, headers: &[(&str, &str)]) -> served::Answer {
    let mut all = headers.to_vec();
    all.push(("Mcp-Session-Id", session));
    served::http(addr, "DELETE", "/mcp/small", &all, "")
}

/// The value of header `name` in `head`.
fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
    })
}

/// The JSON messages of an SSE body.
fn messages(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

fn initialize(addr: SocketAddr) -> String {
    initialize_as(addr, &[])
}

fn init_message() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
}

/// Opens a session with `headers` (a bearer token) and gives its id.
fn initialize_as(addr: SocketAddr, headers: &[(&str, &str)]) -> String {
    let a = post(addr, None, headers, &init_message());
    assert_eq!(a.status, 200, "{}", a.body);
    header(&a.head, "mcp-session-id").unwrap_or_else(|| panic!("no session id: {}", a.head))
}

/// The Python interpreter itself (not a shim that starts shells of its
/// own, which would count as the worker's processes).
fn interpreter() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn small_pool(workers: usize, extra: &str) -> String {
    let script = clients().join("mcp_small.py");
    format!(
        "[[pool]]\nname = \"small\"\nargv = [\"{}\", \"{}\"]\nprotocol = \"json-rpc\"\nstartup = \"parallel\"\nsizing = {{ kind = \"fixed\", workers = {workers} }}\n{extra}\n",
        interpreter(),
        script.display()
    )
}

#[test]
fn the_transport_answers_sessions_versions_and_bad_messages_by_the_rules() {
    let server = serve("mcp-rules", &small_pool(1, "mcp = {}"));
    let addr = server.addr;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    // No session: 400; a session nobody opened: 404.
    assert_eq!(post(addr, None, &[], &list).status, 400);
    assert_eq!(post(addr, Some("0123"), &[], &list).status, 404);
    let long = "x".repeat(10_000);
    assert_eq!(post(addr, Some(&long), &[], &list).status, 404);
    // A batch, and what is not JSON-RPC: 400.
    assert_eq!(post(addr, None, &[], &json!([list])).status, 400);
    let session = initialize(addr);
    assert_eq!(
        post(addr, Some(&session), &[], &json!({"jsonrpc": "2.0"})).status,
        400
    );
    // A version nobody speaks: 400; one the server speaks: served.
    let bad = post(
        addr,
        Some(&session),
        &[("MCP-Protocol-Version", "1999-01-01")],
        &list,
    );
    assert_eq!(bad.status, 400, "{}", bad.body);
    let a = post(
        addr,
        Some(&session),
        &[("MCP-Protocol-Version", "2025-06-18")],
        &list,
    );
    assert_eq!(a.status, 200);
    assert_eq!(
        messages(&a.body)[0]["result"]["tools"][0]["name"],
        "pid",
        "{}",
        a.body
    );
    assert_eq!(messages(&a.body)[0]["id"], 2);
    // A client that takes JSON only gets the response as JSON.
    let call =
        json!({"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": {"name": "pid"}});
    let json_only = served::http(
        addr,
        "POST",
        "/mcp/small",
        &[("Accept", "application/json"), ("Mcp-Session-Id", &session)],
        &call.to_string(),
    );
    assert_eq!(json_only.status, 200);
    let reply: Value = serde_json::from_str(&json_only.body).unwrap();
    assert_eq!(reply["id"], "c");
    let pid = reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    // Notifications and answers to nothing asked: 202.
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(addr, Some(&session), &[], &note).status, 202);
    let stray = json!({"jsonrpc": "2.0", "id": "kennel-99", "result": {}});
    assert_eq!(post(addr, Some(&session), &[], &stray).status, 202);
    // A pool that does not serve MCP: 404.
    let other = served::http(addr, "POST", "/mcp/nope", &[], &list.to_string());
    assert_eq!(other.status, 404);
    // DELETE ends it: 204, then 404; its worker is replaced.
    assert_eq!(delete(addr, &session, &[]).status, 204);
    assert_eq!(post(addr, Some(&session), &[], &list).status, 404);
    server.eventually("a new worker", || {
        let now = pids(&server, "small");
        now.len() == 1 && !now.contains(&pid.parse().unwrap())
    });
}

#[test]
fn a_session_with_no_request_and_no_stream_for_session_idle_ends() {
    let server = serve(
        "mcp-idle",
        &small_pool(1, "mcp = { session_idle = \"1s\" }"),
    );
    let session = initialize(server.addr);
    let lent = |server: &Server| server.get_json("/pools/small/stats")["lent"].clone();
    assert_eq!(lent(&server), 1, "the session holds its worker");
    server.eventually("the idle session ended", || lent(&server) == 0);
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(post(server.addr, Some(&session), &[], &ping).status, 404);
}

#[test]
fn a_cancelled_call_keeps_the_worker_and_a_hang_up_ends_the_session() {
    let server = serve("mcp-cancel", &small_pool(1, "mcp = {}"));
    let addr = server.addr;
    let session = initialize(addr);
    let pid = |s: &str| {
        let call =
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "pid"}});
        messages(&post(addr, Some(s), &[], &call).body)[0]["result"]["content"][0]["text"].clone()
    };
    let first = pid(&session);
    // A call cancelled by the client: its stream ends without a response,
    // and the same process answers next.
    let sleeper = std::thread::spawn({
        let session = session.clone();
        move || {
            let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "sleep", "arguments": {"seconds": 60}}});
            post(addr, Some(&session), &[], &call)
        }
    });
    let started = Instant::now();
    let cancel =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}});
    // Sent until the call is in flight (its stream then ends).
    while !sleeper.is_finished() {
        assert_eq!(post(addr, Some(&session), &[], &cancel).status, 202);
        std::thread::yield_now();
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the call was never cancelled"
        );
    }
    let cut = sleeper.join().unwrap();
    assert_eq!(cut.status, 200);
    assert!(
        messages(&cut.body).iter().all(|m| m["id"] != 5),
        "{}",
        cut.body
    );
    assert_eq!(pid(&session), first, "the worker was kept");

    // A hang-up mid-call ends the session: its worker is replaced.
    let mut stream = hang_up_call(addr, &session);
    stream.flush().unwrap();
    drop(stream);
    server.eventually("the session ended", || {
        post(
            addr,
            Some(&session),
            &[],
            &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        )
        .status
            == 404
    });
    let again = initialize(addr);
    assert_ne!(pid(&again), first, "a new worker for the next session");
}

/// Starts a 60 s call on `session` and returns its connection once the
/// answer's head came; dropped, the connection is reset.
fn hang_up_call(addr: SocketAddr, session: &str) -> TcpStream {
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "sleep", "arguments": {"seconds": 60}}}).to_string();
    let mut stream = TcpStream::connect(addr).unwrap();
    let request = format!(
        "POST /mcp/small HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nMcp-Session-Id: {session}\r\nContent-Length: {}\r\n\r\n{call}",
        call.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    socket2::SockRef::from(&stream)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    stream
}

/// The resident memory of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The live processes under the server of pid `server` that run
/// `mcp_small.py`.
fn small_servers(server: u32) -> usize {
    served::descendants(server)
        .into_iter()
        .filter(|&p| {
            served::alive(p)
                && std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("mcp_small.py"))
        })
        .count()
}

/// One session: opened, one call, then ended by DELETE, or (`cut`) a
/// long call whose connection is reset mid-call.
fn one_session(addr: SocketAddr, cut: bool) {
    let session = initialize(addr);
    if cut {
        drop(hang_up_call(addr, &session));
        return;
    }
    let call =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "pid"}});
    let a = post(addr, Some(&session), &[], &call);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(delete(addr, &session, &[]).status, 204);
}

/// 2,000 sessions (`KENNEL_MCP_SESSIONS` says how many: `bench/mcp.sh
/// --leak N` runs it with more), 30% of them cut by a reset mid-call.
#[test]
fn sessions_cut_mid_call_leave_no_process_behind() {
    let sessions: usize = std::env::var("KENNEL_MCP_SESSIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000);
    const CLIENTS: usize = 8;
    const CAPACITY: usize = 8;
    let pool = small_pool(CAPACITY, "mcp = { attach_wait = \"30s\" }");
    let server = serve("mcp-leak", &pool);
    server.eventually("the pool up", || pids(&server, "small").len() == CAPACITY);
    let addr = server.addr;
    // Warm: the first sessions, then the server's memory.
    for i in 0..50 {
        one_session(addr, i % 10 < 3);
    }
    let rss_before = rss_kib(server.child.id());
    let (done_tx, done) = std::sync::mpsc::channel::<()>();
    let sampler = std::thread::spawn({
        let server_pid = server.child.id();
        move || {
            let mut most = 0;
            while done.recv_timeout(Duration::from_millis(100)).is_err() {
                most = most.max(small_servers(server_pid));
            }
            most
        }
    });
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            std::thread::spawn(move || {
                for i in 0..sessions / CLIENTS {
                    one_session(addr, (c + i * CLIENTS) % 10 < 3);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let ended = Instant::now();
    // Every cut session's worker is released and replaced: the pool
    // holds its capacity, idle, and no more processes.
    server.eventually("every session's worker back", || {
        let stats = server.get_json("/pools/small/stats");
        stats["lent"] == 0 && small_servers(server.child.id()) == CAPACITY
    });
    let settled = ended.elapsed();
    done_tx.send(()).unwrap();
    let most = sampler.join().unwrap();
    let rss_after = rss_kib(server.child.id());
    eprintln!(
        "{sessions} sessions: settled {settled:?} after the last, at most {most} servers, RSS {rss_before} -> {rss_after} KiB"
    );
    assert!(
        most <= CAPACITY,
        "{most} servers at once (capacity {CAPACITY}, max_surge 0)"
    );
    assert!(
        rss_after * 10 <= rss_before * 11,
        "the server's memory grew: {rss_before} -> {rss_after} KiB"
    );
}

#[test]
fn a_tenants_session_is_its_own_and_holds_a_worker_of_its_share() {
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\ntoken_env = \"KENNEL_TEST_OPERATOR\"\n\n[[tenant]]\nname = \"a\"\ntoken_env = \"KENNEL_TEST_TENANT_A\"\nmax_running = 1\n\n[[tenant]]\nname = \"b\"\ntoken_env = \"KENNEL_TEST_TENANT_B\"\n\n{}",
        small_pool(2, "mcp = { attach_wait = \"300ms\" }")
    );
    let server = Server::start(
        "mcp-tenants",
        &config,
        &[],
        &[
            ("RUST_LOG", "warn"),
            ("KENNEL_TEST_OPERATOR", "operator-token"),
            ("KENNEL_TEST_TENANT_A", "token-a"),
            ("KENNEL_TEST_TENANT_B", "token-b"),
        ],
        Stderr::Collected,
    );
    let addr = server.addr;
    let (a, b) = (
        [("Authorization", "Bearer token-a")],
        [("Authorization", "Bearer token-b")],
    );
    let session = initialize_as(addr, &a);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    // Another tenant's token does not reach it, nor end it.
    assert_eq!(post(addr, Some(&session), &b, &list).status, 404);
    let ended = delete(addr, &session, &b);
    assert_eq!(ended.status, 404, "{}", ended.body);
    assert_eq!(post(addr, Some(&session), &a, &list).status, 200);
    // The session holds a worker as a's: at its `max_running = 1`, a's
    // second session waits though a worker is free, and gives up after
    // `attach_wait`; b's takes that worker.
    let second = post(addr, None, &a, &init_message());
    assert_eq!(second.status, 503, "{}", second.body);
    assert!(
        second.body.contains("lend-timeout") || second.body.contains("no worker"),
        "{}",
        second.body
    );
    initialize_as(addr, &b);
    let stats = served::http(
        addr,
        "GET",
        "/pools/small/stats",
        &[("Authorization", "Bearer operator-token")],
        "",
    )
    .json();
    assert_eq!(
        stats["tenants"],
        json!([{"tenant": "a", "waiting": 0, "running": 1}, {"tenant": "b", "waiting": 0, "running": 1}]),
        "{stats}"
    );
}
