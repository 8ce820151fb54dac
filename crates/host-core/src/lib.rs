//! The host trait of jupyter-mcp and every tool, written once against it.
//!
//! Layer 2. A host (the standalone server over files, the VS Code extension over live editor
//! documents) implements [`NotebookHost`]; [`Tools`] turns MCP tool calls into operations on it
//! using the pure domain crates. This crate knows no files, no HTTP, no rmcp and no VS Code: the
//! transports above it and the hosts beside it do.

mod budget;
mod execution;
pub mod external;
pub mod host;
mod inspect;
mod kernel_tools;
pub mod refs;
mod render;
mod session;
pub mod summary;
pub mod tools;
mod transfer_tools;

pub use external::{ExternalCellEvent, ExternalKernels, SharedExternalKernels};
pub use host::{
    Commit, CommitKind, Document, HostError, HostFileReader, HostFileWriter, Listing, NotebookHost,
    NotebookLocation, OpenStatus, Restored, WindowInfo,
};
pub use tools::{
    BoxFuture, CallContext, ImageContent, ProgressSink, ToolDispatch, ToolOutput, Tools,
};
