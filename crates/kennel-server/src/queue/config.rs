//! `[pool.queue]`: where a pool's jobs come from when it reads a NATS
//! JetStream work queue, and how each message is acknowledged
//! (docs/CONFIG.md, "`[pool.queue]`").

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::HumanDuration;

/// `ack_wait` when none is given.
pub(crate) const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(30);
/// The shortest `ack_wait`: in-progress acks go every third of it.
pub(crate) const MIN_ACK_WAIT: Duration = Duration::from_secs(1);
/// The longest `ack_wait`.
pub(crate) const MAX_ACK_WAIT: Duration = Duration::from_secs(12 * 3600);
/// `max_deliver` when none is given.
pub(crate) const DEFAULT_MAX_DELIVER: u32 = 5;
/// The most deliveries `max_deliver` may allow.
pub(crate) const MAX_MAX_DELIVER: u32 = 100;
/// `max_ack_pending` when none is given (JetStream's own default).
pub(crate) const DEFAULT_MAX_ACK_PENDING: u32 = 1000;
/// The largest `max_ack_pending`.
pub(crate) const MAX_MAX_ACK_PENDING: u32 = 1_000_000;
/// `nak_delay` when none is given.
pub(crate) const DEFAULT_NAK_DELAY: Duration = Duration::from_secs(1);
/// The longest wait before a message is delivered again (the doubling of
/// `nak_delay` stops here).
pub(crate) const MAX_NAK_DELAY: Duration = Duration::from_secs(60);
/// `reply_timeout` when none is given.
pub(crate) const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(300);

/// `[pool.queue]`: the pool takes its jobs from a JetStream stream through
/// a durable pull consumer that every instance of the service shares.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub(crate) struct QueueConfig {
    /// `nats`: the server's URL (`"nats://host:4222"`), or several
    /// separated by commas.
    pub nats: String,
    /// `stream`: the JetStream stream that holds the jobs.
    pub stream: String,
    /// `subject`: the subject jobs are published to (no wildcard); the
    /// consumer reads only it.
    pub subject: String,
    /// `durable`: the durable consumer's name (default: the pool's name).
    #[serde(default)]
    pub durable: Option<String>,
    /// `ack_wait`: how long a delivered message may go without an ack (or an
    /// in-progress ack) before JetStream delivers it again.
    #[serde(default = "default_ack_wait")]
    pub ack_wait: HumanDuration,
    /// `max_deliver`: the most times one message is delivered; a job whose
    /// last delivery fails again is answered with its error and terminated.
    #[serde(default = "default_max_deliver")]
    pub max_deliver: u32,
    /// `max_ack_pending`: the most messages delivered and not yet acked,
    /// over every instance.
    #[serde(default = "default_max_ack_pending")]
    pub max_ack_pending: u32,
    /// `nak_delay`: the wait before a job whose worker crashed is delivered
    /// again; it doubles with each delivery, up to one minute.
    #[serde(default = "default_nak_delay")]
    pub nak_delay: HumanDuration,
    /// `result_subject`: where results go for messages that name no reply
    /// subject of their own (header `Kennel-Reply-To`).
    #[serde(default)]
    pub result_subject: Option<String>,
    /// `reply_timeout`: how long `POST /pools/{name}/jobs` waits for the
    /// result of the job it published.
    #[serde(default = "default_reply_timeout")]
    pub reply_timeout: HumanDuration,
    /// `create`: create the stream (work-queue retention, file storage) when
    /// it does not exist (default true).
    #[serde(default = "yes")]
    pub create: bool,
    /// `job_meta`: add `"_kennel": {"id", "delivery"}` to each job that is a
    /// JSON object, for a worker that dedupes (default true).
    #[serde(default = "yes")]
    pub job_meta: bool,
    /// `token_env`: the name of an environment variable holding the NATS
    /// token.
    #[serde(default)]
    pub token_env: Option<String>,
    /// `creds_file`: a NATS credentials file (JWT and NKey seed).
    #[serde(default)]
    pub creds_file: Option<PathBuf>,
}

fn default_ack_wait() -> HumanDuration {
    HumanDuration(DEFAULT_ACK_WAIT)
}
fn default_max_deliver() -> u32 {
    DEFAULT_MAX_DELIVER
}
fn default_max_ack_pending() -> u32 {
    DEFAULT_MAX_ACK_PENDING
}
fn default_nak_delay() -> HumanDuration {
    HumanDuration(DEFAULT_NAK_DELAY)
}
fn default_reply_timeout() -> HumanDuration {
    HumanDuration(DEFAULT_REPLY_TIMEOUT)
}
fn yes() -> bool {
    true
}

impl QueueConfig {
    /// A queue with the required keys and every other at its default (the
    /// defaults of its serde attributes).
    #[cfg(test)]
    pub(crate) fn new(nats: &str, stream: &str, subject: &str) -> Self {
        let keys = serde_json::json!({ "nats": nats, "stream": stream, "subject": subject });
        serde_json::from_value(keys).expect("the required keys are a queue")
    }

    /// The durable consumer's name: `durable`, else the pool's name.
    pub(crate) fn durable_name<'a>(&'a self, pool: &'a str) -> &'a str {
        self.durable.as_deref().unwrap_or(pool)
    }

    /// How often an in-progress ack goes while a job runs: a third of
    /// `ack_wait`, so that two may be lost before JetStream gives up.
    pub(crate) fn progress_every(&self) -> Duration {
        self.ack_wait.0 / 3
    }

    /// The wait before delivery number `delivered + 1`: `nak_delay`
    /// doubled for each delivery after the first, at most one minute.
    pub(crate) fn nak_delay_after(&self, delivered: u64) -> Duration {
        let doublings = u32::try_from(delivered.saturating_sub(1).min(16)).unwrap_or(16);
        self.nak_delay
            .0
            .saturating_mul(1 << doublings)
            .min(MAX_NAK_DELAY)
    }

    /// What `kennel check` prints of the queue, one line per item.
    pub(crate) fn describe(&self, pool: &str) -> Vec<String> {
        let created = if self.create {
            " (created if missing)"
        } else {
            ""
        };
        let mut lines = vec![
            format!("queue           {}", self.nats),
            format!("  stream        {}{created}", self.stream),
            format!("  subject       {}", self.subject),
            format!("  durable       {}", self.durable_name(pool)),
            format!(
                "  ack_wait      {} (in-progress acks every {})",
                self.ack_wait,
                humantime::format_duration(self.progress_every())
            ),
            format!(
                "  max_deliver   {}, nak_delay {} doubling",
                self.max_deliver, self.nak_delay
            ),
        ];
        if let Some(s) = &self.result_subject {
            lines.push(format!("  results       {s}"));
        }
        lines
    }

    /// Checks every key; `pool` is the pool's name, for the durable's
    /// default. A refusal is the key (under `queue.`) and what is allowed.
    ///
    /// # Errors
    ///
    /// The first key out of range.
    pub(crate) fn validate(&self, pool: &str) -> Result<(), (String, String)> {
        let at = |k: &str| format!("queue.{k}");
        check_urls(&self.nats).map_err(|m| (at("nats"), m))?;
        check_js_name(&self.stream).map_err(|m| (at("stream"), m))?;
        check_subject(&self.subject).map_err(|m| (at("subject"), m))?;
        if let Some(d) = &self.durable {
            check_js_name(d).map_err(|m| (at("durable"), m))?;
        } else {
            check_js_name(pool).map_err(|m| {
                (
                    at("durable"),
                    format!("the pool's name cannot name the consumer: {m}; set `durable`"),
                )
            })?;
        }
        let range = |key: &str, d: HumanDuration, lo: Duration, hi: Duration| {
            if d.0 < lo || d.0 > hi {
                Err((
                    at(key),
                    format!(
                        "{d} is out of range (allowed: {} to {})",
                        humantime::format_duration(lo),
                        humantime::format_duration(hi)
                    ),
                ))
            } else {
                Ok(())
            }
        };
        range("ack_wait", self.ack_wait, MIN_ACK_WAIT, MAX_ACK_WAIT)?;
        range("nak_delay", self.nak_delay, Duration::ZERO, MAX_NAK_DELAY)?;
        range(
            "reply_timeout",
            self.reply_timeout,
            Duration::from_millis(1),
            kennel::MAX_DURATION,
        )?;
        for (key, n, max) in [
            ("max_deliver", self.max_deliver, MAX_MAX_DELIVER),
            ("max_ack_pending", self.max_ack_pending, MAX_MAX_ACK_PENDING),
        ] {
            if !(1..=max).contains(&n) {
                return Err((
                    at(key),
                    format!("{n} is out of range (allowed: 1 to {max})"),
                ));
            }
        }
        if let Some(s) = &self.result_subject {
            check_subject(s).map_err(|m| (at("result_subject"), m))?;
        }
        if let Some(v) = &self.token_env {
            crate::config::check_env_name(v).map_err(|m| (at("token_env"), m))?;
        }
        if let Some(f) = &self.creds_file
            && !f.is_file()
        {
            return Err((
                at("creds_file"),
                format!(
                    "{} is not a file (allowed: a NATS credentials file, relative to the config file's directory)",
                    f.display()
                ),
            ));
        }
        Ok(())
    }
}

/// Each comma-separated part must be a NATS server address.
fn check_urls(urls: &str) -> Result<(), String> {
    let allowed = "allowed: \"nats://host:4222\", \"tls://host:4222\" or \"host:4222\", several separated by commas";
    if urls.trim().is_empty() {
        return Err(format!("no server is named ({allowed})"));
    }
    for part in urls.split(',') {
        async_nats::ServerAddr::from_str(part.trim())
            .map_err(|e| format!("{:?} is not a server address: {e} ({allowed})", part.trim()))?;
    }
    Ok(())
}

/// A stream or consumer name: 1 to 64 ASCII letters, digits, `-` or `_`
/// (JetStream refuses `.`, `*`, `>`, spaces and path separators).
fn check_js_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a JetStream name (allowed: 1 to 64 ASCII letters, digits, '-' or '_')"
        ))
    }
}

/// A subject to publish to: dot-separated tokens of printable ASCII, none
/// empty, no wildcard (`*`, `>`), at most 255 bytes.
pub(crate) fn is_subject(subject: &str) -> bool {
    !subject.is_empty()
        && subject.len() <= 255
        && subject.split('.').all(|t| {
            !t.is_empty()
                && t.bytes()
                    .all(|b| b.is_ascii_graphic() && b != b'*' && b != b'>')
        })
}

fn check_subject(subject: &str) -> Result<(), String> {
    if is_subject(subject) {
        Ok(())
    } else {
        Err(format!(
            "{subject:?} is not a subject to publish to (allowed: dot-separated tokens of printable ASCII, none empty and none a wildcard, up to 255 characters, such as \"kennel.jobs.echo\")"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> QueueConfig {
        QueueConfig::new("nats://127.0.0.1:4222", "KENNEL", "kennel.jobs.echo")
    }

    #[test]
    fn the_defaults_are_valid_and_the_durable_is_the_pools_name() {
        let q = queue();
        q.validate("echo").unwrap();
        assert_eq!(q.durable_name("echo"), "echo");
        assert_eq!(q.progress_every(), Duration::from_secs(10));
    }

    #[test]
    fn the_nak_delay_doubles_per_delivery_up_to_a_minute() {
        let q = queue();
        let delays: Vec<u64> = (1..=8).map(|d| q.nak_delay_after(d).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(q.nak_delay_after(u64::MAX), MAX_NAK_DELAY);
    }

    #[test]
    fn a_subject_with_a_wildcard_or_an_empty_token_is_refused_naming_the_key() {
        for bad in ["a.*", "a.>", "a..b", "", "a b", ".a"] {
            let mut q = queue();
            q.subject = bad.into();
            let (key, message) = q.validate("echo").unwrap_err();
            assert_eq!(key, "queue.subject", "{bad:?}");
            assert!(message.contains("allowed:"), "{message}");
        }
    }

    #[test]
    fn out_of_range_values_name_the_key_and_the_range() {
        let mut q = queue();
        q.ack_wait = HumanDuration(Duration::from_millis(10));
        assert_eq!(
            q.validate("echo").unwrap_err(),
            (
                "queue.ack_wait".into(),
                "10ms is out of range (allowed: 1s to 12h)".into()
            )
        );
        let mut q = queue();
        q.max_deliver = 0;
        assert_eq!(q.validate("echo").unwrap_err().0, "queue.max_deliver");
        let mut q = queue();
        q.stream = "a.b".into();
        assert_eq!(q.validate("echo").unwrap_err().0, "queue.stream");
        let mut q = queue();
        q.nats = "http://127.0.0.1:4222".into();
        assert_eq!(q.validate("echo").unwrap_err().0, "queue.nats");
        assert!(
            queue()
                .validate("bad.name")
                .unwrap_err()
                .1
                .contains("set `durable`")
        );
    }

    #[test]
    fn a_queue_with_its_three_required_keys_takes_every_default() {
        let text = "[[pool]]\nname = \"echo\"\nargv = [\"cat\"]\n\n[pool.queue]\nnats = \"nats://127.0.0.1:4222\"\nstream = \"JOBS\"\nsubject = \"jobs.echo\"\n";
        let config =
            crate::config::Config::parse(text, &crate::config::Source::inline("test.toml"))
                .unwrap();
        let queue = config.pools[0].queue.clone().unwrap();
        assert_eq!(
            queue,
            QueueConfig::new("nats://127.0.0.1:4222", "JOBS", "jobs.echo")
        );
        assert_eq!(queue.durable_name("echo"), "echo");
        assert_eq!(queue.ack_wait.0, Duration::from_secs(30));
        assert_eq!(queue.max_deliver, 5);
        assert!(queue.create && queue.job_meta);
    }
}
