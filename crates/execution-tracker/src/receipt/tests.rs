use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::id::ExecutionId;
use crate::output::{IopubEvent, OutputLimits};
use crate::run::{CellCheck, CellRequest, ExecuteReply, ReplyStatus};

/// Prints the stream text of the outputs, with the mode in front.
fn formatter(outputs: &[Value], mode: OutputMode, _: usize) -> String {
    let text: String = outputs
        .iter()
        .filter_map(|output| output["text"].as_str())
        .collect();
    match mode {
        OutputMode::Summary => format!("[{} outputs]", outputs.len()),
        OutputMode::Text => text,
        OutputMode::Full => format!("full:{text}"),
    }
}

/// A run whose cells printed texts of the given lengths and completed, except that the last
/// cell is left executing when `finish` is false.
fn run_with_outputs(lengths: &[usize], finish: bool) -> Run {
    let cells = (0..lengths.len())
        .map(|position| CellRequest {
            cell_id: format!("c{position}"),
            index: position,
            source: String::new(),
        })
        .collect();
    let mut run = Run::new(
        ExecutionId::from_parts(1, 1),
        "nb",
        cells,
        1,
        OutputLimits::default(),
    );
    run.start(2);
    for (position, &length) in lengths.iter().enumerate() {
        let check = CellCheck::Found {
            current_index: position,
            cell_id: format!("c{position}"),
            source: String::new(),
        };
        run.on_cell_checked(position, check, 3);
        let text: String = (0..length)
            .map(|offset| if offset % 50 == 49 { '\n' } else { 'é' })
            .collect();
        run.on_output(
            position,
            IopubEvent::Stream {
                name: "stdout".into(),
                text,
            },
            4,
        );
        if finish || position + 1 < lengths.len() {
            run.on_execute_reply(
                position,
                ExecuteReply {
                    status: ReplyStatus::Ok,
                    execution_count: Some(1),
                },
                5,
            );
            run.on_kernel_idle(position, 5);
        }
    }
    run
}

fn outputs(receipt: &Receipt) -> Vec<&str> {
    receipt
        .cells
        .iter()
        .filter_map(|cell| cell.output.as_deref())
        .collect()
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

#[test]
fn max_output_chars_is_clamped() {
    assert_eq!(clamp_max_output_chars(None), 12_000);
    assert_eq!(clamp_max_output_chars(Some(0)), 1_000);
    assert_eq!(clamp_max_output_chars(Some(5_000)), 5_000);
    assert_eq!(clamp_max_output_chars(Some(1_000_000_000)), 100_000);
    assert_eq!(clamp_max_output_chars(Some(u64::MAX)), 100_000);
}

#[test]
fn fit_keeps_short_text_and_marks_every_cut() {
    assert_eq!(fit("short", 5, 1000), "short");
    let long = "x".repeat(5000);
    let cut = fit(&long, 5000, 1000);
    assert_eq!(chars(&cut), 1000);
    let kept = cut.find('\n').unwrap();
    assert!(cut.ends_with(&format!("\n… [{} characters cut]", 5000 - kept)));
    // A head shorter than the whole: the marker counts from the whole.
    let cut = fit("abc", 4000, 1000);
    assert_eq!(cut, "abc\n… [3997 characters cut]");
    assert_eq!(fit(&long, 5000, 100), OMITTED_MARKER);
    assert!(chars(OMITTED_MARKER) <= OMISSION_RESERVE);
    assert_eq!(fit("", 0, 0), "");
}

#[test]
fn the_receipt_has_the_reference_shape() {
    let mut run = run_with_outputs(&[3, 3], false);
    run.on_observation(crate::run::KernelObservation::Status(KernelStatus::Busy), 6);
    let options = ReceiptOptions {
        include_outputs: true,
        wait_timed_out: true,
        ..ReceiptOptions::default()
    };
    let receipt = serde_json::to_value(run.receipt(&options, &formatter, true)).unwrap();
    assert_eq!(
        receipt,
        json!({
            "executionId": "exec_1_000001",
            "notebookRef": "nb",
            "status": "running",
            "waitTimedOut": true,
            "notebookCommandPending": true,
            "progress": {"cellsDone": 1, "cellsTotal": 2},
            "cells": [
                {"cellId": "c0", "requestedIndex": 0, "currentIndex": 0, "state": "completed", "executionOrder": 1,
                 "startedAtMs": 4, "durationMs": 1, "output": "ééé"},
                {"cellId": "c1", "requestedIndex": 1, "currentIndex": 1, "state": "dispatched",
                 "startedAtMs": 4, "output": "ééé"},
            ],
        })
    );
}

#[test]
fn a_terminal_receipt_has_no_wait_timeout_and_carries_the_stop_reason() {
    let mut run = run_with_outputs(&[1, 1], false);
    run.on_lifecycle(
        crate::run::KernelLifecycle::Died,
        Some(KernelStatus::Dead),
        9,
    );
    let options = ReceiptOptions {
        wait_timed_out: true,
        ..ReceiptOptions::default()
    };
    let receipt = serde_json::to_value(run.receipt(&options, &formatter, false)).unwrap();
    assert_eq!(receipt["status"], "unavailable");
    assert_eq!(receipt["reasonCode"], "kernel_died");
    assert_eq!(receipt["kernelStatusAtStop"], "dead");
    assert!(receipt["reason"].as_str().unwrap().contains("kernel died"));
    assert!(receipt.get("waitTimedOut").is_none());
    assert!(
        receipt["cells"][0].get("output").is_none(),
        "outputs only when asked"
    );
}

#[test]
fn cells_never_dispatched_have_no_output() {
    let mut run = run_with_outputs(&[2], true);
    let cells = vec![
        CellRequest {
            cell_id: "x".into(),
            index: 0,
            source: String::new()
        };
        2
    ];
    let mut other = Run::new(
        ExecutionId::from_parts(1, 2),
        "nb",
        cells,
        1,
        OutputLimits::default(),
    );
    other.invalidate(crate::run::Invalidation::Interrupt, 2);
    let options = ReceiptOptions {
        include_outputs: true,
        ..ReceiptOptions::default()
    };
    assert!(
        other
            .receipt(&options, &formatter, false)
            .cells
            .iter()
            .all(|cell| cell.output.is_none())
    );
    run.compact(&formatter);
    assert_eq!(outputs(&run.receipt(&options, &formatter, false)), ["éé"]);
}

#[test]
fn each_cell_is_capped_at_the_smaller_of_twelve_thousand_and_max_output_chars() {
    let run = run_with_outputs(&[30_000, 500], true);
    for (max, expected) in [
        (None, 12_000),
        (Some(2_000), 2_000),
        (Some(50_000), 12_000),
        (Some(10), 1_000),
    ] {
        let options = ReceiptOptions {
            include_outputs: true,
            max_output_chars: max,
            ..ReceiptOptions::default()
        };
        let receipt = run.receipt(&options, &formatter, false);
        let texts = outputs(&receipt);
        assert_eq!(chars(texts[0]), expected, "{max:?}");
        let kept = texts[0].rsplit_once("\n… [").unwrap().0;
        assert!(texts[0].ends_with(&format!("[{} characters cut]", 30_000 - chars(kept))));
        assert_eq!(chars(texts[1]), 500);
    }
}

#[test]
fn the_receipt_is_capped_at_forty_eight_thousand_and_says_where() {
    let run = run_with_outputs(&[11_000; 8], true);
    let options = ReceiptOptions {
        include_outputs: true,
        ..ReceiptOptions::default()
    };
    let receipt = run.receipt(&options, &formatter, false);
    let texts = outputs(&receipt);
    assert_eq!(texts.len(), 8, "every dispatched cell says something");
    assert!(texts.iter().map(|text| chars(text)).sum::<usize>() <= RECEIPT_OUTPUT_CAP);
    assert_eq!(chars(texts[0]), 11_000);
    assert!(texts[4].contains("characters cut]"));
    for text in &texts[5..] {
        assert_eq!(*text, OMITTED_MARKER);
    }
}

#[test]
fn two_hundred_fifty_six_large_cells_stay_within_the_receipt_cap() {
    let run = run_with_outputs(&[2_000; 256], true);
    let options = ReceiptOptions {
        include_outputs: true,
        max_output_chars: Some(1_000),
        ..ReceiptOptions::default()
    };
    let receipt = run.receipt(&options, &formatter, false);
    assert_eq!(outputs(&receipt).len(), 256);
    assert!(
        outputs(&receipt)
            .iter()
            .map(|text| chars(text))
            .sum::<usize>()
            <= RECEIPT_OUTPUT_CAP
    );
}

#[test]
fn each_mode_goes_through_the_formatter() {
    let run = run_with_outputs(&[2], true);
    for (mode, expected) in [
        (OutputMode::Summary, "[1 outputs]"),
        (OutputMode::Text, "éé"),
        (OutputMode::Full, "full:éé"),
    ] {
        let options = ReceiptOptions {
            include_outputs: true,
            output_mode: mode,
            ..ReceiptOptions::default()
        };
        assert_eq!(
            outputs(&run.receipt(&options, &formatter, false)),
            [expected]
        );
    }
    assert_eq!(json!(OutputMode::Summary), "summary");
    assert_eq!(
        serde_json::from_value::<OutputMode>(json!("full")).unwrap(),
        OutputMode::Full
    );
    assert_eq!(OutputMode::default(), OutputMode::Text);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Releasing a run's raw outputs never changes what its receipts say, and every receipt
    /// keeps both caps.
    #[test]
    fn compacted_receipts_equal_live_receipts(
        lengths in prop_oneof![
            proptest::collection::vec(prop_oneof![0..200usize, 800..1_200usize, 11_000..13_000usize], 1..40),
            // Many large cells: the receipt budget runs out at every per-cell limit.
            proptest::collection::vec(1_000..13_000usize, 30..70),
        ],
        max in proptest::option::of(prop_oneof![0..1_500u64, 0..20_000u64]),
        mode in prop_oneof![Just(OutputMode::Summary), Just(OutputMode::Text), Just(OutputMode::Full)],
    ) {
        let live = run_with_outputs(&lengths, true);
        let mut compacted = live.clone();
        compacted.compact(&formatter);
        prop_assert!(compacted.live_outputs().is_none());
        let options = ReceiptOptions { include_outputs: true, output_mode: mode, max_output_chars: max, wait_timed_out: false };
        let expected = live.receipt(&options, &formatter, false);
        let per_cell = CELL_OUTPUT_CAP.min(clamp_max_output_chars(max));
        let texts = outputs(&expected);
        prop_assert!(texts.iter().all(|text| chars(text) <= per_cell));
        prop_assert!(texts.iter().map(|text| chars(text)).sum::<usize>() <= RECEIPT_OUTPUT_CAP);
        prop_assert_eq!(compacted.receipt(&options, &formatter, false), expected);
    }
}
