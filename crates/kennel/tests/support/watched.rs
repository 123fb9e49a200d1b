//! A fake worker that notes whether the pool closed it or killed it, and
//! the farm's factory of them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{BoxError, Exited, Killer, SlotInfo, Worker};

use super::fake::Fake;
use super::farm::Farm;

/// How the pool first ended a [`Watched`] worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Its `close()` was called.
    Closed,
    /// Its kill switch was used.
    Killed,
}

/// How each [`Watched`] worker was ended, by worker id; the first way counts.
#[derive(Debug, Clone, Default)]
pub struct Endings(Arc<Mutex<Vec<(usize, Ending)>>>);

impl Endings {
    fn note(&self, id: usize, how: Ending) {
        let mut v = self.0.lock().unwrap();
        if !v.iter().any(|(i, _)| *i == id) {
            v.push((id, how));
        }
    }

    /// How worker `id` was ended, if it was.
    pub fn of(&self, id: usize) -> Option<Ending> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, how)| *how)
    }
}

/// A [`Fake`] that notes whether the pool closed it or killed it, and whose
/// `close()` takes a set time.
#[derive(Debug)]
pub struct Watched {
    pub fake: Fake,
    endings: Endings,
    close_takes: Duration,
}

impl std::ops::Deref for Watched {
    type Target = Fake;
    fn deref(&self) -> &Fake {
        &self.fake
    }
}

impl std::ops::DerefMut for Watched {
    fn deref_mut(&mut self) -> &mut Fake {
        &mut self.fake
    }
}

impl Worker for Watched {
    async fn ready(&mut self) -> Result<(), BoxError> {
        self.fake.ready().await
    }

    fn exited(&mut self) -> Exited {
        self.fake.exited()
    }

    fn killer(&self) -> Killer {
        let (id, endings, inner) = (self.fake.id, self.endings.clone(), self.fake.killer());
        Killer::new(move || {
            endings.note(id, Ending::Killed);
            inner.kill();
        })
    }

    async fn close(self) {
        self.endings.note(self.fake.id, Ending::Closed);
        tokio::time::sleep(self.close_takes).await;
        self.fake.close().await;
    }
}

impl Farm {
    /// A factory of [`Watched`] workers that note their ending in `endings`
    /// and take `close_takes` to close.
    pub fn watched_factory(
        &self,
        endings: &Endings,
        close_takes: Duration,
    ) -> impl Fn(SlotInfo) -> std::future::Ready<Result<Watched, BoxError>> + Send + Sync + 'static
    {
        let farm = self.clone();
        let endings = endings.clone();
        move |info: SlotInfo| {
            std::future::ready(farm.make(&info).map(|fake| Watched {
                fake,
                endings: endings.clone(),
                close_takes,
            }))
        }
    }
}
