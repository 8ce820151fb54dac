//! End-to-end tests of the `jupyter-mcp` binary through real MCP clients.

mod broker;
mod budget;
mod documents;
mod execution;
mod faults;
mod intelligence;
mod remote;
mod summaries;
mod transfer;
