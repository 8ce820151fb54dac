//! Test fixtures shared by the machines' tests: receipts rendered for snapshots, so that a
//! snapshot shows what a test is about rather than the same proof pasted again.

use serde::Serialize;
use serde_json::{Value, json};

use crate::sim::SIM_RELEASE_TAG;

/// The identity evidence of the simulated Colab runtime ([`crate::sim::SimHost`]).
fn simulated_identity() -> Value {
    json!({
        "kernelReleaseTag": SIM_RELEASE_TAG,
        "buildInfoReleaseTag": SIM_RELEASE_TAG,
        "colabModule": true,
        "releaseTagsAgree": true,
    })
}

/// The checks of a check receipt on one line: `name outcome (detail)`, `; `-separated.
fn checks_line(checks: &Value) -> String {
    checks
        .as_array()
        .into_iter()
        .flatten()
        .map(|entry| {
            let name = entry["name"].as_str().unwrap_or("?");
            let outcome = entry["outcome"].as_str().unwrap_or("?");
            match entry.get("detail").and_then(Value::as_str) {
                Some(detail) => format!("{name} {outcome} ({detail})"),
                None => format!("{name} {outcome}"),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `receipt` as pretty JSON for a snapshot, field order kept, with the `checks` of its check
/// receipt (the whole receipt, or its `verification`) on one line and the simulated runtime's
/// identity named instead of spelled out.
pub(crate) fn receipt_snapshot(receipt: &impl Serialize) -> String {
    let pretty = serde_json::to_string_pretty(receipt).unwrap();
    let lines: Vec<&str> = pretty.lines().collect();
    let mut out = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let field = ["\"checks\": [", "\"identity\": {"]
            .into_iter()
            .find(|opening| trimmed == *opening);
        let Some(opening) = field else {
            out.push(line.to_owned());
            index += 1;
            continue;
        };
        // The block ends at the first line back at this indent.
        let end = (index + 1..lines.len())
            .find(|&at| {
                lines[at].starts_with(indent) && !lines[at][indent.len()..].starts_with(' ')
            })
            .unwrap();
        let closing = lines[end].trim_start();
        let comma = if closing.ends_with(',') { "," } else { "" };
        let text = format!(
            "{}{}{}",
            &opening[opening.len() - 1..],
            lines[index + 1..end].join("\n"),
            closing.trim_end_matches(',')
        );
        let value: Value = serde_json::from_str(&text).unwrap();
        let name = &opening[..opening.find(':').unwrap()];
        let replacement = if opening.starts_with("\"checks\"") {
            Some(checks_line(&value))
        } else if value == simulated_identity() {
            Some("the simulated runtime's (release tags agree)".to_owned())
        } else {
            None
        };
        match replacement {
            Some(replacement) => {
                out.push(format!("{indent}{name}: {}{comma}", json!(replacement)));
            }
            None => out.extend(lines[index..=end].iter().map(|line| (*line).to_owned())),
        }
        index = end + 1;
    }
    out.join("\n")
}
