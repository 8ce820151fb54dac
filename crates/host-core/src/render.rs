//! Rendering saved outputs as text for reads.

use mcp_contract::params::OutputMode;
use notebook_model::outputs::output_texts;
use serde_json::Value;

/// Output text for one cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedOutputs {
    pub text: String,
    pub truncated: bool,
}

fn summary_line(index: usize, output: &Value) -> String {
    let output_type = output
        .get("output_type")
        .and_then(Value::as_str)
        .unwrap_or("?");
    match output.get("data").and_then(Value::as_object) {
        Some(bundle) => {
            let parts: Vec<String> = bundle
                .iter()
                .map(|(mime, value)| format!("{mime} {} bytes", value.to_string().len()))
                .collect();
            format!("[output {index}: {output_type}: {}]", parts.join(", "))
        }
        None => format!("[output {index}: {output_type}]"),
    }
}

/// Renders `outputs` in `mode`, cut to `max_chars` with an explicit marker.
pub fn render_outputs(outputs: &[Value], mode: OutputMode, max_chars: usize) -> RenderedOutputs {
    let mut parts = Vec::new();
    for (index, output) in outputs.iter().enumerate() {
        match mode {
            OutputMode::Summary => parts.push(summary_line(index, output)),
            OutputMode::Text | OutputMode::Full => {
                let texts = output_texts(output);
                if texts.is_empty() {
                    parts.push(summary_line(index, output));
                }
                let take = if mode == OutputMode::Text {
                    1
                } else {
                    texts.len()
                };
                for (mime, text) in texts.into_iter().take(take) {
                    parts.push(format!("[output {index} | {mime}]\n{text}"));
                }
            }
        }
    }
    let text = if parts.is_empty() {
        "(no saved output)".to_owned()
    } else {
        parts.join("\n\n")
    };
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => {
            let dropped = text[cut..].chars().count();
            RenderedOutputs {
                text: format!("{}\n… [{dropped} more characters cut]", &text[..cut]),
                truncated: true,
            }
        }
        None => RenderedOutputs {
            text,
            truncated: false,
        },
    }
}
