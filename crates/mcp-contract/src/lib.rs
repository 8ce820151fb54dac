//! The tool contract of jupyter-mcp.
//!
//! Layer 1 (domain). Types only: what each tool accepts and returns, its annotations, and the
//! stable error codes. No tokio, no rmcp, no filesystem, no clock.
#![forbid(unsafe_code)]
