//! Starting a [`Coprocess`]: the child in a process group of its own, with
//! piped stdin, stdout and stderr, and the tasks that reap it and forward its
//! stderr.

use std::process::Stdio;
use std::sync::Arc;

use kennel::ExitSignal;
use tokio::process::Command;

use super::reap::wait_for_exit;
use super::stderr::{StderrTail, forward_stderr};
use super::{Coprocess, Label, Phase, Talk};
use crate::error::ProcessError;
use crate::frames::Frames;
use crate::group::ProcessGroup;
use crate::spec::{CoprocessSpec, ReadyMode};

/// The kernel's bit set for a pinned worker's CPUs (those it can hold).
#[cfg(target_os = "linux")]
fn cpu_set(cpus: Option<&[usize]>) -> Option<nix::sched::CpuSet> {
    let cpus = cpus?;
    let mut set = nix::sched::CpuSet::new();
    let mut any = false;
    for &cpu in cpus {
        any |= set.set(cpu).is_ok();
    }
    any.then_some(set)
}

impl Coprocess {
    pub(crate) fn spawn(spec: &CoprocessSpec) -> Result<Self, ProcessError> {
        let Some((first, rest)) = spec.argv.split_first() else {
            return Err(ProcessError::Spawn {
                program: String::new(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "the argv is empty"),
            });
        };
        let program = first.to_string_lossy().into_owned();
        let mut command = Command::new(first);
        command
            .args(rest)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        if spec.env_clear {
            command.env_clear();
        }
        for key in &spec.env_remove {
            command.env_remove(key);
        }
        command.envs(spec.env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = &spec.current_dir {
            command.current_dir(dir);
        }
        #[cfg(target_os = "linux")]
        crate::deathsig::die_with_parent(&mut command, cpu_set(spec.cpus.as_deref()));
        // Started now: the exit counts how long the worker ran from here.
        let (exit, _) = ExitSignal::new();
        let mut child = command.spawn().map_err(|source| ProcessError::Spawn {
            program: program.clone(),
            source,
        })?;
        let pid = child
            .id()
            .expect("a child that was just spawned has not been reaped");
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            unreachable!("stdin, stdout and stderr were all set to piped");
        };

        let label = Label {
            pool: spec.pool.clone(),
            slot: spec.slot,
        };
        let group = Arc::new(ProcessGroup::new(pid));
        let tail = StderrTail::new();
        tokio::spawn(forward_stderr(stderr, label.clone(), pid, tail.clone()));
        tokio::spawn(wait_for_exit(
            child,
            Arc::clone(&group),
            exit.clone(),
            label.clone(),
            pid,
            tail.clone(),
        ));
        tracing::debug!(pool = label.pool.as_deref(), slot = label.slot, pid, %program, "worker started");

        Ok(Self {
            pid,
            group,
            stdin: Some(stdin),
            stdout: Frames::new(stdout, spec.framing, spec.max_line_bytes),
            talk: Talk {
                framing: spec.framing,
                cancel_lines: spec.cancel_lines,
                job_ids: spec.job_ids && !spec.framing.is_rpc(),
                method: spec.method.clone(),
                handshake: spec.handshake.clone(),
                answers: Arc::clone(&spec.answers),
            },
            next_id: 1,
            echoes_ids: false,
            watched: false,
            open: None,
            handshake_sent: false,
            handshake_result: None,
            about: None,
            heartbeat: kennel::Heartbeat::new(),
            exit,
            // The warm-up of a JSON-RPC worker is its handshake, if any.
            phase: if spec.framing.is_rpc() && spec.handshake.is_some()
                || !spec.framing.is_rpc() && spec.ready == ReadyMode::Line
            {
                Phase::Warming
            } else {
                Phase::Idle
            },
            max_line_bytes: spec.max_line_bytes,
            close_grace: spec.close_grace,
            label,
            tail,
            probe: spec.probe.clone(),
        })
    }
}
