//! The Colab preparation tools of an editor window: `inspect_colab_environment_preflight`,
//! `list_colab_terminals`, `close_colab_terminals`, `prepare_colab_environment` and
//! `get_colab_environment_preparation`, written once against [`ColabEnvironment`].
//!
//! The window (the VS Code host) answers with counts, opaque references and receipts; this
//! module checks the window id and the arguments' shape and hands the typed results back. The
//! broker joins the preflight of every connected window.

use mcp_contract::params::{
    CloseColabTerminalsParams, ColabPreflightParams, ColabPreparationParams,
    ListColabTerminalsParams, PrepareColabEnvironmentParams,
};
use mcp_contract::results::ColabPreflightResult;
use mcp_contract::{ErrorCode, ToolError};

use crate::environment::SharedEnvironment;
use crate::failure::{ToolResult, error, require_items, to_json};
use crate::host::NotebookHost;
use crate::tools::Tools;

impl<H: NotebookHost> Tools<H> {
    /// The host's Colab environment, for a call that names this window or none.
    fn environment(&self, window_id: Option<&String>) -> Result<SharedEnvironment, ToolError> {
        self.check_window(window_id)?;
        self.host.colab_environment().ok_or_else(|| {
            error(
                ErrorCode::NotSupported,
                "this host has no Colab environment (an editor window with the Colab extension)",
            )
        })
    }

    pub(crate) async fn colab_preflight(&self, _params: ColabPreflightParams) -> ToolResult {
        let window = self.environment(None)?.preflight().await?;
        to_json(&ColabPreflightResult::from_windows(vec![window]))
    }

    pub(crate) async fn list_colab_terminals(
        &self,
        params: ListColabTerminalsParams,
    ) -> ToolResult {
        let environment = self.environment(params.window_id.as_ref())?;
        to_json(&environment.list_terminals().await?)
    }

    pub(crate) async fn close_colab_terminals(
        &self,
        params: CloseColabTerminalsParams,
    ) -> ToolResult {
        let environment = self.environment(params.window_id.as_ref())?;
        require_items(
            &params.terminal_refs,
            "terminalRefs must name at least one terminal from list_colab_terminals; nothing was closed",
        )?;
        let mut seen = std::collections::HashSet::new();
        if let Some(twice) = params
            .terminal_refs
            .iter()
            .find(|reference| !seen.insert(reference.as_str()))
        {
            return Err(error(
                ErrorCode::InvalidArgument,
                format!(
                    "terminalRefs names `{twice}` twice; name each terminal once. Nothing was closed"
                ),
            ));
        }
        let closed = environment
            .close_terminals(&params.inventory_id, &params.terminal_refs)
            .await?;
        to_json(&closed)
    }

    pub(crate) async fn prepare_colab_environment(
        &self,
        params: PrepareColabEnvironmentParams,
    ) -> ToolResult {
        let environment = self.environment(params.window_id.as_ref())?;
        to_json(&environment.prepare(&params).await?)
    }

    pub(crate) async fn get_colab_environment_preparation(
        &self,
        params: ColabPreparationParams,
    ) -> ToolResult {
        let environment = self.environment(params.window_id.as_ref())?;
        to_json(&environment.preparation(&params.preparation_id).await?)
    }
}
