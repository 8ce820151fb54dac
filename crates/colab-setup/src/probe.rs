//! `check_colab`: proving that a notebook's kernel runs on the Colab runtime behind a file-service
//! root, with a fresh nonce, and cleaning up after the proof.
//!
//! The proof has five steps, one at a time, each with its own deadline:
//!
//! 1. `write_probe` (kernel, 60 s): the kernel creates `/content/jupyter-mcp-check-<nonce>.txt`
//!    exclusively (`O_CREAT | O_EXCL`), writes the nonce into it, and reports bounded
//!    diagnostics: process id, Python version, operating system, whether `/content` exists,
//!    whether `google.colab` is importable and the `COLAB_RELEASE_TAG` variable.
//! 2. `build_info` (15 s): the host reads the runtime's build info. Identity evidence only; it
//!    never counts towards `verified`.
//! 3. `read_nonce` (15 s): the host reads the probe through the runtime's file service (the
//!    `colab://` file system or the Contents API), independently of the kernel. The bytes must be
//!    the nonce, exactly.
//! 4. `remove_probe` (kernel, 5 s): the kernel removes the probe only if it still holds the
//!    nonce, then reports whether the path is absent.
//! 5. `confirm_absent` (5 s): the host asks the file service whether the probe is gone.
//!
//! `verified` is true only when every check passed and the cleanup was confirmed through both
//! surfaces. A step without an answer by its deadline is not retried: its command stays
//! outstanding (the check is not `settled`) and a cleanup it leaves unconfirmed is reported as
//! `uncertain`, never as done. A file that already had the probe's name is not ours and is never
//! removed. The check reads no other file and edits no cell.

use serde::Serialize;

use crate::error::{ErrorBody, SetupError};
use crate::names::{FileServiceRoot, Nonce};

mod program;
mod replies;

pub use program::CHECK_MARKER;
use program::*;

/// Per-step deadlines of a check (the reference values by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckTimeouts {
    /// Kernel executions that do the proof's work: 60 s.
    pub kernel_ms: u64,
    /// File-service nonce reads and the build-info read: 15 s.
    pub read_ms: u64,
    /// Best-effort cleanup, kernel-side and file-service-side: 5 s.
    pub cleanup_ms: u64,
}

impl Default for CheckTimeouts {
    fn default() -> Self {
        CheckTimeouts {
            kernel_ms: 60_000,
            read_ms: 15_000,
            cleanup_ms: 5_000,
        }
    }
}

/// Chooses the root a check reads through: the explicit `colabFileUri` when given (it must be
/// one of the registered roots), else the only registered root. No root, or several without an
/// explicit choice, is refused: roots are never probed in turn.
pub fn select_root(
    registered: &[FileServiceRoot],
    explicit: Option<&str>,
) -> Result<FileServiceRoot, SetupError> {
    match explicit {
        Some(raw) => {
            let root = FileServiceRoot::parse(raw)?;
            if registered.contains(&root) {
                Ok(root)
            } else {
                Err(SetupError::RootInvalid {
                    reason: "colabFileUri names no registered Colab root",
                })
            }
        }
        None => match registered {
            [] => Err(SetupError::NoColabRoot),
            [only] => Ok(only.clone()),
            several => Err(SetupError::ColabRootAmbiguous {
                count: several.len(),
            }),
        },
    }
}

/// One step of the proof; each is dispatched at most once per check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStep {
    /// The kernel writes the probe and reports diagnostics.
    WriteProbe,
    /// The host reads the runtime's build info.
    BuildInfo,
    /// The file service reads the probe.
    ReadNonce,
    /// The kernel removes the probe.
    RemoveProbe,
    /// The file service confirms the probe is gone.
    ConfirmAbsent,
}

/// What the host must do for one step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckCommandKind {
    /// Run `code` in the notebook's active idle Python kernel (`store_history: false`), after
    /// checking it is still the kernel the check started on. Answer
    /// [`CheckReply::KernelOutput`] with all stdout text, or [`CheckReply::KernelFailed`].
    ExecuteKernel {
        /// The Python source.
        code: String,
    },
    /// Read the runtime's build info (`/api/colab/build-info`). Answer [`CheckReply::BuildInfo`]
    /// or [`CheckReply::ServiceUnavailable`].
    ReadBuildInfo,
    /// Read the whole file `path` (relative to `root`) through the file service. Answer
    /// [`CheckReply::FileContent`], [`CheckReply::FileMissing`] or
    /// [`CheckReply::ServiceUnavailable`].
    ReadFile {
        /// The file-service root.
        root: FileServiceRoot,
        /// The probe's path under the root.
        path: String,
    },
    /// Ask the file service whether `path` exists. Answer [`CheckReply::FileExists`],
    /// [`CheckReply::FileMissing`] or [`CheckReply::ServiceUnavailable`].
    StatFile {
        /// The file-service root.
        root: FileServiceRoot,
        /// The probe's path under the root.
        path: String,
    },
}

/// A step the host must perform, and the time by which it must answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckCommand {
    /// Which step (the reply names it).
    pub step: CheckStep,
    /// What to do.
    pub kind: CheckCommandKind,
    /// After this time the check stops waiting; the host should give up too.
    pub deadline_ms: u64,
}

/// How a kernel execution went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelFailure {
    /// The kernel was not the original idle Python kernel, so the code was **not sent**.
    NotSent,
    /// The execution ended with an error output (for example `KeyboardInterrupt`).
    Error {
        /// The exception's class name, never its text.
        ename: String,
    },
    /// The kernel died, or was restarted or replaced, while the step ran.
    Lost,
}

/// The host's answer to a [`CheckCommand`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckReply {
    /// The kernel execution finished; all stdout text, concatenated in arrival order.
    KernelOutput {
        /// Stdout.
        stdout: String,
    },
    /// The kernel execution did not finish normally.
    KernelFailed(KernelFailure),
    /// The build info was read; its release tag, if it has one.
    BuildInfo {
        /// The `release_tag` (or equivalent) field.
        release_tag: Option<String>,
    },
    /// The file's bytes.
    FileContent(Vec<u8>),
    /// The file exists (a stat).
    FileExists,
    /// The file does not exist.
    FileMissing,
    /// The file service or endpoint did not answer usefully (not registered, refused, failed).
    ServiceUnavailable,
}

/// What happens to a check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckEvent {
    /// Time passed (the host ticks about once a second while a check runs).
    Tick,
    /// A step's answer.
    Reply {
        /// The step answered.
        step: CheckStep,
        /// The answer.
        reply: CheckReply,
    },
    /// Stop proving; clean up what may have been created.
    Cancel,
}

/// What the check asks of the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckAction {
    /// Perform this step and answer with [`CheckEvent::Reply`].
    Perform(CheckCommand),
    /// The check ended (once). Outstanding steps may still settle afterwards.
    Finished {
        /// The proof's result.
        verified: bool,
    },
}

crate::wire::wire_enum! {
    /// The individual checks of a receipt.
    pub enum CheckName {
        /// The kernel created the probe exclusively in `/content`.
        KernelWritesProbe => "kernel_writes_probe",
        /// Linux, Python 3, `/content` and `google.colab` present, a process id.
        KernelDiagnostics => "kernel_diagnostics",
        /// The file service returned exactly the nonce.
        FileServiceReadsNonce => "file_service_reads_nonce",
        /// The kernel removed its own probe.
        KernelRemovesProbe => "kernel_removes_probe",
        /// The kernel sees the probe's path absent.
        KernelConfirmsAbsence => "kernel_confirms_absence",
        /// The file service sees the probe's path absent.
        FileServiceConfirmsAbsence => "file_service_confirms_absence",
    }
}

crate::wire::wire_enum! {
    /// The outcome of one check.
    pub enum CheckOutcome {
        /// Not decided yet.
        Pending => "pending",
        /// Passed.
        Passed => "passed",
        /// Failed.
        Failed => "failed",
        /// Not attempted, because an earlier step made it pointless.
        Skipped => "skipped",
        /// No definite answer (a timeout, a lost kernel, an unreadable reply).
        Uncertain => "uncertain",
    }
}

crate::wire::wire_enum! {
    /// Whether the probe is known to be gone.
    pub enum CleanupState {
        /// No probe of ours was created.
        NotNeeded => "not_needed",
        /// Still to do.
        Pending => "pending",
        /// Removed, and absent through both the kernel and the file service.
        Confirmed => "confirmed",
        /// The probe is still there, or could not be removed.
        Failed => "failed",
        /// Neither confirmed nor refuted; the probe may remain.
        Uncertain => "uncertain",
    }
}

/// One check in a receipt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    /// Which check.
    pub name: CheckName,
    /// Its outcome.
    pub outcome: CheckOutcome,
    /// A bounded reason code for a non-passing outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<&'static str>,
}

/// Evidence about the runtime's identity. Reported beside the proof, never part of it: a label,
/// a release tag or an installed module can all be imitated.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IdentityEvidence {
    /// `COLAB_RELEASE_TAG` as the kernel saw it.
    pub kernel_release_tag: Option<String>,
    /// The release tag of the runtime's build info.
    pub build_info_release_tag: Option<String>,
    /// Whether `google.colab` is importable in the kernel.
    pub colab_module: Option<bool>,
    /// Whether both tags are present and equal.
    pub release_tags_agree: Option<bool>,
}

/// The `check_colab` receipt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckReceipt {
    /// True only when every check passed and cleanup was confirmed both ways.
    pub verified: bool,
    /// The file-service root the nonce was read through.
    pub root: String,
    /// The probe's path in the kernel.
    pub probe_path: String,
    /// When the check started, in milliseconds as the host gave them.
    pub timestamp_ms: u64,
    /// When it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at_ms: Option<u64>,
    /// The kernel's process id.
    pub pid: Option<u64>,
    /// The kernel's Python version.
    pub python_version: Option<String>,
    /// The kernel's operating system (`platform.system()`).
    pub system: Option<String>,
    /// Every check, in order.
    pub checks: Vec<CheckResult>,
    /// Whether the probe is known to be gone.
    pub cleanup: CleanupState,
    /// Whether every step the check dispatched has been answered.
    pub settled: bool,
    /// Identity evidence, not proof.
    pub identity: IdentityEvidence,
    /// Why the check did not verify.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

/// What the kernel's probe said about the file it was asked to create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Probe {
    /// Not asked yet.
    NotAttempted,
    /// Certainly not created by us.
    NotCreated,
    /// A file of that name already existed: not ours, never touched.
    Foreign,
    /// Created by us.
    Created,
    /// Perhaps created (an unreadable reply, an interrupted execution).
    Unknown,
}

impl Probe {
    fn may_exist(self) -> bool {
        matches!(self, Probe::Created | Probe::Unknown)
    }
}

/// One `check_colab` proof: events in, actions out.
#[derive(Clone, Debug)]
pub struct ColabCheck {
    root: FileServiceRoot,
    nonce: Nonce,
    timeouts: CheckTimeouts,
    started_at_ms: u64,
    finished_at_ms: Option<u64>,
    results: [(CheckOutcome, Option<&'static str>); 6],
    diagnostics: Diagnostics,
    build_info_tag: Option<String>,
    probe: Probe,
    /// The step the check waits on, and its deadline.
    in_flight: Option<(CheckStep, u64)>,
    /// Steps dispatched and not answered, including those the check stopped waiting for.
    outstanding: Vec<CheckStep>,
    cancelled: bool,
    started: bool,
}

impl ColabCheck {
    /// A check of the notebook's kernel against `root`, with the probe named by `nonce`.
    pub fn new(root: FileServiceRoot, nonce: Nonce, timeouts: CheckTimeouts, now_ms: u64) -> Self {
        ColabCheck {
            root,
            nonce,
            timeouts,
            started_at_ms: now_ms,
            finished_at_ms: None,
            results: [(CheckOutcome::Pending, None); 6],
            diagnostics: Diagnostics::default(),
            build_info_tag: None,
            probe: Probe::NotAttempted,
            in_flight: None,
            outstanding: Vec::new(),
            cancelled: false,
            started: false,
        }
    }

    /// The first step. Call once.
    pub fn start(&mut self, now_ms: u64) -> Vec<CheckAction> {
        if self.started {
            return Vec::new();
        }
        self.started = true;
        vec![self.dispatch(CheckStep::WriteProbe, now_ms)]
    }

    /// Applies an event; returns what the host must do next.
    pub fn apply(&mut self, event: CheckEvent, now_ms: u64) -> Vec<CheckAction> {
        if !self.started && !matches!(event, CheckEvent::Cancel) {
            return self.start(now_ms);
        }
        match event {
            CheckEvent::Tick => self.on_tick(now_ms),
            CheckEvent::Reply { step, reply } => self.on_reply(step, reply, now_ms),
            CheckEvent::Cancel => self.on_cancel(now_ms),
        }
    }

    /// Whether the check has ended (its result is final).
    pub fn is_finished(&self) -> bool {
        self.finished_at_ms.is_some()
    }

    /// Whether every step it dispatched has been answered.
    pub fn is_settled(&self) -> bool {
        self.outstanding.is_empty()
    }

    /// Whether the proof passed (only once finished).
    pub fn verified(&self) -> bool {
        self.is_finished()
            && !self.cancelled
            && self
                .results
                .iter()
                .all(|(outcome, _)| *outcome == CheckOutcome::Passed)
            && self.cleanup() == CleanupState::Confirmed
    }

    /// The steps dispatched and not answered.
    pub fn outstanding(&self) -> &[CheckStep] {
        &self.outstanding
    }

    /// The root the check reads through.
    pub fn root(&self) -> &FileServiceRoot {
        &self.root
    }

    /// Whether a probe of ours may exist on the runtime (created, or perhaps created), and no
    /// cleanup confirmed it gone.
    pub fn probe_may_remain(&self) -> bool {
        self.probe.may_exist() && self.cleanup() != CleanupState::Confirmed
    }

    /// The receipt.
    pub fn receipt(&self) -> CheckReceipt {
        let names = CheckName::ALL;
        let checks = names
            .iter()
            .zip(self.results)
            .map(|(&name, (outcome, detail))| CheckResult {
                name,
                outcome,
                detail,
            })
            .collect();
        let verified = self.verified();
        let error = if verified || !self.is_finished() {
            None
        } else if self.cancelled {
            Some(ErrorBody::from(&SetupError::Cancelled))
        } else {
            Some(ErrorBody::from(&SetupError::VerificationFailed {
                check: self.first_unpassed(),
            }))
        };
        let kernel_tag = self.diagnostics.release_tag.clone();
        let build_tag = self.build_info_tag.clone();
        let agree = match (&kernel_tag, &build_tag) {
            (Some(kernel), Some(build)) => Some(kernel == build),
            _ => None,
        };
        CheckReceipt {
            verified,
            root: self.root.uri(),
            probe_path: self.nonce.kernel_path(),
            timestamp_ms: self.started_at_ms,
            finished_at_ms: self.finished_at_ms,
            pid: self.diagnostics.pid,
            python_version: self.diagnostics.python_version.clone(),
            system: self.diagnostics.system.clone(),
            checks,
            cleanup: self.cleanup(),
            settled: self.is_settled(),
            identity: IdentityEvidence {
                kernel_release_tag: kernel_tag,
                build_info_release_tag: build_tag,
                colab_module: self.diagnostics.colab_module,
                release_tags_agree: agree,
            },
            error,
        }
    }

    /// The name of the first check that did not pass, or of the cleanup.
    pub(crate) fn first_unpassed(&self) -> &'static str {
        CheckName::ALL
            .iter()
            .zip(self.results)
            .find(|(_, (outcome, _))| *outcome != CheckOutcome::Passed)
            .map_or("cleanup", |(name, _)| name.as_str())
    }

    fn cleanup(&self) -> CleanupState {
        match self.probe {
            Probe::NotAttempted | Probe::NotCreated | Probe::Foreign => {
                if self.outstanding.contains(&CheckStep::WriteProbe) {
                    CleanupState::Uncertain
                } else {
                    CleanupState::NotNeeded
                }
            }
            Probe::Created | Probe::Unknown => {
                let removal = self.result(CheckName::KernelRemovesProbe);
                let kernel = self.result(CheckName::KernelConfirmsAbsence);
                let service = self.result(CheckName::FileServiceConfirmsAbsence);
                if [removal, kernel, service].contains(&CheckOutcome::Failed) {
                    CleanupState::Failed
                } else if kernel == CheckOutcome::Passed && service == CheckOutcome::Passed {
                    CleanupState::Confirmed
                } else if self.is_finished() {
                    CleanupState::Uncertain
                } else {
                    CleanupState::Pending
                }
            }
        }
    }

    fn result(&self, name: CheckName) -> CheckOutcome {
        self.results[name as usize].0
    }

    fn set(&mut self, name: CheckName, outcome: CheckOutcome, detail: Option<&'static str>) {
        self.results[name as usize] = (outcome, detail);
    }

    /// Marks every still-pending check with `outcome`.
    fn settle_pending(&mut self, outcome: CheckOutcome, detail: Option<&'static str>) {
        for result in &mut self.results {
            if result.0 == CheckOutcome::Pending {
                *result = (outcome, detail);
            }
        }
    }

    fn dispatch(&mut self, step: CheckStep, now_ms: u64) -> CheckAction {
        let path = self.nonce.service_path();
        let (kind, timeout) = match step {
            CheckStep::WriteProbe => (
                CheckCommandKind::ExecuteKernel {
                    code: kernel_code(KernelOp::Write, &self.nonce),
                },
                self.timeouts.kernel_ms,
            ),
            CheckStep::BuildInfo => (CheckCommandKind::ReadBuildInfo, self.timeouts.read_ms),
            CheckStep::ReadNonce => (
                CheckCommandKind::ReadFile {
                    root: self.root.clone(),
                    path,
                },
                self.timeouts.read_ms,
            ),
            CheckStep::RemoveProbe => (
                CheckCommandKind::ExecuteKernel {
                    code: kernel_code(KernelOp::Remove, &self.nonce),
                },
                self.timeouts.cleanup_ms,
            ),
            CheckStep::ConfirmAbsent => (
                CheckCommandKind::StatFile {
                    root: self.root.clone(),
                    path,
                },
                self.timeouts.cleanup_ms,
            ),
        };
        let deadline_ms = now_ms.saturating_add(timeout);
        self.in_flight = Some((step, deadline_ms));
        self.outstanding.push(step);
        CheckAction::Perform(CheckCommand {
            step,
            kind,
            deadline_ms,
        })
    }

    fn finish(&mut self, now_ms: u64) -> Vec<CheckAction> {
        self.in_flight = None;
        // Every check still pending was made pointless by an earlier one, or by the cancel.
        let detail = if self.cancelled {
            "cancelled"
        } else {
            "earlier_check_failed"
        };
        self.settle_pending(CheckOutcome::Skipped, Some(detail));
        self.finished_at_ms = Some(now_ms);
        vec![CheckAction::Finished {
            verified: self.verified(),
        }]
    }

    /// After the probe's write: the cleanup steps if a probe of ours may exist, else the end.
    fn cleanup_or_finish(&mut self, now_ms: u64) -> Vec<CheckAction> {
        if self.probe.may_exist() {
            vec![self.dispatch(CheckStep::RemoveProbe, now_ms)]
        } else {
            self.finish(now_ms)
        }
    }

    fn on_cancel(&mut self, now_ms: u64) -> Vec<CheckAction> {
        if self.is_finished() || self.cancelled {
            return Vec::new();
        }
        self.cancelled = true;
        if !self.started {
            self.started = true;
            return self.finish(now_ms);
        }
        // The step in flight finishes first; its answer leads to cleanup.
        Vec::new()
    }

    fn on_tick(&mut self, now_ms: u64) -> Vec<CheckAction> {
        let Some((step, deadline)) = self.in_flight else {
            return Vec::new();
        };
        if now_ms < deadline {
            return Vec::new();
        }
        // The step stays outstanding; the check stops waiting for it.
        self.in_flight = None;
        match step {
            CheckStep::WriteProbe => {
                // The kernel is busy with our code: sending it more would only queue.
                self.set(
                    CheckName::KernelWritesProbe,
                    CheckOutcome::Uncertain,
                    Some("timed_out"),
                );
                self.probe = Probe::Unknown;
                self.settle_pending(CheckOutcome::Skipped, Some("kernel_unavailable"));
                self.finish(now_ms)
            }
            CheckStep::BuildInfo => self.after_build_info(now_ms),
            CheckStep::ReadNonce => {
                self.set(
                    CheckName::FileServiceReadsNonce,
                    CheckOutcome::Failed,
                    Some("timed_out"),
                );
                vec![self.dispatch(CheckStep::RemoveProbe, now_ms)]
            }
            CheckStep::RemoveProbe => {
                self.set(
                    CheckName::KernelRemovesProbe,
                    CheckOutcome::Uncertain,
                    Some("timed_out"),
                );
                self.set(
                    CheckName::KernelConfirmsAbsence,
                    CheckOutcome::Uncertain,
                    Some("timed_out"),
                );
                vec![self.dispatch(CheckStep::ConfirmAbsent, now_ms)]
            }
            CheckStep::ConfirmAbsent => {
                self.set(
                    CheckName::FileServiceConfirmsAbsence,
                    CheckOutcome::Uncertain,
                    Some("timed_out"),
                );
                self.finish(now_ms)
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
