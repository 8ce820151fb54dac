//! Tool failures as data: the helpers every tool uses to turn a domain or host failure into a
//! [`ToolError`] with a stable code, and a result into JSON.

use mcp_contract::dispatch::ImageContent;
use mcp_contract::{ErrorCode, ToolError};
use notebook_model::CellRefError;
use serde::Serialize;
use serde_json::{Value, json};

use crate::host::HostError;

pub(crate) fn error(code: ErrorCode, message: impl Into<String>) -> ToolError {
    ToolError::new(code, message)
}

impl From<HostError> for ToolError {
    fn from(host_error: HostError) -> ToolError {
        error(host_error.code(), host_error.to_string())
    }
}

pub(crate) fn cell_ref_error(reference_error: CellRefError) -> ToolError {
    error(
        crate::codes::cell_ref(&reference_error),
        reference_error.to_string(),
    )
}

/// A cell as an error's `details` show it now, so the caller can retry without another read.
pub(crate) fn current_cell_json(current: &notebook_model::CurrentCell) -> Value {
    json!({
        "index": current.cell.index,
        "cell_id": current.cell.id,
        "name": current.cell.name,
        "rev": current.cell.rev,
        "source": current.source,
    })
}

pub(crate) fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("contract types serialise")
}

pub(crate) type ToolResult = Result<(Value, Vec<ImageContent>), ToolError>;
