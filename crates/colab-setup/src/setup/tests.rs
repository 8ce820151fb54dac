//! Scripted paths through the setup machine. Each test drives a [`SetupChecker`], so every step
//! of every path is also checked against the invariants of the fuzz check. Snapshots show the
//! commands a host sees and the receipts a client gets; bless them with `UPDATE_EXPECT=1`.

use std::collections::BTreeSet;

use expect_test::{Expect, expect};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::*;
use crate::check::SetupChecker;
use crate::picker::{PickerRow, PickerView};
use crate::probe::CheckCommandKind;
use crate::servers::{Availability, ServerRow};
use crate::sim::SimHost;

const START: u64 = 1_000_000;

fn alias(raw: &str) -> ServerAlias {
    ServerAlias::parse(raw).unwrap()
}

fn checker(route: Route, sim: SimHost) -> SetupChecker {
    SetupChecker::new(route, sim, START)
}

/// Answers cooperatively, ticking by the poll interval when nothing is outstanding, until the
/// setup waits for the client or has ended and settled.
fn drive(checker: &mut SetupChecker) {
    for _ in 0..2_000 {
        let idle = checker.pending.is_empty();
        if idle
            && (checker.setup.is_terminal()
                || checker.setup.status() == SetupStatus::AwaitingKernelSelection)
        {
            return;
        }
        if idle {
            checker.tick(500);
        } else {
            checker.now_ms += 100;
            checker.answer_oldest();
        }
    }
    panic!("the setup neither waited nor settled");
}

/// `list_setup_kernels`: asks for a listing and answers the observation.
fn list(checker: &mut SetupChecker, token: [u8; 4]) -> Vec<(String, String)> {
    assert!(checker.client(SetupEvent::ListChoices { token }));
    drive(checker);
    checker
        .setup
        .choice_listing()
        .map(|listing| {
            listing
                .choices
                .iter()
                .map(|choice| (choice.kernel_choice_id.to_string(), choice.label.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn select(checker: &mut SetupChecker, choice_id: &str) -> Result<(), SetupError> {
    let event = SetupEvent::SelectChoice {
        choice_id: choice_id.to_owned(),
    };
    let before = checker.setup.version();
    if checker.client(event.clone()) {
        Ok(())
    } else {
        assert_eq!(checker.setup.version(), before);
        Err(checker
            .setup
            .clone()
            .apply(event, checker.now_ms)
            .unwrap_err())
    }
}

fn describe(kind: &CommandKind) -> String {
    match kind {
        CommandKind::CheckProvider => "check_provider".into(),
        CommandKind::ReadSessions => "read_sessions".into(),
        CommandKind::ProbeRuntime => "probe_runtime".into(),
        CommandKind::LookupAssignment { alias } => format!("lookup_assignment {alias}"),
        CommandKind::CreateAssignment { alias } => format!("create_assignment {alias}"),
        CommandKind::ReleaseRuntime { endpoint } => format!("release_runtime {endpoint}"),
        CommandKind::OpenKernelPicker => "open_kernel_picker".into(),
        CommandKind::ObservePicker => "observe_picker".into(),
        CommandKind::ChooseRow { step, label } => format!("choose_row {step} {label:?}"),
        CommandKind::TypeAlias { alias } => format!("type_alias {alias}"),
        CommandKind::SubmitInput => "submit_input".into(),
        CommandKind::DismissPicker => "dismiss_picker".into(),
        CommandKind::ObserveKernelChoices => "observe_kernel_choices".into(),
        CommandKind::SelectKernelChoice {
            label, position, ..
        } => format!("select_kernel_choice {position} {label:?}"),
        CommandKind::StartKernel { label, .. } => format!("start_kernel {label:?}"),
        CommandKind::InsertTemporaryCell { source } => {
            format!("insert_temporary_cell {source:?}")
        }
        CommandKind::RunTemporaryCell { cell_id } => format!("run_temporary_cell {cell_id}"),
        CommandKind::RemoveTemporaryCell { cell_id, .. } => {
            format!("remove_temporary_cell {cell_id}")
        }
        CommandKind::FindMountedServer { alias } => format!("find_mounted_server {alias}"),
        CommandKind::MountServer { alias } => format!("mount_server {alias}"),
        CommandKind::ConnectFileService => "connect_file_service".into(),
        CommandKind::Check { step, command } => {
            let step = serde_json::to_value(step).unwrap();
            let what = match command {
                CheckCommandKind::ExecuteKernel { .. } => "execute_kernel".into(),
                CheckCommandKind::ReadBuildInfo => "read_build_info".into(),
                CheckCommandKind::ReadFile { root, path } => {
                    format!("read_file {root}{path}")
                }
                CheckCommandKind::StatFile { root, path } => {
                    format!("stat_file {root}{path}")
                }
            };
            format!("check {} {what}", step.as_str().unwrap())
        }
    }
}

/// The commands dispatched so far, one a line, with their deadlines relative to the start.
fn trace(checker: &SetupChecker) -> String {
    checker
        .dispatched
        .iter()
        .map(|command| {
            format!(
                "{} {} (+{} ms)\n",
                command.id,
                describe(&command.kind),
                command.deadline_ms - START
            )
        })
        .collect()
}

fn steps(checker: &SetupChecker) -> String {
    checker
        .provider_steps
        .iter()
        .map(|step| step.as_str())
        .collect::<Vec<_>>()
        .join(" → ")
}

/// Whether a receipt field has the value every setup in these tests starts with, whatever its
/// route: its id, notebook and times, and each of its flags false.
fn is_fresh(key: &str, value: &Value) -> bool {
    match key {
        "setupId" => value == "setup_lfls_000007",
        "notebookRef" => value == "nb.ipynb",
        "startedAtMs" => value == START,
        "deadlineAtMs" => value == START + 300_000,
        _ => value == false,
    }
}

/// The whole receipt in wire order, the proof's checks on one line.
fn full_receipt(checker: &SetupChecker) -> String {
    crate::fixtures::receipt_snapshot(&checker.setup.receipt())
}

/// The receipt's fields, in alphabetical order, with the verification shown only as whether it
/// verified: its receipt is the check's own (see the probe's tests).
fn receipt_fields(checker: &SetupChecker) -> Map<String, Value> {
    let Value::Object(mut fields) = serde_json::to_value(checker.setup.receipt()).unwrap() else {
        panic!("a receipt is an object");
    };
    if let Some(verification) = fields.get_mut("verification") {
        *verification = json!(format!(
            "verified: {}",
            verification["verified"].as_bool().unwrap()
        ));
    }
    fields
}

/// The receipt's fields that are not [`is_fresh`], so that a snapshot shows what its test is
/// about.
fn receipt(checker: &SetupChecker) -> String {
    let mut fields = receipt_fields(checker);
    fields.retain(|key, value| !is_fresh(key, value));
    serde_json::to_string_pretty(&fields).unwrap()
}

/// What changed in the receipt since `before` ([`receipt_fields`]), one field a line.
fn receipt_changes(before: &Map<String, Value>, checker: &SetupChecker) -> String {
    let after = receipt_fields(checker);
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let shown = |value: Option<&Value>| value.map_or("(absent)".to_owned(), Value::to_string);
    keys.into_iter()
        .filter(|&key| before.get(key) != after.get(key))
        .map(|key| {
            format!(
                "{key}: {} → {}\n",
                shown(before.get(key)),
                shown(after.get(key))
            )
        })
        .collect()
}

fn assert_snapshot(actual: &str, expected: Expect) {
    expected.assert_eq(actual);
}

fn cpu_session(availability: Availability) -> ServerRow {
    ServerRow {
        name: "cpu-session".into(),
        availability,
        endpoint: Some("8080-gpu-s-abc.prod.colab.dev".into()),
    }
}

fn sessions_route() -> Route {
    Route::SessionsFile {
        session: SessionName::parse("cpu-session").unwrap(),
    }
}

#[test]
fn standalone_sessions_file_happy_path() {
    let sim = SimHost {
        sessions: vec![
            ServerRow::available("other-session"),
            cpu_session(Availability::Available),
        ],
        ..SimHost::default()
    };
    let mut checker = checker(sessions_route(), sim);
    drive(&mut checker);
    assert_snapshot(
        &full_receipt(&checker),
        expect![[r#"
            {
              "setupId": "setup_lfls_000007",
              "notebookRef": "nb.ipynb",
              "route": "sessions_file",
              "status": "awaiting_kernel_selection",
              "stage": "awaiting_kernel_selection",
              "actionRequired": {
                "code": "select_kernel_choice",
                "message": "call list_setup_kernels, then select_setup_kernel with one kernelChoiceId from that listing; no kernel is chosen by default"
              },
              "sessionName": "cpu-session",
              "serverCreated": false,
              "serverMayRemain": false,
              "runtimeReleased": false,
              "startupCellRetained": false,
              "cleanupPending": false,
              "ready": false,
              "startedAtMs": 1000000,
              "deadlineAtMs": 1300000
            }"#]],
    );
    let choices = list(&mut checker, [0xab, 0xcd, 0xef, 0x01]);
    assert_eq!(
        choices,
        [
            (
                "kc1-abcdef01-0".to_owned(),
                "Python 3 (ipykernel)".to_owned()
            ),
            ("kc1-abcdef01-1".to_owned(), "R".to_owned())
        ]
    );
    let awaiting = receipt_fields(&checker);
    select(&mut checker, "kc1-abcdef01-0").unwrap();
    drive(&mut checker);
    assert_snapshot(
        &trace(&checker),
        expect![[r#"
        c0 read_sessions (+60000 ms)
        c1 observe_kernel_choices (+60100 ms)
        c2 start_kernel "Python 3 (ipykernel)" (+60200 ms)
        c3 connect_file_service (+60300 ms)
        c4 check write_probe execute_kernel (+60400 ms)
        c5 check build_info read_build_info (+15500 ms)
        c6 check read_nonce read_file https://8080-sim.prod.colab.dev/content/jupyter-mcp-check-5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e.txt (+15600 ms)
        c7 check remove_probe execute_kernel (+5700 ms)
        c8 check confirm_absent stat_file https://8080-sim.prod.colab.dev/content/jupyter-mcp-check-5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e.txt (+5800 ms)
    "#]],
    );
    assert_snapshot(
        &receipt_changes(&awaiting, &checker),
        expect![[r#"
            actionRequired: {"code":"select_kernel_choice","message":"call list_setup_kernels, then select_setup_kernel with one kernelChoiceId from that listing; no kernel is chosen by default"} → (absent)
            finishedAtMs: (absent) → 1000900
            kernelChoices: {"choices":[{"kernelChoiceId":"kc1-abcdef01-0","label":"Python 3 (ipykernel)"},{"kernelChoiceId":"kc1-abcdef01-1","label":"R"}],"listedAtMs":1000200,"listing":1} → (absent)
            kernelLabel: (absent) → "Python 3 (ipykernel)"
            ready: false → true
            stage: "awaiting_kernel_selection" → "complete"
            status: "awaiting_kernel_selection" → "ready"
            verification: (absent) → "verified: true"
        "#]],
    );
    let verification = checker.setup.receipt().verification;
    assert_eq!(verification, Some(checker.setup.check().unwrap().receipt()));
    assert!(checker.setup.is_settled());
}

#[test]
fn picker_happy_path_walks_every_provider_step() {
    let sim = SimHost {
        handoff: true,
        shape_prompt: true,
        version_prompt: true,
        sign_in_once: true,
        picker_servers: vec!["m99999999".into()],
        ..SimHost::default()
    };
    let mut checker = checker(Route::Picker { reuse: None }, sim);
    drive(&mut checker);
    assert_eq!(checker.setup.status(), SetupStatus::AwaitingKernelSelection);
    assert_snapshot(
        &steps(&checker),
        expect![
            "kernel_picker → colab_source → server_prompt → provider_handoff → server_prompt → server_selection → accelerator_selection → machine_shape_selection → runtime_version_selection → alias_input → kernel_selection"
        ],
    );
    assert_snapshot(
        &receipt(&checker),
        expect![[r#"
            {
              "actionRequired": {
                "code": "select_kernel_choice",
                "message": "call list_setup_kernels, then select_setup_kernel with one kernelChoiceId from that listing; no kernel is chosen by default"
              },
              "providerStep": "kernel_selection",
              "route": "picker",
              "serverAlias": "mc01ab001",
              "serverCreated": true,
              "stage": "awaiting_kernel_selection",
              "status": "awaiting_kernel_selection"
            }"#]],
    );
    let choices = list(&mut checker, [1, 2, 3, 4]);
    select(&mut checker, &choices[0].0).unwrap();
    drive(&mut checker);
    assert_snapshot(
        &trace(&checker),
        expect![[r#"
        c0 check_provider (+60000 ms)
        c1 open_kernel_picker (+60100 ms)
        c2 observe_picker (+60200 ms)
        c3 choose_row kernel_picker "Select Another Kernel..." (+60300 ms)
        c4 observe_picker (+60400 ms)
        c5 choose_row colab_source "Colab" (+60500 ms)
        c6 observe_picker (+60600 ms)
        c7 observe_picker (+61200 ms)
        c8 choose_row provider_handoff "Colab" (+61300 ms)
        c9 observe_picker (+61400 ms)
        c10 observe_picker (+62000 ms)
        c11 choose_row server_selection "New Colab Server" (+62100 ms)
        c12 observe_picker (+62200 ms)
        c13 choose_row accelerator_selection "CPU" (+62300 ms)
        c14 observe_picker (+62400 ms)
        c15 choose_row machine_shape_selection "Standard" (+62500 ms)
        c16 observe_picker (+62600 ms)
        c17 choose_row runtime_version_selection "Latest" (+62700 ms)
        c18 observe_picker (+62800 ms)
        c19 type_alias mc01ab001 (+62900 ms)
        c20 submit_input (+63000 ms)
        c21 observe_picker (+63100 ms)
        c22 observe_picker (+63700 ms)
        c23 observe_picker (+64300 ms)
        c24 observe_picker (+64900 ms)
        c25 observe_kernel_choices (+65000 ms)
        c26 select_kernel_choice 0 "Python 3 (ipykernel)" (+65100 ms)
        c27 insert_temporary_cell "pass" (+65200 ms)
        c28 run_temporary_cell cell-1 (+65300 ms)
        c29 remove_temporary_cell cell-1 (+65400 ms)
        c30 mount_server mc01ab001 (+65500 ms)
        c31 check write_probe execute_kernel (+65600 ms)
        c32 check build_info read_build_info (+20700 ms)
        c33 check read_nonce read_file colab://mc01ab001/content/jupyter-mcp-check-5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e.txt (+20800 ms)
        c34 check remove_probe execute_kernel (+10900 ms)
        c35 check confirm_absent stat_file colab://mc01ab001/content/jupyter-mcp-check-5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e.txt (+11000 ms)
    "#]],
    );
    assert_snapshot(
        &receipt(&checker),
        expect![[r#"
            {
              "finishedAtMs": 1006100,
              "kernelLabel": "Python 3 (ipykernel)",
              "ready": true,
              "route": "picker",
              "serverAlias": "mc01ab001",
              "serverCreated": true,
              "stage": "complete",
              "status": "ready",
              "verification": "verified: true"
            }"#]],
    );
    assert!(checker.sim.cells.is_empty(), "the temporary cell is gone");
    assert!(checker.sim.files.is_empty(), "the probe is gone");
}

#[test]
fn an_exact_alias_reuses_only_that_server() {
    let sim = SimHost {
        direct_source: true,
        version_prompt: false,
        picker_servers: vec!["m0123abc".into(), "m0123abcd".into(), "m99999999".into()],
        ..SimHost::default()
    };
    let mut checker = checker(
        Route::Picker {
            reuse: Some(alias("m0123abcd")),
        },
        sim,
    );
    drive(&mut checker);
    let choices = list(&mut checker, [9, 9, 9, 9]);
    select(&mut checker, &choices[0].0).unwrap();
    drive(&mut checker);
    assert_snapshot(
        &trace(&checker),
        expect![[r#"
        c0 check_provider (+60000 ms)
        c1 open_kernel_picker (+60100 ms)
        c2 observe_picker (+60200 ms)
        c3 choose_row kernel_picker "Colab" (+60300 ms)
        c4 observe_picker (+60400 ms)
        c5 choose_row server_selection "m0123abcd" (+60500 ms)
        c6 observe_picker (+60600 ms)
        c7 observe_kernel_choices (+60700 ms)
        c8 select_kernel_choice 0 "Python 3 (ipykernel)" (+60800 ms)
        c9 insert_temporary_cell "pass" (+60900 ms)
        c10 run_temporary_cell cell-1 (+61000 ms)
        c11 remove_temporary_cell cell-1 (+61100 ms)
        c12 mount_server m0123abcd (+61200 ms)
        c13 check write_probe execute_kernel (+61300 ms)
        c14 check build_info read_build_info (+16400 ms)
        c15 check read_nonce read_file colab://m0123abcd/content/jupyter-mcp-check-5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e.txt (+16500 ms)
        c16 check remove_probe execute_kernel (+6600 ms)
        c17 check confirm_absent stat_file colab://m0123abcd/content/jupyter-mcp-check-5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e.txt (+6700 ms)
    "#]],
    );
    assert_snapshot(
        &receipt(&checker),
        expect![[r#"
            {
              "finishedAtMs": 1001800,
              "kernelLabel": "Python 3 (ipykernel)",
              "ready": true,
              "route": "picker",
              "serverAlias": "m0123abcd",
              "stage": "complete",
              "status": "ready",
              "verification": "verified: true"
            }"#]],
    );
    assert_eq!(checker.sim.picker_servers.len(), 3, "no server was created");
}

#[test]
fn an_unknown_alias_is_refused_and_creates_nothing() {
    let sim = SimHost {
        picker_servers: vec!["m0123abce".into(), "M0123ABCD".into()],
        ..SimHost::default()
    };
    let mut checker = checker(
        Route::Picker {
            reuse: Some(alias("m0123abcd")),
        },
        sim,
    );
    drive(&mut checker);
    assert_snapshot(
        &trace(&checker),
        expect![[r#"
        c0 check_provider (+60000 ms)
        c1 open_kernel_picker (+60100 ms)
        c2 observe_picker (+60200 ms)
        c3 choose_row kernel_picker "Select Another Kernel..." (+60300 ms)
        c4 observe_picker (+60400 ms)
        c5 choose_row colab_source "Colab" (+60500 ms)
        c6 observe_picker (+60600 ms)
        c7 dismiss_picker (+60700 ms)
    "#]],
    );
    assert_snapshot(
        &receipt(&checker),
        expect![[r#"
            {
              "error": {
                "code": "alias_unknown",
                "message": "no live server is named exactly \"m0123abcd\"; nothing was created (reuse never falls back to a new server)"
              },
              "failedProviderStep": "server_selection",
              "failedStage": "acquiring_server",
              "finishedAtMs": 1000700,
              "providerStep": "server_selection",
              "route": "picker",
              "serverAlias": "m0123abcd",
              "stage": "acquiring_server",
              "status": "failed"
            }"#]],
    );
    assert_eq!(checker.sim.picker_servers.len(), 2);
}

#[test]
fn ambiguous_disabled_and_changed_aliases_fail_safely() {
    let reuse = || Route::Picker {
        reuse: Some(alias("m0123abcd")),
    };
    let mut doubled = checker(
        reuse(),
        SimHost {
            picker_servers: vec!["m0123abcd".into(), "m0123abcd".into()],
            ..SimHost::default()
        },
    );
    drive(&mut doubled);
    assert_eq!(
        doubled.setup.receipt().error.unwrap().code,
        "alias_ambiguous"
    );

    // The row changes between observation and click.
    let mut changed = checker(
        reuse(),
        SimHost {
            picker_servers: vec!["m0123abcd".into()],
            ..SimHost::default()
        },
    );
    for _ in 0..100 {
        let choose = changed
            .pending
            .values()
            .find_map(|command| match &command.kind {
                CommandKind::ChooseRow {
                    step: ProviderStep::ServerSelection,
                    ..
                } => Some(command.id),
                _ => None,
            });
        if let Some(id) = choose {
            changed.reply(id, Reply::RowChanged);
            break;
        }
        if !changed.answer_oldest() {
            changed.tick(500);
        }
    }
    drive(&mut changed);
    let receipt = changed.setup.receipt();
    assert_eq!(receipt.error.unwrap().code, "alias_changed");
    assert_eq!(
        receipt.failed_provider_step,
        Some(ProviderStep::ServerSelection)
    );

    // Tunnel reuse never falls back to a new assignment.
    let mut tunnel = checker(
        Route::Tunnel {
            reuse: Some(alias("m0123abcd")),
        },
        SimHost::default(),
    );
    drive(&mut tunnel);
    assert_eq!(tunnel.setup.receipt().error.unwrap().code, "alias_unknown");
    assert!(
        !tunnel
            .dispatched
            .iter()
            .any(|command| matches!(command.kind, CommandKind::CreateAssignment { .. }))
    );

    // A session that is not running is disabled.
    let mut stopped = checker(
        sessions_route(),
        SimHost {
            sessions: vec![cpu_session(Availability::Disabled)],
            ..SimHost::default()
        },
    );
    drive(&mut stopped);
    assert_eq!(
        stopped.setup.receipt().error.unwrap().code,
        "alias_disabled"
    );
}

#[test]
fn cancel_mid_assignment_releases_the_runtime_once_it_is_confirmed() {
    let mut checker = checker(Route::Tunnel { reuse: None }, SimHost::default());
    checker.answer_oldest(); // check_provider
    let create = *checker.pending.keys().next().unwrap();
    checker.tick(1_000);
    assert!(checker.client(SetupEvent::Cancel));
    assert_snapshot(
        &receipt(&checker),
        expect![[r#"
            {
              "cleanupPending": true,
              "error": {
                "code": "cancelled",
                "message": "the setup was cancelled"
              },
              "finishedAtMs": 1001000,
              "providerStep": "assignment_request",
              "route": "tunnel",
              "serverAlias": "mc01ab001",
              "serverMayRemain": true,
              "stage": "acquiring_server",
              "status": "cancelled"
            }"#]],
    );
    let cancelled = receipt_fields(&checker);
    // The assignment request answers late: it did create a runtime, which is ours to release.
    checker.reply(
        create,
        Reply::AssignmentCreated {
            endpoint: "8080-m-abc.prod.colab.dev".into(),
        },
    );
    drive(&mut checker);
    assert_snapshot(
        &trace(&checker),
        expect![[r#"
        c0 check_provider (+60000 ms)
        c1 create_assignment mc01ab001 (+60000 ms)
        c2 release_runtime 8080-m-abc.prod.colab.dev (+61000 ms)
    "#]],
    );
    assert_snapshot(
        &receipt_changes(&cancelled, &checker),
        expect![[r#"
            cleanupPending: true → false
            runtimeReleased: false → true
            serverCreated: false → true
            serverMayRemain: true → false
        "#]],
    );
    assert_eq!(checker.sim.released, ["8080-m-abc.prod.colab.dev"]);
}

#[test]
fn an_unconfirmed_assignment_is_reported_as_possibly_remaining() {
    let mut checker = checker(Route::Tunnel { reuse: None }, SimHost::default());
    checker.answer_oldest();
    let create = *checker.pending.keys().next().unwrap();
    checker.reply(create, Reply::Failed(Failure::Unconfirmed));
    let receipt = checker.setup.receipt();
    assert_eq!(receipt.error.unwrap().code, "assignment_unconfirmed");
    assert!(receipt.server_may_remain && !receipt.runtime_released && !receipt.cleanup_pending);
    assert_eq!(
        receipt.failed_provider_step,
        Some(ProviderStep::AssignmentRequest)
    );

    // Refusals are definite: nothing remains.
    for (refusal, code) in [
        (AssignRefusal::TooManyAssignments, "too_many_assignments"),
        (
            AssignRefusal::AcceleratorUnavailable,
            "accelerator_unavailable",
        ),
        (AssignRefusal::QuotaDenied, "quota_denied"),
    ] {
        let mut refused = SetupChecker::new(Route::Tunnel { reuse: None }, SimHost::default(), 0);
        refused.answer_oldest();
        let create = *refused.pending.keys().next().unwrap();
        refused.reply(create, Reply::AssignmentRefused(refusal));
        let receipt = refused.setup.receipt();
        assert_eq!(receipt.error.unwrap().code, code);
        assert!(!receipt.server_may_remain);
    }
}

#[test]
fn a_reused_assignment_is_never_released() {
    let mut sim = SimHost::default();
    sim.assignments
        .insert("m0123abcd".into(), "8080-existing.prod.colab.dev".into());
    let mut checker = checker(
        Route::Tunnel {
            reuse: Some(alias("m0123abcd")),
        },
        sim,
    );
    drive(&mut checker);
    assert!(checker.client(SetupEvent::Cancel));
    drive(&mut checker);
    let receipt = checker.setup.receipt();
    assert_eq!(receipt.status, SetupStatus::Cancelled);
    assert!(!receipt.server_created && !receipt.server_may_remain && !receipt.runtime_released);
    assert!(checker.sim.released.is_empty());
}

#[test]
fn the_deadline_includes_time_awaiting_a_choice() {
    let mut checker = checker(Route::Picker { reuse: None }, SimHost::default());
    drive(&mut checker);
    let choices = list(&mut checker, [7; 4]);
    assert_eq!(choices.len(), 2);
    let deadline = checker.setup.deadline_at_ms();
    checker.tick(deadline - checker.now_ms - 1);
    assert_eq!(checker.setup.status(), SetupStatus::AwaitingKernelSelection);
    checker.tick(1);
    // Selecting after the deadline is refused.
    assert_eq!(
        select(&mut checker, &choices[0].0).unwrap_err().code(),
        "setup_finished"
    );
    drive(&mut checker);
    assert_snapshot(
        &receipt(&checker),
        expect![[r#"
            {
              "error": {
                "code": "deadline_exceeded",
                "message": "the setup did not finish within 300000 ms (stage awaiting_kernel_selection, waiting for select_kernel_choice); start it again"
              },
              "failedProviderStep": "kernel_selection",
              "failedStage": "awaiting_kernel_selection",
              "finishedAtMs": 1300000,
              "providerStep": "kernel_selection",
              "route": "picker",
              "serverAlias": "mc01ab001",
              "serverCreated": true,
              "serverMayRemain": true,
              "stage": "awaiting_kernel_selection",
              "status": "failed"
            }"#]],
    );
    assert!(matches!(
        checker.dispatched.last().unwrap().kind,
        CommandKind::DismissPicker
    ));
}

#[test]
fn every_route_ends_by_the_deadline_even_if_the_host_never_answers() {
    for route in [
        sessions_route(),
        Route::RuntimeUrl,
        Route::Tunnel { reuse: None },
        Route::Picker { reuse: None },
        Route::MountServer {
            alias: alias("m0123abcd"),
        },
    ] {
        let mut checker = checker(route, SimHost::default());
        let deadline = checker.setup.deadline_at_ms();
        while checker.now_ms < deadline {
            checker.tick(10_000);
        }
        let receipt = checker.setup.receipt();
        assert_eq!(receipt.status, SetupStatus::Failed);
        // The first command timed out long before; it is still owed an answer.
        assert_eq!(receipt.error.unwrap().code, "command_timed_out");
        assert!(receipt.cleanup_pending);
        checker.finish();
    }
}

#[test]
fn a_new_listing_invalidates_old_choice_ids() {
    let mut checker = checker(Route::RuntimeUrl, SimHost::default());
    drive(&mut checker);
    assert_eq!(
        select(&mut checker, "kc1-00000000-0").unwrap_err().code(),
        "choice_stale"
    );
    let first = list(&mut checker, [1, 1, 1, 1]);
    let second = list(&mut checker, [1, 1, 1, 1]);
    assert_ne!(
        first[0].0, second[0].0,
        "ids are fresh even with the same token"
    );
    assert_eq!(
        select(&mut checker, &first[0].0).unwrap_err(),
        SetupError::ChoiceStale {
            choice_id: first[0].0.clone()
        }
    );
    // While a listing is being read, no id is valid.
    assert!(checker.client(SetupEvent::ListChoices { token: [2; 4] }));
    assert_eq!(
        select(&mut checker, &second[0].0).unwrap_err().code(),
        "listing_pending"
    );
    drive(&mut checker);
    let third = checker.setup.choice_listing().unwrap().choices[1]
        .kernel_choice_id
        .to_string();
    select(&mut checker, &third).unwrap();
    // The standalone host starts the kernel at once, so the setup has left the selection.
    assert_eq!(
        select(&mut checker, &third).unwrap_err().code(),
        "not_awaiting_selection"
    );
    drive(&mut checker);
    assert_eq!(checker.setup.status(), SetupStatus::Ready);
    assert_eq!(checker.setup.receipt().kernel_label.as_deref(), Some("R"));
}

#[test]
fn unsafe_listings_and_selections_fail_safely() {
    // Duplicate labels fail the setup: a label could not name one of them.
    let mut duplicate = checker(
        Route::RuntimeUrl,
        SimHost {
            kernel_labels: vec!["Python 3".into(), "Python 3".into()],
            ..SimHost::default()
        },
    );
    drive(&mut duplicate);
    list(&mut duplicate, [0; 4]);
    assert_eq!(
        duplicate.setup.receipt().error.unwrap().code,
        "choices_duplicate"
    );

    // An incomplete listing is refused; the setup keeps waiting and can list again.
    let mut incomplete = checker(Route::RuntimeUrl, SimHost::default());
    drive(&mut incomplete);
    assert!(incomplete.client(SetupEvent::ListChoices { token: [0; 4] }));
    let observe = *incomplete.pending.keys().next().unwrap();
    incomplete.reply(
        observe,
        Reply::KernelChoices {
            labels: vec!["Python 3".into()],
            complete: false,
        },
    );
    assert_eq!(
        incomplete.setup.choice_listing().unwrap_err().code(),
        "choices_incomplete"
    );
    let receipt = incomplete.setup.receipt();
    assert_eq!(receipt.status, SetupStatus::AwaitingKernelSelection);
    assert_eq!(receipt.listing_problem.unwrap().code, "choices_incomplete");
    assert_eq!(list(&mut incomplete, [0; 4]).len(), 2);

    // The choices change between listing and selection: nothing is selected, the listing dies.
    let mut changed = checker(Route::Picker { reuse: None }, SimHost::default());
    drive(&mut changed);
    let choices = list(&mut changed, [0; 4]);
    changed.sim.kernel_labels.push("Julia".into());
    select(&mut changed, &choices[0].0).unwrap();
    drive(&mut changed);
    let receipt = changed.setup.receipt();
    assert_eq!(receipt.status, SetupStatus::AwaitingKernelSelection);
    assert_eq!(receipt.listing_problem.unwrap().code, "choices_changed");
    assert!(receipt.kernel_label.is_none());
    assert_eq!(
        select(&mut changed, &choices[0].0).unwrap_err().code(),
        "choice_stale"
    );

    // VS Code did not confirm the selection: fail closed.
    let mut unconfirmed = checker(Route::Picker { reuse: None }, SimHost::default());
    drive(&mut unconfirmed);
    let choices = list(&mut unconfirmed, [0; 4]);
    select(&mut unconfirmed, &choices[0].0).unwrap();
    let selection = *unconfirmed.pending.keys().next().unwrap();
    unconfirmed.reply(selection, Reply::KernelSelected { confirmed: None });
    drive(&mut unconfirmed);
    let receipt = unconfirmed.setup.receipt();
    assert_eq!(receipt.error.unwrap().code, "selection_unconfirmed");
    assert_eq!(receipt.failed_stage, Some(Stage::AwaitingKernelSelection));
    unconfirmed.finish();
}

#[test]
fn client_commands_outside_a_selection_are_refused_without_change() {
    let mut checker = checker(Route::Picker { reuse: None }, SimHost::default());
    assert_eq!(
        select(&mut checker, "kc1-00000000-0").unwrap_err().code(),
        "not_awaiting_selection"
    );
    assert!(!checker.client(SetupEvent::ListChoices { token: [0; 4] }));
    assert!(checker.client(SetupEvent::Cancel));
    assert!(!checker.client(SetupEvent::ListChoices { token: [0; 4] }));
    // Cancelling twice is harmless.
    assert!(checker.client(SetupEvent::Cancel));
    checker.finish();
}

#[test]
fn picker_surprises_stop_the_setup_at_their_step() {
    let failing_step = |sim: SimHost, script: &dyn Fn(&mut SetupChecker) -> bool| {
        let mut checker = checker(Route::Picker { reuse: None }, sim);
        for _ in 0..200 {
            if checker.setup.is_terminal() || script(&mut checker) {
                break;
            }
            if !checker.answer_oldest() {
                checker.tick(500);
            }
        }
        drive(&mut checker);
        let receipt = checker.setup.receipt();
        checker.finish();
        (
            receipt.error.unwrap().code,
            receipt.failed_provider_step.map(ProviderStep::as_str),
        )
    };
    // Answers the next picker observation with `view`, once.
    let observe_with = |view: PickerView, at: ProviderStep| {
        move |checker: &mut SetupChecker| {
            let observe = checker.pending.values().find_map(|command| {
                (command.kind == CommandKind::ObservePicker).then_some(command.id)
            });
            match observe {
                Some(id) if checker.setup.receipt().provider_step == Some(at) => {
                    checker.reply(id, Reply::Picker(view.clone()));
                    true
                }
                _ => false,
            }
        }
    };
    let quick_pick = |labels: &[&str]| PickerView::QuickPick {
        title: "Select Kernel".into(),
        rows: labels.iter().map(|label| PickerRow::new(*label)).collect(),
        busy: false,
    };

    for (view, at, expected) in [
        // Only suggested local kernels: never accepted as a default.
        (
            quick_pick(&["Python 3.11.7 (.venv)"]),
            ProviderStep::KernelPicker,
            ("picker_unexpected", Some("kernel_picker")),
        ),
        // The source picker comes back without an empty prompt in between.
        (
            quick_pick(&["Python Environments...", "Colab"]),
            ProviderStep::ServerPrompt,
            ("picker_unexpected", Some("provider_handoff")),
        ),
        // No CPU row: a GPU is never chosen in its place.
        (
            quick_pick(&["T4 GPU", "v5e-1 TPU"]),
            ProviderStep::AcceleratorSelection,
            ("picker_unexpected", Some("accelerator_selection")),
        ),
        // The alias box does not name Colab CPU.
        (
            PickerView::InputBox {
                title: "Alias your server".into(),
                prompt: "Colab T4 GPU".into(),
                value: String::new(),
            },
            ProviderStep::RuntimeVersionSelection,
            ("alias_prompt_mismatch", Some("alias_input")),
        ),
        // The kernel list does not show the alias.
        (
            PickerView::QuickPick {
                title: "Select a kernel from Colab CPU".into(),
                rows: vec![PickerRow::new("Python 3 (ipykernel)")],
                busy: false,
            },
            ProviderStep::KernelSelection,
            ("alias_not_confirmed", Some("kernel_selection")),
        ),
    ] {
        let script = observe_with(view.clone(), at);
        assert_eq!(
            failing_step(SimHost::default(), &script),
            expected,
            "{view:?} at {at:?}"
        );
    }
    // The typed alias reads back differently.
    let readback = |checker: &mut SetupChecker| {
        let typed = checker.pending.values().find_map(|command| {
            matches!(command.kind, CommandKind::TypeAlias { .. }).then_some(command.id)
        });
        if let Some(id) = typed {
            checker.reply(
                id,
                Reply::AliasReadBack {
                    value: "m0000000".into(),
                },
            );
        }
        typed.is_some()
    };
    assert_eq!(
        failing_step(SimHost::default(), &readback),
        ("alias_readback_mismatch", Some("alias_input"))
    );
    // A second hand-off after another empty prompt.
    let mut twice = checker(Route::Picker { reuse: None }, SimHost::default());
    let mut handoffs = 0;
    for _ in 0..200 {
        if twice.setup.is_terminal() {
            break;
        }
        let observe = twice
            .pending
            .values()
            .find_map(|command| (command.kind == CommandKind::ObservePicker).then_some(command.id));
        let step = twice.setup.receipt().provider_step;
        match (observe, step) {
            (Some(id), Some(ProviderStep::ServerPrompt)) if handoffs < 4 => {
                let view = if handoffs % 2 == 0 {
                    quick_pick(&[])
                } else {
                    quick_pick(&["Colab"])
                };
                handoffs += 1;
                twice.reply(id, Reply::Picker(view));
            }
            _ => {
                if !twice.answer_oldest() {
                    twice.tick(500);
                }
            }
        }
    }
    let receipt = twice.setup.receipt();
    assert_eq!(receipt.error.unwrap().code, "picker_unexpected");
    assert_eq!(
        receipt.failed_provider_step,
        Some(ProviderStep::ProviderHandoff)
    );
}

#[test]
fn a_closed_picker_gives_up_after_its_timeout() {
    let mut checker = checker(Route::Picker { reuse: None }, SimHost::default());
    checker.answer_oldest(); // check_provider
    checker.answer_oldest(); // open_kernel_picker
    checker.sim.screen = crate::sim::Screen::Closed;
    for _ in 0..400 {
        if checker.setup.is_terminal() {
            break;
        }
        if !checker.answer_oldest() {
            checker.tick(500);
        }
    }
    let receipt = checker.setup.receipt();
    assert_eq!(receipt.error.unwrap().code, "picker_closed");
    assert!(receipt.finished_at_ms.unwrap() - START >= 60_000);
    assert!(receipt.finished_at_ms.unwrap() - START < 70_000);
}

#[test]
fn sign_in_and_expired_credentials_wait_for_the_user() {
    let mut picker = checker(
        Route::Picker { reuse: None },
        SimHost {
            sign_in_once: true,
            ..SimHost::default()
        },
    );
    let mut saw_sign_in = false;
    for _ in 0..200 {
        if picker.setup.status() == SetupStatus::AwaitingUser {
            let receipt = picker.setup.receipt();
            assert_eq!(receipt.action_required.unwrap().code, ActionCode::SignIn);
            saw_sign_in = true;
        }
        if picker.setup.status() == SetupStatus::AwaitingKernelSelection {
            break;
        }
        if !picker.answer_oldest() {
            picker.tick(500);
        }
    }
    assert!(saw_sign_in);
    assert_eq!(picker.setup.status(), SetupStatus::AwaitingKernelSelection);

    // The sessions file has the session, but its token expired and could not be refreshed.
    let mut sessions = checker(
        sessions_route(),
        SimHost {
            sessions: vec![cpu_session(Availability::CredentialsExpired)],
            ..SimHost::default()
        },
    );
    sessions.answer_oldest();
    let receipt = sessions.setup.receipt();
    assert_eq!(receipt.status, SetupStatus::AwaitingUser);
    assert_eq!(
        receipt.action_required.unwrap().code,
        ActionCode::RefreshCredentials
    );
    sessions.sim.sessions = vec![cpu_session(Availability::Available)];
    sessions.tick(5_000);
    drive(&mut sessions);
    assert_eq!(
        sessions.setup.status(),
        SetupStatus::AwaitingKernelSelection
    );

    // The tunnel needs credentials: wait, retry, and give up at the deadline.
    let mut tunnel = checker(Route::Tunnel { reuse: None }, SimHost::default());
    let first = *tunnel.pending.keys().next().unwrap();
    tunnel.reply(first, Reply::Failed(Failure::AuthenticationRequired));
    assert_eq!(tunnel.setup.status(), SetupStatus::AwaitingUser);
    for _ in 0..400 {
        if tunnel.setup.is_terminal() {
            break;
        }
        match tunnel.pending.keys().next().copied() {
            Some(id) => tunnel.reply(id, Reply::Failed(Failure::AuthenticationRequired)),
            None => tunnel.tick(5_000),
        }
    }
    let receipt = tunnel.setup.receipt();
    let error = receipt.error.unwrap();
    assert_eq!(error.code, "deadline_exceeded");
    assert!(error.message.contains("waiting for refresh_credentials"));
    assert_eq!(receipt.failed_stage, Some(Stage::Preparing));
}

#[test]
fn a_startup_cell_is_removed_only_when_safe() {
    // Cancelled while the cell runs: retained and reported, then removed once its run settles.
    let mut running = checker(Route::Picker { reuse: None }, SimHost::default());
    drive(&mut running);
    let choices = list(&mut running, [0; 4]);
    select(&mut running, &choices[0].0).unwrap();
    let run = loop {
        let run = running.pending.values().find_map(|command| {
            matches!(command.kind, CommandKind::RunTemporaryCell { .. }).then_some(command.id)
        });
        if let Some(run) = run {
            break run;
        }
        assert!(running.answer_oldest());
    };
    assert!(running.client(SetupEvent::Cancel));
    let receipt = running.setup.receipt();
    assert!(receipt.startup_cell_retained && receipt.cleanup_pending);
    assert_eq!(
        receipt.startup_cell_retained_reason,
        Some(RetainReason::QueuedOrRunning)
    );
    assert!(
        !running.client(SetupEvent::ListChoices { token: [0; 4] }),
        "a cancelled setup lists nothing"
    );
    running.reply(run, Reply::CellRan(CellRun::Completed));
    drive(&mut running);
    let receipt = running.setup.receipt();
    assert!(!receipt.startup_cell_retained && !receipt.cleanup_pending);
    assert!(running.sim.cells.is_empty());

    // Edited by the user before removal: retained and reported; the setup still completes.
    let mut edited = checker(Route::Picker { reuse: None }, SimHost::default());
    drive(&mut edited);
    let choices = list(&mut edited, [0; 4]);
    select(&mut edited, &choices[0].0).unwrap();
    loop {
        let remove = edited.pending.values().find_map(|command| {
            matches!(command.kind, CommandKind::RemoveTemporaryCell { .. }).then_some(command.id)
        });
        if let Some(remove) = remove {
            edited.reply(remove, Reply::CellRetained(RetainReason::Edited));
            break;
        }
        assert!(edited.answer_oldest());
    }
    drive(&mut edited);
    let receipt = edited.setup.receipt();
    assert_eq!(receipt.status, SetupStatus::Ready);
    assert_eq!(
        receipt.startup_cell_retained_reason,
        Some(RetainReason::Edited)
    );
}

#[test]
fn mounting_an_existing_server_selects_and_starts_nothing() {
    let mut checker = checker(
        Route::MountServer {
            alias: alias("m0123abcd"),
        },
        SimHost::default(),
    );
    drive(&mut checker);
    assert_snapshot(
        &trace(&checker),
        expect![[r#"
            c0 find_mounted_server m0123abcd (+60000 ms)
            c1 check_provider (+60100 ms)
            c2 mount_server m0123abcd (+60200 ms)
            c3 check write_probe execute_kernel (+60300 ms)
            c4 check build_info read_build_info (+15400 ms)
            c5 check read_nonce read_file colab://m0123abcd/content/jupyter-mcp-check-5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e.txt (+15500 ms)
            c6 check remove_probe execute_kernel (+5600 ms)
            c7 check confirm_absent stat_file colab://m0123abcd/content/jupyter-mcp-check-5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e.txt (+5700 ms)
        "#]],
    );
    let receipt = checker.setup.receipt();
    assert!(receipt.ready && !receipt.server_created);
}

#[test]
fn a_server_mounted_already_is_reused_before_the_provider_or_any_picker() {
    let mut checker = checker(
        Route::MountServer {
            alias: alias("m0123abcd"),
        },
        SimHost {
            mounted: ["m0123abcd".to_owned()].into(),
            ..SimHost::default()
        },
    );
    drive(&mut checker);
    assert_snapshot(
        &trace(&checker),
        expect![[r#"
            c0 find_mounted_server m0123abcd (+60000 ms)
            c1 check write_probe execute_kernel (+60100 ms)
            c2 check build_info read_build_info (+15200 ms)
            c3 check read_nonce read_file colab://m0123abcd/content/jupyter-mcp-check-5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e.txt (+15300 ms)
            c4 check remove_probe execute_kernel (+5400 ms)
            c5 check confirm_absent stat_file colab://m0123abcd/content/jupyter-mcp-check-5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e.txt (+5500 ms)
        "#]],
    );
    let receipt = checker.setup.receipt();
    assert!(receipt.ready && !receipt.server_created);
}

#[test]
fn a_failed_verification_fails_the_setup_and_cleans_up() {
    let mut checker = checker(
        Route::RuntimeUrl,
        SimHost {
            file_service_down: true,
            ..SimHost::default()
        },
    );
    drive(&mut checker);
    let choices = list(&mut checker, [0; 4]);
    select(&mut checker, &choices[0].0).unwrap();
    drive(&mut checker);
    let receipt = checker.setup.receipt();
    assert_eq!(receipt.status, SetupStatus::Failed);
    assert_eq!(receipt.failed_stage, Some(Stage::Verifying));
    assert_eq!(
        receipt.error.unwrap().message,
        "verification failed: file_service_reads_nonce; see verification.checks"
    );
    let verification = receipt.verification.unwrap();
    assert!(!verification.verified);
    // The kernel removed the probe, but the file service could not confirm it.
    assert_eq!(verification.cleanup, crate::probe::CleanupState::Uncertain);
    assert!(checker.sim.files.is_empty());
}

#[test]
fn cancelling_during_verification_cleans_up_the_probe() {
    let mut checker = checker(Route::RuntimeUrl, SimHost::default());
    drive(&mut checker);
    let choices = list(&mut checker, [0; 4]);
    select(&mut checker, &choices[0].0).unwrap();
    loop {
        let reading = checker.pending.values().any(|command| {
            matches!(
                command.kind,
                CommandKind::Check {
                    step: CheckStep::ReadNonce,
                    ..
                }
            )
        });
        if reading {
            break;
        }
        assert!(checker.answer_oldest());
    }
    assert!(checker.client(SetupEvent::Cancel));
    assert!(checker.setup.cleanup_pending());
    drive(&mut checker);
    let receipt = checker.setup.receipt();
    assert_eq!(receipt.status, SetupStatus::Cancelled);
    let verification = receipt.verification.unwrap();
    assert!(!verification.verified);
    assert_eq!(verification.cleanup, crate::probe::CleanupState::Confirmed);
    assert!(checker.sim.files.is_empty());
}

/// The tunnel route against a model of what cancellation must undo: a runtime is released
/// exactly when this setup's own request created it, whenever the cancel lands and whenever the
/// answers arrive; a runtime that already existed is never released.
#[derive(Clone, Debug)]
enum TunnelOp {
    /// Answer the k-th outstanding command cooperatively.
    Answer(usize),
    /// Answer the assignment request, if outstanding, with this outcome.
    Assign(u8),
    Tick(u64),
    Cancel,
}

fn tunnel_op() -> impl Strategy<Value = TunnelOp> {
    prop_oneof![
        4 => (0..4usize).prop_map(TunnelOp::Answer),
        2 => (0..5u8).prop_map(TunnelOp::Assign),
        2 => prop_oneof![Just(0u64), Just(1_000), Just(61_000)].prop_map(TunnelOp::Tick),
        1 => Just(TunnelOp::Cancel),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn cancel_releases_what_was_assigned_and_nothing_else(
        reuse in any::<bool>(),
        exists in any::<bool>(),
        ops in proptest::collection::vec(tunnel_op(), 0..40),
    ) {
        let mut sim = SimHost::default();
        if exists {
            sim.assignments.insert("m0123abcd".into(), "8080-existing".into());
        }
        let route = Route::Tunnel { reuse: reuse.then(|| alias("m0123abcd")) };
        let mut checker = checker(route, sim);
        for op in ops {
            match op {
                TunnelOp::Answer(k) => checker.answer_one(k),
                TunnelOp::Assign(outcome) => {
                    let create = checker.pending.values().find_map(|command| {
                        matches!(command.kind, CommandKind::CreateAssignment { .. }).then_some(command.id)
                    });
                    if let Some(id) = create {
                        let reply = match outcome {
                            0 => Reply::AssignmentCreated { endpoint: format!("8080-new-{}", id.0) },
                            1 => Reply::AssignmentFound { endpoint: "8080-existing".into() },
                            2 => Reply::Failed(Failure::Unconfirmed),
                            3 => Reply::Failed(Failure::NotPerformed),
                            _ => Reply::AssignmentRefused(AssignRefusal::TooManyAssignments),
                        };
                        checker.reply(id, reply);
                    }
                }
                TunnelOp::Tick(ms) => checker.tick(ms),
                TunnelOp::Cancel => {
                    checker.client(SetupEvent::Cancel);
                }
            }
        }
        checker.finish();
        let receipt = checker.setup.receipt();
        let released = checker.released_endpoints();
        if receipt.status == SetupStatus::Ready {
            prop_assert!(released.is_empty());
        } else {
            let created: Vec<String> = checker.created.iter().cloned().collect();
            prop_assert_eq!(&released, &created);
        }
        prop_assert!(!released.contains(&"8080-existing".to_owned()));
        if reuse {
            prop_assert!(released.is_empty() && !receipt.server_created);
        }
        // Whatever remains is said to remain.
        let unconfirmed = checker.dispatched.iter().any(|command| {
            matches!(command.kind, CommandKind::CreateAssignment { .. })
        }) && checker.created.is_empty()
            && receipt.server_may_remain;
        if receipt.status != SetupStatus::Ready && receipt.server_may_remain {
            prop_assert!(unconfirmed || (!checker.created.is_empty() && !receipt.runtime_released));
        }
    }
}
