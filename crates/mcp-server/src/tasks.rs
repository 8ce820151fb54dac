//! `run_cells` as an MCP task (the `io.modelcontextprotocol/tasks` extension of protocol
//! 2026-07-28), for clients that declared the extension on the request: the call answers at
//! once with a task handle; the task starts the run, follows it with `get_execution` until it
//! is terminal and ends with the run's final receipt as its result. Cancelling the task
//! interrupts the kernel (`interrupt_kernels`), which ends the run as an interrupt does. A retry
//! with the same `idempotencyKey` gets the task it started. Everything goes through the
//! dispatch, so a run routed through the broker is followed the same way. What the calls say
//! (a notebook, a run) is the contract's ([`mcp_contract::run_task`]): this module moves them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mcp_contract::run_task::{RunTask, ToolCall, execution_id, is_terminal, status_message};
use mcp_contract::{ToolDispatch, ToolOutput};
use rmcp::model::{CallToolResult, CreateTaskResult};
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use serde_json::{Map, Value};

use crate::handler::call_tool_result;

/// How long one `get_execution` of the follower waits, in ms.
const FOLLOW_WAIT_MS: u64 = 30_000;
/// How long a cancelled task waits for the interrupted run's receipt, in ms.
const ENDED_WAIT_MS: u64 = 15_000;
/// How long a task is kept (a day: a long training run must not be cut off by its handle).
const TASK_TTL_MS: u64 = 24 * 60 * 60 * 1000;
/// How often clients are told to poll.
const POLL_INTERVAL_MS: u64 = 1_000;

/// The tasks of one server.
#[derive(Default)]
pub(crate) struct Tasks {
    manager: TaskManager,
    /// A call's retry key ([`RunTask::retry_key`]) → the task it started.
    keys: Mutex<HashMap<String, String>>,
}

impl Tasks {
    /// The manager, for `tasks/get`, `tasks/update` and `tasks/cancel`.
    pub(crate) fn manager(&self) -> &TaskManager {
        &self.manager
    }

    /// Starts `run_cells` with `arguments` as a task (or finds the one its idempotency key
    /// started).
    pub(crate) fn start(
        &self,
        dispatch: Arc<dyn ToolDispatch>,
        arguments: Map<String, Value>,
    ) -> CreateTaskResult {
        let run = RunTask::new(&arguments);
        let key = run.retry_key();
        if let Some(key) = &key {
            let known = self.keys.lock().expect("task keys lock").get(key).cloned();
            if let Some(task) = known.and_then(|id| self.manager.get_task(&id).ok()) {
                return CreateTaskResult::new(task.task);
            }
        }
        let task = self.manager.spawn(
            TaskOptions::new()
                .with_ttl_ms(TASK_TTL_MS)
                .with_poll_interval_ms(POLL_INTERVAL_MS)
                .with_status_message("starting the run"),
            move |context| Box::pin(follow(dispatch, run, arguments, context)),
        );
        if let Some(key) = key {
            let mut keys = self.keys.lock().expect("task keys lock");
            if keys.len() >= 1_024 {
                keys.clear();
            }
            keys.insert(key, task.task_id.clone());
        }
        CreateTaskResult::new(task)
    }
}

async fn call(dispatch: &dyn ToolDispatch, call: ToolCall) -> ToolOutput {
    dispatch.dispatch(call.into()).await
}

/// The task's work: start the run, follow it to its end, or interrupt it when cancelled.
async fn follow(
    dispatch: Arc<dyn ToolDispatch>,
    run: RunTask,
    arguments: Map<String, Value>,
    context: TaskContext,
) -> Result<CallToolResult, TaskExit> {
    let started = call(dispatch.as_ref(), run.start(arguments)).await;
    let Some(receipt) = started.structured.clone().filter(|_| !started.is_error) else {
        // A refusal (a bad argument, a busy notebook) is the task's result, as data.
        return Ok(call_tool_result(started));
    };
    let Some(execution) = execution_id(&receipt).map(str::to_owned) else {
        // Nothing needed running.
        return Ok(call_tool_result(started));
    };
    if is_terminal(&receipt) {
        return Ok(call_tool_result(started));
    }
    context.set_status_message(status_message(&receipt));
    let follow_call = run.follow(&execution, FOLLOW_WAIT_MS);
    loop {
        tokio::select! {
            () = context.cancelled() => {
                let interrupted = call(dispatch.as_ref(), run.interrupt()).await;
                if interrupted.is_error {
                    tracing::warn!(text = %interrupted.text, "a cancelled task's interrupt failed");
                }
                // The interrupt ends the run; its receipt says how.
                let ended = call(dispatch.as_ref(), run.ended(&execution, ENDED_WAIT_MS)).await;
                if let Some(receipt) = &ended.structured {
                    context.set_status_message(format!("cancelled: {}", status_message(receipt)));
                }
                return Err(TaskExit::Cancelled);
            }
            followed = call(dispatch.as_ref(), follow_call.clone()) => {
                let Some(receipt) = followed.structured.clone().filter(|_| !followed.is_error) else {
                    return Ok(call_tool_result(followed));
                };
                if is_terminal(&receipt) {
                    return Ok(call_tool_result(followed));
                }
                context.set_status_message(status_message(&receipt));
            }
        }
    }
}
