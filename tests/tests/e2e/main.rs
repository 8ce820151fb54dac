//! End-to-end tests of the `jupyter-mcp` binary through real MCP clients.

mod bad_input;
mod broker;
mod budget;
mod colab;
mod documents;
mod embedding;
mod execution;
mod faults;
mod hub;
mod intelligence;
mod jupyter;
mod mcp_features;
mod parity;
mod remote;
mod summaries;
mod transfer;
mod viewer;
