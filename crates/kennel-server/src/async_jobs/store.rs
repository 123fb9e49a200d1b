//! The store of asynchronous jobs: one SQLite file (`rusqlite`, its bundled
//! library) in the server's `state_dir`, written before a job is answered
//! 202, so that a `kill -9` of kennel loses no accepted job.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobState {
    /// Accepted, waiting for a worker.
    Queued,
    /// A worker has it.
    Running,
    /// The worker replied; its reply is the result.
    Done,
    /// It failed (its error is kept).
    Failed,
    /// Cancelled by `DELETE /jobs/{id}`.
    Cancelled,
}

impl JobState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    pub(crate) fn parse(s: &str) -> Self {
        match s {
            "queued" => Self::Queued,
            "running" => Self::Running,
            "done" => Self::Done,
            "cancelled" => Self::Cancelled,
            _ => Self::Failed,
        }
    }

    /// Whether it is over.
    pub(crate) fn is_final(self) -> bool {
        matches!(self, Self::Done | Self::Failed | Self::Cancelled)
    }
}

/// One job as stored.
#[derive(Debug, Clone)]
pub(crate) struct JobRecord {
    pub(crate) id: String,
    pub(crate) pool: String,
    pub(crate) key: Option<String>,
    pub(crate) body: Vec<u8>,
    pub(crate) state: JobState,
    pub(crate) attempts: u32,
    pub(crate) created_ms: i64,
    pub(crate) started_ms: Option<i64>,
    pub(crate) finished_ms: Option<i64>,
    /// The worker's reply as it wrote it (done).
    pub(crate) result: Option<Vec<u8>>,
    /// The error's body, JSON (failed, cancelled).
    pub(crate) error: Option<String>,
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The store. Cheap to clone; each call takes the connection for one
/// statement or transaction (SQLite's own lock makes a second server on the
/// same file wait, and the server's lock file keeps it out).
#[derive(Clone)]
pub(crate) struct Store {
    conn: Arc<Mutex<Connection>>,
}

/// What opening the store or a statement failed on, in words.
pub(crate) type StoreError = String;

#[allow(clippy::needless_pass_by_value)] // used as `map_err(fail)`
fn fail(e: rusqlite::Error) -> StoreError {
    format!("the job store failed: {e}")
}

impl Store {
    /// Opens (or creates) `dir/jobs.sqlite3`.
    pub(crate) fn open(dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create the state directory {}: {e}", dir.display()))?;
        let conn = Connection::open(dir.join("jobs.sqlite3")).map_err(fail)?;
        // WAL, and every commit synced: an accepted job survives a crash of
        // kennel and of the machine.
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = FULL;
             PRAGMA busy_timeout = 5000;
             CREATE TABLE IF NOT EXISTS jobs (
                 id TEXT PRIMARY KEY,
                 pool TEXT NOT NULL,
                 key TEXT,
                 idempotency TEXT,
                 body BLOB NOT NULL,
                 state TEXT NOT NULL,
                 attempts INTEGER NOT NULL DEFAULT 0,
                 created_ms INTEGER NOT NULL,
                 started_ms INTEGER,
                 finished_ms INTEGER,
                 result BLOB,
                 error TEXT
             );
             CREATE UNIQUE INDEX IF NOT EXISTS jobs_idempotency
                 ON jobs (pool, idempotency) WHERE idempotency IS NOT NULL;
             CREATE INDEX IF NOT EXISTS jobs_queued ON jobs (pool, state, created_ms);",
        )
        .map_err(fail)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores a new queued job, or, with an `idempotency` key already used
    /// on `pool`, returns that job's id instead: `(id, new)`.
    pub(crate) fn accept(
        &self,
        pool: &str,
        key: Option<&str>,
        idempotency: Option<&str>,
        body: &[u8],
        max_jobs: usize,
    ) -> Result<Option<(String, bool)>, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(fail)?;
        if let Some(idem) = idempotency {
            let found: Option<String> = tx
                .query_row(
                    "SELECT id FROM jobs WHERE pool = ?1 AND idempotency = ?2",
                    params![pool, idem],
                    |row| row.get(0),
                )
                .optional()
                .map_err(fail)?;
            if let Some(id) = found {
                return Ok(Some((id, false)));
            }
        }
        let count: i64 = tx
            .query_row("SELECT count(*) FROM jobs", [], |row| row.get(0))
            .map_err(fail)?;
        if usize::try_from(count).unwrap_or(usize::MAX) >= max_jobs {
            return Ok(None);
        }
        let id = format!("{:032x}", rand::random::<u128>());
        tx.execute(
            "INSERT INTO jobs (id, pool, key, idempotency, body, state, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, 'queued', ?6)",
            params![id, pool, key, idempotency, body, now_ms()],
        )
        .map_err(fail)?;
        tx.commit().map_err(fail)?;
        Ok(Some((id, true)))
    }

    /// The job `id`.
    pub(crate) fn get(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        self.conn()
            .query_row(
                "SELECT id, pool, key, body, state, attempts, created_ms, started_ms,
                        finished_ms, result, error FROM jobs WHERE id = ?1",
                params![id],
                |row| {
                    Ok(JobRecord {
                        id: row.get(0)?,
                        pool: row.get(1)?,
                        key: row.get(2)?,
                        body: row.get(3)?,
                        state: JobState::parse(&row.get::<_, String>(4)?),
                        attempts: row.get(5)?,
                        created_ms: row.get(6)?,
                        started_ms: row.get(7)?,
                        finished_ms: row.get(8)?,
                        result: row.get(9)?,
                        error: row.get(10)?,
                    })
                },
            )
            .optional()
            .map_err(fail)
    }

    /// Takes the oldest queued job of `pool`: it is running from now on,
    /// one attempt more.
    pub(crate) fn take_next(&self, pool: &str) -> Result<Option<JobRecord>, StoreError> {
        let id: Option<String> = {
            let conn = self.conn();
            conn.query_row(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1, started_ms = ?2
                     WHERE id = (SELECT id FROM jobs WHERE pool = ?1 AND state = 'queued'
                                 ORDER BY created_ms, rowid LIMIT 1)
                     RETURNING id",
                params![pool, now_ms()],
                |row| row.get(0),
            )
            .optional()
            .map_err(fail)?
        };
        match id {
            Some(id) => self.get(&id),
            None => Ok(None),
        }
    }

    /// Ends a job that is not over yet as `state` with its `result` or
    /// `error`; `false` when it was over already (a cancel came first).
    pub(crate) fn finish(
        &self,
        id: &str,
        state: JobState,
        result: Option<&[u8]>,
        error: Option<&str>,
    ) -> Result<bool, StoreError> {
        let changed = self
            .conn()
            .execute(
                "UPDATE jobs SET state = ?2, result = ?3, error = ?4, finished_ms = ?5
                 WHERE id = ?1 AND state IN ('queued', 'running')",
                params![id, state.as_str(), result, error, now_ms()],
            )
            .map_err(fail)?;
        Ok(changed == 1)
    }

    /// At start: every job that was running when kennel stopped goes back
    /// to the queue where `rerun(pool)` says its jobs may run twice, and is
    /// failed `interrupted` elsewhere. Returns how many of each.
    pub(crate) fn recover(
        &self,
        rerun: impl Fn(&str) -> bool,
    ) -> Result<(usize, usize), StoreError> {
        let running: Vec<(String, String)> = {
            let conn = self.conn();
            let mut stmt = conn
                .prepare("SELECT id, pool FROM jobs WHERE state = 'running'")
                .map_err(fail)?;
            let rows = stmt
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                .map_err(fail)?;
            rows.collect::<Result<_, _>>().map_err(fail)?
        };
        let (mut again, mut failed) = (0, 0);
        let error = serde_json::json!({
            "error": "interrupted",
            "message": "kennel stopped while the job ran, and its pool does not say its jobs may run twice (retry_on_crash)",
        })
        .to_string();
        for (id, pool) in running {
            if rerun(&pool) {
                self.conn()
                    .execute(
                        "UPDATE jobs SET state = 'queued' WHERE id = ?1",
                        params![id],
                    )
                    .map_err(fail)?;
                again += 1;
            } else {
                self.finish(&id, JobState::Failed, None, Some(&error))?;
                failed += 1;
            }
        }
        Ok((again, failed))
    }

    /// The pools with queued jobs.
    pub(crate) fn pools_with_queued(&self) -> Result<Vec<String>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare("SELECT DISTINCT pool FROM jobs WHERE state = 'queued'")
            .map_err(fail)?;
        let rows = stmt.query_map([], |row| row.get(0)).map_err(fail)?;
        rows.collect::<Result<_, _>>().map_err(fail)
    }

    /// Forgets the jobs that ended more than `ttl` ago; how many.
    pub(crate) fn expire(&self, ttl: Duration) -> Result<usize, StoreError> {
        let before = now_ms() - i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        self.conn()
            .execute(
                "DELETE FROM jobs WHERE finished_ms IS NOT NULL AND finished_ms < ?1",
                params![before],
            )
            .map_err(fail)
    }
}
