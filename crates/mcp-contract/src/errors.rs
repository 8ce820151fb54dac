//! The stable error codes of the contract. A failure is a tool result with `isError: true`, a
//! [`crate::ToolError`] body with one of these codes, and a message that says what to do next.
//!
//! Codes are [`ErrorCode`] variants, so a misspelt code does not compile; [`ERROR_CODES`] (the
//! book's error table, `docs/src/errors.md`, is checked against it) is generated from the same
//! list.

macro_rules! error_codes {
    ($($variant:ident = $code:literal : $when:literal,)*) => {
        /// A stable error code: the `code` of a [`crate::ToolError`], serialised as its
        /// snake_case word.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $(
                #[doc = $when]
                $variant,
            )*
        }

        impl ErrorCode {
            word_methods!(ErrorCode, "Every code, in the order of the book's table (`docs/src/errors.md`).", from_word, "The code with this word, if there is one.", $($variant => $code),*);

            /// When the code is returned, in one sentence.
            pub const fn describe(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $when,)*
                }
            }
        }

        /// Every error code a tool can return, with when it happens (generated from
        /// [`ErrorCode`]).
        pub const ERROR_CODES: &[(&str, &str)] = &[$(($code, $when),)*];
    };
}

error_codes! {
    InvalidArguments = "invalid_arguments": "The arguments do not match the tool's input schema (missing, unknown or mistyped keys).",
    InvalidArgument = "invalid_argument": "An argument has an allowed type but an unusable value.",
    UnknownTool = "unknown_tool": "No tool has this name (it may have been renamed or removed).",
    NotebookNotFound = "notebook_not_found": "No notebook matches the reference.",
    NotebookRefMalformed = "notebook_ref_malformed": "Starts with nb_ but is not nb_ followed by 24 hex characters.",
    NotebookRefUnknown = "notebook_ref_unknown": "A well-formed notebookRef that is unknown, stale, or from another server start.",
    NotebookAmbiguous = "notebook_ambiguous": "The URI is open in several windows; use one of the listed notebookRefs.",
    WindowNotConnected = "window_not_connected": "The windowId names no connected window.",
    WindowUnavailable = "window_unavailable": "The window that owns the notebook did not answer.",
    PathOutsideRoot = "path_outside_root": "The path leaves the allowed root folder (.., absolute paths elsewhere, escaping symlinks).",
    NotANotebook = "not_a_notebook": "The path does not name an .ipynb file.",
    NotebookUnreadable = "notebook_unreadable": "The file could not be parsed as an nbformat 4.0-4.5 notebook; the message names the problem.",
    NotebookChangedOnDisk = "notebook_changed_on_disk": "Someone else changed the notebook's cells since it was read; it has been reloaded and nothing was written.",
    AlreadyExists = "already_exists": "The destination exists and is never overwritten.",
    IoError = "io_error": "Reading or writing a file failed (disk full, permissions); the file on disk is intact.",
    CellNotFound = "cell_not_found": "No cell has that id or name.",
    CellIndexOutOfRange = "cell_index_out_of_range": "The index is past the last cell.",
    InvalidCellRef = "invalid_cell_ref": "The cell reference is empty or malformed.",
    RevMismatch = "rev_mismatch": "The cell changed since it was read; details carry its current rev and source. Nothing was applied.",
    ExpectedRevRequired = "expected_rev_required": "Changing an existing cell needs expectedRev from your latest read.",
    OldTextNotFound = "old_text_not_found": "replace: oldText does not occur in the cell.",
    OldTextAmbiguous = "old_text_ambiguous": "replace: oldText occurs more than once.",
    DuplicateCell = "duplicate_cell": "A cell is listed twice.",
    IndexOutOfRange = "index_out_of_range": "toIndex is outside the allowed range.",
    InvalidName = "invalid_name": "A cell name must be lower-case kebab-case.",
    NameTaken = "name_taken": "Another cell already has that name.",
    NotACodeCell = "not_a_code_cell": "Only code cells can run or have outputs.",
    SourceRange = "source_range": "startLine/endLine are outside a cell's lines.",
    InvalidRegex = "invalid_regex": "search_cells: the query is not a valid regular expression.",
    NoKernel = "no_kernel": "No usable kernel is installed or selected; the message says what to install or select.",
    KernelNotFound = "kernel_not_found": "The kernelId is not one of list_kernels' ids.",
    KernelUnavailable = "kernel_unavailable": "The kernel could not be started or is not answering.",
    KernelBusy = "kernel_busy": "The kernel is busy with other work; try again when it is idle.",
    RunActive = "run_active": "Another tracked run is active on this notebook; details name it.",
    CommandPending = "command_pending": "An earlier execute request has not been answered by the kernel yet.",
    RunLimit = "run_limit": "Too many active runs in this window (16).",
    TooManyCells = "too_many_cells": "A run may hold at most 256 cells.",
    RegistryFull = "registry_full": "The execution registry is full of active runs.",
    ExecutionNotFound = "execution_not_found": "No tracked run has this executionId for this notebook.",
    NoExecution = "no_execution": "The notebook has no tracked run yet.",
    NothingToUndo = "nothing_to_undo": "No change made through this server is left to undo for this notebook.",
    VariableNotFound = "variable_not_found": "inspect_variable: the name is not defined in the kernel.",
    TransferFailed = "transfer_failed": "A file transfer failed; the message names the phase, details.committed says whether the destination was committed.",
    TransferUncertain = "transfer_uncertain": "A file transfer's promotion was requested but not confirmed.",
    TransferBudget = "transfer_budget": "The kernel's transfer budget (64 MiB) is spent; restart the kernel.",
    TooLarge = "too_large": "The file or payload is larger than allowed.",
    ResponseTooLarge = "response_too_large": "The reply would be too large to send in one message; the message says how to ask for less.",
    NotSupported = "not_supported": "This host cannot do that for this notebook.",
    EnvironmentBlocked = "environment_blocked": "Something in the window blocks preparing it for Colab (open terminals, documents, debugging, or the native connection); details.blockers names each.",
    InternalError = "internal_error": "A bug in the server; the message says what failed.",
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ErrorCode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let word = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        ErrorCode::from_word(&word)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown error code `{word}`")))
    }
}

impl schemars::JsonSchema for ErrorCode {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ErrorCode".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let words: Vec<&str> = ERROR_CODES.iter().map(|(code, _)| *code).collect();
        schemars::json_schema!({ "type": "string", "enum": words })
    }
}

/// True when `code` is one of [`ERROR_CODES`].
pub fn is_known_code(code: &str) -> bool {
    ErrorCode::from_word(code).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_book_lists_exactly_these_codes() {
        let chapter = include_str!("../../../docs/src/errors.md");
        let table = chapter
            .split("<!-- errors:start -->")
            .nth(1)
            .and_then(|rest| rest.split("<!-- errors:end -->").next())
            .expect("docs/src/errors.md has an errors table");
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

    #[test]
    fn codes_are_unique_snake_case_words_that_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let word = code.as_str();
            assert!(seen.insert(word), "{word} twice");
            assert!(
                word.bytes()
                    .all(|byte| byte.is_ascii_lowercase() || byte == b'_')
            );
            assert_eq!(ErrorCode::from_word(word), Some(*code));
            let json = serde_json::to_value(code).expect("serialises");
            assert_eq!(json, serde_json::Value::String(word.to_owned()));
            assert_eq!(serde_json::from_value::<ErrorCode>(json).ok(), Some(*code));
        }
        assert_eq!(ErrorCode::ALL.len(), ERROR_CODES.len());
        assert!(serde_json::from_str::<ErrorCode>("\"no_such_code\"").is_err());
    }
}
