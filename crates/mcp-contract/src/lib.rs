//! The tool contract of jupyter-mcp.
//!
//! Layer 1 (domain). Types only: what each tool accepts ([`params`]) and returns ([`results`]),
//! the catalogue of tools with their annotations and schemas ([`catalog`]), the stable error
//! codes ([`errors`]), the lenient reading of stringified arguments ([`coerce`]), notebook
//! references ([`refs`]), what a transport serves ([`dispatch`]) and the calls that follow a run
//! as an MCP task ([`run_task`]). No tokio, no rmcp, no
//! filesystem, no clock: hosts and transports build on these types.
//!
//! ```
//! use mcp_contract::{ErrorCode, ToolError, ToolOutput};
//!
//! let failure = ToolOutput::failure(ToolError::new(ErrorCode::NotebookNotFound, "list first"));
//! assert_eq!(failure.error_code(), Some(ErrorCode::NotebookNotFound));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod catalog;
pub mod coerce;
pub mod dispatch;
pub mod errors;
pub mod params;
pub mod prompts;
pub mod refs;
pub mod resources;
pub mod results;
pub mod run_task;
pub mod windows_paths;

pub use catalog::{Annotations, BrokerRoute, Capability, ToolName, ToolSpec, all_tools};
pub use coerce::parse_arguments;
pub use dispatch::{
    BoxFuture, CallContext, ImageContent, ProgressSink, ResourceBody, ResourceEntry, ResourceError,
    ToolDispatch, ToolOutput, ToolRequest, WindowInfo,
};
pub use errors::ErrorCode;
pub use results::ToolError;

/// Valid tool parameter JSON and its rejection must never panic: for a fuzz target.
pub fn check_arguments(data: &[u8]) {
    let Ok(serde_json::Value::Object(arguments)) = serde_json::from_slice(data) else {
        return;
    };
    for spec in all_tools() {
        let schema = (spec.input_schema)();
        let _ = parse_arguments::<serde_json::Value>(Some(arguments.clone()), &schema);
        let _ = parse_arguments::<params::EditCellsParams>(Some(arguments.clone()), &schema);
    }
}
