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

/// Refuses an empty list argument with `InvalidArgument`; `message` says what it must list.
pub(crate) fn require_items<T>(items: &[T], message: &str) -> Result<(), ToolError> {
    if items.is_empty() {
        return Err(error(ErrorCode::InvalidArgument, message));
    }
    Ok(())
}

/// Refuses a text argument that holds a control character with `InvalidArgument`; `message`
/// says what to give instead.
pub(crate) fn refuse_control_characters(
    value: Option<&str>,
    message: &str,
) -> Result<(), ToolError> {
    if value.is_some_and(|text| text.chars().any(char::is_control)) {
        return Err(error(ErrorCode::InvalidArgument, message));
    }
    Ok(())
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

/// A tool's reply that is `value` as JSON, without images.
pub(crate) fn to_json<T: Serialize>(value: &T) -> ToolResult {
    Ok((to_value(value), Vec::new()))
}
