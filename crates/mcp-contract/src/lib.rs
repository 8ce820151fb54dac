//! The tool contract of jupyter-mcp.
//!
//! Layer 1 (domain). Types only: what each tool accepts ([`params`]) and returns ([`results`]),
//! the catalogue of tools with their annotations and schemas ([`catalog`]), the stable error
//! codes ([`errors`]) and the lenient reading of stringified arguments ([`coerce`]). No tokio, no
//! rmcp, no filesystem, no clock: hosts and transports build on these types.
#![forbid(unsafe_code)]

pub mod catalog;
pub mod coerce;
pub mod errors;
pub mod params;
pub mod results;

pub use catalog::{Annotations, Capability, ToolSpec, all_tools};
pub use coerce::parse_arguments;
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
