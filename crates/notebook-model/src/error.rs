//! The errors of this crate. Each variant says what went wrong in terms a caller can act on; the
//! messages are written for the person or agent who has to fix the input.

use thiserror::Error;

/// Why a notebook file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    #[error("the file is not valid UTF-8 text; .ipynb files are UTF-8 JSON")]
    InvalidUtf8,
    #[error("the file is not valid JSON (line {line}, column {column}): {message}")]
    InvalidJson {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("the file is JSON but not a JSON object, so it is not a notebook")]
    NotAnObject,
    #[error("the file has no integer `nbformat` field, so it is not a Jupyter notebook")]
    MissingVersion,
    #[error("{}", unsupported_version_message(*major, *minor))]
    UnsupportedVersion { major: u64, minor: Option<u64> },
    #[error("the notebook's `metadata` is not a JSON object")]
    InvalidNotebookMetadata,
    #[error("the notebook's `cells` is not a list")]
    CellsNotAList,
    #[error("cell {index} is malformed: {problem}")]
    InvalidCell { index: usize, problem: String },
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
    #[error(
        "cell index {index} is out of range: the notebook has {count} cells (indices 0 to {last})",
        last = count.saturating_sub(1)
    )]
    IndexOutOfRange { index: u64, count: usize },
    #[error("the notebook has no cells, so `{reference}` refers to nothing")]
    EmptyNotebook { reference: String },
    #[error(
        "no cell has the id or name `{reference}`; read the outline (read_notebook) for current \
         ids and names, or pass a 0-based index as a JSON number"
    )]
    NotFound { reference: String },
    #[error(
        "`{reference}` is not a cell reference: use an index (JSON number), an id, a name, TOP or BOTTOM"
    )]
    Invalid { reference: String },
}
