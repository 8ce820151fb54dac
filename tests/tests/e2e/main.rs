//! End-to-end tests of the `jupyter-mcp` binary through real MCP clients.

mod documents;
mod execution;
mod faults;
mod intelligence;
mod summaries;
mod transfer;
