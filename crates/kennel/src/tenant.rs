//! Callers that share a pool: [`Tenant`], its [`TenantShare`] (weight and
//! limits) and a job's [`Priority`] within its tenant.
//!
//! When workers are scarce, the next free one goes to the tenant furthest
//! below its share (start-time fair queuing over the jobs granted, a key's
//! load counted as the job times it takes); within a tenant, to the
//! priority level furthest below its share (levels weigh 1, 4 and 16); within
//! a level, to the oldest job. The rules are in the pool's docs.

use std::fmt;
use std::sync::Arc;

/// The longest tenant name, in bytes.
pub const MAX_TENANT_LEN: usize = 64;

/// The most a tenant's [`TenantShare::weight`] may be.
pub const MAX_WEIGHT: u32 = 1000;

/// A caller that shares the pool with others: its jobs get the pool's
/// workers in proportion to its [`TenantShare::weight`] when workers are
/// scarce.
///
/// A name of 1 to [`MAX_TENANT_LEN`] bytes of ASCII letters, digits, `.`,
/// `_` and `-`, so that it can name a metric's label or a config entry.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tenant(Arc<str>);

impl Tenant {
    /// Checks `name` and makes it a [`Tenant`].
    ///
    /// # Errors
    ///
    /// [`TenantError`] when it is empty, longer than [`MAX_TENANT_LEN`]
    /// bytes, or holds another character than those allowed; its text says
    /// which.
    pub fn new(name: &str) -> Result<Self, TenantError> {
        if name.is_empty() || name.len() > MAX_TENANT_LEN {
            return Err(TenantError(format!(
                "a tenant's name is 1 to {MAX_TENANT_LEN} bytes; this one is {}",
                name.len()
            )));
        }
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if let Some((at, c)) = name.char_indices().find(|(_, c)| !allowed(*c)) {
            return Err(TenantError(format!(
                "a tenant's name is ASCII letters, digits, `.`, `_` and `-`; byte {at} is {c:?}"
            )));
        }
        Ok(Self(name.into()))
    }

    /// The tenant's name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Tenant {
    type Err = TenantError;

    fn from_str(s: &str) -> Result<Self, TenantError> {
        Self::new(s)
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Tenant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Tenant {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Self::new(&s).map_err(serde::de::Error::custom)
    }
}

/// A tenant name that breaks the rules of [`Tenant::new`], with what rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TenantError(String);

/// A tenant's share of one pool: its weight against the other tenants and
/// its limits there. A tenant the pool has no share for (and jobs with no
/// tenant) weighs 1, without limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(default, deny_unknown_fields)
)]
#[non_exhaustive]
pub struct TenantShare {
    /// Its weight, 1 to [`MAX_WEIGHT`]: while several tenants have jobs
    /// waiting, each gets workers in proportion to its weight.
    pub weight: u32,
    /// The most of its jobs that may wait here at once; one more is
    /// refused with [`Error::TenantLimit`](crate::Error::TenantLimit).
    pub max_queued: Option<usize>,
    /// The most of its jobs that may hold workers here at once; its other
    /// jobs wait, and free workers go to other tenants meanwhile.
    pub max_running: Option<usize>,
}

impl Default for TenantShare {
    fn default() -> Self {
        Self {
            weight: 1,
            max_queued: None,
            max_running: None,
        }
    }
}

impl TenantShare {
    /// A share of `weight`, without limits.
    pub fn weight(weight: u32) -> Self {
        Self {
            weight,
            ..Self::default()
        }
    }

    /// At most `n` jobs waiting at once.
    pub fn max_queued(mut self, n: usize) -> Self {
        self.max_queued = Some(n);
        self
    }

    /// At most `n` jobs holding workers at once.
    pub fn max_running(mut self, n: usize) -> Self {
        self.max_running = Some(n);
        self
    }

    /// Checks the weight's range (the limits take any value; 0 refuses
    /// every job).
    pub(crate) fn check(&self) -> Result<(), String> {
        if (1..=MAX_WEIGHT).contains(&self.weight) {
            Ok(())
        } else {
            Err(format!(
                "a weight is 1 to {MAX_WEIGHT}; this one is {}",
                self.weight
            ))
        }
    }
}

/// One tenant's jobs in a pool now ([`Pool::tenants`](crate::Pool::tenants)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TenantLoad {
    /// The tenant (`None`: jobs without one).
    pub tenant: Option<Tenant>,
    /// Its jobs waiting for a worker.
    pub waiting: usize,
    /// Its jobs holding workers.
    pub running: usize,
}

/// A job's priority within its tenant. While several levels have jobs
/// waiting, each gets workers in proportion to its weight (`Low` 1,
/// `Normal` 4, `High` 16): a higher level goes first nearly always, and a
/// lower one still moves. The bound on starvation: the oldest waiting `Low`
/// job waits behind at most 17 `High` grants of its tenant in a row (`Low`
/// gets 1 in 17 of them), 22 with `Normal` jobs waiting too (1 in 21);
/// `Normal` behind `High`, at most 5 (1 in 5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
pub enum Priority {
    /// Batch work: whatever the higher levels leave.
    Low,
    /// The default.
    #[default]
    Normal,
    /// Interactive work: first, nearly always.
    High,
}

impl Priority {
    /// Every level, lowest first.
    pub const ALL: [Self; 3] = [Self::Low, Self::Normal, Self::High];

    /// The level's weight against the tenant's other levels.
    pub(crate) fn weight(self) -> f64 {
        match self {
            Self::Low => 1.0,
            Self::Normal => 4.0,
            Self::High => 16.0,
        }
    }

    /// Its index in [`Priority::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// Its name, as a header or a config spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Normal => "normal",
            Self::High => "high",
        }
    }
}

impl std::str::FromStr for Priority {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| format!("a priority is `low`, `normal` or `high`, not {s:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_name_is_a_safe_label() {
        assert_eq!(Tenant::new("team-a.v2_x").unwrap().as_str(), "team-a.v2_x");
        assert!(Tenant::new("").is_err());
        assert!(Tenant::new(&"a".repeat(MAX_TENANT_LEN)).is_ok());
        assert!(Tenant::new(&"a".repeat(MAX_TENANT_LEN + 1)).is_err());
        let bad = Tenant::new("a b").unwrap_err();
        assert!(bad.to_string().contains("byte 1"), "{bad}");
        assert!(Tenant::new("a\"}").is_err());
    }

    #[test]
    fn a_priority_reads_its_name() {
        assert_eq!("high".parse::<Priority>(), Ok(Priority::High));
        assert!("urgent".parse::<Priority>().is_err());
        assert!(Priority::High > Priority::Low);
    }
}
