//! Data-driven snapshot tests: each `tests/fixtures/NAME.json` (a list of nbformat outputs and
//! optional options) is formatted and compared with `tests/fixtures/NAME.txt`.
//! `UPDATE_EXPECT=1 cargo test -p condense --test snapshots` blesses the current output.
//!
//! Most fixtures were captured from a real ipykernel by `tests/fixtures/generate.py`; the
//! others are hand-written for cases a kernel does not produce on demand.

use std::fmt::Write as _;
use std::path::Path;

use base64::Engine as _;
use condense::{FormatOptions, ImageOutcome, OutputMode, format_outputs, image_dimensions};
use serde_json::Value;

#[path = "support/fixtures.rs"]
mod fixtures;

use fixtures::fixture_paths;

/// The outputs and the options of a fixture; `modes` lists the modes to render (default text).
fn load(path: &Path) -> (Vec<Value>, Vec<(OutputMode, FormatOptions)>) {
    let fixture: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("readable fixture"))
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let outputs = fixture["outputs"]
        .as_array()
        .expect("an outputs list")
        .clone();
    let settings = fixture.get("options").cloned().unwrap_or(Value::Null);
    let mut base = FormatOptions::default();
    let number = |key: &str| {
        settings
            .get(key)
            .and_then(Value::as_u64)
            .map(|value| value as usize)
    };
    if let Some(value) = number("max_chars") {
        base.max_chars = value;
    }
    if let Some(value) = settings.get("include_images").and_then(Value::as_bool) {
        base.include_images = value;
    }
    if let Some(value) = number("max_images") {
        base.max_images = value;
    }
    if let Some(value) = number("max_image_bytes") {
        base.max_image_bytes = value;
    }
    if let Some(value) = number("max_image_side") {
        base.max_image_side = value as u32;
    }
    if let Some(value) = number("max_table_rows") {
        base.max_table_rows = value;
    }
    if let Some(value) = number("max_table_columns") {
        base.max_table_columns = value;
    }
    let modes: Vec<OutputMode> = match settings.get("modes").and_then(Value::as_array) {
        Some(modes) => modes
            .iter()
            .map(|mode| {
                OutputMode::from_word(mode.as_str().expect("mode name")).expect("known mode")
            })
            .collect(),
        None => vec![OutputMode::Text],
    };
    let options = modes
        .into_iter()
        .map(|mode| {
            (
                mode,
                FormatOptions {
                    mode,
                    ..base.clone()
                },
            )
        })
        .collect();
    (outputs, options)
}

fn render(outputs: &[Value], options: &FormatOptions) -> String {
    let result = format_outputs(outputs, options);
    let mut out = String::new();
    writeln!(out, "{}", result.text).unwrap();
    writeln!(
        out,
        "--- truncated: {}, dropped characters: {}",
        result.truncated, result.dropped_chars
    )
    .unwrap();
    for (index, image) in result.images.iter().enumerate() {
        // The returned bytes must be a real image of the stated size and within the limits.
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&image.base64)
            .expect("valid base64");
        let (format, width, height) = image_dimensions(&bytes).expect("a decodable image");
        assert_eq!(
            (format.mime(), width, height),
            (image.mime, image.width, image.height)
        );
        assert_eq!(bytes.len(), image.byte_len);
        assert!(width.max(height) <= options.max_image_side);
        writeln!(
            out,
            "--- image {}: {} {}×{}, {} bytes, from output {}",
            index + 1,
            image.mime,
            width,
            height,
            image.byte_len,
            image.output_index + 1
        )
        .unwrap();
    }
    for report in &result.image_reports {
        let size = report
            .original_size
            .map_or("?".to_owned(), |(width, height)| {
                format!("{width}×{height}")
            });
        let outcome = match &report.outcome {
            ImageOutcome::Returned {
                image_number,
                downscaled,
            } => {
                format!(
                    "returned as image {image_number}{}",
                    if *downscaled { ", downscaled" } else { "" }
                )
            }
            other => format!("{other:?}"),
        };
        writeln!(
            out,
            "--- report: output {} {} {size}, {} bytes: {outcome}",
            report.output_index + 1,
            report.mime,
            report.original_bytes
        )
        .unwrap();
    }
    let total_image_bytes: usize = result.images.iter().map(|image| image.byte_len).sum();
    assert!(total_image_bytes <= options.max_image_bytes);
    assert!(result.images.len() <= options.max_images);
    assert!(result.text.chars().count() <= options.max_chars.max(condense::MIN_TEXT_BOUND));
    out
}

#[test]
fn fixtures_match_their_snapshots() {
    let paths = fixture_paths();
    assert!(
        paths.len() >= 25,
        "expected at least 25 fixtures, found {}",
        paths.len()
    );
    let mut failures = Vec::new();
    for path in &paths {
        let (outputs, runs) = load(path);
        let mut actual = String::new();
        for (mode, options) in &runs {
            writeln!(actual, "=== {} ===", mode.as_str()).unwrap();
            actual.push_str(&render(&outputs, options));
        }
        let expected_path = path.with_extension("txt");
        let outcome = std::panic::catch_unwind(|| {
            expect_test::expect_file![expected_path].assert_eq(&actual)
        });
        if outcome.is_err() {
            failures.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    assert!(
        failures.is_empty(),
        "snapshots differ for {failures:?}; rerun with UPDATE_EXPECT=1 to bless"
    );
}

#[test]
fn formatting_is_deterministic_on_fixtures() {
    for path in fixture_paths() {
        let (outputs, runs) = load(&path);
        for (_, options) in runs {
            assert_eq!(
                format_outputs(&outputs, &options),
                format_outputs(&outputs, &options),
                "{}",
                path.display()
            );
        }
    }
}
