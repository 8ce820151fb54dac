//! Reading an output's fields and MIME bundle: nbformat multi-line text, stored sizes, which
//! representations are text, and the order in which they are considered.

use serde_json::Value;

use crate::terminal::render_terminal;

/// nbformat multi-line strings: a string, or a list of strings to concatenate.
pub(super) fn multiline_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Stored size of a value in bytes: the text for strings (and lists of strings), the JSON
/// otherwise.
pub(super) fn json_size(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len(),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            items.iter().filter_map(Value::as_str).map(str::len).sum()
        }
        other => serde_json::to_string(other).map_or(0, |text| text.len()),
    }
}

pub(super) fn is_plotly(mime: &str) -> bool {
    mime.starts_with("application/vnd.plotly.")
}

pub(super) fn is_vega(mime: &str) -> bool {
    mime.starts_with("application/vnd.vegalite.") || mime.starts_with("application/vnd.vega.")
}

pub(super) fn is_widget(mime: &str) -> bool {
    mime == "application/vnd.jupyter.widget-view+json"
}

pub(super) fn is_javascript(mime: &str) -> bool {
    matches!(
        mime,
        "application/javascript" | "text/javascript" | "application/x-javascript"
    )
}

/// A representation shown as text: `text/*` (but JavaScript) and JSON that no summary handles.
pub(super) fn is_textual(mime: &str) -> bool {
    if is_javascript(mime) || is_plotly(mime) || is_vega(mime) || is_widget(mime) {
        return false;
    }
    mime.starts_with("text/") || mime == "application/json" || mime.ends_with("+json")
}

/// The order in which MIME types are considered and listed; ties break alphabetically, so that
/// the result never depends on the order of keys in the bundle.
pub(super) fn mime_rank(mime: &str) -> usize {
    const PREFERRED_TEXT: [&str; 5] = [
        "text/markdown",
        "text/plain",
        "application/json",
        "text/html",
        "text/latex",
    ];
    if let Some(position) = PREFERRED_TEXT
        .iter()
        .position(|preferred| *preferred == mime)
    {
        return position;
    }
    match mime {
        _ if mime.starts_with("text/") && !is_javascript(mime) => 5,
        "image/png" => 10,
        "image/jpeg" => 11,
        "image/svg+xml" => 12,
        _ if mime.starts_with("image/") => 13,
        _ if is_plotly(mime) => 20,
        _ if is_vega(mime) => 21,
        _ if is_widget(mime) => 22,
        _ if is_javascript(mime) => 23,
        _ => 30,
    }
}

pub(super) fn sorted_bundle(output: &Value) -> Vec<(&str, &Value)> {
    let mut entries: Vec<(&str, &Value)> = output
        .get("data")
        .and_then(Value::as_object)
        .map(|data| {
            data.iter()
                .map(|(mime, value)| (mime.as_str(), value))
                .collect()
        })
        .unwrap_or_default();
    entries.sort_by(|a, b| {
        mime_rank(a.0)
            .cmp(&mime_rank(b.0))
            .then_with(|| a.0.cmp(b.0))
    });
    entries
}

/// A `text/plain` that only names an object (`<IPython.core.display.JSON object>`,
/// `<pandas.io.formats.style.Styler at 0x7f...>`): useless when another representation exists.
pub(super) fn is_default_repr(text: &str) -> bool {
    let first_line = text.trim().lines().next().unwrap_or("");
    first_line.starts_with('<')
        && first_line.ends_with('>')
        && (first_line.contains(" object") || first_line.contains(" at 0x"))
}

/// The text of a textual MIME entry: JSON pretty-printed, everything else rendered as terminal
/// text (ANSI removed, carriage returns collapsed).
pub(super) fn textual_body(mime: &str, value: &Value) -> String {
    if mime == "application/json" || mime.ends_with("+json") {
        let parsed = crate::rich::json_payload(value);
        let text = match parsed {
            Some(json) => serde_json::to_string_pretty(json.as_ref()).unwrap_or_default(),
            None => multiline_text(value),
        };
        return text;
    }
    let text = multiline_text(value);
    render_terminal(&text).trim_end_matches('\n').to_owned()
}
