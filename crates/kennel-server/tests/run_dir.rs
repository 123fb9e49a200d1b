//! The run directory no other local user controls, against the real
//! `kennel serve`: a directory another user owns, or prepared with a
//! `lock` link to a file of this user's and a forged `group-*` file, is
//! refused before anything in it is touched; a forged file in this user's
//! own directory whose leader's start time differs signals nothing; the
//! reaper beside the server holds no secret in its environment, and
//! makes no run directory where the one it watched was removed.

#![cfg(target_os = "linux")]

mod served;

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use nix::sys::signal::Signal;

use served::{
    LIMIT, LISTEN, Server, Stderr, TempDir, alive, demo_pool, descendants, environ, is_reaper,
};

/// The uid of `nobody`.
const NOBODY: u32 = 65534;

/// A real process in a group of its own (the kind a worker leaves),
/// killed on drop.
struct Bystander(Child);

impl Bystander {
    fn spawn() -> Self {
        Self(
            Command::new("sleep")
                .arg("1000")
                .process_group(0)
                .spawn()
                .unwrap(),
        )
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn runs(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }

    /// Field 22 of its `/proc/<pid>/stat`: its start time.
    fn start_time(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let after = stat.rsplit_once(')').unwrap().1;
        after.split_whitespace().nth(19).unwrap().parse().unwrap()
    }

    /// A `group-*` file for it, as a server writes one; `late` ticks off
    /// its real start time.
    fn forge(&self, run: &Path, late: u64) {
        let pid = self.pid();
        let started = self.start_time() + late;
        std::fs::write(
            run.join(format!("group-{pid}")),
            format!("{pid} {started}\n"),
        )
        .unwrap();
    }
}

impl Drop for Bystander {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn mkdir(dir: &Path) {
    std::fs::DirBuilder::new().mode(0o700).create(dir).unwrap();
}

/// `kennel serve` on `run_dir`, which must refuse to start: its stderr.
fn refused_start(dir: &Path, run_dir: &Path) -> String {
    let config = dir.join("kennel.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nrun_dir = {run_dir:?}\n{}",
            demo_pool("demo", 1)
        ),
    )
    .unwrap();
    let mut child = Command::new(served::kennel_bin())
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("kennel serve started on {}", run_dir.display());
        }
        std::thread::yield_now();
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    stderr
}

#[test]
fn a_run_directory_another_user_controls_is_refused_without_touching_it() {
    let dir = TempDir::new("rundir-foreign");
    if !nix::unistd::geteuid().is_root() {
        // Not root: no directory can be given away, but `/` is another
        // user's.
        let stderr = refused_start(&dir.0, Path::new("/"));
        assert!(stderr.contains("is owned by another user"), "{stderr}");
        return;
    }
    // Prepared by `nobody` before the server starts: a `lock` link to a
    // file of root's, a group file naming a live process of root's.
    let precious = dir.0.join("precious");
    std::fs::write(&precious, "190 bytes of root's\n").unwrap();
    let run = dir.0.join("run");
    mkdir(&run);
    std::os::unix::fs::symlink(&precious, run.join("lock")).unwrap();
    let mut victim = Bystander::spawn();
    victim.forge(&run, 0);
    std::os::unix::fs::lchown(&run, Some(NOBODY), None).unwrap();
    let stderr = refused_start(&dir.0, &run);
    assert!(
        stderr.contains(&format!(
            "cannot use the run directory {}: refused: {} is owned by another user (uid {NOBODY}",
            run.display(),
            run.display()
        )),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&precious).unwrap(),
        "190 bytes of root's\n"
    );
    assert!(victim.runs(), "the forged group was signalled");
    assert!(run.join(format!("group-{}", victim.pid())).exists());

    // A directory above the run directory that `nobody` owns: it could
    // swap the run directory for its own.
    let theirs = dir.0.join("theirs");
    mkdir(&theirs);
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::lchown(&theirs, Some(NOBODY), None).unwrap();
    let stderr = refused_start(&dir.0, &theirs.join("7878"));
    assert!(
        stderr.contains(&format!(
            "refused: {} is owned by another user (uid {NOBODY}): it could replace the run directory below it",
            theirs.display()
        )),
        "{stderr}"
    );
    assert!(victim.runs());
    assert!(
        !theirs.join("7878").exists(),
        "created in a directory of another user's"
    );
}

#[test]
fn a_lock_that_is_a_symbolic_link_is_refused_and_its_target_kept() {
    let dir = TempDir::new("rundir-link");
    let precious = dir.0.join("precious");
    std::fs::write(&precious, "kept\n").unwrap();
    let run = dir.0.join("run");
    mkdir(&run);
    std::os::unix::fs::symlink(&precious, run.join("lock")).unwrap();
    let stderr = refused_start(&dir.0, &run);
    assert!(
        stderr.contains(&format!(
            "refused: {} is a symbolic link, which kennel never follows",
            run.join("lock").display()
        )),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "kept\n");
}

#[test]
fn a_recorded_group_whose_leader_started_at_another_time_is_not_killed() {
    let dir = TempDir::new("rundir-late");
    let run = dir.0.join("run");
    mkdir(&run);
    let mut bystander = Bystander::spawn();
    bystander.forge(&run, 1);
    let server = Server::start(
        "rundir-late",
        &format!("[server]\nrun_dir = {run:?}\n{}", demo_pool("demo", 1)),
        &LISTEN,
        &[],
        Stderr::Collected,
    );
    // The file was read and removed as stale before the first worker.
    assert!(!run.join(format!("group-{}", bystander.pid())).exists());
    assert!(
        bystander.runs(),
        "a group whose leader is another process was killed"
    );
    assert!(server.stop());
    assert!(bystander.runs());
}

#[test]
fn the_reapers_environment_holds_no_token() {
    let token = "s3cret-reaper-5d2a";
    let server = Server::start(
        "reaper-env",
        &format!(
            "[server]\nlisten = \"127.0.0.1:0\"\ntoken_env = \"KENNEL_TEST_TOKEN\"\n{}",
            demo_pool("demo", 1)
        ),
        &[],
        &[("KENNEL_TEST_TOKEN", token)],
        Stderr::Collected,
    );
    let server_pid = server.child.id();
    // The server has it (so the test sees a token where there is one).
    assert!(environ(server_pid).iter().any(|v| v.contains(token)));
    let reaper = descendants(server_pid)
        .into_iter()
        .find(|&p| is_reaper(p))
        .expect("the server's reaper");
    let env = environ(reaper);
    assert!(!env.iter().any(|v| v.contains(token)), "{env:?}");
    assert!(server.stop());
}

#[test]
fn a_reaper_whose_run_directory_was_removed_makes_none() {
    let mut server = Server::start(
        "rundir-removed",
        &format!(
            "[server]\nrun_dir = \"{{dir}}/run\"\n{}",
            demo_pool("demo", 1)
        ),
        &LISTEN,
        &[],
        Stderr::Collected,
    );
    let run = server.dir.0.join("run");
    assert!(run.join("lock").exists());
    let reaper = descendants(server.child.id())
        .into_iter()
        .find(|&p| is_reaper(p))
        .expect("the server's reaper");
    std::fs::remove_dir_all(&run).unwrap();
    server.signal(Signal::SIGTERM);
    let status = server
        .exit_within(LIMIT)
        .expect("the server ends on SIGTERM");
    assert!(status.success(), "{}", server.log());
    // The reaper wakes when the server has ended; each check reads /proc.
    let started = Instant::now();
    while alive(reaper) {
        assert!(started.elapsed() < LIMIT, "the reaper never ended");
        std::thread::yield_now();
    }
    assert!(
        !run.exists(),
        "the reaper made {} again: {:?}",
        run.display(),
        std::fs::read_dir(&run)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect::<Vec<_>>()
    );
}
