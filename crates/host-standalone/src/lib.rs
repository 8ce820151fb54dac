//! The standalone host of jupyter-mcp.
//!
//! Layer 3 (host). Notebooks are `.ipynb` files under one root folder; every change is written
//! atomically before a tool returns, after a snapshot of the file it replaces (for recovery by
//! hand; `undo_last` is host-core's). Code runs on Jupyter kernels (the
//! `kernels` crate), one per notebook: local ones started in the notebook's folder, or, with
//! `--kernel-server`, kernels of a Jupyter Server or Kernel Gateway, or with `--colab-session` /
//! `--colab-runtime-url`, kernels of a Colab runtime ([`colab`]). It implements
//! [`host_core::NotebookHost`] and serves the tools over Streamable HTTP or stdio through
//! `mcp-server`. It knows nothing about VS Code, and tool logic does not live here.

mod atomic;
pub mod colab;
pub mod files;
pub mod server;
pub mod snapshots;

pub use files::{FileHost, FileHostConfig, StandaloneHost};
pub use server::{Auth, KernelServer, ServeConfig, Transport, serve};
