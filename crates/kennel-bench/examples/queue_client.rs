//! The client of `bench/queue.sh`: publishes jobs to a JetStream subject
//! that queued kennel pools read, and gathers their answers (header
//! `Kennel-Reply-To`).
//!
//! ```text
//! queue_client drain URL SUBJECT N BODY      # N jobs at once; prints jobs/s
//! queue_client roundtrip URL SUBJECT N BODY  # one job after another; prints µs per job
//! ```

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

const LIMIT: Duration = Duration::from_secs(300);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, mode, url, subject, n, body] = args.as_slice() else {
        return Err("usage: queue_client drain|roundtrip URL SUBJECT N BODY".into());
    };
    let n: usize = n.parse()?;
    let client = async_nats::connect(url.as_str()).await?;
    let js = async_nats::jetstream::new(client.clone());
    let inbox = client.new_inbox();
    let mut answers = client.subscribe(inbox.clone()).await?;
    let tag = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos()
    );
    let job = |i: usize| {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("bench-{tag}-{i}"));
        headers.insert("Kennel-Reply-To", inbox.as_str());
        headers
    };
    match mode.as_str() {
        "drain" => {
            let started = Instant::now();
            let mut acks = Vec::with_capacity(n);
            for i in 0..n {
                acks.push(
                    js.publish_with_headers(subject.clone(), job(i), body.clone().into())
                        .await?,
                );
            }
            for ack in acks {
                ack.await?;
            }
            let mut seen: HashMap<String, usize> = HashMap::new();
            while seen.len() < n {
                let Ok(Some(m)) = tokio::time::timeout(LIMIT, answers.next()).await else {
                    return Err(format!("only {} of {n} answered", seen.len()).into());
                };
                let status = header(&m, "Kennel-Status");
                if status != "200" {
                    return Err(format!("an answer with status {status}").into());
                }
                *seen.entry(header(&m, "Kennel-Job-Id")).or_default() += 1;
            }
            let secs = started.elapsed().as_secs_f64();
            let duplicates: usize = seen.values().map(|c| c - 1).sum();
            #[allow(clippy::cast_precision_loss)]
            let rate = n as f64 / secs;
            println!("jobs={n} seconds={secs:.3} jobs_per_s={rate:.2} duplicates={duplicates}");
        }
        "roundtrip" => {
            let mut times = Vec::with_capacity(n);
            for i in 0..n {
                let t = Instant::now();
                js.publish_with_headers(subject.clone(), job(i), body.clone().into())
                    .await?
                    .await?;
                let Ok(Some(_)) = tokio::time::timeout(LIMIT, answers.next()).await else {
                    return Err("no answer".into());
                };
                times.push(t.elapsed());
            }
            times.sort();
            let mean = times.iter().sum::<Duration>() / u32::try_from(n)?;
            println!(
                "jobs={n} mean_us={} p50_us={} p99_us={}",
                mean.as_micros(),
                times[n / 2].as_micros(),
                times[n * 99 / 100].as_micros()
            );
        }
        other => return Err(format!("unknown mode {other}").into()),
    }
    Ok(())
}

fn header(m: &async_nats::Message, name: &str) -> String {
    let Ok(name) = name.parse::<async_nats::header::HeaderName>() else {
        return String::new();
    };
    m.headers
        .as_ref()
        .and_then(|h| h.get(name))
        .map(|v| v.as_str().to_owned())
        .unwrap_or_default()
}
