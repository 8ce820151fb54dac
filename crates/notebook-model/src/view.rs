//! Per-cell facts for read views: line counts, execution state, and source slicing.

use thiserror::Error;

use crate::notebook::{Cell, CellKind};
use crate::outputs::OutputView;

/// Number of lines as the reference counts them: segments after splitting on `\n`, so an empty
/// source is one line and a trailing newline adds one.
pub fn line_count(source: &str) -> usize {
    source.bytes().filter(|&byte| byte == b'\n').count() + 1
}

/// What the saved file says about a code cell's last execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutionState {
    /// Markdown and raw cells.
    NotApplicable,
    /// An execution count and no error output.
    Success,
    /// An `error` output is saved.
    Error,
    /// Outputs without an execution count: something ran, the file does not say how it ended.
    Unknown,
    /// No execution count and no outputs.
    NotRun,
}

impl ExecutionState {
    /// The name used in views: `n/a`, `success`, `error`, `unknown` or `not-run`.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionState::NotApplicable => "n/a",
            ExecutionState::Success => "success",
            ExecutionState::Error => "error",
            ExecutionState::Unknown => "unknown",
            ExecutionState::NotRun => "not-run",
        }
    }
}

/// The saved execution state of a cell.
pub fn execution_state(cell: &Cell) -> ExecutionState {
    if cell.kind() != CellKind::Code {
        return ExecutionState::NotApplicable;
    }
    let has_error = cell
        .outputs()
        .iter()
        .any(|output| OutputView::of(output).is_error());
    if has_error {
        ExecutionState::Error
    } else if cell.execution_count().is_some() {
        ExecutionState::Success
    } else if !cell.outputs().is_empty() {
        ExecutionState::Unknown
    } else {
        ExecutionState::NotRun
    }
}

/// Why a source slice could not be taken.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SliceError {
    /// A start or end line of 0 was given.
    #[error("startLine and endLine are 1-based: {0} is not allowed")]
    LineBelowOne(u64),
    /// The end line is before the start line.
    #[error("endLine {end} is before startLine {start}")]
    EndBeforeStart {
        /// The first line asked for (1-based).
        start: u64,
        /// The last line asked for (1-based).
        end: u64,
    },
    /// A line past the cell's last line was asked for.
    #[error(
        "requested source lines {start}-{end} exceed cell {index}'s line count {count}; ask for \
         fewer lines or target other cells"
    )]
    BeyondEnd {
        /// The first line asked for (1-based).
        start: u64,
        /// The last line asked for (1-based, inclusive).
        end: u64,
        /// The cell's 0-based position.
        index: usize,
        /// The cell's number of lines.
        count: usize,
    },
}

/// A slice of a cell's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSlice {
    /// The selected lines, cut to the character bound when `truncated`.
    pub text: String,
    /// True when `max_chars` cut the text.
    pub truncated: bool,
}

/// Takes lines `start..=end` (1-based, inclusive; defaults: the whole source) and then at most
/// `max_chars` characters (`0` = unbounded).
pub fn slice_source(
    source: &str,
    index: usize,
    start_line: Option<u64>,
    end_line: Option<u64>,
    max_chars: usize,
) -> Result<SourceSlice, SliceError> {
    let count = line_count(source);
    let start = start_line.unwrap_or(1);
    if start == 0 {
        return Err(SliceError::LineBelowOne(start));
    }
    if end_line == Some(0) {
        return Err(SliceError::LineBelowOne(0));
    }
    let end = end_line.unwrap_or(count as u64);
    if end < start {
        return Err(SliceError::EndBeforeStart { start, end });
    }
    if start > count as u64 || end > count as u64 {
        return Err(SliceError::BeyondEnd {
            start,
            end,
            index,
            count,
        });
    }
    let selected: String = if start == 1 && end == count as u64 {
        source.to_owned()
    } else {
        let lines: Vec<&str> = source.split('\n').collect();
        lines[(start - 1) as usize..end as usize].join("\n")
    };
    if max_chars > 0
        && let Some((cut, _)) = selected.char_indices().nth(max_chars)
    {
        return Ok(SourceSlice {
            text: selected[..cut].to_owned(),
            truncated: true,
        });
    }
    Ok(SourceSlice {
        text: selected,
        truncated: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_counts_follow_the_reference() {
        assert_eq!(line_count(""), 1);
        assert_eq!(line_count("a"), 1);
        assert_eq!(line_count("a\n"), 2);
        assert_eq!(line_count("a\nb"), 2);
    }

    #[test]
    fn slices_lines_then_characters() {
        let source = "one\ntwo\nthree";
        assert_eq!(
            slice_source(source, 0, Some(2), Some(3), 0).unwrap().text,
            "two\nthree"
        );
        let cut = slice_source(&"x".repeat(70_000), 0, Some(1), Some(1), 32).unwrap();
        assert_eq!(cut.text, "x".repeat(32));
        assert!(cut.truncated);
        assert!(matches!(
            slice_source(source, 4, Some(2), Some(9), 0),
            Err(SliceError::BeyondEnd {
                count: 3,
                index: 4,
                ..
            })
        ));
        assert!(slice_source(source, 0, Some(0), None, 0).is_err());
        assert!(slice_source(source, 0, Some(3), Some(2), 0).is_err());
    }
}
