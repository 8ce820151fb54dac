//! The stable error codes of the contract. A failure is a tool result with `isError: true`, a
//! [`crate::ToolError`] body with one of these codes, and a message that says what to do next.

/// Every error code a tool can return, with when it happens. The README's error table is checked
/// against this list.
pub const ERROR_CODES: &[(&str, &str)] = &[
    (
        "invalid_arguments",
        "The arguments do not match the tool's input schema (missing, unknown or mistyped keys).",
    ),
    (
        "invalid_argument",
        "An argument has an allowed type but an unusable value.",
    ),
    (
        "unknown_tool",
        "No tool has this name (it may have been renamed or removed).",
    ),
    ("notebook_not_found", "No notebook matches the reference."),
    (
        "notebook_ref_malformed",
        "Starts with nb_ but is not nb_ followed by 24 hex characters.",
    ),
    (
        "notebook_ref_unknown",
        "A well-formed notebookRef that is unknown, stale, or from another server start.",
    ),
    (
        "notebook_ambiguous",
        "The URI is open in several windows; use one of the listed notebookRefs.",
    ),
    (
        "window_not_connected",
        "The windowId names no connected window.",
    ),
    (
        "window_unavailable",
        "The window that owns the notebook did not answer.",
    ),
    (
        "path_outside_root",
        "The path leaves the allowed root folder (.., absolute paths elsewhere, escaping symlinks).",
    ),
    ("not_a_notebook", "The path does not name an .ipynb file."),
    (
        "notebook_unreadable",
        "The file could not be parsed as an nbformat 4.0-4.5 notebook; the message names the problem.",
    ),
    (
        "notebook_changed_on_disk",
        "Someone else changed the file since it was read; it has been reloaded and nothing was written.",
    ),
    (
        "already_exists",
        "The destination exists and is never overwritten.",
    ),
    (
        "io_error",
        "Reading or writing a file failed (disk full, permissions); the file on disk is intact.",
    ),
    ("cell_not_found", "No cell has that id or name."),
    (
        "cell_index_out_of_range",
        "The index is past the last cell.",
    ),
    (
        "invalid_cell_ref",
        "The cell reference is empty or malformed.",
    ),
    (
        "rev_mismatch",
        "The cell changed since it was read; details carry its current rev and source. Nothing was applied.",
    ),
    (
        "expected_rev_required",
        "Changing an existing cell needs expectedRev from your latest read.",
    ),
    (
        "old_text_not_found",
        "replace: oldText does not occur in the cell.",
    ),
    (
        "old_text_ambiguous",
        "replace: oldText occurs more than once.",
    ),
    ("duplicate_cell", "A cell is listed twice."),
    (
        "index_out_of_range",
        "toIndex is outside the allowed range.",
    ),
    ("invalid_name", "A cell name must be lower-case kebab-case."),
    ("name_taken", "Another cell already has that name."),
    (
        "not_a_code_cell",
        "Only code cells can run or have outputs.",
    ),
    (
        "source_range",
        "startLine/endLine are outside a cell's lines.",
    ),
    (
        "invalid_regex",
        "search_cells: the query is not a valid regular expression.",
    ),
    (
        "no_kernel",
        "No usable kernel is installed or selected; the message says what to install or select.",
    ),
    (
        "kernel_not_found",
        "The kernelId is not one of list_kernels' ids.",
    ),
    (
        "kernel_unavailable",
        "The kernel could not be started or is not answering.",
    ),
    (
        "kernel_busy",
        "The kernel is busy with other work; try again when it is idle.",
    ),
    (
        "run_active",
        "Another tracked run is active on this notebook; details name it.",
    ),
    (
        "command_pending",
        "An earlier execute request has not been answered by the kernel yet.",
    ),
    ("run_limit", "Too many active runs in this window (16)."),
    ("too_many_cells", "A run may hold at most 256 cells."),
    (
        "registry_full",
        "The execution registry is full of active runs.",
    ),
    (
        "execution_not_found",
        "No tracked run has this executionId for this notebook.",
    ),
    ("no_execution", "The notebook has no tracked run yet."),
    ("nothing_to_undo", "No snapshot is left for this notebook."),
    (
        "variable_not_found",
        "inspect_variable: the name is not defined in the kernel.",
    ),
    (
        "transfer_failed",
        "A file transfer failed; the message names the phase, details.committed says whether the destination was committed.",
    ),
    (
        "transfer_uncertain",
        "A file transfer's promotion was requested but not confirmed.",
    ),
    (
        "transfer_budget",
        "The kernel's transfer budget (64 MiB) is spent; restart the kernel.",
    ),
    ("too_large", "The file or payload is larger than allowed."),
    (
        "response_too_large",
        "The reply would be too large to send in one message; the message says how to ask for less.",
    ),
    (
        "not_supported",
        "This host cannot do that for this notebook.",
    ),
    (
        "internal_error",
        "A bug in the server; the message says what failed.",
    ),
];

/// True when `code` is one of [`ERROR_CODES`].
pub fn is_known_code(code: &str) -> bool {
    ERROR_CODES.iter().any(|(known, _)| *known == code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_lists_exactly_these_codes() {
        let readme = include_str!("../../../README.md");
        let table = readme
            .split("<!-- errors:start -->")
            .nth(1)
            .and_then(|rest| rest.split("<!-- errors:end -->").next())
            .expect("README has an errors table");
        let mut documented: Vec<&str> = table
            .lines()
            .filter_map(|line| line.strip_prefix("| `"))
            .filter_map(|line| line.split('`').next())
            .collect();
        let mut known: Vec<&str> = ERROR_CODES.iter().map(|(code, _)| *code).collect();
        documented.sort_unstable();
        known.sort_unstable();
        assert_eq!(documented, known);
    }
}
