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

/// The methods of a closed set whose variants each have one snake_case word (the tool names,
/// the error codes): `ALL` (documented by `$all`, in the order of the list that declares them),
/// `as_str` and `$parse`, the variant with a word (documented by `$parsed`).
macro_rules! word_methods {
    ($enum:ident, $all:literal, $parse:ident, $parsed:literal, $($variant:ident => $word:literal),* $(,)?) => {
        #[doc = $all]
        pub const ALL: &'static [$enum] = &[$($enum::$variant,)*];

        /// The snake_case word clients see.
        pub const fn as_str(self) -> &'static str {
            match self {
                $($enum::$variant => $word,)*
            }
        }

        #[doc = $parsed]
        pub fn $parse(word: &str) -> Option<$enum> {
            match word {
                $($word => Some($enum::$variant),)*
                _ => None,
            }
        }
    };
}

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
