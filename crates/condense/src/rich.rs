//! One-line summaries of rich outputs whose raw form is useless to an agent: Plotly figures,
//! Vega and Vega-Lite specs, and Jupyter widgets.

use std::borrow::Cow;

use serde_json::Value;

use crate::terminal::{group_thousands, plural};

const MAX_LISTED: usize = 8;
const MAX_LABEL_CHARS: usize = 80;

/// The JSON payload of a MIME bundle entry: an object as is, or a string holding JSON.
pub(crate) fn json_payload(value: &Value) -> Option<Cow<'_, Value>> {
    match value {
        Value::Object(_) | Value::Array(_) => Some(Cow::Borrowed(value)),
        Value::String(text) => serde_json::from_str(text).ok().map(Cow::Owned),
        _ => None,
    }
}

fn label(text: &str) -> String {
    let collapsed = crate::html::collapse_whitespace(text);
    if collapsed.chars().count() > MAX_LABEL_CHARS {
        let cut: String = collapsed.chars().take(MAX_LABEL_CHARS).collect();
        format!("{cut}…")
    } else {
        collapsed
    }
}

/// A title as Plotly and Vega write it: a string, `{"text": ...}`, or a list of lines.
fn title_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(text) if !text.trim().is_empty() => Some(label(text)),
        Value::Object(object) => title_text(object.get("text")),
        Value::Array(lines) => {
            let joined: Vec<&str> = lines.iter().filter_map(Value::as_str).collect();
            (!joined.is_empty()).then(|| label(&joined.join(" ")))
        }
        _ => None,
    }
}

/// `plotly figure "Growth": 2 traces: scatter "squares" (50 points), bar "counts" (3 points);
/// x axis "step"; y axis "value"`.
pub(crate) fn summarize_plotly(value: &Value) -> String {
    let Some(figure) = json_payload(value) else {
        return "plotly figure (unreadable JSON)".to_owned();
    };
    let mut summary = String::from("plotly figure");
    let layout = figure.get("layout");
    if let Some(title) = title_text(layout.and_then(|layout| layout.get("title"))) {
        summary.push_str(&format!(" {title:?}"));
    }
    let traces = figure
        .get("data")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    summary.push_str(&format!(": {}", plural(traces.len(), "trace", "traces")));
    let described: Vec<String> = traces
        .iter()
        .take(MAX_LISTED)
        .map(|trace| {
            let kind = trace
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("scatter");
            let mut text = kind.to_owned();
            if let Some(name) = trace
                .get("name")
                .and_then(Value::as_str)
                .filter(|name| !name.is_empty())
            {
                text.push_str(&format!(" {:?}", label(name)));
            }
            let points = ["x", "y", "values", "z", "lat", "r", "labels"]
                .iter()
                .find_map(|key| trace.get(*key).and_then(Value::as_array).map(Vec::len));
            if let Some(points) = points {
                text.push_str(&format!(" ({})", plural(points, "point", "points")));
            }
            text
        })
        .collect();
    if !described.is_empty() {
        summary.push_str(&format!(": {}", described.join(", ")));
        if traces.len() > MAX_LISTED {
            summary.push_str(&format!(
                " and {} more",
                group_thousands(traces.len() - MAX_LISTED)
            ));
        }
    }
    for axis in ["xaxis", "yaxis"] {
        if let Some(title) = title_text(
            layout
                .and_then(|layout| layout.get(axis))
                .and_then(|axis| axis.get("title")),
        ) {
            summary.push_str(&format!("; {} axis {title:?}", &axis[..1]));
        }
    }
    summary
}

/// Channels in the order they are listed; others follow alphabetically.
const CHANNEL_ORDER: [&str; 12] = [
    "x", "y", "x2", "y2", "color", "size", "shape", "theta", "radius", "row", "column", "facet",
];

fn mark_name(spec: &Value) -> Option<String> {
    match spec.get("mark")? {
        Value::String(mark) => Some(mark.clone()),
        Value::Object(mark) => mark.get("type").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

fn encoding_text(spec: &Value) -> Option<String> {
    let encoding = spec.get("encoding")?.as_object()?;
    let mut channels: Vec<&String> = encoding.keys().collect();
    channels.sort_by_key(|channel| {
        (
            CHANNEL_ORDER
                .iter()
                .position(|known| known == channel)
                .unwrap_or(CHANNEL_ORDER.len()),
            channel.as_str(),
        )
    });
    let parts: Vec<String> = channels
        .into_iter()
        .take(MAX_LISTED)
        .filter_map(|channel| {
            let definition = &encoding[channel];
            let field = definition.get("field").and_then(Value::as_str);
            let aggregate = definition.get("aggregate").and_then(Value::as_str);
            let kind = definition.get("type").and_then(Value::as_str);
            let what = match (aggregate, field) {
                (Some(aggregate), Some(field)) => format!("{aggregate}({field})"),
                (Some(aggregate), None) => aggregate.to_owned(),
                (None, Some(field)) => field.to_owned(),
                (None, None) => definition
                    .get("value")
                    .map(|value| format!("value {value}"))?,
            };
            Some(match kind {
                Some(kind) => format!("{channel}: {} ({kind})", label(&what)),
                None => format!("{channel}: {}", label(&what)),
            })
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn data_rows(spec: &Value) -> Option<usize> {
    if let Some(values) = spec
        .get("data")
        .and_then(|data| data.get("values"))
        .and_then(Value::as_array)
    {
        return Some(values.len());
    }
    let datasets = spec.get("datasets")?.as_object()?;
    Some(
        datasets
            .values()
            .filter_map(Value::as_array)
            .map(Vec::len)
            .sum(),
    )
}

/// `vega-lite chart "Population": bar mark; x: city (nominal), y: population (quantitative);
/// 3 data rows`. Vega (not Lite) specs list their mark types and data sets.
pub(crate) fn summarize_vega(mime: &str, value: &Value) -> String {
    let lite = mime.contains("vegalite");
    let kind = if lite {
        "vega-lite chart"
    } else {
        "vega chart"
    };
    let Some(spec) = json_payload(value) else {
        return format!("{kind} (unreadable JSON)");
    };
    let mut summary = kind.to_owned();
    if let Some(title) = title_text(spec.get("title")) {
        summary.push_str(&format!(" {title:?}"));
    }
    let mut parts: Vec<String> = Vec::new();
    if lite {
        if let Some(mark) = mark_name(&spec) {
            parts.push(format!("{mark} mark"));
        }
        if let Some(encoding) = encoding_text(&spec) {
            parts.push(encoding);
        }
        for composite in ["layer", "concat", "hconcat", "vconcat"] {
            if let Some(views) = spec.get(composite).and_then(Value::as_array) {
                let marks: Vec<String> = views
                    .iter()
                    .take(MAX_LISTED)
                    .filter_map(mark_name)
                    .collect();
                let mut text = format!("{composite} of {}", plural(views.len(), "view", "views"));
                if !marks.is_empty() {
                    text.push_str(&format!(" ({})", marks.join(", ")));
                }
                parts.push(text);
            }
        }
        if let Some(facet) = spec.get("facet").and_then(Value::as_object) {
            let fields: Vec<&str> = facet
                .values()
                .filter_map(|value| value.get("field").and_then(Value::as_str))
                .collect();
            parts.push(format!(
                "faceted by {}",
                if fields.is_empty() {
                    "?".to_owned()
                } else {
                    fields.join(", ")
                }
            ));
            if let Some(inner) = spec.get("spec").and_then(mark_name) {
                parts.push(format!("{inner} mark"));
            }
        }
    } else if let Some(marks) = spec.get("marks").and_then(Value::as_array) {
        parts.push(format!(
            "{}: {}",
            plural(marks.len(), "mark", "marks"),
            listed_strings(marks, "type")
        ));
    }
    if let Some(rows) = data_rows(&spec) {
        parts.push(plural(rows, "data row", "data rows"));
    } else if let Some(url) = spec
        .get("data")
        .and_then(|data| data.get("url"))
        .and_then(Value::as_str)
    {
        parts.push(format!("data from {}", label(url)));
    } else if let Some(data) = spec.get("data").and_then(Value::as_array) {
        parts.push(format!("data sets: {}", listed_strings(data, "name")));
    }
    if !parts.is_empty() {
        summary.push_str(&format!(": {}", parts.join("; ")));
    }
    summary
}

/// The string `key` of the first few `items` that have one, comma-separated.
fn listed_strings(items: &[Value], key: &str) -> String {
    let listed: Vec<&str> = items
        .iter()
        .take(MAX_LISTED)
        .filter_map(|item| item.get(key).and_then(Value::as_str))
        .collect();
    listed.join(", ")
}

/// `Jupyter widget (model 2141775e…): live state in the kernel, not in the output`.
pub(crate) fn summarize_widget(value: &Value) -> String {
    let model = json_payload(value).and_then(|payload| {
        payload
            .get("model_id")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    match model {
        Some(model) => format!(
            "Jupyter widget (model {model}): its live state is in the kernel, not in the output"
        ),
        None => "Jupyter widget: its live state is in the kernel, not in the output".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plotly_summary_lists_traces_and_titles() {
        let figure = json!({
            "data": [{"type": "scatter", "name": "sin", "x": [1, 2, 3], "y": [1, 2, 3]}, {"type": "bar", "y": [1]}],
            "layout": {"title": {"text": "Waves"}, "xaxis": {"title": {"text": "t"}}, "yaxis": {"title": "v"}}
        });
        assert_eq!(
            summarize_plotly(&figure),
            "plotly figure \"Waves\": 2 traces: scatter \"sin\" (3 points), bar (1 point); x axis \"t\"; y axis \"v\""
        );
        assert_eq!(
            summarize_plotly(&json!("not json")),
            "plotly figure (unreadable JSON)"
        );
    }

    #[test]
    fn vega_lite_summary_reads_mark_encoding_and_data() {
        let spec = json!({
            "title": "Pop", "mark": {"type": "bar"},
            "encoding": {"y": {"field": "n", "type": "quantitative", "aggregate": "sum"}, "x": {"field": "city", "type": "nominal"}},
            "data": {"values": [{}, {}, {}]}
        });
        assert_eq!(
            summarize_vega("application/vnd.vegalite.v5+json", &spec),
            "vega-lite chart \"Pop\": bar mark; x: city (nominal), y: sum(n) (quantitative); 3 data rows"
        );
        let layered =
            json!({"layer": [{"mark": "line"}, {"mark": "point"}], "data": {"url": "data.csv"}});
        assert_eq!(
            summarize_vega("application/vnd.vegalite.v4+json", &layered),
            "vega-lite chart: layer of 2 views (line, point); data from data.csv"
        );
    }

    #[test]
    fn widget_summary_names_the_model() {
        assert_eq!(
            summarize_widget(&json!({"model_id": "abc", "version_major": 2})),
            "Jupyter widget (model abc): its live state is in the kernel, not in the output"
        );
    }
}
