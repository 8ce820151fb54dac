//! The tools of a [`JupyterHost`], served with the agent's name: each call's MCP client name
//! (when the transport knows it) becomes the name JupyterLab shows for the agent.

use std::sync::Arc;

use host_core::{BoxFuture, Services, ToolDispatch, ToolOutput, Tools};
use mcp_contract::ToolRequest;
use mcp_contract::catalog::ToolSpec;

use crate::host::JupyterHost;

/// [`Tools`] over a [`JupyterHost`], naming the agent after its client.
pub struct JupyterDispatch {
    tools: Tools<JupyterHost>,
}

impl JupyterDispatch {
    /// The tools of `host`, using `services` (the summarizer).
    pub fn new(host: Arc<JupyterHost>, services: Services) -> JupyterDispatch {
        JupyterDispatch {
            tools: Tools::with_services(host, services),
        }
    }

    /// The host.
    pub fn host(&self) -> &Arc<JupyterHost> {
        self.tools.host()
    }
}

impl ToolDispatch for JupyterDispatch {
    fn specs(&self) -> Vec<ToolSpec> {
        self.tools.specs().to_vec()
    }

    fn dispatch(&self, request: ToolRequest) -> BoxFuture<'_, ToolOutput> {
        if let Some(client_name) = &request.context.client_name {
            self.tools.host().presence().set_client_name(client_name);
        }
        self.tools.dispatch(request)
    }
}
