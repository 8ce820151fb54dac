//! The VS Code host of jupyter-mcp, without VS Code and without Node.
//!
//! Layer 3 (host). The notebooks are the live `NotebookDocument`s of one VS Code window,
//! unsaved changes included; a [`Shell`] (the TypeScript extension, through `host-napi`) reads
//! and changes them with VS Code's notebook API. This crate maps VS Code's notebook data
//! (cells, the ipynb extension's metadata layout, output items, execution summaries) to and from
//! nbformat ([`convert`]), turns a batch of [`notebook_model::DocChange`]s into one edit plan
//! against the live document ([`plan`]), and implements [`host_core::NotebookHost`] on top
//! ([`VsCodeHost`]). Code runs through VS Code's Jupyter extension when it serves the notebook
//! ([`jupyter`]), otherwise on the same local kernels as the standalone host (through the
//! extension's own notebook controller). The native driver ([`native`]) operates VS Code's quick
//! pick and input box in this window's page over a loopback Chrome DevTools connection, for the
//! Colab setup that has no API to call.
//!
//! It knows nothing about napi or JavaScript (the shell is a trait), holds no tool logic
//! (that is `host-core`), and never writes a notebook file behind a live document: every change
//! goes through the shell as an edit of the open document.
#![forbid(unsafe_code)]

pub mod colab;
pub mod convert;
mod dispatch;
mod host;
pub mod jupyter;
pub mod kernels;
pub mod native;
pub mod plan;
pub mod shell;
pub mod uri;

pub use dispatch::{RunningServer, Transport, VsCodeDispatch};
pub use host::{ColabConfig, HostConfig, VsCodeHost};
pub use host_core::{CallContext, ToolOutput};
pub use shell::{
    CellData, CellSnapshot, Controller, ExecutionSummary, JupyterKernel, JupyterReply,
    JupyterRequest, NewNotebook, OutputData, OutputItem, Shell, ShellError, Snapshot,
};

/// Local Jupyter kernels for a window, discovered from its first folder (a project `.venv`)
/// and the Jupyter paths, as the standalone host finds them.
pub fn local_kernels(
    first_folder: Option<std::path::PathBuf>,
    idle_ttl: Option<std::time::Duration>,
) -> ::kernels::KernelManager {
    let provider = ::kernels::LocalProvider::new(
        ::kernels::DiscoveryConfig::from_env(first_folder),
        ::kernels::LaunchConfig::default(),
    );
    ::kernels::KernelManager::new(
        std::sync::Arc::new(provider),
        ::kernels::ManagerConfig { idle_ttl },
    )
}

/// What the window's tools use besides the window: the summarizer of the extension host's
/// environment (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`, `JUPYTER_MCP_SUMMARY_MODEL`), as the
/// standalone server builds it, trusting the platform's certificate authorities (or
/// `SSL_CERT_FILE`). A window that cannot build one (an unusable `ANTHROPIC_BASE_URL`) still
/// starts: it logs why and gives deterministic summaries.
pub fn services_from_env() -> host_core::Services {
    let summarizer =
        summarizer::from_env(&summarizer::TlsTrust::default()).unwrap_or_else(|error| {
            tracing::warn!(%error, "summaries stay deterministic");
            None
        });
    host_core::Services { summarizer }
}

/// A random UUID (v4), for the window id made at each activation.
pub fn random_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}
