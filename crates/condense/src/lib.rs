//! Condensed cell outputs: what an agent should see of a cell's nbformat outputs.
//!
//! Layer 1 (domain). Pure and synchronous: nbformat output dicts (`serde_json::Value`) come in,
//! bounded text and downscaled PNG/JPEG images come out. No tokio, no MCP, no filesystem, no
//! clock; image decoding and encoding are pure Rust. Streams are merged, terminal control
//! (ANSI, `\r` progress bars, cursor movement) is rendered away, tracebacks are trimmed to the
//! frames that help, DataFrame HTML becomes CSV that states the frame's real size, charts become
//! one-line summaries, and every cut is marked in the text.
//!
//! The entry point is [`format_outputs`]; the pieces ([`strip_ansi`],
//! [`collapse_carriage_returns`], [`render_terminal`], [`head_tail`], [`HeadTailBuffer`],
//! [`html_table_to_rows`], [`html_to_text`], [`downscale_image`], [`condense_traceback`]) are
//! public for reuse.
//!
//! All of that is the default feature `render`. Without it the crate is only [`OutputMode`], the
//! three renderings a caller can ask for, so that the tool contract (`mcp-contract`) names them
//! without pulling image codecs into the transports that depend on it.
//!
//! ```
//! use condense::{FormatOptions, format_outputs};
//! use serde_json::json;
//!
//! // A progress bar that redraws itself with `\r` leaves only its last state.
//! let outputs = [
//!     json!({"output_type": "stream", "name": "stderr", "text": " 10%|#  |\r"}),
//!     json!({"output_type": "stream", "name": "stderr", "text": ["100%|###|", "\n"]}),
//! ];
//! let condensed = format_outputs(&outputs, &FormatOptions::default());
//! assert_eq!(condensed.text, "[outputs 1–2 | stderr]\n100%|###|");
//! assert!(condensed.images.is_empty());
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "render")]
mod format;
#[cfg(feature = "render")]
mod html;
#[cfg(feature = "render")]
mod images;
mod mode;
#[cfg(feature = "render")]
mod rich;
#[cfg(feature = "render")]
mod table;
#[cfg(feature = "render")]
mod terminal;
#[cfg(feature = "render")]
mod traceback;
#[cfg(feature = "render")]
mod truncate;

#[cfg(feature = "render")]
use serde_json::Value;

#[cfg(feature = "render")]
pub use format::{
    FormatOptions, FormattedOutputs, ImageOutcome, ImageReport, MIN_TEXT_BOUND, ReturnedImage,
    format_outputs,
};
#[cfg(feature = "render")]
pub use html::{HtmlTable, html_table_to_rows, html_to_text};
#[cfg(feature = "render")]
pub use images::{
    DownscaledImage, RasterFormat, downscale_image, fit_within, image_dimensions, summarize_svg,
};
pub use mode::OutputMode;
#[cfg(feature = "render")]
pub use terminal::{collapse_carriage_returns, render_terminal, strip_ansi};
#[cfg(feature = "render")]
pub use traceback::{CondensedTraceback, TracebackOptions, condense_traceback};
#[cfg(feature = "render")]
pub use truncate::{HeadTail, HeadTailBuffer, head_tail};

/// What can go wrong in this crate. [`format_outputs`] itself never fails: a bad output becomes
/// a line of text that says what was wrong with it.
#[cfg(feature = "render")]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CondenseError {
    /// The bytes are an image format other than PNG and JPEG, or no image at all.
    #[error("unsupported image format: {0}")]
    UnsupportedImageFormat(String),
    /// The image header or pixels could not be decoded (corrupt, truncated, or over the limits).
    #[error("could not decode the image: {0}")]
    ImageDecode(String),
    /// Re-encoding a downscaled image failed.
    #[error("could not encode the image: {0}")]
    ImageEncode(String),
    /// The base64 text of an image is invalid.
    #[error("invalid base64: {0}")]
    Base64(String),
}

/// Fuzzing entry point: arbitrary bytes → outputs (a JSON list of outputs, a cell or notebook
/// with `outputs`, any other JSON value as one output, or non-JSON bytes as one stdout stream) →
/// formatted in every mode. Panics if a guarantee is broken: the text bound, the image limits,
/// or determinism.
#[cfg(feature = "render")]
pub fn check_format_outputs(data: &[u8]) {
    let outputs: Vec<Value> = match serde_json::from_slice::<Value>(data) {
        Ok(Value::Array(items)) => items,
        Ok(Value::Object(object)) => match object.get("outputs") {
            Some(Value::Array(items)) => items.clone(),
            _ => vec![Value::Object(object)],
        },
        Ok(other) => vec![other],
        Err(_) => vec![serde_json::json!({
            "output_type": "stream",
            "name": "stdout",
            "text": String::from_utf8_lossy(data),
        })],
    };
    for mode in [OutputMode::Summary, OutputMode::Text, OutputMode::Full] {
        for max_chars in [0, 300, 12_000] {
            let options = FormatOptions {
                mode,
                max_chars,
                max_image_side: 64,
                max_images: 2,
                max_image_bytes: 50_000,
                max_table_rows: 6,
                max_table_columns: 4,
                ..FormatOptions::default()
            };
            let result = format_outputs(&outputs, &options);
            let length = result.text.chars().count();
            assert!(
                length <= max_chars.max(MIN_TEXT_BOUND),
                "{length} characters for a bound of {max_chars}"
            );
            assert!(result.images.len() <= options.max_images);
            assert!(
                result
                    .images
                    .iter()
                    .map(|image| image.byte_len)
                    .sum::<usize>()
                    <= options.max_image_bytes
            );
            assert!(
                result
                    .images
                    .iter()
                    .all(|image| image.width.max(image.height) <= options.max_image_side)
            );
            assert!(
                result.dropped_chars == 0 || result.truncated,
                "dropped characters without truncated"
            );
            if max_chars == 300 {
                assert_eq!(
                    format_outputs(&outputs, &options),
                    result,
                    "not deterministic"
                );
            }
        }
    }
}

#[cfg(all(test, feature = "render"))]
mod tests {
    use super::*;

    #[test]
    fn check_survives_odd_inputs() {
        for input in [
            &b""[..],
            b"null",
            b"[1, \"x\", {}]",
            b"{\"outputs\": [{\"output_type\": \"stream\"}]}",
            b"\xff\xfe\x1b[31m\rnot json",
            b"[{\"output_type\": \"display_data\", \"data\": {\"image/png\": \"iVBORw0KGgo=\", \"text/html\": [\"<table><tr><td colspan=9>\"]}}]",
            b"[{\"output_type\": \"error\", \"traceback\": 5, \"ename\": null}]",
        ] {
            check_format_outputs(input);
        }
    }

    #[test]
    fn output_modes_round_trip_their_names() {
        for mode in OutputMode::ALL {
            assert_eq!(OutputMode::from_word(mode.as_str()), Some(mode));
        }
        assert_eq!(OutputMode::from_word("all"), None);
    }
}
