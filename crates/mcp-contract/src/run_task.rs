//! `run_cells` followed as a task: the calls that start, follow and interrupt one run, and what
//! its receipts say, so that a transport serving MCP tasks needs to know neither notebooks nor
//! the arguments of these tools. It makes the calls through its [`crate::ToolDispatch`].
//!
//! ```
//! use mcp_contract::ToolName;
//! use mcp_contract::run_task::{RunTask, execution_id, is_terminal};
//! use serde_json::json;
//!
//! let arguments = json!({"notebookRef": "a.ipynb", "cellIds": ["load"]});
//! let task = RunTask::new(arguments.as_object().unwrap());
//! let start = task.start(arguments.as_object().unwrap().clone());
//! assert_eq!((start.tool, &start.arguments["waitMs"]), (ToolName::RunCells, &json!(0)));
//! let receipt = json!({"executionId": "run-1", "status": "running"});
//! assert!(!is_terminal(&receipt));
//! let follow = task.follow(execution_id(&receipt).unwrap(), 30_000);
//! assert_eq!(follow.tool, ToolName::GetExecution);
//! assert_eq!(follow.arguments["notebookRef"], "a.ipynb");
//! ```

use serde_json::{Map, Value, json};

use crate::ToolName;

/// One call to make through the dispatch.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The tool.
    pub tool: ToolName,
    /// Its arguments.
    pub arguments: Map<String, Value>,
}

/// One `run_cells` call followed to its end.
#[derive(Debug, Clone, PartialEq)]
pub struct RunTask {
    notebook: String,
    include_outputs: Value,
    idempotency_key: Option<String>,
}

impl RunTask {
    /// The task of a `run_cells` call with these arguments.
    pub fn new(arguments: &Map<String, Value>) -> RunTask {
        RunTask {
            notebook: arguments
                .get("notebookRef")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            include_outputs: arguments
                .get("includeOutputs")
                .cloned()
                .unwrap_or(Value::Bool(true)),
            idempotency_key: arguments
                .get("idempotencyKey")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }
    }

    /// What makes a retry the same call (its notebook and idempotency key), as one opaque
    /// string; `None` without an idempotency key.
    pub fn retry_key(&self) -> Option<String> {
        let key = self.idempotency_key.as_ref()?;
        Some(json!([self.notebook, key]).to_string())
    }

    /// The call that starts the run: `arguments` as given, answering at once.
    pub fn start(&self, mut arguments: Map<String, Value>) -> ToolCall {
        arguments.insert("waitMs".to_owned(), json!(0));
        ToolCall {
            tool: ToolName::RunCells,
            arguments,
        }
    }

    /// The call that waits up to `wait_ms` for the run `execution` (outputs as the run asked).
    pub fn follow(&self, execution: &str, wait_ms: u64) -> ToolCall {
        self.receipt_call(execution, wait_ms, Some(self.include_outputs.clone()))
    }

    /// The call that waits up to `wait_ms` for how the run `execution` ended after an
    /// interrupt, without its outputs.
    pub fn ended(&self, execution: &str, wait_ms: u64) -> ToolCall {
        self.receipt_call(execution, wait_ms, None)
    }

    /// The call that interrupts the notebook's kernel, which ends the run as an interrupt does.
    pub fn interrupt(&self) -> ToolCall {
        ToolCall {
            tool: ToolName::InterruptKernels,
            arguments: object(json!({"notebookRefs": [self.notebook]})),
        }
    }

    fn receipt_call(
        &self,
        execution: &str,
        wait_ms: u64,
        include_outputs: Option<Value>,
    ) -> ToolCall {
        let mut arguments = object(json!({
            "notebookRef": self.notebook, "executionId": execution, "waitMs": wait_ms,
        }));
        if let Some(include_outputs) = include_outputs {
            arguments.insert("includeOutputs".to_owned(), include_outputs);
        }
        ToolCall {
            tool: ToolName::GetExecution,
            arguments,
        }
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The run a receipt is about; `None` when nothing needed running.
pub fn execution_id(receipt: &Value) -> Option<&str> {
    receipt["executionId"].as_str()
}

/// Whether the run of a receipt has ended (`completed`, `failed` or `unavailable`).
pub fn is_terminal(receipt: &Value) -> bool {
    matches!(
        receipt["status"].as_str(),
        Some("completed" | "failed" | "unavailable")
    )
}

/// A progress line for a task's status message, such as `running: 2 of 5 cells done`.
pub fn status_message(receipt: &Value) -> String {
    let status = receipt["status"].as_str().unwrap_or("running");
    let done = receipt["progress"]["cellsDone"].as_u64().unwrap_or(0);
    let total = receipt["progress"]["cellsTotal"].as_u64().unwrap_or(0);
    format!("{status}: {done} of {total} cells done")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(arguments: Value) -> RunTask {
        RunTask::new(arguments.as_object().expect("an object"))
    }

    #[test]
    fn the_calls_name_the_run_and_its_notebook() {
        let run = task(json!({"notebookRef": "nb.ipynb", "cellIds": [1], "includeOutputs": false}));
        let start = run.start(object(json!({"notebookRef": "nb.ipynb", "waitMs": 60_000})));
        assert_eq!(start.tool, ToolName::RunCells);
        assert_eq!(
            Value::Object(start.arguments),
            json!({"notebookRef": "nb.ipynb", "waitMs": 0})
        );
        assert_eq!(
            run.follow("run-7", 30_000),
            ToolCall {
                tool: ToolName::GetExecution,
                arguments: object(json!({
                    "notebookRef": "nb.ipynb", "executionId": "run-7", "waitMs": 30_000,
                    "includeOutputs": false,
                })),
            }
        );
        assert_eq!(
            Value::Object(run.ended("run-7", 15_000).arguments),
            json!({"notebookRef": "nb.ipynb", "executionId": "run-7", "waitMs": 15_000})
        );
        let interrupt = run.interrupt();
        assert_eq!(interrupt.tool, ToolName::InterruptKernels);
        assert_eq!(
            Value::Object(interrupt.arguments),
            json!({"notebookRefs": ["nb.ipynb"]})
        );
        // Outputs by default, as `run_cells` has them.
        assert_eq!(
            task(json!({"notebookRef": "nb.ipynb"}))
                .follow("r", 1)
                .arguments["includeOutputs"],
            json!(true)
        );
    }

    #[test]
    fn a_retry_is_the_same_notebook_and_key() {
        let key = |arguments: Value| task(arguments).retry_key();
        assert_eq!(key(json!({"notebookRef": "a.ipynb"})), None);
        let first = key(json!({"notebookRef": "a.ipynb", "idempotencyKey": "k"}));
        assert!(first.is_some());
        assert_eq!(
            first,
            key(json!({"notebookRef": "a.ipynb", "idempotencyKey": "k", "cellIds": [2]}))
        );
        assert_ne!(
            first,
            key(json!({"notebookRef": "b.ipynb", "idempotencyKey": "k"}))
        );
        // No concatenation makes two different pairs one key.
        assert_ne!(
            key(json!({"notebookRef": "a\",\"b", "idempotencyKey": "c"})),
            key(json!({"notebookRef": "a", "idempotencyKey": "b\",\"c"}))
        );
    }

    #[test]
    fn receipts_say_whether_the_run_ended() {
        for status in ["completed", "failed", "unavailable"] {
            assert!(is_terminal(&json!({"status": status})), "{status}");
        }
        for status in ["running", "queued"] {
            assert!(!is_terminal(&json!({"status": status})), "{status}");
        }
        assert!(!is_terminal(&json!({})));
        assert_eq!(execution_id(&json!({"executionId": "x"})), Some("x"));
        assert_eq!(execution_id(&json!({"status": "completed"})), None);
        assert_eq!(
            status_message(
                &json!({"status": "running", "progress": {"cellsDone": 2, "cellsTotal": 5}})
            ),
            "running: 2 of 5 cells done"
        );
        assert_eq!(status_message(&json!({})), "running: 0 of 0 cells done");
    }
}
