//! Receipts: the JSON a client gets from `run_cells` and `get_execution`.
//!
//! Output text is produced by an [`OutputFormatter`] that lives in another crate; this module
//! only enforces the caps. Each cell's text is at most `min(12,000, maxOutputChars)` characters
//! (with `maxOutputChars` clamped to 1,000..100,000) and the whole receipt at most 48,000, in
//! requested order. Text that does not fit ends with a marker saying how many characters were
//! cut; a cell that gets no share of the receipt budget carries a short marker instead of
//! silently showing nothing, and so do all cells after it. All lengths are counted in Unicode
//! scalar values (`char`s).
//!
//! While a run is active its receipts format the live outputs. When it ends, the registry
//! formats each cell once per mode and keeps only as much text as any receipt could show
//! ([`CapturedOutput`]), then drops the raw outputs, which the host has already persisted.

use serde::Serialize;
use serde_json::Value;

use crate::id::ExecutionId;
use crate::output::OutputAccumulator;
use crate::run::{CellState, KernelStatus, Progress, ReasonCode, Run, RunStatus};

/// `maxOutputChars` when the client gives none.
pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 12_000;
/// Lower clamp of `maxOutputChars`.
pub const MIN_MAX_OUTPUT_CHARS: usize = 1_000;
/// Upper clamp of `maxOutputChars`; also the `max_chars` given to the formatter.
pub const MAX_MAX_OUTPUT_CHARS: usize = 100_000;
/// Most characters of output one cell contributes to a receipt.
pub const CELL_OUTPUT_CAP: usize = 12_000;
/// Most characters of output in one receipt, across cells.
pub const RECEIPT_OUTPUT_CAP: usize = 48_000;
/// What a cell shows once the receipt budget is spent.
const OMITTED_MARKER: &str = "… [output omitted: receipt output limit reached]";
/// Characters set aside for each later cell, so that a cell whose share of the receipt budget
/// ran out can still say so with [`OMITTED_MARKER`].
const OMISSION_RESERVE: usize = 64;
/// A lower bound on what a receipt spends on a cell whose text it has room for; see
/// `CapturedOutput::capture_run`.
const LEAST_RECEIPT_SHARE: usize = MIN_MAX_OUTPUT_CHARS - 100;
/// Below this many characters a cut is not worth it and the omission marker is used instead.
const SMALLEST_USEFUL_CUT: usize = 2 * OMISSION_RESERVE;

pub use condense::OutputMode;

/// The index of a mode in per-mode arrays.
fn slot(mode: OutputMode) -> usize {
    match mode {
        OutputMode::Summary => 0,
        OutputMode::Text => 1,
        OutputMode::Full => 2,
    }
}

/// Renders nbformat outputs as text. `max_chars` is a bound on the work, not the cap: the
/// tracker cuts the result itself. Any `Fn(&[Value], OutputMode, usize) -> String` is one.
pub trait OutputFormatter {
    /// Renders `outputs` (nbformat dicts) in `mode`, doing work for about `max_chars` characters.
    fn format(&self, outputs: &[Value], mode: OutputMode, max_chars: usize) -> String;
}

impl<F> OutputFormatter for F
where
    F: Fn(&[Value], OutputMode, usize) -> String,
{
    fn format(&self, outputs: &[Value], mode: OutputMode, max_chars: usize) -> String {
        self(outputs, mode, max_chars)
    }
}

/// What a receipt should contain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiptOptions {
    /// Add `cells[].output` for dispatched cells.
    pub include_outputs: bool,
    /// How outputs are rendered.
    pub output_mode: OutputMode,
    /// The client's `maxOutputChars`, before clamping.
    pub max_output_chars: Option<u64>,
    /// The host's wait budget ran out; reported only while the run is not terminal.
    pub wait_timed_out: bool,
}

/// `maxOutputChars` clamped to 1,000..100,000, 12,000 when absent.
pub fn clamp_max_output_chars(requested: Option<u64>) -> usize {
    match requested {
        None => DEFAULT_MAX_OUTPUT_CHARS,
        Some(requested) => usize::try_from(requested)
            .unwrap_or(usize::MAX)
            .clamp(MIN_MAX_OUTPUT_CHARS, MAX_MAX_OUTPUT_CHARS),
    }
}

/// The receipt of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// The run's id, to pass to `get_execution`.
    pub execution_id: ExecutionId,
    /// The notebook the run belongs to, as the host named it at admission.
    pub notebook_ref: String,
    /// Where the run is: `requested`, `running`, or a terminal `completed`, `failed` or
    /// `unavailable`.
    pub status: RunStatus,
    /// Why the run stopped, in a sentence; `None` while it goes on and when it completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why the run stopped, as a stable code; `None` while it goes on and when it completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_code: Option<ReasonCode>,
    /// The kernel status last observed when tracking stopped early; `None` when none was observed
    /// or the run did not stop early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_status_at_stop: Option<KernelStatus>,
    /// Present (and `true`) only when the wait budget ran out before a terminal status.
    #[serde(skip_serializing_if = "is_false")]
    pub wait_timed_out: bool,
    /// Whether an execute request of this notebook has not had its reply yet.
    pub notebook_command_pending: bool,
    /// How many cells have settled, out of how many.
    pub progress: Progress,
    /// What the user must do outside MCP: a cell's kernel asked its frontend for something
    /// (such as Colab's Drive authorisation) that was answered with an error at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_required: Option<crate::run::ActionNotice>,
    /// One entry per requested cell, in requested order.
    pub cells: Vec<CellReceipt>,
}

/// One cell of a receipt, in requested order.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CellReceipt {
    /// The cell's nbformat id, as captured at admission.
    pub cell_id: String,
    /// The cell's 0-based index at admission.
    pub requested_index: usize,
    /// The cell's 0-based index when it was dispatched; `None` if it never was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_index: Option<usize>,
    /// Where the cell is: `requested`, `dispatched`, `completed`, `failed`, `unavailable` or
    /// `not-run`.
    pub state: CellState,
    /// Why the cell failed, was not run or became unavailable, in a sentence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The kernel's execution count for the cell, from its reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_order: Option<u64>,
    /// When the kernel started on the cell, in the host's milliseconds (its `now_ms` clock).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<u64>,
    /// How long the cell took, in milliseconds from its start to its reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The cell's output text, cut to the receipt's limits; present only when outputs were asked
    /// for and the cell was dispatched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// The beginning of one cell's formatted output in one mode, and how long the whole was.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CapturedText {
    head: String,
    total_chars: usize,
}

/// A settled cell's formatted output in every mode, kept after the raw outputs are released.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CapturedOutput {
    by_mode: [CapturedText; 3],
}

impl CapturedOutput {
    /// Formats every dispatched cell in every mode and keeps only what a receipt can show. Until
    /// its budget runs out, a receipt spends at least `min(length, 900)` characters on each
    /// cell (the per-cell limit is at least 1,000, less a marker), so cell `i` can never show
    /// more than 48,000 minus that sum over the cells before it; nothing beyond is kept.
    pub(crate) fn capture_run(
        outputs: &OutputAccumulator,
        dispatched: &[bool],
        formatter: &dyn OutputFormatter,
    ) -> Vec<Option<CapturedOutput>> {
        let mut remaining = [RECEIPT_OUTPUT_CAP; 3];
        dispatched
            .iter()
            .enumerate()
            .map(|(position, &was_dispatched)| {
                if !was_dispatched {
                    return None;
                }
                let cell_outputs = outputs.outputs(position);
                let by_mode = OutputMode::ALL.map(|mode| {
                    let text = formatter.format(&cell_outputs, mode, MAX_MAX_OUTPUT_CHARS);
                    let total_chars = text.chars().count();
                    let keep = total_chars.min(CELL_OUTPUT_CAP).min(remaining[slot(mode)]);
                    remaining[slot(mode)] -= total_chars
                        .min(LEAST_RECEIPT_SHARE)
                        .min(remaining[slot(mode)]);
                    CapturedText {
                        head: take_chars(&text, keep).to_owned(),
                        total_chars,
                    }
                });
                Some(CapturedOutput { by_mode })
            })
            .collect()
    }
}

/// The first `count` characters of `text`.
fn take_chars(text: &str, count: usize) -> &str {
    match text.char_indices().nth(count) {
        Some((offset, _)) => &text[..offset],
        None => text,
    }
}

/// Fits a cell's text into `limit` characters: whole if it fits, else its beginning and a
/// marker saying how many characters were cut, else (no room worth cutting into) the omission
/// marker.
fn fit(head: &str, total_chars: usize, limit: usize) -> String {
    let head_chars = head.chars().count();
    if head_chars == total_chars && total_chars <= limit {
        return head.to_owned();
    }
    if limit < SMALLEST_USEFUL_CUT {
        return OMITTED_MARKER.to_owned();
    }
    // The marker's length depends on the number it prints; the number printed is at most
    // `total_chars`, so reserving for that width is enough.
    let marker_width = cut_marker(total_chars).chars().count();
    let keep = head_chars.min(limit - marker_width);
    let mut text = take_chars(head, keep).to_owned();
    text.push_str(&cut_marker(total_chars - keep));
    text
}

fn cut_marker(cut: usize) -> String {
    format!("\n… [{cut} characters cut]")
}

/// Builds the receipt of `run`.
pub(crate) fn build_receipt(
    run: &Run,
    options: &ReceiptOptions,
    formatter: &dyn OutputFormatter,
    notebook_command_pending: bool,
) -> Receipt {
    let per_cell_limit = CELL_OUTPUT_CAP.min(clamp_max_output_chars(options.max_output_chars));
    let mut later_outputs = if options.include_outputs {
        run.cells()
            .iter()
            .filter(|cell| cell.was_dispatched())
            .count()
    } else {
        0
    };
    let mut remaining = RECEIPT_OUTPUT_CAP;
    // Once a cell was cut short by the receipt budget, later cells only get the omission
    // marker, so the receipt never resumes with text after a gap.
    let mut exhausted = false;
    let cells = run
        .cells()
        .iter()
        .enumerate()
        .map(|(position, cell)| {
            let output = (options.include_outputs && cell.was_dispatched()).then(|| {
                later_outputs -= 1;
                if exhausted {
                    // Nothing more can be shown, so the outputs are not even formatted.
                    return OMITTED_MARKER.to_owned();
                }
                let available = remaining.saturating_sub(later_outputs * OMISSION_RESERVE);
                let limit = per_cell_limit.min(available);
                let live;
                let (head, total_chars) = match (run.live_outputs(), run.captured(position)) {
                    (Some(outputs), _) => {
                        live = formatter.format(
                            &outputs.outputs(position),
                            options.output_mode,
                            MAX_MAX_OUTPUT_CHARS,
                        );
                        (live.as_str(), live.chars().count())
                    }
                    (None, Some(captured)) => {
                        let captured = &captured.by_mode[slot(options.output_mode)];
                        (captured.head.as_str(), captured.total_chars)
                    }
                    (None, None) => ("", 0),
                };
                let text = fit(head, total_chars, limit);
                if total_chars > limit && limit < per_cell_limit {
                    exhausted = true;
                }
                remaining = remaining.saturating_sub(text.chars().count());
                text
            });
            CellReceipt {
                cell_id: cell.cell_id().to_owned(),
                requested_index: cell.requested_index(),
                current_index: cell.current_index(),
                state: cell.state(),
                reason: cell.reason().map(str::to_owned),
                execution_order: cell.execution_order(),
                started_at_ms: cell.started_at_ms(),
                duration_ms: cell.duration_ms(),
                output,
            }
        })
        .collect();
    Receipt {
        execution_id: run.id().clone(),
        notebook_ref: run.notebook().to_owned(),
        status: run.status(),
        reason: run.reason().map(str::to_owned),
        reason_code: run.reason_code(),
        kernel_status_at_stop: run.kernel_status_at_stop(),
        wait_timed_out: options.wait_timed_out && !run.is_terminal(),
        notebook_command_pending,
        progress: run.progress(),
        action_required: run.action_required().cloned(),
        cells,
    }
}

impl Run {
    /// The receipt of this run on its own. `notebook_command_pending` is the notebook-wide
    /// flag, which only the registry knows; use `Registry::receipt` in a host.
    pub fn receipt(
        &self,
        options: &ReceiptOptions,
        formatter: &dyn OutputFormatter,
        notebook_command_pending: bool,
    ) -> Receipt {
        build_receipt(self, options, formatter, notebook_command_pending)
    }
}

#[cfg(test)]
mod tests;
