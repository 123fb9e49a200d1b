//! Tenants against the real `kennel serve` (ADR 0065): a tenant's token is
//! the only thing that names it and reaches only the routes it was given
//! (401, 403); over its limits it gets 429 `tenant-limit` with its own
//! `Retry-After`, while the pool's own bound still answers 503; the
//! metrics count each configured tenant's jobs.

mod served;
mod support;

use served::{Server, Stderr};

const OPERATOR: &str = "operator-token-1";
const TOKEN_A: &str = "tenant-a-token";
const TOKEN_B: &str = "tenant-b-token";

/// A demo pool of one worker whose queue holds one job, tenant `a`
/// (token in a variable, jobs only, one job waiting at most) and `b`
/// (token in a file, every route).
fn config() -> String {
    r#"[server]
listen = "127.0.0.1:0"
state_dir = "{dir}/state"
token_env = "KENNEL_TEST_OPERATOR"

[[tenant]]
name = "a"
token_env = "KENNEL_TEST_TENANT_A"
max_queued = 1

[[tenant]]
name = "b"
token_file = "{dir}/b.token"
weight = 3
routes = "all"

[[pool]]
name = "demo"
argv = ["@kennel", "worker", "demo", "--warmup", "10ms"]
startup = "parallel"
sizing = { kind = "fixed", workers = 1 }
max_waiting = 2
"#
    .to_owned()
}

/// The server and the directory of its token file, removed when dropped.
fn start(name: &str) -> (Server, served::TempDir) {
    let dir = served::TempDir::new(&format!("{name}-token"));
    let file = dir.0.join("b.token");
    std::fs::write(&file, format!("{TOKEN_B}\n")).unwrap();
    let toml = config().replace("{dir}/b.token", &file.display().to_string());
    let server = Server::start(
        name,
        &toml,
        &[],
        &[
            ("KENNEL_TEST_OPERATOR", OPERATOR),
            ("KENNEL_TEST_TENANT_A", TOKEN_A),
        ],
        Stderr::Collected,
    );
    (server, dir)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn call(
    server: &Server,
    method: &str,
    path: &str,
    token: &str,
    extra: &[(&str, &str)],
    body: &str,
) -> served::Answer {
    let auth = bearer(token);
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    headers.extend_from_slice(extra);
    server.http(method, path, &headers, body)
}

/// `POST /pools/{pool}/jobs` with `body`, as the caller of `token`.
fn job(server: &Server, pool: &str, token: &str, body: &str) -> served::Answer {
    call(
        server,
        "POST",
        &format!("/pools/{pool}/jobs"),
        token,
        &[],
        body,
    )
}

/// `GET /pools/{pool}/stats`, as the service.
fn stats(server: &Server, pool: &str) -> serde_json::Value {
    call(
        server,
        "GET",
        &format!("/pools/{pool}/stats"),
        OPERATOR,
        &[],
        "",
    )
    .json()
}

#[test]
fn a_tenants_token_names_it_and_reaches_only_its_routes() {
    let (server, _token) = start("tenant-routes");
    let one = r#"{"iterations": 1}"#;
    // No token, or one nobody has: 401.
    assert_eq!(
        server.http("POST", "/pools/demo/jobs", &[], one).status,
        401
    );
    assert_eq!(job(&server, "demo", "nobody", one).status, 401);
    // a runs jobs and reads the pools.
    let ran = job(&server, "demo", TOKEN_A, one);
    assert_eq!(ran.status, 200, "{}", ran.body);
    assert_eq!(call(&server, "GET", "/pools", TOKEN_A, &[], "").status, 200);
    // ...and nothing else: configs, reloads, workers, asynchronous jobs.
    for (method, path) in [
        ("PUT", "/pools/demo/config"),
        ("POST", "/reload"),
        ("GET", "/pools/demo/workers"),
        ("GET", "/events"),
        ("GET", "/pools/demo/config"),
    ] {
        let refused = call(&server, method, path, TOKEN_A, &[], "{}");
        assert_eq!(refused.status, 403, "{method} {path}: {}", refused.body);
        assert_eq!(refused.json()["error"], "forbidden");
        assert!(
            refused.body.contains("tenant a may not use"),
            "{}",
            refused.body
        );
    }
    let detached = call(
        &server,
        "POST",
        "/pools/demo/jobs",
        TOKEN_A,
        &[("Prefer", "respond-async")],
        one,
    );
    assert_eq!(detached.status, 403, "{}", detached.body);
    // b, with every route, and the service's own token reach them.
    assert_eq!(
        call(&server, "GET", "/pools/demo/workers", TOKEN_B, &[], "").status,
        200
    );
    assert_eq!(
        call(&server, "GET", "/pools/demo/workers", OPERATOR, &[], "").status,
        200
    );
    // A bad priority is a bad request.
    let bad = call(
        &server,
        "POST",
        "/pools/demo/jobs",
        TOKEN_A,
        &[("Kennel-Priority", "urgent")],
        one,
    );
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("Kennel-Priority"), "{}", bad.body);
    // The pool counts each job under the tenant its token names, and a
    // tenant sees its own row only.
    let (addr, long) = (server.addr, r#"{"sleep_ms": 1500}"#);
    let hold = std::thread::spawn(move || {
        let auth = bearer(TOKEN_B);
        served::http(
            addr,
            "POST",
            "/pools/demo/jobs",
            &[("Authorization", &auth)],
            long,
        )
    });
    server.eventually("b's job runs", || {
        stats(&server, "demo")["tenants"]
            == serde_json::json!([{"tenant": "b", "waiting": 0, "running": 1}])
    });
    let own = call(&server, "GET", "/pools/demo/stats", TOKEN_A, &[], "").json();
    assert_eq!(own["tenants"], serde_json::json!([]), "{own}");
    assert_eq!(hold.join().unwrap().status, 200);
}

#[test]
fn over_its_limits_a_tenant_gets_429_with_its_own_retry_after() {
    let (server, _token) = start("tenant-limits");
    // The operator's job holds the one worker for a while.
    let addr = server.addr;
    let send = |token: &'static str, body: &'static str| {
        std::thread::spawn(move || {
            let auth = bearer(token);
            served::http(
                addr,
                "POST",
                "/pools/demo/jobs",
                &[("Authorization", &auth)],
                body,
            )
        })
    };
    let held = send(OPERATOR, r#"{"sleep_ms": 3000}"#);
    server.eventually("the worker is lent", || stats(&server, "demo")["lent"] == 1);
    // a's first job waits; its second is over `max_queued = 1`.
    let queued = send(TOKEN_A, r#"{"iterations": 1}"#);
    server.eventually("a's job waits", || stats(&server, "demo")["waiting"] == 1);
    let over = job(&server, "demo", TOKEN_A, r#"{"iterations": 1}"#);
    assert_eq!(over.status, 429, "{}", over.body);
    assert_eq!(over.json()["error"], "tenant-limit");
    assert!(over.body.contains("tenant a"), "{}", over.body);
    let retry: u64 = over
        .head
        .lines()
        .find_map(|l| {
            l.strip_prefix("retry-after: ")
                .or_else(|| l.strip_prefix("Retry-After: "))
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After: {}", over.head));
    assert!((1..=60).contains(&retry), "{retry}");
    // The metrics count it by tenant, and a's job waiting.
    let metrics = call(&server, "GET", "/metrics", OPERATOR, &[], "").body;
    let series = |s: &str| served::sample(&metrics, s);
    assert_eq!(
        series(r#"kennel_tenant_jobs_total{pool="demo",tenant="a",outcome="tenant-limit"}"#),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        series(r#"kennel_tenant_jobs_waiting{pool="demo",tenant="a"}"#),
        1.0
    );
    assert_eq!(
        series(r#"kennel_tenant_jobs_waiting{pool="demo",tenant="b"}"#),
        0.0
    );
    assert!(metrics.contains(r#"kennel_tenant_jobs_running{pool="demo",tenant="b"} 0"#));
    // b waits beside it, within its own limits; then the pool's own bound
    // (`max_waiting = 2`) answers 503.
    let b_queued = send(TOKEN_B, r#"{"iterations": 1}"#);
    server.eventually("b's job waits", || stats(&server, "demo")["waiting"] == 2);
    let full = job(&server, "demo", TOKEN_B, r#"{"iterations": 1}"#);
    assert_eq!(full.status, 503, "{}", full.body);
    assert_eq!(full.json()["error"], "rejected");
    for answer in [held, queued, b_queued] {
        assert_eq!(answer.join().unwrap().status, 200);
    }
}

#[test]
fn a_tenant_without_its_token_stops_the_start_naming_it() {
    let dir = served::TempDir::new("tenant-no-token");
    let toml = config().replace(
        "{dir}/b.token",
        &dir.0.join("missing").display().to_string(),
    );
    let path = dir.0.join("kennel.toml");
    std::fs::write(&path, toml.replace("{dir}", &dir.0.display().to_string())).unwrap();
    let out = std::process::Command::new(served::kennel_bin())
        .args(["serve", "--config"])
        .arg(&path)
        .env("KENNEL_TEST_OPERATOR", OPERATOR)
        .env("KENNEL_TEST_TENANT_A", TOKEN_A)
        .env("XDG_RUNTIME_DIR", &dir.0) // where its run directory would be
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tenant b: cannot read `token_file`"), "{err}");
    // Refused before it took its port and made its run directory.
    assert!(!dir.0.join("kennel").exists(), "a run directory was made");
}

#[test]
fn a_tenants_max_in_flight_holds_across_every_pool() {
    let toml = r#"[server]
listen = "127.0.0.1:0"
state_dir = "{dir}/state"
token_env = "KENNEL_TEST_OPERATOR"

[[tenant]]
name = "c"
token_env = "KENNEL_TEST_TENANT_A"
max_in_flight = 1

[[pool]]
name = "one"
argv = ["@kennel", "worker", "demo", "--warmup", "10ms"]
startup = "parallel"
sizing = { kind = "fixed", workers = 1 }

[[pool]]
name = "two"
argv = ["@kennel", "worker", "demo", "--warmup", "10ms"]
startup = "parallel"
sizing = { kind = "fixed", workers = 1 }
group = "g"
"#;
    let server = Server::start(
        "tenant-max-jobs",
        toml,
        &[],
        &[
            ("KENNEL_TEST_OPERATOR", OPERATOR),
            ("KENNEL_TEST_TENANT_A", TOKEN_A),
        ],
        Stderr::Collected,
    );
    let addr = server.addr;
    let held = std::thread::spawn(move || {
        let auth = bearer(TOKEN_A);
        served::http(
            addr,
            "POST",
            "/pools/one/jobs",
            &[("Authorization", &auth)],
            r#"{"sleep_ms": 1500}"#,
        )
    });
    server.eventually("c's job runs in pool one", || {
        stats(&server, "one")["lent"] == 1
    });
    // Pool two has a free worker, but c has its one job in flight.
    let over = job(&server, "two", TOKEN_A, r#"{"iterations": 1}"#);
    assert_eq!(over.status, 429, "{}", over.body);
    assert_eq!(over.json()["error"], "tenant-limit");
    assert!(over.body.contains("`max_in_flight`"), "{}", over.body);
    // A group job too (pool two is in group g).
    let grouped = call(
        &server,
        "POST",
        "/groups/g/jobs",
        TOKEN_A,
        &[],
        r#"{"iterations": 1}"#,
    );
    assert_eq!(grouped.status, 429, "{}", grouped.body);
    assert_eq!(held.join().unwrap().status, 200);
    // Its job done, c may send the next one, to a pool or to the group.
    let next = job(&server, "two", TOKEN_A, r#"{"iterations": 1}"#);
    assert_eq!(next.status, 200, "{}", next.body);
    let grouped = call(
        &server,
        "POST",
        "/groups/g/jobs",
        TOKEN_A,
        &[],
        r#"{"iterations": 1}"#,
    );
    assert_eq!(grouped.status, 200, "{}", grouped.body);
}
