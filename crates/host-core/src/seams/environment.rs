//! The editor window's Colab seam: its preparation, preflight and terminals
//! ([`ColabEnvironment`]), which the Colab environment tools (`tools/environment.rs`) drive.

use std::sync::Arc;

use mcp_contract::ToolError;
use mcp_contract::params::PrepareColabEnvironmentParams;
use mcp_contract::results::{
    CloseColabTerminalsResult, ColabPreparationResult, ColabTerminalsResult, PreflightWindow,
};

use mcp_contract::BoxFuture;

/// An editor window's side of the Colab preparation tools.
pub trait ColabEnvironment: Send + Sync + 'static {
    /// This window's preflight: counts and booleans only, never contents, commands, paths or
    /// titles. Changes nothing.
    fn preflight(&self) -> BoxFuture<'_, Result<PreflightWindow, ToolError>>;

    /// A new terminal inventory (voiding the previous one), valid 60 s.
    fn list_terminals(&self) -> BoxFuture<'_, Result<ColabTerminalsResult, ToolError>>;

    /// Closes exactly the terminals `refs` names from the latest inventory `inventory_id`.
    fn close_terminals<'a>(
        &'a self,
        inventory_id: &'a str,
        refs: &'a [String],
    ) -> BoxFuture<'a, Result<CloseColabTerminalsResult, ToolError>>;

    /// Starts (or reports) a preparation of this window.
    fn prepare<'a>(
        &'a self,
        params: &'a PrepareColabEnvironmentParams,
    ) -> BoxFuture<'a, Result<ColabPreparationResult, ToolError>>;

    /// A preparation checked afresh.
    fn preparation<'a>(
        &'a self,
        preparation_id: &'a str,
    ) -> BoxFuture<'a, Result<ColabPreparationResult, ToolError>>;
}

/// A shared [`ColabEnvironment`].
pub type SharedEnvironment = Arc<dyn ColabEnvironment>;

/// Window labels in the preflight are cut to this many characters.
pub const MAX_PREFLIGHT_LABEL_CHARS: usize = 256;
