//! Plain-text access to saved outputs, for search and export. (Condensed, agent-facing rendering
//! of outputs lives in the `condense` crate.)

use serde_json::Value;

/// The textual representations of one output: `(mime-or-stream-name, text)` pairs. Streams give
/// their text, rich outputs their `text/*`, JSON and error payloads; images give nothing.
pub fn output_texts(output: &Value) -> Vec<(String, String)> {
    let output_type = output
        .get("output_type")
        .and_then(Value::as_str)
        .unwrap_or("");
    match output_type {
        "stream" => {
            let name = output
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("stdout");
            vec![(name.to_owned(), joined_text(output.get("text")))]
        }
        "error" => {
            let ename = output.get("ename").and_then(Value::as_str).unwrap_or("");
            let evalue = output.get("evalue").and_then(Value::as_str).unwrap_or("");
            let mut text = format!("{ename}: {evalue}");
            if let Some(Value::Array(frames)) = output.get("traceback") {
                for frame in frames.iter().filter_map(Value::as_str) {
                    text.push('\n');
                    text.push_str(&strip_ansi_basic(frame));
                }
            }
            vec![("error".to_owned(), text)]
        }
        _ => {
            let Some(Value::Object(bundle)) = output.get("data") else {
                return Vec::new();
            };
            bundle
                .iter()
                .filter(|(mime, _)| mime.starts_with("text/") || mime.ends_with("json"))
                .map(|(mime, value)| {
                    let text = match value {
                        Value::String(_) | Value::Array(_) => joined_text(Some(value)),
                        other => other.to_string(),
                    };
                    (mime.clone(), text)
                })
                .collect()
        }
    }
}

/// A multi-line string field, whether stored as a string or a list of strings.
pub fn joined_text(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

/// Removes ANSI CSI sequences (colours in tracebacks) so that searches match visible text.
fn strip_ansi_basic(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(character) = chars.next() {
        if character == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for terminator in chars.by_ref() {
                if ('@'..='~').contains(&terminator) {
                    break;
                }
            }
        } else {
            out.push(character);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_of_each_output_type() {
        let stream =
            serde_json::json!({"output_type": "stream", "name": "stderr", "text": ["a\n", "b"]});
        assert_eq!(
            output_texts(&stream),
            vec![("stderr".to_owned(), "a\nb".to_owned())]
        );
        let error = serde_json::json!({"output_type": "error", "ename": "KeyError", "evalue": "'x'",
            "traceback": ["\u{1b}[0;31mKeyError\u{1b}[0m: 'x'"]});
        assert_eq!(output_texts(&error)[0].1, "KeyError: 'x'\nKeyError: 'x'");
        let rich = serde_json::json!({"output_type": "display_data",
            "data": {"image/png": "AAAA", "text/plain": "<Figure>"}, "metadata": {}});
        assert_eq!(
            output_texts(&rich),
            vec![("text/plain".to_owned(), "<Figure>".to_owned())]
        );
    }
}
