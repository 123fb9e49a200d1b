//! Who calls: the tenant a request's bearer token names (`[[tenant]]`), or
//! the service's own token, and the routes each may use.
//!
//! The token is the only thing that names a tenant: no header or body can
//! claim another. With tenants configured, every request but the probes,
//! the status page (and `/metrics` with `metrics_public`) carries the token
//! of a tenant or the service's own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::Method;
use kennel::{Priority, Tenant};

use crate::config::Config;
use crate::config::tenant::Routes;
use crate::error::ApiError;

/// The header that sets a job's priority within its tenant.
pub(crate) const PRIORITY_HEADER: &str = "kennel-priority";

/// The caller of one request, put in its extensions by the token check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    /// Its tenant; `None` for the service's own token (or no token set).
    pub(crate) tenant: Option<Tenant>,
    pub(crate) routes: Routes,
    /// Its `max_in_flight`, across every pool.
    pub(crate) max_in_flight: Option<usize>,
}

impl Caller {
    /// The service's own token, or a service without tokens.
    pub(crate) const OPERATOR: Self = Self {
        tenant: None,
        routes: Routes::All,
        max_in_flight: None,
    };

    /// Whether it may use the route `route` (a matched route's template)
    /// with `method`.
    pub(crate) fn may(&self, method: &Method, route: &str) -> bool {
        if self.routes == Routes::All {
            return true;
        }
        let post = *method == Method::POST;
        let jobs = (post && matches!(route, "/pools/{name}/jobs" | "/groups/{group}/jobs"))
            || route == "/mcp/{name}";
        let reads = *method == Method::GET
            && matches!(route, "/pools" | "/pools/{name}/stats" | "/openapi.json");
        jobs || reads
    }

    /// A tenant's job may not be stored to run later, nor go through a
    /// pool's JetStream queue: neither carries its tenant (403).
    pub(crate) fn refuse_detached(&self, what: &str) -> Result<(), ApiError> {
        match &self.tenant {
            Some(t) => Err(ApiError::Forbidden {
                message: format!(
                    "tenant {t} may not send {what}: it would run outside the tenant's share and limits (allowed: a job answered on this request)"
                ),
            }),
            None => Ok(()),
        }
    }

    /// The options of a job of `key` sent by this caller at `priority`.
    pub(crate) fn run_options(
        &self,
        key: Option<kennel::Key>,
        priority: Priority,
    ) -> kennel::RunOptions {
        let mut options = kennel::RunOptions::new().priority(priority);
        if let Some(key) = key {
            options = options.key(key);
        }
        if let Some(tenant) = &self.tenant {
            options = options.tenant(tenant.clone());
        }
        options
    }

    /// Refused a route: 403, naming the tenant and what it may use.
    pub(crate) fn refused(&self, route: &str) -> ApiError {
        let who = self.tenant.as_ref().map_or("(none)", Tenant::as_str);
        ApiError::Forbidden {
            message: format!(
                "tenant {who} may not use {route} (allowed: the job routes, /mcp/{{name}} and the reads of pools with `routes = \"jobs\"`, every route with `routes = \"all\"`)"
            ),
        }
    }
}

/// Each tenant's jobs in flight across every pool, for its `max_in_flight`:
/// the tenants with a job in flight only.
#[derive(Debug, Default)]
pub(crate) struct Flights(Mutex<HashMap<Tenant, usize>>);

/// One job of a tenant in flight; dropped, it is no longer.
#[derive(Debug)]
pub(crate) struct InFlight {
    flights: Arc<Flights>,
    tenant: Tenant,
}

/// A job refused for its tenant's `max_in_flight`.
#[derive(Debug)]
pub(crate) struct OverMaxInFlight {
    tenant: Tenant,
    max: usize,
}

impl OverMaxInFlight {
    pub(crate) fn tenant(&self) -> &Tenant {
        &self.tenant
    }

    /// 429 `tenant-limit`, with `wait` (the tenant's own projected wait in
    /// the pool) as `Retry-After`, 1 to 60 s.
    pub(crate) fn retry_in(self, wait: std::time::Duration) -> ApiError {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        ApiError::TenantLimit {
            message: format!(
                "tenant {} has {} jobs in flight, its `max_in_flight`; try again in {secs} s",
                self.tenant, self.max
            ),
            retry_after: secs.clamp(1, 60),
        }
    }
}

impl Flights {
    /// One more job of `caller` in flight, if its `max_in_flight` lets it (no
    /// guard for a caller without a tenant or a `max_in_flight`).
    pub(crate) fn enter(
        self: &Arc<Self>,
        caller: &Caller,
    ) -> Result<Option<InFlight>, OverMaxInFlight> {
        let (Some(tenant), Some(max)) = (&caller.tenant, caller.max_in_flight) else {
            return Ok(None);
        };
        let mut map = crate::lock(&self.0);
        let n = map.entry(tenant.clone()).or_default();
        if *n >= max {
            return Err(OverMaxInFlight {
                tenant: tenant.clone(),
                max,
            });
        }
        *n += 1;
        Ok(Some(InFlight {
            flights: Arc::clone(self),
            tenant: tenant.clone(),
        }))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut map = crate::lock(&self.flights.0);
        if let Some(n) = map.get_mut(&self.tenant) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.tenant);
            }
        }
    }
}

/// The tokens of the tenants.
#[derive(Debug, Default)]
pub(crate) struct Callers {
    by_token: Vec<(String, Caller)>,
}

impl Callers {
    /// The tenants of `config`, with their tokens read now.
    ///
    /// # Errors
    ///
    /// A tenant whose tokens cannot be read, or a token two callers share.
    pub(crate) fn of(config: &Config, operator: Option<&str>) -> Result<Self, String> {
        let mut by_token: Vec<(String, Caller)> = Vec::new();
        for t in &config.tenants {
            for token in t.tokens()? {
                let taken = operator == Some(token.as_str())
                    || by_token.iter().any(|(other, _)| *other == token);
                if taken {
                    return Err(format!(
                        "tenant {}: a token of its is also another caller's (allowed: a token each caller has alone)",
                        t.name
                    ));
                }
                let caller = Caller {
                    tenant: Some(t.name.clone()),
                    routes: t.routes,
                    max_in_flight: t.max_in_flight,
                };
                by_token.push((token, caller));
            }
        }
        Ok(Self { by_token })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_token.is_empty()
    }

    /// The caller whose token is `given`, compared in constant time with
    /// each.
    pub(crate) fn find(&self, given: &str) -> Option<&Caller> {
        let mut found = None;
        for (token, caller) in &self.by_token {
            if constant_time_eq(token.as_bytes(), given.as_bytes()) {
                found = Some(caller);
            }
        }
        found
    }
}

/// A job's priority, from its `Kennel-Priority` header (default normal).
///
/// # Errors
///
/// 400 `bad-request` for a value that is not `low`, `normal` or `high`.
pub(crate) fn priority(headers: &axum::http::HeaderMap) -> Result<Priority, ApiError> {
    let Some(value) = headers.get(PRIORITY_HEADER) else {
        return Ok(Priority::Normal);
    };
    let text = value.to_str().unwrap_or("");
    text.parse().map_err(|m: String| ApiError::BadRequest {
        message: format!("`Kennel-Priority`: {m}"),
    })
}

/// Sets each configured tenant's jobs waiting and running in each pool
/// (`kennel_tenant_jobs_waiting`, `kennel_tenant_jobs_running`): the
/// tenants a pool's options name, a closed set from the config.
pub(crate) fn record_loads(state: &crate::state::AppState) {
    let pools: Vec<_> = (state.pools().lock().iter())
        .map(|(name, e)| (name.clone(), e.pool.clone()))
        .collect();
    for (name, pool) in pools {
        let loads = pool.tenants();
        for tenant in pool.options().tenants.keys() {
            let load = loads.iter().find(|l| l.tenant.as_ref() == Some(tenant));
            let (waiting, running) = load.map_or((0, 0), |l| (l.waiting, l.running));
            let labels = [
                ("pool", name.clone()),
                ("tenant", tenant.as_str().to_owned()),
            ];
            metrics::gauge!("kennel_tenant_jobs_waiting", &labels).set(waiting as f64);
            metrics::gauge!("kennel_tenant_jobs_running", &labels).set(running as f64);
        }
    }
}

/// Counts a tenant's job by how it was answered (`kennel_tenant_jobs_total`):
/// `done` (2xx), `tenant-limit` (429) or `failed`.
pub(crate) fn count_job(caller: &Caller, pool: &str, status: axum::http::StatusCode) {
    let Some(tenant) = &caller.tenant else {
        return;
    };
    let outcome = match status.as_u16() {
        200..=299 => "done",
        429 => "tenant-limit",
        _ => "failed",
    };
    metrics::counter!(
        "kennel_tenant_jobs_total",
        "pool" => pool.to_owned(),
        "tenant" => tenant.as_str().to_owned(),
        "outcome" => outcome
    )
    .increment(1);
}

/// Compares without an early exit on the first differing byte.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
