use expect_test::expect;
use proptest::prelude::*;

use super::*;
use crate::sim::SimHost;

const START: u64 = 5_000_000;

fn nonce() -> Nonce {
    Nonce::from_bytes([0x42; 16])
}

fn colab_root() -> FileServiceRoot {
    FileServiceRoot::parse("colab://m0123abcd/").unwrap()
}

/// A check and every command it dispatched.
struct Run {
    check: ColabCheck,
    now_ms: u64,
    pending: Vec<CheckCommand>,
    sent: Vec<CheckStep>,
    finished: usize,
}

impl Run {
    fn new(root: FileServiceRoot) -> Self {
        let mut run = Run {
            check: ColabCheck::new(root, nonce(), CheckTimeouts::default(), START),
            now_ms: START,
            pending: Vec::new(),
            sent: Vec::new(),
            finished: 0,
        };
        let actions = run.check.start(START);
        run.take(actions);
        run
    }

    fn take(&mut self, actions: Vec<CheckAction>) {
        for action in actions {
            match action {
                CheckAction::Perform(command) => {
                    assert!(
                        !self.sent.contains(&command.step),
                        "step {:?} dispatched twice",
                        command.step
                    );
                    self.sent.push(command.step);
                    self.pending.push(command);
                }
                CheckAction::Finished { verified } => {
                    assert_eq!(verified, self.check.verified());
                    self.finished += 1;
                }
            }
        }
        assert!(self.finished <= 1);
        assert_eq!(self.finished == 1, self.check.is_finished());
        // Nothing is verified without confirmed cleanup.
        if self.check.verified() {
            assert_eq!(self.check.receipt().cleanup, CleanupState::Confirmed);
        }
    }

    /// A check on the Colab root whose probe write was answered with `reply`.
    fn after_write(reply: CheckReply) -> Self {
        let mut run = Run::new(colab_root());
        run.reply(CheckStep::WriteProbe, reply);
        run
    }

    fn reply(&mut self, step: CheckStep, reply: CheckReply) {
        self.now_ms += 50;
        self.pending.retain(|command| command.step != step);
        let actions = self
            .check
            .apply(CheckEvent::Reply { step, reply }, self.now_ms);
        self.take(actions);
    }

    /// Answers every step from the simulated world until the check ends.
    fn answer_all(&mut self, sim: &mut SimHost) {
        while let Some(command) = self.pending.first().cloned() {
            let reply = sim.check_answer(&command.kind);
            self.reply(command.step, reply);
        }
    }

    fn tick(&mut self, advance_ms: u64) {
        self.now_ms += advance_ms;
        let actions = self.check.apply(CheckEvent::Tick, self.now_ms);
        self.take(actions);
    }

    fn receipt(&self) -> String {
        crate::fixtures::receipt_snapshot(&self.check.receipt())
    }
}

#[test]
fn a_colab_runtime_verifies_and_leaves_nothing_behind() {
    let mut sim = SimHost::default();
    let mut run = Run::new(colab_root());
    run.answer_all(&mut sim);
    assert!(run.check.verified());
    assert!(run.check.is_settled() && !run.check.probe_may_remain());
    assert!(sim.files.is_empty());
    assert_eq!(
        run.sent,
        [
            CheckStep::WriteProbe,
            CheckStep::BuildInfo,
            CheckStep::ReadNonce,
            CheckStep::RemoveProbe,
            CheckStep::ConfirmAbsent
        ]
    );
    expect![[r#"
        {
          "verified": true,
          "root": "colab://m0123abcd/",
          "probePath": "/content/jupyter-mcp-check-42424242424242424242424242424242.txt",
          "timestampMs": 5000000,
          "finishedAtMs": 5000250,
          "pid": 4242,
          "pythonVersion": "3.12.11",
          "system": "Linux",
          "checks": "kernel_writes_probe passed; kernel_diagnostics passed; file_service_reads_nonce passed; kernel_removes_probe passed; kernel_confirms_absence passed; file_service_confirms_absence passed",
          "cleanup": "confirmed",
          "settled": true,
          "identity": "the simulated runtime's (release tags agree)"
        }"#]]
    .assert_eq(&run.receipt());
}

#[test]
fn a_plain_jupyter_server_is_refused() {
    // No Colab file service is registered at all: nothing to prove against.
    assert_eq!(select_root(&[], None), Err(SetupError::NoColabRoot));
    // Or the host offers its Contents API as a root, but the kernel is not on Colab: no
    // /content, no google.colab. The probe is never written, so nothing needs cleaning.
    let mut sim = SimHost {
        colab: false,
        ..SimHost::default()
    };
    let root = FileServiceRoot::parse("https://localhost.example/").unwrap();
    let mut run = Run::new(root);
    run.answer_all(&mut sim);
    assert!(!run.check.verified());
    assert_eq!(run.sent, [CheckStep::WriteProbe]);
    expect![[r#"
        {
          "verified": false,
          "root": "https://localhost.example/",
          "probePath": "/content/jupyter-mcp-check-42424242424242424242424242424242.txt",
          "timestampMs": 5000000,
          "finishedAtMs": 5000050,
          "pid": 4242,
          "pythonVersion": "3.12.11",
          "system": "Linux",
          "checks": "kernel_writes_probe failed (no_content_directory); kernel_diagnostics failed (no_content_directory); file_service_reads_nonce skipped (earlier_check_failed); kernel_removes_probe skipped (earlier_check_failed); kernel_confirms_absence skipped (earlier_check_failed); file_service_confirms_absence skipped (earlier_check_failed)",
          "cleanup": "not_needed",
          "settled": true,
          "identity": {
            "kernelReleaseTag": null,
            "buildInfoReleaseTag": null,
            "colabModule": false,
            "releaseTagsAgree": null
          },
          "error": {
            "code": "verification_failed",
            "message": "verification failed: kernel_writes_probe; see verification.checks"
          }
        }"#]]
    .assert_eq(&run.receipt());
}

#[test]
fn an_unconfirmed_cleanup_stays_uncertain() {
    let mut sim = SimHost::default();
    let mut run = Run::new(colab_root());
    while run.pending.first().map(|command| command.step) != Some(CheckStep::ConfirmAbsent) {
        let command = run.pending[0].clone();
        let reply = sim.check_answer(&command.kind);
        run.reply(command.step, reply);
    }
    // The file service does not answer the absence check within 5 s.
    run.tick(4_999);
    assert!(!run.check.is_finished());
    run.tick(1);
    assert!(run.check.is_finished() && !run.check.verified());
    assert!(!run.check.is_settled());
    expect![[r#"
        {
          "verified": false,
          "root": "colab://m0123abcd/",
          "probePath": "/content/jupyter-mcp-check-42424242424242424242424242424242.txt",
          "timestampMs": 5000000,
          "finishedAtMs": 5005200,
          "pid": 4242,
          "pythonVersion": "3.12.11",
          "system": "Linux",
          "checks": "kernel_writes_probe passed; kernel_diagnostics passed; file_service_reads_nonce passed; kernel_removes_probe passed; kernel_confirms_absence passed; file_service_confirms_absence uncertain (timed_out)",
          "cleanup": "uncertain",
          "settled": false,
          "identity": "the simulated runtime's (release tags agree)",
          "error": {
            "code": "verification_failed",
            "message": "verification failed: file_service_confirms_absence; see verification.checks"
          }
        }"#]]
    .assert_eq(&run.receipt());
    // A late answer settles the step but does not rewrite what was judged at the time.
    run.reply(CheckStep::ConfirmAbsent, CheckReply::FileMissing);
    let receipt = run.check.receipt();
    assert!(receipt.settled && !receipt.verified);
    assert_eq!(receipt.cleanup, CleanupState::Uncertain);
}

#[test]
fn a_file_that_already_has_the_probes_name_is_never_touched() {
    let mut sim = SimHost::default();
    sim.files
        .insert(nonce().kernel_path(), b"someone else's".to_vec());
    let mut run = Run::new(colab_root());
    run.answer_all(&mut sim);
    let receipt = run.check.receipt();
    assert!(!receipt.verified);
    assert_eq!(receipt.checks[0].detail, Some("already_exists"));
    assert_eq!(receipt.cleanup, CleanupState::NotNeeded);
    assert_eq!(run.sent, [CheckStep::WriteProbe]);
    assert_eq!(sim.files[&nonce().kernel_path()], b"someone else's");
}

#[test]
fn a_different_file_service_sees_a_different_file() {
    // The root belongs to another runtime: the nonce read finds nothing. The kernel still
    // removes its own probe, and both surfaces confirm it is gone.
    let mut run = Run::new(colab_root());
    let mut kernel = SimHost::default();
    for _ in 0..10 {
        let Some(command) = run.pending.first().cloned() else {
            break;
        };
        let reply = match &command.kind {
            CheckCommandKind::ReadFile { .. } | CheckCommandKind::StatFile { .. } => {
                CheckReply::FileMissing
            }
            other => kernel.check_answer(other),
        };
        run.reply(command.step, reply);
    }
    let receipt = run.check.receipt();
    assert!(!receipt.verified);
    assert_eq!(receipt.checks[2].outcome, CheckOutcome::Failed);
    assert_eq!(receipt.checks[2].detail, Some("not_found"));
    assert_eq!(receipt.cleanup, CleanupState::Confirmed);
    assert_eq!(
        receipt.error.unwrap().message,
        "verification failed: file_service_reads_nonce; see verification.checks"
    );
    assert!(kernel.files.is_empty());
}

#[test]
fn kernel_trouble_is_never_mistaken_for_success() {
    // Not sent: certainly nothing was written, nothing to clean.
    let not_sent = Run::after_write(CheckReply::KernelFailed(KernelFailure::NotSent));
    assert_eq!(not_sent.check.receipt().cleanup, CleanupState::NotNeeded);
    assert!(not_sent.check.is_finished());

    // An interrupted write may have left the probe: removal is attempted.
    let mut interrupted = Run::after_write(CheckReply::KernelFailed(KernelFailure::Error {
        ename: "KeyboardInterrupt".into(),
    }));
    assert_eq!(interrupted.sent.last(), Some(&CheckStep::RemoveProbe));
    let mut sim = SimHost::default();
    interrupted.answer_all(&mut sim);
    let receipt = interrupted.check.receipt();
    assert!(!receipt.verified);
    assert_eq!(receipt.cleanup, CleanupState::NotNeeded, "it was not there");

    // A lost kernel cannot clean up: the probe may remain.
    let lost = Run::after_write(CheckReply::KernelFailed(KernelFailure::Lost));
    assert_eq!(lost.check.receipt().cleanup, CleanupState::Uncertain);
    assert!(lost.check.probe_may_remain());

    // A write that does not answer within 60 s: no more code is queued behind it.
    let mut slow = Run::new(colab_root());
    slow.tick(60_000);
    assert!(slow.check.is_finished());
    assert_eq!(slow.sent, [CheckStep::WriteProbe]);
    let receipt = slow.check.receipt();
    assert_eq!(receipt.cleanup, CleanupState::Uncertain);
    assert!(!receipt.settled);
    assert_eq!(receipt.checks[0].outcome, CheckOutcome::Uncertain);
    slow.reply(
        CheckStep::WriteProbe,
        CheckReply::KernelOutput {
            stdout: String::new(),
        },
    );
    assert!(slow.check.is_settled());
    assert_eq!(
        slow.sent,
        [CheckStep::WriteProbe],
        "a late answer sends nothing"
    );
}

#[test]
fn a_wrong_nonce_or_forged_lines_do_not_pass() {
    let mut sim = SimHost::default();
    let mut run = Run::new(colab_root());
    while let Some(command) = run.pending.first().cloned() {
        let reply = match command.step {
            CheckStep::ReadNonce => {
                CheckReply::FileContent(b"00000000000000000000000000000000".to_vec())
            }
            _ => sim.check_answer(&command.kind),
        };
        run.reply(command.step, reply);
    }
    let receipt = run.check.receipt();
    assert_eq!(receipt.checks[2].detail, Some("content_differs"));
    assert!(!receipt.verified);

    let nonce = nonce();
    let line = |nonce: &str, json: &str| format!("{CHECK_MARKER}{nonce}:{json}\n");
    let good = line(nonce.as_str(), r#"{"op":"write","created":true}"#);
    assert!(parse_kernel_reply(&good, &nonce, KernelOp::Write).is_some());
    assert!(parse_kernel_reply(&good, &nonce, KernelOp::Remove).is_none());
    let twice = format!("{good}{good}");
    assert!(parse_kernel_reply(&twice, &nonce, KernelOp::Write).is_none());
    let other = line(&"0".repeat(32), r#"{"op":"write","created":true}"#);
    assert!(parse_kernel_reply(&other, &nonce, KernelOp::Write).is_none());
    let huge = format!("{}{good}", "x".repeat(MAX_STDOUT_BYTES));
    assert!(parse_kernel_reply(&huge, &nonce, KernelOp::Write).is_none());
}

#[test]
fn diagnostics_must_describe_a_colab_linux_python3_kernel() {
    let good = Diagnostics {
        pid: Some(7),
        python_version: Some("3.12.11".into()),
        system: Some("Linux".into()),
        content_directory: Some(true),
        colab_module: Some(true),
        release_tag: None,
    };
    assert_eq!(diagnostics_problem(&good), None);
    let with = |change: fn(&mut Diagnostics)| {
        let mut diagnostics = good.clone();
        change(&mut diagnostics);
        diagnostics_problem(&diagnostics)
    };
    assert_eq!(with(|d| d.pid = None), Some("no_process_id"));
    assert_eq!(
        with(|d| d.system = Some("Darwin".into())),
        Some("not_linux")
    );
    assert_eq!(
        with(|d| d.python_version = Some("2.7.18".into())),
        Some("not_python3")
    );
    assert_eq!(
        with(|d| d.python_version = Some("3".into())),
        Some("not_python3")
    );
    assert_eq!(
        with(|d| d.content_directory = Some(false)),
        Some("no_content_directory")
    );
    assert_eq!(with(|d| d.colab_module = None), Some("no_colab_module"));
    // Unbounded or non-printable text is dropped, not reported.
    let value = serde_json::json!({"python": "3.12\u{7}", "system": "L".repeat(33), "pid": 0});
    let parsed = parse_diagnostics(&value);
    assert_eq!(parsed.python_version, None);
    assert_eq!(parsed.system, None);
    assert_eq!(parsed.pid, None);
}

#[test]
fn roots_are_chosen_explicitly_or_not_at_all() {
    let first = colab_root();
    let second = FileServiceRoot::parse("colab://m99999999/").unwrap();
    assert_eq!(
        select_root(std::slice::from_ref(&first), None),
        Ok(first.clone())
    );
    let both = [first.clone(), second.clone()];
    assert_eq!(
        select_root(&both, None),
        Err(SetupError::ColabRootAmbiguous { count: 2 })
    );
    assert_eq!(select_root(&both, Some("colab://m99999999/")), Ok(second));
    assert_eq!(
        select_root(&both, Some("colab://m11111111/"))
            .unwrap_err()
            .code(),
        "root_invalid"
    );
    assert_eq!(
        select_root(&both, Some("colab://m0123abcd/content/x"))
            .unwrap_err()
            .code(),
        "root_invalid"
    );
}

#[test]
fn cancelling_cleans_up_what_may_exist() {
    let mut before_start = ColabCheck::new(colab_root(), nonce(), CheckTimeouts::default(), 0);
    let actions = before_start.apply(CheckEvent::Cancel, 0);
    assert_eq!(actions, [CheckAction::Finished { verified: false }]);

    let mut sim = SimHost::default();
    let mut run = Run::new(colab_root());
    let actions = run.check.apply(CheckEvent::Cancel, run.now_ms);
    assert!(actions.is_empty(), "the write in flight finishes first");
    run.answer_all(&mut sim);
    assert_eq!(
        run.sent,
        [
            CheckStep::WriteProbe,
            CheckStep::RemoveProbe,
            CheckStep::ConfirmAbsent
        ]
    );
    let receipt = run.check.receipt();
    assert!(!receipt.verified);
    assert_eq!(receipt.cleanup, CleanupState::Confirmed);
    assert_eq!(receipt.error.unwrap().code, "cancelled");
    assert!(sim.files.is_empty());
}

#[test]
fn the_kernel_program_is_one_exec_in_a_fresh_namespace() {
    let code = kernel_code(KernelOp::Remove, &nonce());
    assert!(code.starts_with("exec(\""));
    assert_eq!(
        code.lines().count(),
        1,
        "one line, so no cell magic can split it"
    );
    assert!(code.ends_with(
        "{\"__name__\": \"__jupyter_mcp_colab_check__\", \"OP\": \"remove\", \"PROBE\": \
         \"/content/jupyter-mcp-check-42424242424242424242424242424242.txt\", \"NONCE\": \
         \"42424242424242424242424242424242\", \"MARKER\": \
         \"__JUPYTER_MCP_COLAB_CHECK__42424242424242424242424242424242:\"})\n"
    ));
}

fn reply_strategy() -> impl Strategy<Value = CheckReply> {
    prop_oneof![
        Just(CheckReply::FileMissing),
        Just(CheckReply::FileExists),
        Just(CheckReply::ServiceUnavailable),
        Just(CheckReply::FileContent(
            nonce().as_str().as_bytes().to_vec()
        )),
        Just(CheckReply::FileContent(b"nope".to_vec())),
        Just(CheckReply::KernelFailed(KernelFailure::NotSent)),
        Just(CheckReply::KernelFailed(KernelFailure::Lost)),
        Just(CheckReply::BuildInfo { release_tag: None }),
        Just(CheckReply::KernelOutput {
            stdout: String::new()
        }),
    ]
}

proptest! {
    /// Whatever the answers and timing, a check ends within the sum of its step deadlines,
    /// verifies only if its cleanup was confirmed, and never dispatches a step twice.
    #[test]
    fn a_check_always_ends_and_verifies_only_with_confirmed_cleanup(
        script in proptest::collection::vec((0..4u8, reply_strategy(), 0..70_000u64), 0..30)
    ) {
        let mut sim = SimHost::default();
        let mut run = Run::new(colab_root());
        for (kind, reply, advance) in script {
            let Some(command) = run.pending.first().cloned() else { break };
            match kind {
                0 => run.reply(command.step, reply),
                1 => run.tick(advance),
                _ => {
                    let reply = sim.check_answer(&command.kind);
                    run.reply(command.step, reply);
                }
            }
        }
        // Each step may overrun its deadline by at most one tick before the check moves on.
        let deadlines = 60_000 + 15_000 * 2 + 5_000 * 2;
        let limit = START + deadlines + 5 * 70_000 + 50 * 30 + 1_000;
        while !run.check.is_finished() {
            prop_assert!(run.now_ms <= limit, "the check never ended");
            run.tick(1_000);
        }
        let receipt = run.check.receipt();
        if receipt.verified {
            prop_assert_eq!(receipt.cleanup, CleanupState::Confirmed);
            prop_assert!(receipt.checks.iter().all(|check| check.outcome == CheckOutcome::Passed));
        }
        prop_assert!(receipt.finished_at_ms.unwrap() <= limit);
    }
}
