//! Kernels a host reaches through its editor rather than through a [`kernels::KernelManager`]:
//! VS Code's Jupyter extension, when it serves a notebook. The host decides per notebook
//! ([`crate::NotebookHost::external_kernels`]); the kernel tools and the runner then use this
//! seam, and every rule about what a result means stays here and in `execution-tracker`.

use std::sync::Arc;

use mcp_contract::results::{KernelChoice, KernelState};
use serde_json::Value;

use crate::host::{HostError, NotebookLocation};
use crate::tools::BoxFuture;

/// What a host reports about one cell it was asked to run, in order: at most one `Observed`,
/// then one terminal event.
#[derive(Debug, Clone, PartialEq)]
pub enum ExternalCellEvent {
    /// The editor shows the cell started after the request.
    Observed,
    /// The cell finished after the request: its success mark, execution count and outputs (as
    /// nbformat outputs; they are already in the document).
    Settled {
        success: bool,
        execution_count: Option<u64>,
        outputs: Vec<Value>,
    },
    /// The editor refused the request; `error_name` is a sanitised error class name.
    DispatchFailed { error_name: String },
    /// The notebook was closed.
    NotebookClosed,
    /// Observation stopped without a completion: the cell changed, moved or vanished, or a
    /// kernel restart or interrupt was requested. Completion is not claimed.
    Lost,
}

/// The kernels of one notebook, as its editor offers them.
pub trait ExternalKernels: Send + Sync + 'static {
    /// The kernels (controllers) the editor offers for the notebook, with their exact ids.
    fn list(
        &self,
        location: &NotebookLocation,
    ) -> BoxFuture<'_, Result<Vec<KernelChoice>, HostError>>;

    /// Selects the kernel with exactly this id (one `list` returned).
    fn select(&self, location: &NotebookLocation, id: &str)
    -> BoxFuture<'_, Result<(), HostError>>;

    /// Asks the editor to configure a kernel; returns its words about what it did.
    fn configure(&self, location: &NotebookLocation) -> BoxFuture<'_, Result<String, HostError>>;

    /// The notebook's active kernel as the editor reports it.
    fn state(&self, location: &NotebookLocation) -> BoxFuture<'_, KernelState>;

    /// Requests a restart (`restart`) or an interrupt; completion is not claimed. Observations
    /// of the notebook's cells that are under way stop first.
    fn request(
        &self,
        location: &NotebookLocation,
        restart: bool,
    ) -> BoxFuture<'_, Result<(), HostError>>;

    /// Runs the code cell at `index` (whose id is `cell_id`) and reports what is observed.
    fn run_cell(
        &self,
        location: &NotebookLocation,
        index: usize,
        cell_id: &str,
    ) -> tokio::sync::mpsc::UnboundedReceiver<ExternalCellEvent>;
}

/// A shared handle on a host's external kernels.
pub type SharedExternalKernels = Arc<dyn ExternalKernels>;

/// An nbformat output as the IOPub event that would have produced it.
pub(crate) fn iopub_of_output(output: &Value) -> Option<execution_tracker::IopubEvent> {
    let mut message = output.as_object()?.clone();
    let output_type = message.remove("output_type")?;
    if let Some(Value::Array(parts)) = message.get("text") {
        let joined: String = parts.iter().filter_map(Value::as_str).collect();
        message.insert("text".to_owned(), Value::String(joined));
    }
    if let Some(Value::Array(parts)) = message.get("traceback")
        && parts.iter().any(|part| !part.is_string())
    {
        message.remove("traceback");
    }
    message.insert("msg_type".to_owned(), output_type);
    serde_json::from_value(Value::Object(message)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outputs_become_the_events_that_make_them() {
        let stream =
            iopub_of_output(&json!({"output_type":"stream","name":"stdout","text":["a\n","b"]}));
        assert_eq!(
            stream,
            Some(execution_tracker::IopubEvent::Stream {
                name: "stdout".to_owned(),
                text: "a\nb".to_owned()
            })
        );
        let error = iopub_of_output(
            &json!({"output_type":"error","ename":"ValueError","evalue":"x","traceback":[]}),
        );
        assert!(matches!(
            error,
            Some(execution_tracker::IopubEvent::Error { .. })
        ));
        assert_eq!(iopub_of_output(&json!({"text": "no type"})), None);
    }
}
