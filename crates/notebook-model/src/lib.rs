//! The Jupyter notebook as data.
//!
//! Layer 1 (domain). This crate knows nbformat 4 and nothing else: no tokio, no MCP, no VS Code,
//! no filesystem and no clock. Bytes come in, a typed notebook comes out; edits and views are
//! pure functions over it.
#![forbid(unsafe_code)]
