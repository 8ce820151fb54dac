//! The answers to each step of the proof, and what each one decides.

use serde_json::Value;

use super::*;

impl ColabCheck {
    pub(super) fn on_reply(
        &mut self,
        step: CheckStep,
        reply: CheckReply,
        now_ms: u64,
    ) -> Vec<CheckAction> {
        let Some(position) = self.outstanding.iter().position(|&s| s == step) else {
            // Not dispatched, or already answered: nothing to settle.
            return Vec::new();
        };
        self.outstanding.remove(position);
        if self.in_flight.map(|(s, _)| s) != Some(step) {
            // A late answer to a step the check stopped waiting for: it settles, and changes
            // nothing else (the result was judged at that moment).
            return Vec::new();
        }
        self.in_flight = None;
        match step {
            CheckStep::WriteProbe => self.after_write(reply, now_ms),
            CheckStep::BuildInfo => {
                if let CheckReply::BuildInfo { release_tag } = reply {
                    self.build_info_tag = release_tag.filter(|tag| {
                        tag.len() <= 64 && tag.bytes().all(|byte| (0x20..0x7f).contains(&byte))
                    });
                }
                self.after_build_info(now_ms)
            }
            CheckStep::ReadNonce => {
                let (outcome, detail) = match reply {
                    CheckReply::FileContent(bytes) if bytes == self.nonce.as_str().as_bytes() => {
                        (CheckOutcome::Passed, None)
                    }
                    CheckReply::FileContent(_) => (CheckOutcome::Failed, Some("content_differs")),
                    CheckReply::FileMissing => (CheckOutcome::Failed, Some("not_found")),
                    CheckReply::ServiceUnavailable => {
                        (CheckOutcome::Failed, Some("service_unavailable"))
                    }
                    _ => (CheckOutcome::Failed, Some("unexpected_reply")),
                };
                self.set(CheckName::FileServiceReadsNonce, outcome, detail);
                vec![self.dispatch(CheckStep::RemoveProbe, now_ms)]
            }
            CheckStep::RemoveProbe => {
                self.after_remove(reply);
                vec![self.dispatch(CheckStep::ConfirmAbsent, now_ms)]
            }
            CheckStep::ConfirmAbsent => {
                let (outcome, detail) = match reply {
                    CheckReply::FileMissing => (CheckOutcome::Passed, None),
                    CheckReply::FileExists | CheckReply::FileContent(_) => {
                        (CheckOutcome::Failed, Some("still_present"))
                    }
                    CheckReply::ServiceUnavailable => {
                        (CheckOutcome::Uncertain, Some("service_unavailable"))
                    }
                    _ => (CheckOutcome::Uncertain, Some("unexpected_reply")),
                };
                self.set(CheckName::FileServiceConfirmsAbsence, outcome, detail);
                self.finish(now_ms)
            }
        }
    }

    pub(super) fn after_write(&mut self, reply: CheckReply, now_ms: u64) -> Vec<CheckAction> {
        let parsed = match reply {
            CheckReply::KernelOutput { stdout } => {
                parse_kernel_reply(&stdout, &self.nonce, KernelOp::Write)
            }
            CheckReply::KernelFailed(KernelFailure::NotSent) => {
                return self.write_without_kernel(
                    Probe::NotCreated,
                    (CheckOutcome::Failed, "kernel_not_idle"),
                    now_ms,
                );
            }
            // The file may exist, and no kernel is left to remove it.
            CheckReply::KernelFailed(KernelFailure::Lost) => {
                return self.write_without_kernel(
                    Probe::Unknown,
                    (CheckOutcome::Uncertain, "kernel_lost"),
                    now_ms,
                );
            }
            CheckReply::KernelFailed(KernelFailure::Error { .. }) => None,
            _ => None,
        };
        let Some(value) = parsed else {
            self.probe = Probe::Unknown;
            let unreadable = Some("unreadable_reply");
            self.set(
                CheckName::KernelWritesProbe,
                CheckOutcome::Uncertain,
                unreadable,
            );
            for skipped in [
                CheckName::KernelDiagnostics,
                CheckName::FileServiceReadsNonce,
            ] {
                self.set(skipped, CheckOutcome::Skipped, unreadable);
            }
            return self.cleanup_or_finish(now_ms);
        };
        self.diagnostics = parse_diagnostics(&value);
        let diagnostics = diagnostics_problem(&self.diagnostics);
        let diagnostics_outcome = match diagnostics {
            None => CheckOutcome::Passed,
            Some(_) => CheckOutcome::Failed,
        };
        self.set(
            CheckName::KernelDiagnostics,
            diagnostics_outcome,
            diagnostics,
        );
        let created = value.get("created").and_then(Value::as_bool);
        let error = value.get("error").and_then(Value::as_str);
        let (probe, outcome, detail) = match (created, error) {
            (Some(true), _) => (Probe::Created, CheckOutcome::Passed, None),
            (Some(false), Some("FileExistsError")) => {
                (Probe::Foreign, CheckOutcome::Failed, Some("already_exists"))
            }
            (Some(false), Some("FileNotFoundError")) => (
                Probe::NotCreated,
                CheckOutcome::Failed,
                Some("no_content_directory"),
            ),
            (Some(false), _) => (Probe::NotCreated, CheckOutcome::Failed, Some("not_created")),
            (None, _) => (
                Probe::Unknown,
                CheckOutcome::Uncertain,
                Some("unreadable_reply"),
            ),
        };
        self.probe = probe;
        self.set(CheckName::KernelWritesProbe, outcome, detail);
        if self.probe == Probe::Created && diagnostics.is_none() && !self.cancelled {
            return vec![self.dispatch(CheckStep::BuildInfo, now_ms)];
        }
        let detail = if self.cancelled {
            "cancelled"
        } else {
            "earlier_check_failed"
        };
        if self.result(CheckName::FileServiceReadsNonce) == CheckOutcome::Pending {
            self.set(
                CheckName::FileServiceReadsNonce,
                CheckOutcome::Skipped,
                Some(detail),
            );
        }
        self.cleanup_or_finish(now_ms)
    }

    /// The write never ran to an answer: what that leaves of the probe, and the end of the check.
    fn write_without_kernel(
        &mut self,
        probe: Probe,
        (outcome, detail): (CheckOutcome, &'static str),
        now_ms: u64,
    ) -> Vec<CheckAction> {
        self.probe = probe;
        self.set(CheckName::KernelWritesProbe, outcome, Some(detail));
        self.settle_pending(CheckOutcome::Skipped, Some("kernel_unavailable"));
        self.finish(now_ms)
    }

    pub(super) fn after_build_info(&mut self, now_ms: u64) -> Vec<CheckAction> {
        if self.cancelled {
            self.set(
                CheckName::FileServiceReadsNonce,
                CheckOutcome::Skipped,
                Some("cancelled"),
            );
            return vec![self.dispatch(CheckStep::RemoveProbe, now_ms)];
        }
        vec![self.dispatch(CheckStep::ReadNonce, now_ms)]
    }

    pub(super) fn after_remove(&mut self, reply: CheckReply) {
        let parsed = match reply {
            CheckReply::KernelOutput { stdout } => {
                parse_kernel_reply(&stdout, &self.nonce, KernelOp::Remove)
            }
            CheckReply::KernelFailed(KernelFailure::NotSent) => {
                self.set(
                    CheckName::KernelRemovesProbe,
                    CheckOutcome::Failed,
                    Some("kernel_not_idle"),
                );
                self.set(
                    CheckName::KernelConfirmsAbsence,
                    CheckOutcome::Uncertain,
                    Some("kernel_not_idle"),
                );
                return;
            }
            _ => None,
        };
        let fields = parsed.as_ref().and_then(|value| {
            Some((
                value.get("removed")?.as_bool()?,
                value.get("absent")?.as_bool()?,
                value
                    .get("foreign")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            ))
        });
        let Some((removed, absent, foreign)) = fields else {
            self.set(
                CheckName::KernelRemovesProbe,
                CheckOutcome::Uncertain,
                Some("unreadable_reply"),
            );
            self.set(
                CheckName::KernelConfirmsAbsence,
                CheckOutcome::Uncertain,
                Some("unreadable_reply"),
            );
            return;
        };
        let removal = if removed {
            (CheckOutcome::Passed, None)
        } else if foreign {
            (CheckOutcome::Failed, Some("content_differs"))
        } else if self.probe == Probe::Unknown && absent {
            // Nothing of ours was there to remove.
            (CheckOutcome::Skipped, Some("nothing_to_remove"))
        } else {
            (CheckOutcome::Failed, Some("already_absent"))
        };
        self.set(CheckName::KernelRemovesProbe, removal.0, removal.1);
        if self.probe == Probe::Unknown && !removed && absent {
            // The earlier reply was unreadable; the probe is certainly gone now.
            self.probe = Probe::NotCreated;
        }
        let absence = if absent {
            (CheckOutcome::Passed, None)
        } else {
            (CheckOutcome::Failed, Some("still_present"))
        };
        self.set(CheckName::KernelConfirmsAbsence, absence.0, absence.1);
    }
}
