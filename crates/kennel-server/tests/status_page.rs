//! The status page in a real browser: headless Chromium (the system's
//! package; `.ci/run` installs it) driven over the DevTools protocol by
//! `chromiumoxide`, loading `GET /` from a real `kennel serve` process with
//! real demo workers, and reading what the page shows after its scripts
//! ran: the pools, their counts, a worker's row, the size chart, and an
//! event that arrives while it is open. A screenshot is kept in
//! `target/` (and in `docs/img/status.png` with `KENNEL_SCREENSHOT=docs`).
//!
//! Without Chromium the tests fail, naming it, unless `KENNEL_ALLOW_SKIP=1`
//! lets them pass without running (`support::outside`).

mod served;
mod support;

use std::path::{Path, PathBuf};

use chromiumoxide::Page;
use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::page::ScreenshotParams;
use futures_util::StreamExt;
use serde_json::Value;
use served::{LIMIT, LISTEN, Server, Stderr, web_and_batch};

const BEARER: [(&str, &str); 1] = [("Authorization", "Bearer s3cret")];

/// The Chromium binary: `KENNEL_CHROMIUM` (missing if that file is not
/// there), else the first of the usual names on `PATH`. Missing: see
/// `support::outside::needed`.
fn chromium(test: &str) -> Option<PathBuf> {
    let found = match std::env::var_os("KENNEL_CHROMIUM") {
        // Named: that one, if it is there.
        Some(named) => Some(PathBuf::from(named)).filter(|p| p.is_file()),
        None => std::env::var_os("PATH").and_then(|path| {
            [
                "chromium",
                "chromium-browser",
                "google-chrome",
                "google-chrome-stable",
            ]
            .iter()
            .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
            .find(|p| p.is_file())
        }),
    };
    support::outside::needed(
        test,
        "chromium",
        "install it (apt-get install chromium) or name it in KENNEL_CHROMIUM",
        found,
    )
}

/// A headless browser and the task that drives its connection; closed
/// when dropped.
struct Chromium {
    browser: Browser,
    handler: tokio::task::JoinHandle<()>,
    profile: PathBuf,
}

impl Chromium {
    async fn launch(binary: &Path, name: &str) -> Self {
        let profile =
            std::env::temp_dir().join(format!("kennel-chromium-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&profile);
        let config = BrowserConfig::builder()
            .chrome_executable(binary)
            .user_data_dir(&profile)
            // Root in a container has no user namespace for the sandbox.
            .no_sandbox()
            .window_size(1280, 900)
            .viewport(None)
            .args([
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
            ])
            .launch_timeout(LIMIT)
            .request_timeout(LIMIT)
            .build()
            .unwrap();
        let (browser, mut handler) = Browser::launch(config).await.expect("chromium starts");
        let handler = tokio::spawn(async move {
            while let Some(event) = handler.next().await {
                if event.is_err() {
                    break;
                }
            }
        });
        Self {
            browser,
            handler,
            profile,
        }
    }

    async fn close(mut self) {
        let _ = self.browser.close().await;
        let _ = self.browser.wait().await;
        self.handler.abort();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// Runs `condition` (a JS expression) in the page until it is truthy, and
/// answers its value; the wait is the browser's, bounded by `LIMIT`.
async fn wait_for(page: &Page, what: &str, condition: &str) -> Value {
    let script = format!(
        "new Promise((resolve) => {{ const check = () => {{ let v; try {{ v = ({condition}); }} catch (e) {{ v = null; }} if (v) resolve(v); else setTimeout(check, 25); }}; check(); }})"
    );
    tokio::time::timeout(LIMIT, page.evaluate(script))
        .await
        .unwrap_or_else(|_| panic!("the page never showed {what}"))
        .unwrap_or_else(|e| panic!("{what}: {e}"))
        .into_value()
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

async fn eval(page: &Page, expression: &str) -> Value {
    page.evaluate(expression)
        .await
        .unwrap_or_else(|e| panic!("{expression}: {e}"))
        .into_value()
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_shows_pools_counts_workers_and_a_live_event_in_chromium() {
    let test = "the_status_page_shows_pools_counts_workers_and_a_live_event_in_chromium";
    let Some(binary) = chromium(test) else {
        return;
    };
    let server = Server::start(
        "page",
        &web_and_batch("200ms"),
        &LISTEN,
        &[],
        Stderr::Collected,
    );
    server.wait_count("demo", "idle", 2, &[]);
    server.wait_count("batch", "idle", 1, &[]);
    let chrome = Chromium::launch(&binary, "page").await;
    let url = format!("http://{}/", server.addr);
    let page = chrome
        .browser
        .new_page(url.as_str())
        .await
        .expect("the page loads");

    // Both pools, by name, with their group.
    let names = wait_for(
        &page,
        "both pools",
        "document.querySelectorAll('section.pool').length === 2 && [...document.querySelectorAll('section.pool')].map(s => s.dataset.pool)",
    )
    .await;
    // In the server's order.
    let listed: Vec<Value> = server.get_json("/pools")["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].clone())
        .collect();
    assert_eq!(names, Value::Array(listed));
    assert_eq!(names, serde_json::json!(["batch", "demo"]));
    let title = eval(
        &page,
        "document.querySelector('section[data-pool=demo] h2').innerText",
    )
    .await;
    let title = title.as_str().unwrap();
    assert!(
        title.contains("demo") && title.contains("group web") && title.contains("healthy"),
        "{title}"
    );

    // Its counts are the server's.
    let stats = server.get_json("/pools/demo/stats");
    for key in ["idle", "capacity", "size", "lent", "waiting"] {
        let shown = eval(
            &page,
            &format!(
                "document.querySelector('section[data-pool=demo] [data-count={key}] dd').innerText"
            ),
        )
        .await;
        assert_eq!(shown, stats[key].to_string(), "{key}: {stats}");
    }
    // The tenants with jobs in the pool: none now.
    let tenants = eval(
        &page,
        "document.querySelector('p[data-tenants=demo]').innerText",
    )
    .await;
    assert_eq!(tenants, "tenants none busy", "{stats}");

    // A worker's row: its state and pid as the server lists them.
    let workers = server.get_json("/pools/demo/workers");
    let pid = workers["workers"][0]["pid"]
        .as_u64()
        .expect("slot 0 has a pid");
    let row = wait_for(
        &page,
        "slot 0's row",
        "(() => { const r = document.querySelector('table[data-workers=demo] tr[data-slot=\"0\"]'); return r && [...r.cells].map(c => c.innerText); })()",
    )
    .await;
    assert_eq!(row[0], "0");
    assert_eq!(row[1], "idle");
    assert_eq!(row[2], pid.to_string(), "{row}");
    let batch_rows = eval(
        &page,
        "document.querySelectorAll('table[data-workers=batch] tbody tr').length",
    )
    .await;
    assert_eq!(batch_rows, 1);

    // The size chart draws the size line, at the pool's size.
    let points = wait_for(
        &page,
        "the size line",
        "(() => { const l = document.querySelector('svg[data-chart=demo] polyline[data-series=size]'); return l && l.getAttribute('points').split(' ').length >= 2 && l.getAttribute('points'); })()",
    )
    .await;
    assert!(points.as_str().is_some_and(|p| !p.is_empty()));

    // An event that happens while the page is open arrives in its feed.
    wait_for(
        &page,
        "a live event stream",
        "document.getElementById('conn').dataset.state === 'live'",
    )
    .await;
    // The events from before the page opened are replayed into its feed:
    // the warm-ups of both pools.
    let replayed = wait_for(
        &page,
        "the replayed warm-ups",
        "(() => { const n = p => document.querySelectorAll(`#feed li[data-event=\"worker:ready\"][data-pool=${p}]`).length; return n('demo') === 2 && n('batch') === 1 && [n('demo'), n('batch')]; })()",
    )
    .await;
    assert_eq!(replayed, serde_json::json!([2, 1]));
    // Each shows when it happened, before the page opened, not the moment
    // the page read it.
    let before_page = eval(
        &page,
        "[...document.querySelectorAll('#feed li[data-event=\"worker:ready\"] time')].map(t => Date.parse(t.dateTime) < performance.timeOrigin)",
    )
    .await;
    assert_eq!(before_page, serde_json::json!([true, true, true]));
    let served::Answer { status, body, .. } =
        server.http("POST", "/pools/demo/jobs", &[], r#"{"crash": true}"#);
    assert_eq!(status, 502, "{body}");
    let crashed: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(crashed["error"], "crashed");
    let event = wait_for(
        &page,
        "the worker:crashed event",
        "(() => { const li = document.querySelector('#feed li[data-event=\"worker:crashed\"][data-pool=demo]'); return li && li.innerText; })()",
    )
    .await;
    let event = event.as_str().unwrap();
    assert!(
        event.contains("worker:crashed") && event.contains("\"slot\":"),
        "{event}"
    );
    // The replacement's warm-up follows, and the counts come back.
    wait_for(
        &page,
        "the replacement ready",
        "document.querySelectorAll('#feed li[data-event=\"worker:ready\"][data-pool=demo]').length === 3 && document.querySelector('section[data-pool=demo] [data-count=idle] dd').innerText === '2'",
    )
    .await;

    // A resize shows in the counts, a new row and the size line.
    let served::Answer { status, body, .. } = server.http(
        "PUT",
        "/pools/demo/config",
        &[],
        r#"{"sizing": {"kind": "fixed", "workers": 3}}"#,
    );
    assert_eq!(status, 200, "{body}");
    wait_for(
        &page,
        "the third worker",
        "document.querySelector('section[data-pool=demo] [data-count=size] dd').innerText === '3' && document.querySelector('table[data-workers=demo] tr[data-slot=\"2\"] td.state').innerText === 'idle'",
    )
    .await;
    let levels = wait_for(
        &page,
        "the size line at two levels",
        "(() => { const ys = new Set(document.querySelector('svg[data-chart=demo] polyline[data-series=size]').getAttribute('points').split(' ').map(p => p.split(',')[1])); return ys.size >= 2 && ys.size; })()",
    )
    .await;
    assert_eq!(levels, 2, "the size line goes from 2 to 3");

    let shot = page
        .screenshot(ScreenshotParams::builder().full_page(true).build())
        .await
        .expect("a screenshot");
    assert!(
        shot.starts_with(b"\x89PNG\r\n\x1a\n") && shot.len() > 10_000,
        "{} bytes",
        shot.len()
    );
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status.png");
    std::fs::write(&keep, &shot).unwrap();
    if std::env::var("KENNEL_SCREENSHOT").is_ok_and(|v| v == "docs") {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/img/status.png");
        std::fs::write(&docs, &shot).unwrap();
        eprintln!("wrote {}", docs.display());
    }
    eprintln!("screenshot: {}", keep.display());

    chrome.close().await;
    assert!(server.stop(), "the server stopped with an error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_token_the_page_asks_for_it_and_then_shows_the_pools() {
    let test = "behind_a_token_the_page_asks_for_it_and_then_shows_the_pools";
    let Some(binary) = chromium(test) else {
        return;
    };
    let config = format!(
        "[server]\ntoken_env = \"KENNEL_PAGE_TOKEN\"\n{}",
        web_and_batch("200ms")
    );
    let server = Server::start(
        "page-token",
        &config,
        &LISTEN,
        &[("KENNEL_PAGE_TOKEN", "s3cret")],
        Stderr::Collected,
    );
    server.wait_count("batch", "idle", 1, &BEARER);
    let chrome = Chromium::launch(&binary, "page-token").await;
    let url = format!("http://{}/", server.addr);
    let page = chrome
        .browser
        .new_page(url.as_str())
        .await
        .expect("the page loads");
    wait_for(
        &page,
        "the token form",
        "!document.getElementById('auth').hidden",
    )
    .await;
    let pools = eval(&page, "document.querySelectorAll('section.pool').length").await;
    assert_eq!(pools, 0, "no pool is shown without the token");
    eval(
        &page,
        "document.getElementById('token').value = 's3cret'; document.getElementById('auth').requestSubmit(); true",
    )
    .await;
    let names = wait_for(
        &page,
        "both pools",
        "document.querySelectorAll('section.pool').length === 2 && [...document.querySelectorAll('section.pool')].map(s => s.dataset.pool)",
    )
    .await;
    assert_eq!(names, serde_json::json!(["batch", "demo"]));
    wait_for(
        &page,
        "a live event stream",
        "document.getElementById('conn').dataset.state === 'live'",
    )
    .await;
    chrome.close().await;
    assert!(server.stop());
}

#[test]
fn docs_keep_a_screenshot_of_the_status_page() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/img/status.png");
    let png = std::fs::read(&docs)
        .expect("docs/img/status.png (KENNEL_SCREENSHOT=docs cargo test --test status_page)");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
}
