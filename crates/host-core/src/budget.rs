//! Reply budgets. An agent's context is the scarce resource, and a transport has limits of its
//! own (rmcp's Streamable HTTP client drops the whole connection on a server-sent event over
//! 16 MiB). So every reply is bounded twice: tools whose replies grow with the notebook
//! (`read_notebook`) return what fits a per-call budget and say how to read the rest, and
//! [`cap_reply`] turns any reply that would still be too large to send into a
//! `response_too_large` error that says how to ask for less.

use std::fmt::Write as _;

use serde::Serialize;

use mcp_contract::{ErrorCode, ToolName};

use crate::failure::error;
use mcp_contract::ToolOutput;

/// The largest reply sent, in bytes as estimated by [`wire_estimate`]. The text goes out twice
/// (as text content, JSON-escaped, and as `structuredContent`), so a reply under this bound
/// stays under 13 MB on the wire even when escaping doubles the text, below the 16 MiB that
/// rmcp clients accept in one event.
pub const MAX_REPLY_BYTES: usize = 8_000_000;

/// What a reply costs on the wire, before JSON escaping: the text twice (content and
/// `structuredContent`) and the base64 of its images.
pub fn wire_estimate(output: &ToolOutput) -> usize {
    2 * output.text.len()
        + output
            .images
            .iter()
            .map(|image| image.data.len())
            .sum::<usize>()
}

/// Replaces a reply too large to send with a `response_too_large` error naming the way to ask
/// for less, so that a large answer never closes the client's transport.
pub fn cap_reply(tool: ToolName, output: ToolOutput) -> ToolOutput {
    let size = wire_estimate(&output);
    if size <= MAX_REPLY_BYTES {
        return output;
    }
    let advice = match tool {
        ToolName::ReadNotebook => {
            "read fewer cells at a time: keep the default maxResponseChars (or lower it) and follow nextCellOffset, or pass cellIds; outputMode \"summary\", a smaller maxOutputChars or includeImages: false shrink each cell"
        }
        ToolName::ExportNotebook => "pass outputPath to write the export to a file under the root",
        ToolName::RunCells => {
            "the run itself went ahead; read its receipt with get_execution and includeOutputs: false, and the outputs per cell with read_notebook"
        }
        ToolName::GetExecution => {
            "ask without outputs (includeOutputs: false) and read them per cell with read_notebook"
        }
        _ => "ask for fewer items or smaller parts",
    };
    ToolOutput::failure(error(
        ErrorCode::ResponseTooLarge,
        format!(
            "the reply of {tool} would be about {size} bytes, more than the {MAX_REPLY_BYTES} one message may carry; nothing was returned: {advice}"
        ),
    ))
}

/// The length of `value`'s compact JSON text, without building it.
pub(crate) fn json_len<T: Serialize + ?Sized>(value: &T) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, value).expect("tool results serialise");
    counter.0
}

/// Indices as short runs, `3–7, 9, 12–20`, at most `max_runs` of them and then how many more.
pub(crate) fn describe_indices(indices: &[usize], max_runs: usize) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &index in indices {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == index => *end = index,
            _ => runs.push((index, index)),
        }
    }
    let mut text = String::new();
    for (position, (start, end)) in runs.iter().enumerate() {
        if position == max_runs {
            let rest: usize = runs[position..]
                .iter()
                .map(|(start, end)| end - start + 1)
                .sum();
            let _ = write!(text, ", and {rest} more");
            break;
        }
        if position > 0 {
            text.push_str(", ");
        }
        if start == end {
            let _ = write!(text, "{start}");
        } else {
            let _ = write!(text, "{start}–{end}");
        }
    }
    text
}

/// The notice of a `read_notebook` reply that the budget cut: which cells were left out and
/// exactly how to read them next.
pub(crate) fn left_out_notice(
    budget: usize,
    returned: usize,
    selected: usize,
    left_out: &[usize],
    next_offset: usize,
) -> String {
    format!(
        "the reply budget (maxResponseChars {budget}) is spent: {returned} of the {selected} selected cells are returned, {} left out (indices {}). Read the next ones with cellOffset: {next_offset} and the same other arguments (repeat until nextCellOffset is absent), or pass cellIds for the cells you need; view \"outline\", outputMode \"summary\" or a smaller maxOutputChars fit more cells per reply.",
        left_out.len(),
        describe_indices(left_out, 8),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_contract::ImageContent;

    #[test]
    fn index_runs_are_collapsed_and_bounded() {
        assert_eq!(describe_indices(&[], 3), "");
        assert_eq!(describe_indices(&[4], 3), "4");
        assert_eq!(describe_indices(&[1, 2, 3, 7, 9, 10], 3), "1–3, 7, 9–10");
        assert_eq!(describe_indices(&[1, 3, 5, 6, 7, 9], 2), "1, 3, and 4 more");
    }

    #[test]
    fn json_len_matches_the_serialised_text() {
        let value = serde_json::json!({"a": "x\"y\n", "b": [1, 2.5, null], "c": "é"});
        assert_eq!(json_len(&value), value.to_string().len());
    }

    #[test]
    fn a_reply_over_the_cap_becomes_an_error_that_says_what_to_do() {
        let small = ToolOutput::success(serde_json::json!({"ok": true}), Vec::new());
        assert_eq!(cap_reply(ToolName::ReadNotebook, small.clone()), small);

        let image = ImageContent {
            data: "A".repeat(MAX_REPLY_BYTES / 2),
            mime_type: "image/png".to_owned(),
        };
        let text = "x".repeat(MAX_REPLY_BYTES / 4 + 1);
        let large = ToolOutput::success(serde_json::json!({ "text": text }), vec![image]);
        let capped = cap_reply(ToolName::ExportNotebook, large);
        assert!(capped.is_error);
        assert!(
            capped.text.contains("\"response_too_large\""),
            "{}",
            capped.text
        );
        assert!(capped.text.contains("outputPath"), "{}", capped.text);
        assert!(capped.images.is_empty());
    }
}
