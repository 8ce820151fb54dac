//! `outputMode: summary`: one line per output, its type, MIME types and byte sizes.

use serde_json::Value;

use super::bundle::{json_size, output_type, sorted_bundle};
use super::fit::cut_to_bound;
use super::{FormatOptions, FormattedOutputs, MIN_TEXT_BOUND};
use crate::terminal::group_thousands;

pub(super) fn format_summary(outputs: &[Value], options: &FormatOptions) -> FormattedOutputs {
    let mut lines: Vec<String> = Vec::new();
    for (index, output) in outputs.iter().enumerate() {
        let number = index + 1;
        let line = match output_type(output) {
            "stream" => {
                let name = output
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("stdout");
                let size = output.get("text").map_or(0, json_size);
                format!(
                    "[output {number}: stream {name}, {} bytes]",
                    group_thousands(size)
                )
            }
            "error" => {
                let ename = output
                    .get("ename")
                    .and_then(Value::as_str)
                    .unwrap_or("Error");
                let size = output.get("traceback").map_or(0, json_size);
                format!(
                    "[output {number}: error {}, {} bytes of traceback]",
                    crate::strip_ansi(ename),
                    group_thousands(size)
                )
            }
            kind @ ("execute_result" | "display_data" | "update_display_data") => {
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
            other => format!(
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
