//! Reading what a projection returned: pure functions from the page's JSON to the driver's
//! answers.
//!
//! The page is not trusted: every string is bounded again here, the rows are cut at
//! [`MAX_ROWS`], and a refusal's reason is one of a fixed set of sentences, never the page's
//! text.

use colab_setup::{PickerRow, PickerView, UserPrompt};
use serde_json::Value;

use super::NativeBlocker;
use super::projections::{MAX_CHARS, MAX_ROWS};

/// What an observation saw, with what [`PickerView`] does not carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// The picker as the setup machine reads it.
    pub view: PickerView,
    /// For a quick pick, how many items the list holds (rendered or not); otherwise 0.
    pub rows_total: usize,
    /// For a quick pick, whether every item is among the reported rows (VS Code renders only the
    /// rows in view, and the report stops at [`MAX_ROWS`]); otherwise true.
    pub complete: bool,
    /// Whether the page has focus inside the quick input (false when nothing is open).
    pub focused: bool,
}

/// The marker state a projection reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MarkerState {
    Ours,
    Stale,
    Missing,
}

/// The suffix VS Code appends to an input box's prompt; it is VS Code's, not the prompt's.
const INPUT_BOX_SUFFIX: &str = "(Press 'Enter' to confirm or 'Escape' to cancel)";

fn bounded(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_default()
        .chars()
        .take(MAX_CHARS)
        .collect()
}

fn malformed(what: &str) -> NativeBlocker {
    NativeBlocker::Protocol(format!("the page's projection answer has no valid {what}"))
}

/// The marker state of any projection answer.
pub(crate) fn marker_state(answer: &Value) -> Result<MarkerState, NativeBlocker> {
    match answer.get("marker").and_then(Value::as_str) {
        Some("ours") => Ok(MarkerState::Ours),
        Some("stale") => Ok(MarkerState::Stale),
        Some("missing") => Ok(MarkerState::Missing),
        _ => Err(malformed("marker state")),
    }
}

/// The blocker for a marker that is not ours.
pub(crate) fn marker_blocker(state: MarkerState) -> Option<NativeBlocker> {
    match state {
        MarkerState::Ours => None,
        MarkerState::Stale => Some(NativeBlocker::MarkerStale),
        MarkerState::Missing => Some(NativeBlocker::MarkerMissing),
    }
}

/// The projection's status code, after the marker check every projection starts with.
pub(crate) fn status(answer: &Value) -> Result<&str, NativeBlocker> {
    if let Some(blocker) = marker_blocker(marker_state(answer)?) {
        return Err(blocker);
    }
    let status = answer
        .get("status")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("status"))?;
    if status == "unexpected" {
        return Err(unexpected(answer));
    }
    Ok(status)
}

/// A fixed sentence for each reason a write projection refuses.
fn unexpected(answer: &Value) -> NativeBlocker {
    let why = match answer.get("why").and_then(Value::as_str) {
        Some("dialog_open") => "a dialog is open",
        Some("closed") => "no quick input is open",
        Some("not_a_quick_pick") => "the quick input is an input box, not a quick pick",
        Some("not_an_input_box") => "the quick input is a quick pick, not an input box",
        Some("not_focused") => "the quick input does not have focus",
        Some("rows_incomplete") => "the quick pick does not show all its rows",
        Some("no_input") => "the input box has no usable input",
        Some("password_box") => "the input box asks for a password",
        Some("title_changed") => "the input box's title is not the expected one",
        Some("prompt_changed") => "the input box's prompt is not the expected one",
        Some("value_changed") => "the input box's value changed before it was submitted",
        Some("validation_error") => "the input box shows a validation message",
        _ => "the page refused for a reason the driver does not know",
    };
    NativeBlocker::UnexpectedUi(why.to_owned())
}

/// What a modal dialog asks for, from its message.
fn classify_dialog(message: &str) -> UserPrompt {
    let message = message.to_lowercase();
    if ["sign in", "sign-in", "signin", "log in"]
        .iter()
        .any(|phrase| message.contains(phrase))
    {
        UserPrompt::SignIn
    } else if ["consent", "allow", "trust"]
        .iter()
        .any(|phrase| message.contains(phrase))
    {
        UserPrompt::Consent
    } else {
        UserPrompt::Other
    }
}

fn strip_input_box_suffix(prompt: String) -> String {
    match prompt.strip_suffix(INPUT_BOX_SUFFIX) {
        Some(rest) => rest.trim_end().to_owned(),
        None => prompt,
    }
}

/// The observation in an `observe` projection's answer.
pub(crate) fn parse_observation(answer: &Value) -> Result<Observation, NativeBlocker> {
    status(answer)?;
    let focused = answer
        .get("focused")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let title = bounded(&answer["title"]);
    let busy = answer.get("busy").and_then(Value::as_bool).unwrap_or(false);
    let kind = answer.get("kind").and_then(Value::as_str);
    let observation = match kind {
        Some("closed") => Observation {
            view: PickerView::Closed,
            rows_total: 0,
            complete: true,
            focused: false,
        },
        Some("dialog") => Observation {
            view: PickerView::Prompt(classify_dialog(&bounded(&answer["message"]))),
            rows_total: 0,
            complete: true,
            focused: false,
        },
        Some("quick_pick") => {
            let listed = answer["rows"].as_array().ok_or_else(|| malformed("rows"))?;
            let mut rows = Vec::with_capacity(listed.len().min(MAX_ROWS));
            for row in listed.iter().take(MAX_ROWS) {
                rows.push(PickerRow {
                    label: bounded(&row["label"]),
                    enabled: row["enabled"].as_bool().ok_or_else(|| malformed("row"))?,
                });
            }
            let reported = answer["total"]
                .as_u64()
                .and_then(|total| usize::try_from(total).ok())
                .unwrap_or(listed.len());
            let rows_total = reported.max(listed.len());
            let complete = answer["complete"].as_bool().unwrap_or(false)
                && listed.len() <= MAX_ROWS
                && rows_total == rows.len();
            Observation {
                view: PickerView::QuickPick { title, rows, busy },
                rows_total,
                complete,
                focused,
            }
        }
        Some("input_box") => Observation {
            view: PickerView::InputBox {
                title,
                prompt: strip_input_box_suffix(bounded(&answer["prompt"])),
                value: bounded(&answer["value"]),
            },
            rows_total: 0,
            complete: true,
            focused,
        },
        _ => return Err(malformed("kind")),
    };
    Ok(observation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_quick_pick_maps_to_its_rows_title_and_busy_state() {
        let answer = json!({
            "status": "ok", "marker": "ours", "kind": "quick_pick", "title": "Colab",
            "busy": true, "focused": true, "total": 2, "complete": true,
            "rows": [
                { "label": "New Colab Server", "enabled": true },
                { "label": "m0123abcd", "enabled": false },
            ],
        });
        let observation = parse_observation(&answer).unwrap();
        assert_eq!(
            observation.view,
            PickerView::QuickPick {
                title: "Colab".into(),
                rows: vec![
                    PickerRow::new("New Colab Server"),
                    PickerRow {
                        label: "m0123abcd".into(),
                        enabled: false
                    },
                ],
                busy: true,
            }
        );
        assert!(observation.complete && observation.focused);
        assert_eq!(observation.rows_total, 2);
    }

    #[test]
    fn an_input_box_loses_vs_codes_suffix_but_keeps_its_prompt_and_value() {
        let answer = json!({
            "status": "ok", "marker": "ours", "kind": "input_box", "title": "Alias your server",
            "prompt": "Provide a local alias for the new Colab CPU server (Press 'Enter' to confirm or 'Escape' to cancel)",
            "value": "Colab CPU", "busy": false, "focused": true,
        });
        assert_eq!(
            parse_observation(&answer).unwrap().view,
            PickerView::InputBox {
                title: "Alias your server".into(),
                prompt: "Provide a local alias for the new Colab CPU server".into(),
                value: "Colab CPU".into(),
            }
        );
    }

    #[test]
    fn closed_and_dialogs_map_to_their_views() {
        let closed = json!({ "status": "ok", "marker": "ours", "kind": "closed" });
        assert_eq!(parse_observation(&closed).unwrap().view, PickerView::Closed);
        for (message, prompt) in [
            (
                "The extension 'Colab' wants to sign in using Google.",
                UserPrompt::SignIn,
            ),
            (
                "Allow the Jupyter extension to run code?",
                UserPrompt::Consent,
            ),
            ("Something else entirely", UserPrompt::Other),
        ] {
            let dialog =
                json!({ "status": "ok", "marker": "ours", "kind": "dialog", "message": message });
            assert_eq!(
                parse_observation(&dialog).unwrap().view,
                PickerView::Prompt(prompt)
            );
        }
    }

    #[test]
    fn the_page_cannot_exceed_the_bounds() {
        let rows: Vec<Value> = (0..100)
            .map(|n| json!({ "label": format!("{n}{}", "x".repeat(500)), "enabled": true }))
            .collect();
        let answer = json!({
            "status": "ok", "marker": "ours", "kind": "quick_pick", "title": "t".repeat(1000),
            "busy": false, "total": 100, "complete": true, "rows": rows,
        });
        let observation = parse_observation(&answer).unwrap();
        let PickerView::QuickPick { title, rows, .. } = observation.view else {
            panic!("not a quick pick");
        };
        assert_eq!(title.chars().count(), MAX_CHARS);
        assert_eq!(rows.len(), MAX_ROWS);
        assert!(
            rows.iter()
                .all(|row| row.label.chars().count() == MAX_CHARS)
        );
        assert!(!observation.complete);
        assert_eq!(observation.rows_total, 100);
    }

    #[test]
    fn a_virtualised_list_is_reported_incomplete() {
        let answer = json!({
            "status": "ok", "marker": "ours", "kind": "quick_pick", "title": "",
            "busy": false, "total": 40, "complete": false,
            "rows": [{ "label": "a", "enabled": true }],
        });
        let observation = parse_observation(&answer).unwrap();
        assert!(!observation.complete);
        assert_eq!(observation.rows_total, 40);
    }

    #[test]
    fn markers_and_refusals_map_to_blockers_with_fixed_sentences() {
        let stale = json!({ "status": "marker", "marker": "stale" });
        assert_eq!(parse_observation(&stale), Err(NativeBlocker::MarkerStale));
        let missing = json!({ "status": "marker", "marker": "missing" });
        assert_eq!(status(&missing), Err(NativeBlocker::MarkerMissing));
        let refused = json!({ "status": "unexpected", "marker": "ours", "why": "not_focused" });
        assert_eq!(
            status(&refused),
            Err(NativeBlocker::UnexpectedUi(
                "the quick input does not have focus".into()
            ))
        );
        let hostile =
            json!({ "status": "unexpected", "marker": "ours", "why": "<script>secret</script>" });
        let Err(NativeBlocker::UnexpectedUi(sentence)) = status(&hostile) else {
            panic!("not a refusal");
        };
        assert!(!sentence.contains("secret"));
    }

    #[test]
    fn malformed_answers_are_protocol_faults() {
        for answer in [
            json!(null),
            json!("text"),
            json!({ "status": "ok", "marker": "ours" }),
            json!({ "status": "ok", "marker": "ours", "kind": "quick_pick", "rows": "no" }),
            json!({ "status": "ok", "marker": "ours", "kind": "quick_pick", "rows": [{ "label": "a" }] }),
            json!({ "status": "ok", "marker": "yes" }),
        ] {
            assert!(
                matches!(parse_observation(&answer), Err(NativeBlocker::Protocol(_))),
                "{answer}"
            );
        }
    }
}
