//! Tool logic tested in-process: [`crate::testing::MemoryHost`] and scripted kernels, on paused
//! tokio time (waits and deadlines pass instantly; nothing sleeps). The end-to-end suite keeps
//! the paths that need a real kernel.

mod epochs;
mod listing;
mod reads;
mod runs;
mod setups;
mod summaries;
mod transfers;
mod undo;

use std::sync::Arc;

use mcp_contract::{ErrorCode, ToolOutput};
use serde_json::{Value, json};

use crate::testing::{MemoryHost, ScriptedKernels};
use crate::{CallContext, Tools};

/// A host with scripted kernels and the tools over it.
pub(crate) struct World {
    pub host: Arc<MemoryHost>,
    pub kernels: ScriptedKernels,
    pub tools: Tools<MemoryHost>,
}

impl World {
    pub fn new() -> World {
        World::with_host(MemoryHost::new())
    }

    pub fn with_host(host: MemoryHost) -> World {
        World::with_host_and_kernels(host, ScriptedKernels::new())
    }

    pub fn with_host_and_kernels(host: MemoryHost, kernels: ScriptedKernels) -> World {
        World::with_services(host, kernels, crate::Services::default())
    }

    /// A host with these kernels and the tools over it, given `services`.
    pub fn with_services(
        host: MemoryHost,
        kernels: ScriptedKernels,
        services: crate::Services,
    ) -> World {
        let host = Arc::new(host.with_kernels(kernels.clone()));
        World {
            tools: Tools::with_services(host.clone(), services),
            host,
            kernels,
        }
    }

    pub async fn call(&self, tool: &str, arguments: Value) -> ToolOutput {
        self.tools
            .call(tool, arguments.as_object().cloned(), CallContext::default())
            .await
    }

    /// The structured result of a call that must succeed.
    pub async fn ok(&self, tool: &str, arguments: Value) -> Value {
        let output = self.call(tool, arguments).await;
        assert!(!output.is_error, "{tool} failed: {}", output.text);
        output.structured.expect("a success has structured content")
    }

    /// The notebook's outline, as `read_notebook` answers it.
    pub async fn outline(&self, notebook: &str) -> Value {
        self.ok("read_notebook", json!({"notebookRef": notebook}))
            .await
    }

    /// The receipt of a run of the notebook's stale cells, waited for to its end.
    pub async fn run_stale_cells(&self, notebook: &str) -> Value {
        self.ok(
            "run_cells",
            json!({"notebookRef": notebook, "waitMs": 60_000}),
        )
        .await
    }

    /// The receipt of a run of one cell, waited for to its end.
    pub async fn run_cell(&self, notebook: &str, cell: usize) -> Value {
        self.ok(
            "run_cells",
            json!({"notebookRef": notebook, "cellIds": [cell], "waitMs": 60_000}),
        )
        .await
    }

    /// The receipt of a run of the notebook's stale cells that is still running after 100 ms.
    pub async fn start_run(&self, notebook: &str) -> Value {
        let running = self
            .ok("run_cells", json!({"notebookRef": notebook, "waitMs": 100}))
            .await;
        assert_eq!(running["status"], "running", "{running}");
        running
    }

    /// The output of a call that must fail with `code`, for further checks of its text.
    pub async fn refused(&self, tool: &str, arguments: Value, code: ErrorCode) -> ToolOutput {
        let output = self.call(tool, arguments).await;
        assert_eq!(output.error_code(), Some(code), "{tool}: {}", output.text);
        output
    }

    /// Replaces the code of `cell` (an outline's cell, with its id and rev) in `notebook`; the
    /// edit must succeed.
    pub async fn edit_code(&self, notebook: &str, cell: &Value, new_code: &str) -> Value {
        self.ok("edit_cells", code_edit(notebook, cell, new_code))
            .await
    }

    /// The code of a call that must fail.
    pub async fn fails(&self, tool: &str, arguments: Value) -> ErrorCode {
        let output = self.call(tool, arguments).await;
        assert!(
            output.is_error,
            "{tool} should have failed: {}",
            output.text
        );
        output.error_code().expect("a failure has a known code")
    }

    /// The receipt's cell states, in order.
    pub fn states(receipt: &Value) -> Vec<String> {
        receipt["cells"]
            .as_array()
            .expect("cells")
            .iter()
            .map(|cell| cell["state"].as_str().expect("state").to_owned())
            .collect()
    }

    /// Follows a run until it is terminal (tokio time is paused, so long waits cost nothing).
    pub async fn finish(&self, notebook: &str) -> Value {
        self.ok(
            "get_execution",
            json!({"notebookRef": notebook, "waitMs": 3_600_000, "includeOutputs": true}),
        )
        .await
    }
}

/// The `edit_cells` arguments that replace the code of `cell` (an outline's cell, with its id and
/// rev) in `notebook`.
pub fn code_edit(notebook: &str, cell: &Value, new_code: &str) -> Value {
    json!({"notebookRef": notebook, "edits": [{
        "editType": "edit", "cellId": cell["cell_id"], "expectedRev": cell["rev"],
        "newCode": new_code
    }]})
}
