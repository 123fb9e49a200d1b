//! Fair shares of the pool's workers: between tenants by their weights, and
//! within a tenant between priority levels (ADR 0065).
//!
//! Start-time fair queuing, counted in jobs: each tenant has a tag, the
//! virtual time of its next job; the next free worker goes to the waiting
//! job of the tenant with the lowest tag, and a grant moves the tenant's tag
//! on by its cost over its weight (a job costs 1, a job whose worker loads a
//! key for it 1 more for each job time the load takes). A tenant that starts
//! waiting takes at least the tag of the last grant, so it cannot bank the
//! time it was idle: an idle tenant's share goes to the others (work
//! conserving), and a returning tenant goes first only by what it is owed
//! now. The same rule, one level down, orders a tenant's priority levels.

use std::collections::{BTreeMap, HashMap};

use crate::tenant::{Priority, Tenant, TenantShare};

/// Whose a job is and how urgent, within its tenant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Class {
    pub(crate) tenant: Option<Tenant>,
    pub(crate) priority: Priority,
}

/// What one tenant has had, and has now.
#[derive(Debug, Clone, Default)]
struct Account {
    /// The start tag of its next job.
    tag: f64,
    /// Per level (lowest first), the start tag of the level's next job.
    levels: [f64; 3],
    /// The tag of the level it was last granted for.
    level_now: f64,
    /// Its jobs holding workers.
    running: usize,
    /// Its jobs waiting, per level.
    waiting: [usize; 3],
}

impl Account {
    fn idle(&self) -> bool {
        self.running == 0 && self.waiting.iter().all(|&w| w == 0)
    }
}

/// The accounts of the tenants with jobs waiting or running, or with more
/// than their share lately, and the table of shares the pool was given.
#[derive(Debug, Default)]
pub(crate) struct Shares {
    accounts: HashMap<Option<Tenant>, Account>,
    /// The tag of the last grant: the virtual time now.
    now: f64,
    table: BTreeMap<Tenant, TenantShare>,
}

impl Shares {
    /// Takes the pool's table of shares (at build and at each reconfigure):
    /// weights apply from the next grant, limits from the next job.
    pub(crate) fn set_table(&mut self, table: &BTreeMap<Tenant, TenantShare>) {
        self.table.clone_from(table);
    }

    /// The share of `tenant`: its own, or weight 1 without limits.
    pub(crate) fn share(&self, tenant: Option<&Tenant>) -> TenantShare {
        tenant
            .and_then(|t| self.table.get(t))
            .copied()
            .unwrap_or_default()
    }

    fn account(&mut self, tenant: &Option<Tenant>) -> &mut Account {
        let now = self.now;
        self.accounts
            .entry(tenant.clone())
            .or_insert_with(|| Account {
                tag: now,
                levels: [now; 3],
                level_now: now,
                ..Account::default()
            })
    }

    /// Whether one more job of `tenant` may wait (its `max_queued`).
    pub(crate) fn may_queue(&self, tenant: Option<&Tenant>) -> bool {
        let waiting = self
            .accounts
            .get(&tenant.cloned())
            .map_or(0, |a| a.waiting.iter().sum());
        self.share(tenant)
            .max_queued
            .is_none_or(|max| waiting < max)
    }

    /// Whether one more job of `tenant` may hold a worker (its
    /// `max_running`).
    pub(crate) fn may_run(&self, tenant: Option<&Tenant>) -> bool {
        let running = self.accounts.get(&tenant.cloned()).map_or(0, |a| a.running);
        self.share(tenant)
            .max_running
            .is_none_or(|max| running < max)
    }

    /// A job of `class` starts waiting. A tenant (a level) that had none
    /// waiting takes at least the virtual time now: it cannot bank the time
    /// it was idle.
    pub(crate) fn arrive(&mut self, class: &Class) {
        let l = class.priority.index();
        let a = self.catch_up(class);
        a.waiting[l] += 1;
    }

    /// The account of `class`'s tenant, its tag (and its level's) moved up
    /// to the virtual time now if none of its jobs (of that level) waits.
    fn catch_up(&mut self, class: &Class) -> &mut Account {
        let now = self.now;
        let a = self.account(&class.tenant);
        if a.waiting.iter().all(|&w| w == 0) {
            a.tag = a.tag.max(now);
        }
        let l = class.priority.index();
        if a.waiting[l] == 0 {
            a.levels[l] = a.levels[l].max(a.level_now);
        }
        a
    }

    /// A job of `class` stops waiting (it got a worker, or gave up).
    pub(crate) fn leave(&mut self, class: &Class) {
        if let Some(a) = self.accounts.get_mut(&class.tenant) {
            let w = &mut a.waiting[class.priority.index()];
            *w = w.saturating_sub(1);
        }
        self.forget_if_idle(&class.tenant);
    }

    /// A job of `class` got a worker, at `cost` jobs; `waited` says whether
    /// it came from the queue (else it takes the virtual time now first, as
    /// a job that starts waiting does).
    pub(crate) fn grant(&mut self, class: &Class, cost: f64, waited: bool) {
        let weight = f64::from(self.share(class.tenant.as_ref()).weight);
        let a = if waited {
            self.account(&class.tenant)
        } else {
            self.catch_up(class)
        };
        let start = a.tag;
        a.tag += cost / weight;
        let l = class.priority.index();
        a.level_now = a.levels[l];
        a.levels[l] += cost / class.priority.weight();
        a.running += 1;
        self.now = self.now.max(start);
    }

    /// A job of `tenant` gave its worker back.
    pub(crate) fn release(&mut self, tenant: &Option<Tenant>) {
        if let Some(a) = self.accounts.get_mut(tenant) {
            a.running = a.running.saturating_sub(1);
        }
        self.forget_if_idle(tenant);
    }

    /// An account with nothing waiting or running and no more than its
    /// share is the same as a new one: drop it (the map holds only tenants
    /// that are busy or ahead).
    fn forget_if_idle(&mut self, tenant: &Option<Tenant>) {
        let now = self.now;
        if self
            .accounts
            .get(tenant)
            .is_some_and(|a| a.idle() && a.tag <= now)
        {
            self.accounts.remove(tenant);
        }
    }

    /// Whether `other` is owed against `tenant`: its tag is not above
    /// `tenant`'s (it has had no more than its share lately).
    pub(crate) fn owed(&self, other: Option<&Tenant>, tenant: Option<&Tenant>) -> bool {
        let tag = |t: Option<&Tenant>| self.accounts.get(&t.cloned()).map_or(self.now, |a| a.tag);
        tag(other) <= tag(tenant)
    }

    /// Where a waiting job of `class` stands: lower goes first (its
    /// tenant's tag, its level's tag within the tenant, then the higher
    /// level).
    pub(crate) fn rank(&self, class: &Class) -> (f64, f64, std::cmp::Reverse<Priority>) {
        let a = self.accounts.get(&class.tenant);
        let l = class.priority.index();
        (
            a.map_or(self.now, |a| a.tag),
            a.map_or(self.now, |a| a.levels[l]),
            std::cmp::Reverse(class.priority),
        )
    }

    /// The order in which `jobs` (waiting, oldest first) would get workers
    /// if each cost one job: the keyed lending order walks them in it.
    pub(crate) fn order<'a>(&self, jobs: impl Iterator<Item = (u64, &'a Class)>) -> Vec<u64> {
        // Each class's jobs, oldest first, and each tenant's tags as they
        // would move.
        let mut classes: Vec<(&Class, std::collections::VecDeque<u64>)> = Vec::new();
        for (id, class) in jobs {
            match classes.iter_mut().find(|(c, _)| *c == class) {
                Some((_, q)) => q.push_back(id),
                None => classes.push((class, [id].into())),
            }
        }
        let mut tags: HashMap<Option<Tenant>, (f64, [f64; 3])> = HashMap::new();
        for (class, _) in &classes {
            let a = self.accounts.get(&class.tenant);
            tags.entry(class.tenant.clone())
                .or_insert_with(|| a.map_or((self.now, [self.now; 3]), |a| (a.tag, a.levels)));
        }
        let mut order = Vec::new();
        loop {
            let rank = |(c, q): &(&Class, std::collections::VecDeque<u64>)| {
                let (tag, levels) = tags[&c.tenant];
                let head = *q.front()?;
                Some((
                    tag,
                    levels[c.priority.index()],
                    std::cmp::Reverse(c.priority),
                    head,
                ))
            };
            let best = classes
                .iter()
                .enumerate()
                .filter_map(|(i, c)| rank(c).map(|r| (r, i)))
                .min_by(|(a, _), (b, _)| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
            let Some((_, i)) = best else {
                return order;
            };
            let (class, q) = &mut classes[i];
            order.extend(q.pop_front());
            let weight = f64::from(self.share(class.tenant.as_ref()).weight);
            let t = tags.get_mut(&class.tenant).expect("every class has tags");
            t.0 += 1.0 / weight;
            t.1[class.priority.index()] += 1.0 / class.priority.weight();
        }
    }

    /// How long a job of `tenant` would wait now, at `mean` seconds a job
    /// on `capacity` workers: its jobs waiting, over its part of the
    /// workers (its weight among the busy tenants, at most its
    /// `max_running`).
    pub(crate) fn projected(&self, tenant: Option<&Tenant>, mean: f64, capacity: usize) -> f64 {
        let own = self.share(tenant);
        let busy: f64 = self
            .accounts
            .iter()
            .filter(|(t, a)| !a.idle() && t.as_ref() != tenant)
            .map(|(t, _)| f64::from(self.share(t.as_ref()).weight))
            .sum();
        let weight = f64::from(own.weight);
        let mut workers = capacity as f64 * weight / (weight + busy);
        if let Some(max) = own.max_running {
            workers = workers.min(max as f64);
        }
        let waiting: usize = self
            .accounts
            .get(&tenant.cloned())
            .map_or(0, |a| a.waiting.iter().sum());
        (waiting + 1) as f64 * mean / workers.max(1.0)
    }

    /// The tenants with jobs waiting or running now, with how many of
    /// each, by name (jobs without a tenant first).
    pub(crate) fn busy(&self) -> Vec<crate::TenantLoad> {
        let mut busy: Vec<crate::TenantLoad> = self
            .accounts
            .iter()
            .filter(|(_, a)| !a.idle())
            .map(|(t, a)| crate::TenantLoad {
                tenant: t.clone(),
                waiting: a.waiting.iter().sum(),
                running: a.running,
            })
            .collect();
        busy.sort_by(|a, b| a.tenant.cmp(&b.tenant));
        busy
    }
}
