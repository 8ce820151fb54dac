use std::path::{Path, PathBuf};

use expect_test::expect_file;
use serde_json::json;

use super::*;

fn stream(name: &str, text: &str) -> IopubEvent {
    IopubEvent::Stream {
        name: name.to_owned(),
        text: text.to_owned(),
    }
}

fn display(text: &str, display_id: Option<&str>) -> IopubEvent {
    IopubEvent::DisplayData {
        data: json!({ "text/plain": text }),
        metadata: json!({}),
        transient: display_id.map(|id| Transient {
            display_id: Some(id.to_owned()),
        }),
    }
}

/// An accumulator for one cell, with the default limits but for what `adjust` changes.
fn one_cell(adjust: impl FnOnce(&mut OutputLimits)) -> OutputAccumulator {
    let mut limits = OutputLimits::default();
    adjust(&mut limits);
    OutputAccumulator::new(1, limits)
}

fn text_of(outputs: &[Value]) -> Vec<String> {
    outputs
        .iter()
        .map(|output| match output["output_type"].as_str() {
            Some("stream") => format!(
                "{}:{}",
                output["name"].as_str().unwrap(),
                output["text"].as_str().unwrap()
            ),
            Some(other) => format!(
                "{other}:{}",
                output["data"]["text/plain"].as_str().unwrap_or("")
            ),
            None => panic!("no output_type in {output}"),
        })
        .collect()
}

#[test]
fn carriage_returns_keep_the_latest_line_state() {
    let cases: &[(&[&str], &str)] = &[
        (&["a\rb"], "b"),
        (&["10%\r", "20%\r", "30%\n"], "30%\n"),
        (&["line\r\nnext"], "line\nnext"),
        (&["line\r", "\nnext"], "line\nnext"),
        (&["keep\nold\rnew"], "keep\nnew"),
        (&["trailing\r"], "trailing\r"),
        (&["a\r\r\nb"], "\nb"),
        (&["x\n\r"], "x\n\r"),
        (&["x\n\r", "y"], "x\ny"),
    ];
    for (chunks, expected) in cases {
        let mut accumulator = OutputAccumulator::new(1, OutputLimits::default());
        for chunk in *chunks {
            accumulator.apply(0, stream("stdout", chunk));
        }
        assert_eq!(
            accumulator.outputs(0)[0]["text"],
            *expected,
            "chunks {chunks:?}"
        );
    }
}

#[test]
fn consecutive_streams_of_one_name_merge_and_others_do_not() {
    let mut accumulator = OutputAccumulator::new(1, OutputLimits::default());
    for (name, text) in [
        ("stdout", "a"),
        ("stdout", "b"),
        ("stderr", "c"),
        ("stdout", "d"),
    ] {
        assert_eq!(accumulator.apply(0, stream(name, text)), vec![0]);
    }
    assert_eq!(
        text_of(&accumulator.outputs(0)),
        ["stdout:ab", "stderr:c", "stdout:d"]
    );
}

#[test]
fn events_for_positions_outside_the_run_are_ignored() {
    let mut accumulator = OutputAccumulator::new(1, OutputLimits::default());
    assert!(accumulator.apply(1, stream("stdout", "x")).is_empty());
    assert!(accumulator.outputs(1).is_empty());
    assert_eq!(accumulator.cell_count(), 1);
}

#[test]
fn update_without_a_display_id_or_target_changes_nothing() {
    let mut accumulator = OutputAccumulator::new(1, OutputLimits::default());
    accumulator.apply(0, display("one", None));
    let update = |id: Option<&str>| IopubEvent::UpdateDisplayData {
        data: json!({ "text/plain": "two" }),
        metadata: json!({}),
        transient: id.map(|id| Transient {
            display_id: Some(id.to_owned()),
        }),
    };
    assert!(accumulator.apply(0, update(None)).is_empty());
    assert!(accumulator.apply(0, update(Some("unknown"))).is_empty());
    assert_eq!(text_of(&accumulator.outputs(0)), ["display_data:one"]);
}

#[test]
fn clear_output_forgets_the_cell_display_ids() {
    let mut accumulator = OutputAccumulator::new(2, OutputLimits::default());
    accumulator.apply(0, display("zero", Some("shared")));
    accumulator.apply(1, display("one", Some("shared")));
    assert_eq!(accumulator.display_entries(), 2);
    assert_eq!(
        accumulator.apply(1, IopubEvent::ClearOutput { wait: false }),
        vec![1]
    );
    assert_eq!(accumulator.display_entries(), 1);
    // Clearing an empty cell changes nothing.
    assert!(
        accumulator
            .apply(1, IopubEvent::ClearOutput { wait: false })
            .is_empty()
    );
}

#[test]
fn last_error_name_is_the_latest_error() {
    let mut accumulator = OutputAccumulator::new(1, OutputLimits::default());
    assert_eq!(accumulator.last_error_name(0), None);
    for ename in ["KeyError", "ValueError"] {
        let event = IopubEvent::Error {
            ename: ename.to_owned(),
            evalue: "bad".to_owned(),
            traceback: vec!["line".to_owned()],
        };
        accumulator.apply(0, event);
    }
    accumulator.apply(0, stream("stdout", "after"));
    assert_eq!(accumulator.last_error_name(0), Some("ValueError"));
    assert_eq!(accumulator.last_error_name(3), None);
}

/// A kernel writing 16 MiB in 64 KiB chunks leaves at most the stream budget in memory, keeps
/// the first and the latest text, and counts exactly what it dropped.
#[test]
fn a_stream_flood_stays_within_the_budget() {
    let limits = OutputLimits {
        max_stream_bytes_per_cell: 1024 * 1024,
        ..OutputLimits::default()
    };
    let mut accumulator = OutputAccumulator::new(1, limits);
    let chunk_bytes = 64 * 1024;
    let chunks = 256;
    for chunk in 0..chunks {
        // 16-byte lines: the head (half of the budget) ends exactly at a line end.
        let line = format!("chunk {chunk:09}\n");
        let text = line.repeat(chunk_bytes / line.len());
        accumulator.apply(0, stream("stdout", &text));
        assert!(accumulator.retained(0).stream_bytes <= limits.max_stream_bytes_per_cell);
    }
    let outputs = accumulator.outputs(0);
    assert_eq!(
        outputs.len(),
        1,
        "head, marker and tail merge into one stream"
    );
    let text = outputs[0]["text"].as_str().unwrap();
    assert!(text.starts_with("chunk 000000000\n"));
    assert!(text.ends_with(&format!("chunk {:09}\n", chunks - 1)));
    let marker_line = text.lines().find(|line| line.starts_with("… [")).unwrap();
    let dropped: usize = marker_line["… [".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let line_bytes = "chunk 000000000\n".len();
    let written = chunks * (chunk_bytes / line_bytes) * line_bytes;
    let kept = text.len() - marker_line.len() - 1;
    assert_eq!(dropped + kept, written);
}

#[test]
fn interleaved_tiny_streams_are_bounded_by_the_output_count() {
    let mut accumulator = one_cell(|limits| limits.max_outputs_per_cell = 10);
    for index in 0..10_000 {
        let name = if index % 2 == 0 { "stdout" } else { "stderr" };
        accumulator.apply(0, stream(name, "x"));
    }
    assert!(accumulator.retained(0).outputs <= 10);
    let outputs = accumulator.outputs(0);
    assert!(outputs.len() <= 11);
    assert!(outputs.iter().any(|output| {
        output["text"]
            .as_str()
            .unwrap()
            .contains("characters dropped")
    }));
}

#[test]
fn a_rich_output_larger_than_the_tail_budget_is_dropped_and_counted() {
    let mut accumulator = one_cell(|limits| limits.max_rich_bytes_per_cell = 100);
    accumulator.apply(0, display(&"x".repeat(500), Some("big")));
    assert_eq!(accumulator.display_entries(), 0);
    assert_eq!(
        text_of(&accumulator.outputs(0)),
        ["stdout:… [1 output dropped] …\n"]
    );
}

/// One fixture: JSON lines of IOPub events (`{"cell": N, "msg_type": ..., ...}`, `cell`
/// defaulting to 0), optionally a `{"limits": {...}}` line, and `//` comment lines. The expected
/// file lists, per event, the cells it changed, then every cell's nbformat outputs.
fn run_fixture(path: &Path) -> String {
    let input = std::fs::read_to_string(path).unwrap();
    let mut limits = OutputLimits::default();
    let mut events = Vec::new();
    for (number, line) in input.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("//") {
            continue;
        }
        let mut value: Value = serde_json::from_str(line)
            .unwrap_or_else(|error| panic!("{}:{}: {error}", path.display(), number + 1));
        if let Some(given) = value.get("limits") {
            let field = |name: &str, default: usize| {
                given
                    .get(name)
                    .and_then(Value::as_u64)
                    .map_or(default, |value| value as usize)
            };
            limits = OutputLimits {
                max_stream_bytes_per_cell: field(
                    "max_stream_bytes_per_cell",
                    limits.max_stream_bytes_per_cell,
                ),
                max_outputs_per_cell: field("max_outputs_per_cell", limits.max_outputs_per_cell),
                max_rich_bytes_per_cell: field(
                    "max_rich_bytes_per_cell",
                    limits.max_rich_bytes_per_cell,
                ),
            };
            continue;
        }
        let cell = value
            .as_object_mut()
            .and_then(|object| object.remove("cell"));
        let cell = cell.and_then(|cell| cell.as_u64()).unwrap_or(0) as usize;
        let event: IopubEvent = serde_json::from_value(value)
            .unwrap_or_else(|error| panic!("{}:{}: {error}", path.display(), number + 1));
        events.push((cell, event));
    }
    let cell_count = events.iter().map(|(cell, _)| cell + 1).max().unwrap_or(1);
    let mut accumulator = OutputAccumulator::new(cell_count, limits);
    let mut rendered = String::from("changed per event:");
    for (cell, event) in events {
        rendered.push_str(&format!(" {:?}", accumulator.apply(cell, event)));
    }
    rendered.push('\n');
    for cell in 0..cell_count {
        let outputs = sort_keys(Value::from(accumulator.outputs(cell)));
        rendered.push_str(&format!(
            "\ncell {cell}:\n{}\n",
            serde_json::to_string_pretty(&outputs).unwrap()
        ));
    }
    rendered
}

/// Objects with sorted keys, so the snapshot does not depend on serde_json's map order.
fn sort_keys(value: Value) -> Value {
    match value {
        Value::Object(entries) => {
            let mut entries: Vec<(String, Value)> = entries.into_iter().collect();
            entries.sort_by(|left, right| left.0.cmp(&right.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(key, value)| (key, sort_keys(value)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        other => other,
    }
}

#[test]
fn output_fixtures() {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/outputs");
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(&directory)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "jsonl")
        })
        .collect();
    fixtures.sort();
    assert!(
        fixtures.len() >= 10,
        "fixtures missing from {}",
        directory.display()
    );
    for fixture in fixtures {
        let actual = run_fixture(&fixture);
        expect_file![fixture.with_extension("expected")].assert_eq(&actual);
    }
}
