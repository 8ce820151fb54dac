//! Measures how much smaller the `text` mode is than the raw outputs, on the snapshot fixtures.
//!
//! `cargo run -p condense --example measure [-- --no-images]` prints, per fixture, the bytes of
//! the raw outputs (compact JSON, as stored in a notebook without indentation), the bytes of the
//! returned text, the bytes of the returned images (base64), and the ratios. Default options.

use condense::{FormatOptions, format_outputs};
use serde_json::Value;

#[path = "../tests/support/fixtures.rs"]
mod fixtures;

use fixtures::fixture_paths;

#[allow(
    clippy::print_stdout,
    reason = "a measurement tool whose output is the report"
)]
fn main() {
    let include_images = !std::env::args().any(|argument| argument == "--no-images");
    let paths = fixture_paths();
    let options = FormatOptions {
        include_images,
        ..FormatOptions::default()
    };
    let (mut raw_total, mut text_total, mut image_total) = (0usize, 0usize, 0usize);
    println!(
        "{:<34} {:>10} {:>8} {:>9} {:>8} {:>8}",
        "fixture", "raw bytes", "text", "images", "raw/text", "raw/all"
    );
    for path in &paths {
        let fixture: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json");
        let outputs = fixture["outputs"].as_array().expect("outputs").clone();
        let raw = serde_json::to_string(&outputs).expect("serialise").len();
        let result = format_outputs(&outputs, &options);
        let text = result.text.len();
        let images: usize = result.images.iter().map(|image| image.base64.len()).sum();
        raw_total += raw;
        text_total += text;
        image_total += images;
        println!(
            "{:<34} {:>10} {:>8} {:>9} {:>7.1}× {:>7.1}×",
            path.file_stem().unwrap().to_string_lossy(),
            raw,
            text,
            images,
            raw as f64 / text.max(1) as f64,
            raw as f64 / (text + images).max(1) as f64
        );
    }
    println!(
        "{:<34} {:>10} {:>8} {:>9} {:>7.1}× {:>7.1}×",
        "TOTAL",
        raw_total,
        text_total,
        image_total,
        raw_total as f64 / text_total.max(1) as f64,
        raw_total as f64 / (text_total + image_total).max(1) as f64
    );
}
