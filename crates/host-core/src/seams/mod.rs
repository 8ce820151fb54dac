//! The seams: what a host implements and what the binary gives the tools once. Documents
//! ([`host::NotebookHost`]), kernels ([`kernel::NotebookKernels`] and a
//! [`kernel::KernelSession`] per running kernel), transfer files ([`files::HostFiles`]), a Colab
//! runtime ([`colab::ColabRuntimes`]), an editor window's Colab side
//! ([`environment::ColabEnvironment`]) and a language model for summaries
//! ([`summary::Summarizer`]). These modules import nothing from the tools: the tools are
//! written against them.

pub mod colab;
pub mod environment;
pub mod files;
pub mod host;
pub mod kernel;
pub mod location;
pub mod summary;

pub use mcp_contract::dispatch::{BoxFuture, ImageContent, ProgressSink};
