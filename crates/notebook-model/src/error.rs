//! The errors of this crate. Each variant says what went wrong in terms a caller can act on; the
//! messages are written for the person or agent who has to fix the input.

use thiserror::Error;

/// Why a notebook file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    /// The bytes are not UTF-8.
    #[error("the file is not valid UTF-8 text; .ipynb files are UTF-8 JSON")]
    InvalidUtf8,
    /// The text is not JSON.
    #[error("the file is not valid JSON (line {line}, column {column}): {message}")]
    InvalidJson {
        /// 1-based line of the syntax error.
        line: usize,
        /// 1-based column of the syntax error.
        column: usize,
        /// The JSON parser's description of the error.
        message: String,
    },
    /// The JSON is not an object.
    #[error("the file is JSON but not a JSON object, so it is not a notebook")]
    NotAnObject,
    /// The object has no integer `nbformat` field.
    #[error("the file has no integer `nbformat` field, so it is not a Jupyter notebook")]
    MissingVersion,
    /// The notebook is not nbformat 4.0 to 4.5 (or is 4 without `nbformat_minor`).
    #[error("{}", unsupported_version_message(*major, *minor))]
    UnsupportedVersion {
        /// The file's `nbformat`.
        major: u64,
        /// The file's `nbformat_minor`; `None` when it has none.
        minor: Option<u64>,
    },
    /// The notebook's `metadata` is not an object.
    #[error("the notebook's `metadata` is not a JSON object")]
    InvalidNotebookMetadata,
    /// The notebook's `cells` is not an array.
    #[error("the notebook's `cells` is not a list")]
    CellsNotAList,
    /// A cell object is not a valid nbformat 4 cell.
    #[error("cell {index} is malformed: {problem}")]
    InvalidCell {
        /// 0-based position of the cell in `cells`.
        index: usize,
        /// What is wrong with it.
        problem: String,
    },
}

fn unsupported_version_message(major: u64, minor: Option<u64>) -> String {
    let version = match minor {
        Some(minor) => format!("{major}.{minor}"),
        None => format!("{major} (no nbformat_minor)"),
    };
    if major == 4 && minor.is_none() {
        return "this notebook says nbformat 4 but has no `nbformat_minor` field, which nbformat 4 \
                requires; add `\"nbformat_minor\": 4` next to `\"nbformat\": 4` if the file is \
                otherwise a notebook"
            .to_owned();
    }
    if major < 4 {
        format!(
            "this notebook is nbformat {version}; only nbformat 4.0 to 4.5 is supported. Upgrade it \
             with `jupyter nbconvert --to notebook --nbformat 4 --output upgraded.ipynb FILE` (or \
             open and save it in JupyterLab), then use the upgraded file"
        )
    } else {
        format!(
            "this notebook is nbformat {version}; only nbformat 4.0 to 4.5 is supported. It was \
             written by a newer tool than this server understands"
        )
    }
}

/// Why a cell reference did not resolve.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CellRefError {
    /// A numeric reference is not below the number of cells.
    #[error(
        "cell index {index} is out of range: the notebook has {count} cells (indices 0 to {last})",
        last = count.saturating_sub(1)
    )]
    IndexOutOfRange {
        /// The index given.
        index: u64,
        /// Number of cells in the notebook.
        count: usize,
    },
    /// `TOP` or `BOTTOM` was given for a notebook without cells.
    #[error("the notebook has no cells, so `{reference}` refers to nothing")]
    EmptyNotebook {
        /// The reference as the caller wrote it.
        reference: String,
    },
    /// No cell has this id or name, and it is not an index either.
    #[error(
        "no cell has the id or name `{reference}`; read the outline (read_notebook) for current \
         ids and names, or pass a 0-based index as a JSON number"
    )]
    NotFound {
        /// The reference as the caller wrote it.
        reference: String,
    },
    /// The reference is empty (or only whitespace).
    #[error(
        "`{reference}` is not a cell reference: use an index (JSON number), an id, a name, TOP or BOTTOM"
    )]
    Invalid {
        /// The reference as the caller wrote it.
        reference: String,
    },
}
