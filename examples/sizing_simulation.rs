//! Let the pool find how many workers pay: `Fixed(2)`, `Fixed(capacity)`,
//! `HillClimbing` and `Gradient` on one simulated workload, for one simulated
//! hour each (a paused clock: it takes seconds).
//!
//! The workload: workers share 6 cores. With `n` jobs at once, a job takes
//! `0.5 s × max(1, n / 6) × (1 + 0.1 × max(0, n - 6))` (±5% jitter), so jobs
//! per second rise up to 6 workers and fall after; the pool may run 16. Forty
//! clients send one job after another, so jobs always wait. A second scene
//! moves the curve: two cores go after 20 minutes, and three come back after
//! 40 (7 cores).
//!
//! It prints, for each sizing, the size over time and the jobs per second,
//! and compares them with every `Fixed(n)` run on the same scene.
//!
//! `cargo run --release -p kennel-examples --example sizing-simulation`
//! (`-- --svg docs/img` also draws the plots shown in
//! `docs/concepts/sizing.md`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{
    BoxError, Event, ExitSignal, ExitStatus, Exited, Fixed, Gradient, HillClimbing, Killer, Pool,
    Sizing, SlotInfo, TestComputer, Worker,
};
use plotters::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const CAPACITY: usize = 16;
const CLIENTS: usize = 40;
const HOUR: Duration = Duration::from_secs(3600);
const SAMPLE: Duration = Duration::from_secs(10);
const GIB: u64 = 1 << 30;

// ----- the simulated machine -----

/// How a job's time depends on how many jobs run at once.
#[derive(Debug, Clone, Copy)]
struct Curve {
    cores: f64,
    contention: f64,
    work: Duration,
}

impl Curve {
    const fn cores(cores: f64) -> Self {
        Self {
            cores,
            contention: 0.1,
            work: Duration::from_millis(500),
        }
    }

    fn job_time(&self, n: usize) -> Duration {
        let n = n.max(1) as f64;
        let share = (n / self.cores).max(1.0);
        let slowdown = 1.0 + self.contention * (n - self.cores).max(0.0);
        self.work.mul_f64(share * slowdown)
    }
}

#[derive(Debug)]
struct Cores {
    curve: Curve,
    running: usize,
    done: u64,
    rng: StdRng,
}

/// The cores the workers share.
#[derive(Debug, Clone)]
struct Machine(Arc<Mutex<Cores>>);

impl Machine {
    fn new(curve: Curve) -> Self {
        Self(Arc::new(Mutex::new(Cores {
            curve,
            running: 0,
            done: 0,
            rng: StdRng::seed_from_u64(1),
        })))
    }

    async fn job(&self) {
        let took = {
            let mut c = self.0.lock().unwrap();
            c.running += 1;
            let jitter = c.rng.random_range(0.95..1.05);
            c.curve.job_time(c.running).mul_f64(jitter)
        };
        tokio::time::sleep(took).await;
        let mut c = self.0.lock().unwrap();
        c.running -= 1;
        c.done += 1;
    }

    fn done(&self) -> u64 {
        self.0.lock().unwrap().done
    }

    fn set_curve(&self, curve: Curve) {
        self.0.lock().unwrap().curve = curve;
    }
}

/// A worker that only occupies a slot: the work is done by the machine.
struct Cpu {
    signal: ExitSignal,
    exited: Option<Exited>,
}

impl Cpu {
    async fn start(_info: SlotInfo) -> Result<Self, BoxError> {
        let (signal, exited) = ExitSignal::new();
        Ok(Self {
            signal,
            exited: Some(exited),
        })
    }
}

impl Worker for Cpu {
    async fn ready(&mut self) -> Result<(), BoxError> {
        // A costly warm-up: a step up to a new worker pays it once.
        tokio::time::sleep(Duration::from_secs(5)).await;
        Ok(())
    }
    fn exited(&mut self) -> Exited {
        self.exited.take().unwrap_or_else(Exited::never)
    }
    fn killer(&self) -> Killer {
        self.signal.killer()
    }
    async fn close(self) {
        self.signal.exit(ExitStatus::Closed);
    }
}

// ----- one run -----

/// A curve that changes at given times.
struct Scene {
    name: &'static str,
    title: &'static str,
    phases: Vec<(Duration, Curve)>,
}

/// What one sizing did over the hour.
struct Run {
    label: String,
    /// (minutes, size), every 10 s.
    sizes: Vec<(f64, usize)>,
    /// (minutes, jobs per second over the minute before).
    rates: Vec<(f64, f64)>,
    jobs: u64,
    steps: usize,
}

impl Run {
    fn jobs_per_sec(&self) -> f64 {
        self.jobs as f64 / HOUR.as_secs_f64()
    }
}

fn simulate(scene: &Scene, label: &str, sizing: impl Sizing) -> Run {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let machine = Machine::new(scene.phases[0].1);
        let pool = Pool::builder(Cpu::start)
            .sizing(sizing)
            .with_options(|o| o.max_waiting = Some(1000))
            .build()
            .expect("the pool builds");
        let mut events = pool.events();
        let steps = Arc::new(Mutex::new(0usize));
        let counted = steps.clone();
        tokio::spawn(async move {
            while let Ok(e) = events.recv().await {
                if matches!(e, Event::SizingStep(_)) {
                    *counted.lock().unwrap() += 1;
                }
            }
        });
        for &(at, curve) in &scene.phases[1..] {
            let m = machine.clone();
            tokio::spawn(async move {
                tokio::time::sleep(at).await;
                m.set_curve(curve);
            });
        }
        for _ in 0..CLIENTS {
            let pool = pool.clone();
            let m = machine.clone();
            tokio::spawn(async move {
                loop {
                    let m = m.clone();
                    if pool
                        .run(async move |_: &mut Cpu| m.job().await)
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
        let mut sizes = Vec::new();
        let mut rates = Vec::new();
        let mut last_done = 0;
        let mut t = Duration::ZERO;
        while t < HOUR {
            tokio::time::sleep(SAMPLE).await;
            t += SAMPLE;
            let minutes = t.as_secs_f64() / 60.0;
            sizes.push((minutes, pool.stats().size));
            if t.as_secs() % 60 == 0 {
                let done = machine.done();
                rates.push((minutes, (done - last_done) as f64 / 60.0));
                last_done = done;
            }
        }
        let steps = *steps.lock().unwrap();
        Run {
            label: label.to_owned(),
            sizes,
            rates,
            jobs: machine.done(),
            steps,
        }
    })
}

fn computer() -> TestComputer {
    // 16 CPUs and 64 GiB free: with 2 GiB per worker, a capacity of 16.
    TestComputer::new(CAPACITY, 64 * GIB)
}

// ----- output -----

/// The size at the start of every 5 minutes, in one line.
fn size_line(run: &Run) -> String {
    run.sizes
        .iter()
        .filter(|(m, _)| (*m * 6.0).round() as u64 % 30 == 0)
        .map(|(_, s)| format!("{s:>3}"))
        .collect()
}

/// Draws `dir/sizing-<scene>.svg`: size over time above, jobs per second
/// below; returns its path.
fn plot(scene: &Scene, runs: &[Run], best: (usize, f64), dir: &str) -> Result<String, String> {
    let path = format!("{dir}/sizing-{}.svg", scene.name);
    draw(&path, scene, runs, best)?;
    Ok(path)
}

fn draw(path: &str, scene: &Scene, runs: &[Run], best: (usize, f64)) -> Result<(), String> {
    let root = SVGBackend::new(path, (900, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (top, bottom) = root.split_vertically(300);
    let colors = [
        RGBColor(150, 150, 150),
        RGBColor(90, 90, 90),
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
    ];

    let mut sizes = ChartBuilder::on(&top)
        .caption(
            format!("{}: size over time", scene.title),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(0f64..60f64, 0usize..(CAPACITY + 1))
        .map_err(|e| e.to_string())?;
    sizes
        .configure_mesh()
        .x_desc("minutes")
        .y_desc("workers")
        .draw()
        .map_err(|e| e.to_string())?;
    for (run, color) in runs.iter().zip(colors) {
        sizes
            .draw_series(LineSeries::new(run.sizes.iter().copied(), color))
            .map_err(|e| e.to_string())?
            .label(run.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    sizes
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| e.to_string())?;

    let top_rate = runs
        .iter()
        .flat_map(|r| r.rates.iter().map(|&(_, x)| x))
        .fold(best.1, f64::max)
        * 1.15;
    let mut rates = ChartBuilder::on(&bottom)
        .caption("jobs per second (each minute)", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(0f64..60f64, 0f64..top_rate)
        .map_err(|e| e.to_string())?;
    rates
        .configure_mesh()
        .x_desc("minutes")
        .y_desc("jobs/s")
        .draw()
        .map_err(|e| e.to_string())?;
    for (run, color) in runs.iter().zip(colors) {
        rates
            .draw_series(LineSeries::new(run.rates.iter().copied(), color))
            .map_err(|e| e.to_string())?;
    }
    rates
        .draw_series(LineSeries::new(
            [(0.0, best.1), (60.0, best.1)],
            BLACK.mix(0.4),
        ))
        .map_err(|e| e.to_string())?
        .label(format!("best fixed size, Fixed({}): mean", best.0))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.4)));
    rates
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let svg_dir = args
        .iter()
        .position(|a| a == "--svg")
        .and_then(|i| args.get(i + 1))
        .cloned();

    let scenes = [
        Scene {
            name: "steady",
            title: "6 cores for an hour",
            phases: vec![(Duration::ZERO, Curve::cores(6.0))],
        },
        Scene {
            name: "moving",
            title: "6 cores, 4 from minute 20, 7 from minute 40",
            phases: vec![
                (Duration::ZERO, Curve::cores(6.0)),
                (Duration::from_secs(20 * 60), Curve::cores(4.0)),
                (Duration::from_secs(40 * 60), Curve::cores(7.0)),
            ],
        },
    ];

    for scene in &scenes {
        println!("== {} ==", scene.title);
        let fixed: Vec<(usize, f64)> = (1..=CAPACITY)
            .map(|n| (n, simulate(scene, "", Fixed(n)).jobs_per_sec()))
            .collect();
        let best = fixed
            .iter()
            .copied()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .expect("16 runs");
        print!("every Fixed(n), jobs/s:");
        for (n, x) in &fixed {
            print!(" {n}:{x:.2}");
        }
        println!();

        let runs = [
            simulate(scene, "Fixed(2)", Fixed(2)),
            simulate(scene, "Fixed(16)", Fixed(CAPACITY)),
            simulate(
                scene,
                "HillClimbing",
                HillClimbing::new(2 * GIB, computer()).seed(1),
            ),
            simulate(
                scene,
                "Gradient",
                Gradient::new(2 * GIB, computer()).seed(1),
            ),
        ];
        println!(
            "{:<13} {:>7} {:>8} {:>6}  size every 5 minutes",
            "sizing", "jobs/s", "of best", "steps"
        );
        for run in &runs {
            println!(
                "{:<13} {:>7.2} {:>7.1}% {:>6}  {}",
                run.label,
                run.jobs_per_sec(),
                100.0 * run.jobs_per_sec() / best.1,
                run.steps,
                size_line(run)
            );
        }
        println!(
            "best fixed size: Fixed({}) at {:.2} jobs/s (found by trying all 16)\n",
            best.0, best.1
        );
        if let Some(dir) = &svg_dir {
            match plot(scene, &runs, best, dir) {
                Ok(path) => println!("wrote {path}\n"),
                Err(e) => eprintln!("could not draw the plot: {e}"),
            }
        }
    }
}
