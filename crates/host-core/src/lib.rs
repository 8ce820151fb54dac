//! The host trait of jupyter-mcp and every tool, written once against it.
//!
//! Layer 2. A host (the standalone server over files, the VS Code extension over live editor
//! documents) implements [`NotebookHost`]; [`Tools`] turns MCP tool calls into operations on it
//! using the pure domain crates. Where a host's notebooks run code, it hands out one
//! [`NotebookKernels`] (the kernel seam, [`kernel`]); where transfers read and write files on
//! its side, one [`HostFiles`] ([`files`]). The tools that are listed follow from what those
//! can do. Services that do not depend on the host (a language model for summaries,
//! [`summary::Summarizer`]) are given to the tools once, as [`Services`]. This crate knows no
//! files, no processes, no sockets, no HTTP, no rmcp and no VS Code: the transports above it
//! and the hosts beside it do. [`testing`] (feature `testing`) has an in-memory host, a
//! scripted kernel and a scripted summarizer for tests of tool logic, here and in other hosts.
#![cfg_attr(
    feature = "testing",
    doc = r#"
A tool call against the in-memory host of [`testing`]: [`Tools::call`] takes the arguments as a
client sent them and returns what the client gets.

```
use std::sync::Arc;

use host_core::testing::MemoryHost;
use host_core::{CallContext, Tools};
use serde_json::json;

let host = Arc::new(MemoryHost::new());
host.insert("analysis.ipynb", &["import math", "area = math.pi * 2 ** 2"]);
let tools = Tools::new(host);
// Booleans and numbers sent as strings are read as what the schema says they are.
let arguments = json!({"notebookRef": "analysis.ipynb", "view": "source", "maxSourceChars": "8"});
let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
let output = runtime.block_on(tools.call(
    "read_notebook",
    arguments.as_object().cloned(),
    CallContext::default(),
));
assert!(!output.is_error, "{}", output.text);
let read = output.structured.unwrap();
assert_eq!(read["cellCount"], 2);
assert_eq!(read["cells"][1]["source"], "area = m");
assert_eq!(read["cells"][1]["sourceTruncated"], true);
```
"#
)]
#![warn(missing_docs)]

mod budget;
mod codes;
mod epoch;
mod execution;
mod failure;
mod inspect;
mod kernel_tools;
mod render;
mod resources;
mod result_words;
pub mod seams;
mod session;
mod setups;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tools;
mod transfer_tools;
mod undo;

pub use seams::{colab, environment, files, host, kernel, summary};

#[cfg(test)]
mod tests;

pub use files::{HostFileReader, HostFileWriter, HostFiles};
pub use host::{
    ChangeKind, Commit, CommitKind, Document, DocumentCapabilities, HostError, Listing,
    NotebookHost, NotebookLocation, OpenStatus, Saved, WindowInfo,
};
pub use kernel::{
    KernelCapabilities, KernelError, KernelEvent, KernelSession, NotebookKernels, ObservedRun,
    SharedKernels, SharedSession,
};
pub use mcp_contract::refs;
pub use mcp_contract::windows_paths;
pub use tools::{
    BoxFuture, CallContext, ImageContent, ProgressSink, Services, ToolDispatch, ToolOutput, Tools,
};
pub use undo::MAX_UNDO_STEPS;
