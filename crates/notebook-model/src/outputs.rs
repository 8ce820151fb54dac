//! Plain-text access to saved outputs, for search and export. (Condensed, agent-facing rendering
//! of outputs lives in the `condense` crate.)

use serde_json::{Map, Value};

/// One saved output read in place by its `output_type`: the fields each kind has, borrowed from
/// the raw JSON, which keeps every field (known or not) where it is. A field that is missing or
/// of the wrong JSON type reads as `None`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OutputView<'a> {
    /// `stream`: which stream (`stdout` or `stderr`) and its multi-line `text`.
    Stream {
        /// `name`.
        name: Option<&'a str>,
        /// `text`, a string or a list of strings.
        text: Option<&'a Value>,
    },
    /// `execute_result`, `display_data` or `update_display_data`: a MIME bundle.
    Rich {
        /// Which of the three.
        kind: RichKind,
        /// `data`, the MIME bundle.
        data: Option<&'a Map<String, Value>>,
    },
    /// `error`: the exception's class, value and traceback lines.
    Error {
        /// `ename`.
        ename: Option<&'a str>,
        /// `evalue`, as stored.
        evalue: Option<&'a Value>,
        /// `traceback`, a list of strings (with ANSI colours).
        traceback: Option<&'a Value>,
    },
    /// Any other `output_type`: `""` when it is missing or not a string.
    Unknown {
        /// The `output_type` as stored.
        output_type: &'a str,
    },
}

/// The outputs that carry a MIME bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RichKind {
    /// `execute_result`: a cell's value, with its execution count.
    ExecuteResult,
    /// `display_data`: anything the cell displayed.
    DisplayData,
    /// `update_display_data`: a later version of a display (kept only in live documents).
    UpdateDisplayData,
}

impl RichKind {
    /// The `output_type` on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            RichKind::ExecuteResult => "execute_result",
            RichKind::DisplayData => "display_data",
            RichKind::UpdateDisplayData => "update_display_data",
        }
    }
}

impl<'a> OutputView<'a> {
    /// Reads `output` by its `output_type` (a value that is not an object reads as an unknown
    /// output with `""` as its type).
    pub fn of(output: &'a Value) -> OutputView<'a> {
        match output.as_object() {
            Some(fields) => OutputView::of_fields(fields),
            None => OutputView::Unknown { output_type: "" },
        }
    }

    /// Reads an output's fields by its `output_type`.
    pub fn of_fields(output: &'a Map<String, Value>) -> OutputView<'a> {
        let text = |key: &str| output.get(key).and_then(Value::as_str);
        let output_type = text("output_type").unwrap_or("");
        let rich = |kind| OutputView::Rich {
            kind,
            data: output.get("data").and_then(Value::as_object),
        };
        match output_type {
            "stream" => OutputView::Stream {
                name: text("name"),
                text: output.get("text"),
            },
            "error" => OutputView::Error {
                ename: text("ename"),
                evalue: output.get("evalue"),
                traceback: output.get("traceback"),
            },
            "execute_result" => rich(RichKind::ExecuteResult),
            "display_data" => rich(RichKind::DisplayData),
            "update_display_data" => rich(RichKind::UpdateDisplayData),
            _ => OutputView::Unknown { output_type },
        }
    }

    /// The `output_type` as stored (`""` when missing).
    pub fn output_type(&self) -> &'a str {
        match self {
            OutputView::Stream { .. } => "stream",
            OutputView::Rich { kind, .. } => kind.as_str(),
            OutputView::Error { .. } => "error",
            OutputView::Unknown { output_type } => output_type,
        }
    }

    /// Whether this is a `stream` output.
    pub fn is_stream(&self) -> bool {
        matches!(self, OutputView::Stream { .. })
    }

    /// Whether this is an `error` output.
    pub fn is_error(&self) -> bool {
        matches!(self, OutputView::Error { .. })
    }
}

/// The textual representations of one output: `(mime-or-stream-name, text)` pairs. Streams give
/// their text, rich outputs their `text/*`, JSON and error payloads; images give nothing.
pub fn output_texts(output: &Value) -> Vec<(String, String)> {
    match OutputView::of(output) {
        OutputView::Stream { name, text } => {
            vec![(name.unwrap_or("stdout").to_owned(), joined_text(text))]
        }
        OutputView::Error {
            ename,
            evalue,
            traceback,
        } => {
            let ename = ename.unwrap_or("");
            let evalue = evalue.and_then(Value::as_str).unwrap_or("");
            let mut text = format!("{ename}: {evalue}");
            if let Some(Value::Array(frames)) = traceback {
                for frame in frames.iter().filter_map(Value::as_str) {
                    text.push('\n');
                    text.push_str(&strip_ansi_basic(frame));
                }
            }
            vec![("error".to_owned(), text)]
        }
        OutputView::Rich { .. } | OutputView::Unknown { .. } => {
            // Any other output shows the text of its bundle, if it has one, whatever its type.
            let Some(bundle) = output.get("data").and_then(Value::as_object) else {
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
    fn views_read_each_kind_and_keep_what_is_missing_as_none() {
        let stream = serde_json::json!({"output_type": "stream", "name": "stderr", "text": "a"});
        assert_eq!(
            OutputView::of(&stream),
            OutputView::Stream {
                name: Some("stderr"),
                text: Some(&Value::from("a")),
            }
        );
        let error = serde_json::json!({"output_type": "error", "ename": 3});
        assert_eq!(
            OutputView::of(&error),
            OutputView::Error {
                ename: None,
                evalue: None,
                traceback: None,
            }
        );
        for kind in [
            RichKind::ExecuteResult,
            RichKind::DisplayData,
            RichKind::UpdateDisplayData,
        ] {
            let rich =
                serde_json::json!({"output_type": kind.as_str(), "data": {"text/plain": "1"}});
            let view = OutputView::of(&rich);
            assert!(
                matches!(view, OutputView::Rich { kind: read, data: Some(data) } if read == kind && data.len() == 1)
            );
            assert_eq!(view.output_type(), kind.as_str());
        }
        let strange = serde_json::json!({"output_type": "clear_output"});
        assert_eq!(
            OutputView::of(&strange),
            OutputView::Unknown {
                output_type: "clear_output"
            }
        );
        let untyped = serde_json::json!({"output_type": 1, "name": "stdout"});
        assert_eq!(OutputView::of(&untyped).output_type(), "");
        assert_eq!(OutputView::of(&Value::from("stream")).output_type(), "");
        assert!(OutputView::of(&stream).is_stream() && !OutputView::of(&stream).is_error());
        assert!(OutputView::of(&error).is_error());
    }

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
