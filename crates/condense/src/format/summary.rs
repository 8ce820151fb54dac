//! `outputMode: summary`: one line per output, its type, MIME types and byte sizes.

use notebook_model::outputs::OutputView;
use serde_json::Value;

use super::bundle::{json_size, sorted_bundle};
use super::fit::cut_to_bound;
use super::{FormatOptions, FormattedOutputs, MIN_TEXT_BOUND};
use crate::terminal::group_thousands;

pub(super) fn format_summary(outputs: &[Value], options: &FormatOptions) -> FormattedOutputs {
    let mut lines: Vec<String> = Vec::new();
    for (index, output) in outputs.iter().enumerate() {
        let number = index + 1;
        let line = match OutputView::of(output) {
            OutputView::Stream { name, text } => {
                let name = name.unwrap_or("stdout");
                let size = text.map_or(0, json_size);
                format!(
                    "[output {number}: stream {name}, {} bytes]",
                    group_thousands(size)
                )
            }
            OutputView::Error {
                ename, traceback, ..
            } => {
                let ename = ename.unwrap_or("Error");
                let size = traceback.map_or(0, json_size);
                format!(
                    "[output {number}: error {}, {} bytes of traceback]",
                    crate::strip_ansi(ename),
                    group_thousands(size)
                )
            }
            OutputView::Rich { kind, .. } => {
                let kind = kind.as_str();
                let listed: Vec<String> = sorted_bundle(output)
                    .iter()
                    .map(|(mime, value)| {
                        format!("{mime} {} bytes", group_thousands(json_size(value)))
                    })
                    .collect();
                if listed.is_empty() {
                    format!("[output {number}: {kind} with no data]")
                } else {
                    format!("[output {number}: {kind} {}]", listed.join(", "))
                }
            }
            OutputView::Unknown { output_type: other } => format!(
                "[output {number}: unknown output type {other:?}, {} bytes]",
                group_thousands(json_size(output))
            ),
        };
        lines.push(line);
    }
    let text = if lines.is_empty() {
        "(no outputs)".to_owned()
    } else {
        lines.join("\n")
    };
    let mut result = FormattedOutputs {
        text,
        images: Vec::new(),
        image_reports: Vec::new(),
        truncated: false,
        dropped_chars: 0,
    };
    let max_chars = options.max_chars.max(MIN_TEXT_BOUND);
    if let Some((cut, dropped_chars)) = cut_to_bound(&result.text, max_chars) {
        result.dropped_chars = dropped_chars;
        result.truncated = true;
        result.text = cut;
    }
    result
}
