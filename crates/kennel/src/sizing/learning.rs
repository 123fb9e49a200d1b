//! What every learning sizing (`HillClimbing`, `Gradient`) shares on top of
//! its [`Stepper`](super::step::Stepper): its setters and its
//! [`Sizing`](super::Sizing) impl, made by one macro.

/// The setters and the [`Sizing`](super::Sizing) impl that every learning
/// sizing (a `stepper: Stepper<_>` field) shares; the doc lines given are
/// added to `quick_windows`.
macro_rules! learning_sizing {
    ($ty:ident $(, $quick_doc:literal)*) => {
        impl $ty {
            /// Seeds the random pause lengths, so that a run repeats (default:
            /// a seed from the operating system).
            #[must_use]
            pub fn seed(mut self, seed: u64) -> Self {
                self.stepper.pause.set_seed(seed);
                self
            }

            /// How long a window lasts at least: `min_jobs` jobs and
            /// `min_time` (default 20 jobs and 2 seconds). Once the spread of
            /// job times is known, [quick windows](Self::quick_windows) need
            /// fewer jobs, never more than `min_jobs`. 0 of either is a
            /// [`BuildError`](crate::BuildError) naming `window`.
            #[must_use]
            pub fn window(mut self, min_jobs: u32, min_time: std::time::Duration) -> Self {
                self.stepper.windows.min_jobs = min_jobs;
                self.stepper.windows.min_time = min_time;
                self
            }

            /// Whether a window needs only the jobs that measure its mean job
            /// time to ±5% once the spread of job times is known
            /// (`(2 × cv / 0.05)²`, at least 5, at most the window's
            /// `min_jobs`; `min_time` still holds).
            $(#[doc = $quick_doc])*
            /// On by default; off, every window counts `min_jobs`.
            #[must_use]
            pub fn quick_windows(mut self, on: bool) -> Self {
                self.stepper.windows.quick = on;
                self
            }

            /// The shortest and the longest pause after a step that changes
            /// nothing, in windows (default 1 and 16): the first pause is
            /// `shortest`, each one after it in a row twice as long, up to
            /// `longest`. Each from 1 to 1024, `shortest` at most `longest`,
            /// else a [`BuildError`](crate::BuildError) naming `pause`.
            #[must_use]
            pub fn pause(mut self, shortest: u32, longest: u32) -> Self {
                self.stepper.pause.set_bounds(shortest, longest);
                self
            }

            /// The bytes each worker needs.
            pub fn memory_per_worker(&self) -> u64 {
                self.stepper.memory.per_worker()
            }
        }

        impl super::Sizing for $ty {
            fn plan(&mut self) -> Result<super::SizePlan, crate::BuildError> {
                self.stepper.plan()
            }

            fn observe(
                &mut self,
                view: &super::SizingView,
                input: super::SizingInput,
            ) -> super::SizingDecision {
                self.stepper.observe(view, input)
            }

            fn may_start(&mut self, view: &super::SizingView) -> bool {
                self.stepper.may_start(view)
            }
        }
    };
}
pub(crate) use learning_sizing;
