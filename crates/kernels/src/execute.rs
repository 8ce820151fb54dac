//! Execute requests: options, the ordered stream of events one request produces, and a
//! collecting helper for callers that only want the text.

use std::collections::BTreeMap;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::{Error, Result};
use crate::status::ProcessExit;

/// A JSON object as it came from the kernel (MIME bundles, output metadata, ...). Kept raw so
/// that MIME types and fields this crate does not model survive unchanged.
pub type JsonObject = serde_json::Map<String, Value>;

/// Options of one `execute_request`. `allow_stdin` is always false: this crate never offers
/// stdin, so `input()` in the kernel fails fast instead of hanging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecuteOptions {
    /// Execute as quietly as possible: no `execute_input`, no `execute_result`, no history.
    pub silent: bool,
    /// Add the code to the kernel's history and bump the execution count.
    pub store_history: bool,
    /// Expressions the kernel evaluates after the code; results come back in the reply.
    pub user_expressions: BTreeMap<String, String>,
    /// Abort the requests queued behind this one when it fails.
    pub stop_on_error: bool,
    /// Binary buffers sent with the request (the message's extra parts), for kernel code that
    /// reads them from its parent message: bytes that need no encoding and are never parsed
    /// as source or JSON.
    pub buffers: Vec<Vec<u8>>,
}

impl Default for ExecuteOptions {
    fn default() -> Self {
        ExecuteOptions {
            silent: false,
            store_history: true,
            user_expressions: BTreeMap::new(),
            stop_on_error: true,
            buffers: Vec::new(),
        }
    }
}

impl ExecuteOptions {
    /// Silent, no history, does not abort queued requests on failure: for helper code that the
    /// user should not see (variable inspection, file transfer).
    pub fn quiet() -> Self {
        ExecuteOptions {
            silent: true,
            store_history: false,
            user_expressions: BTreeMap::new(),
            stop_on_error: false,
            buffers: Vec::new(),
        }
    }
}

/// Which standard stream a `stream` message belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamName {
    Stdout,
    Stderr,
}

impl StreamName {
    /// `stdout` or `stderr`, as nbformat spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamName::Stdout => "stdout",
            StreamName::Stderr => "stderr",
        }
    }
}

/// An error raised by the code the kernel ran (an `error` message or a failed reply).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ErrorOutput {
    pub ename: String,
    pub evalue: String,
    /// Traceback lines, possibly with ANSI colour codes, as the kernel sent them.
    pub traceback: Vec<String>,
}

/// `ok`, `error` or `aborted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyStatus {
    Ok,
    Error,
    /// The request was skipped because an earlier one failed with `stop_on_error`, or the
    /// kernel went idle without ever replying (then the reply is synthetic).
    Aborted,
}

/// The shell `execute_reply`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecuteReply {
    pub status: ReplyStatus,
    /// Absent when the kernel omitted it (silent or aborted requests may).
    pub execution_count: Option<u64>,
    /// Results of `ExecuteOptions::user_expressions`, each `{status, data, metadata}` or an
    /// error object, as the kernel sent them.
    pub user_expressions: JsonObject,
    /// Deprecated-but-used payloads (`page`, `set_next_input`, ...), raw.
    pub payload: Vec<Value>,
    /// Present when `status` is `Error`.
    pub error: Option<ErrorOutput>,
}

/// One event of an execute request, in the order the request produced them.
///
/// A request yields `Busy`, then its IOPub outputs, then `Idle`, then `Reply`. `Reply` and
/// the `Kernel*`/`ConnectionLost` variants are terminal: nothing follows them. When the shell
/// reply overtakes the final `idle` (as it usually does), `Replied` says so as it arrives,
/// among the outputs: the kernel has finished the code, though outputs it sent before its reply
/// may still follow.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecuteEvent {
    /// The kernel started working on this request.
    Busy,
    /// The kernel echoed the code with its execution count.
    Input {
        code: String,
        execution_count: Option<u64>,
    },
    Stream {
        name: StreamName,
        text: String,
    },
    ExecuteResult {
        execution_count: Option<u64>,
        data: JsonObject,
        metadata: JsonObject,
    },
    DisplayData {
        data: JsonObject,
        metadata: JsonObject,
        /// `transient.display_id`, for later `UpdateDisplayData`.
        display_id: Option<String>,
        /// The message's binary buffers, in order (empty for ordinary displays; file transfer
        /// downloads carry their chunks here).
        buffers: Vec<Vec<u8>>,
    },
    UpdateDisplayData {
        data: JsonObject,
        metadata: JsonObject,
        display_id: Option<String>,
    },
    Error(ErrorOutput),
    ClearOutput {
        wait: bool,
    },
    /// The kernel finished working on this request.
    Idle,
    /// The kernel asked its frontend for something this client cannot do (a provider's own
    /// prompt, such as Colab's Drive authorisation); it was answered with an error at once, and
    /// `message` says what the user must do instead. `code` is short and stable.
    ActionRequired {
        code: String,
        message: String,
    },
    /// The shell reply arrived before `Idle`; it is held and comes as `Reply` after `Idle`.
    Replied {
        /// The reply's execution count.
        execution_count: Option<u64>,
    },
    /// Terminal: the shell reply.
    Reply(ExecuteReply),
    /// Terminal: the kernel was restarted before the request finished.
    KernelRestarted,
    /// Terminal: the kernel process died before the request finished.
    KernelDied {
        exit: ProcessExit,
    },
    /// Terminal: the kernel was shut down before the request finished.
    KernelShutdown,
    /// Terminal: the event source went away without saying why.
    ConnectionLost,
    /// Terminal: the server that ran the kernel was stopped (a JupyterHub stopped or culled
    /// the user's server), and the kernel with it.
    ServerStopped,
}

impl ExecuteEvent {
    /// True for the events after which a handle yields nothing more.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            ExecuteEvent::Reply(_)
                | ExecuteEvent::KernelRestarted
                | ExecuteEvent::KernelDied { .. }
                | ExecuteEvent::KernelShutdown
                | ExecuteEvent::ConnectionLost
                | ExecuteEvent::ServerStopped
        )
    }
}

/// Keeps the kernel manager's activity count up while a request runs. Dropped when the
/// handle sees its terminal event or is dropped.
pub(crate) type ActivityGuard = Box<dyn Send + Sync>;

/// The receiving end of one execute request.
pub struct ExecuteHandle {
    msg_id: String,
    epoch: u64,
    events: mpsc::UnboundedReceiver<ExecuteEvent>,
    finished: bool,
    activity: Option<ActivityGuard>,
    /// Bytes of stream text sent into `events` and not yet taken out, when the sender bounds it.
    backlog: Option<StreamBacklog>,
}

/// The bytes of stream text waiting in an [`ExecuteHandle`]'s channel. The sender adds what it
/// queues, the handle subtracts what it hands out, so a sender can drop stream text (with a
/// marker) instead of queueing without bound when the reader is slower than the kernel.
pub(crate) type StreamBacklog = std::sync::Arc<std::sync::atomic::AtomicUsize>;

crate::debug_fields!(ExecuteHandle {
    msg_id,
    epoch,
    finished
});

impl ExecuteHandle {
    /// Wraps a channel of events. Providers create handles this way; the channel's sender
    /// must send exactly one terminal event last.
    pub fn new(msg_id: String, epoch: u64, events: mpsc::UnboundedReceiver<ExecuteEvent>) -> Self {
        ExecuteHandle {
            msg_id,
            epoch,
            events,
            finished: false,
            activity: None,
            backlog: None,
        }
    }

    #[cfg_attr(
        not(any(feature = "local", feature = "remote")),
        allow(dead_code, reason = "used by the kernel providers")
    )]
    pub(crate) fn with_backlog(mut self, backlog: StreamBacklog) -> Self {
        self.backlog = Some(backlog);
        self
    }

    pub(crate) fn with_activity(mut self, guard: ActivityGuard) -> Self {
        self.activity = Some(guard);
        self
    }

    /// The `msg_id` of the `execute_request`.
    pub fn msg_id(&self) -> &str {
        &self.msg_id
    }

    /// The kernel epoch the request was sent to.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The next event, or `None` after the terminal event. Should the source vanish without
    /// a terminal event, this yields `ConnectionLost` once.
    pub async fn next(&mut self) -> Option<ExecuteEvent> {
        if self.finished {
            return None;
        }
        let event = self
            .events
            .recv()
            .await
            .unwrap_or(ExecuteEvent::ConnectionLost);
        if let (Some(backlog), ExecuteEvent::Stream { text, .. }) = (&self.backlog, &event) {
            backlog.fetch_sub(text.len(), std::sync::atomic::Ordering::Relaxed);
        }
        if event.is_terminal() {
            self.finished = true;
            self.activity = None;
        }
        Some(event)
    }

    /// Reads every event up to and including the terminal one.
    pub async fn collect_events(mut self) -> Vec<ExecuteEvent> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            events.push(event);
        }
        events
    }

    /// Reads to the end and folds the events into a summary. A restart, death, shutdown or
    /// lost connection becomes the matching error.
    pub async fn summarize(mut self) -> Result<ExecuteResultSummary> {
        let mut summary = ExecuteResultSummary::default();
        while let Some(event) = self.next().await {
            match event {
                ExecuteEvent::Stream { name, text } => match name {
                    StreamName::Stdout => summary.stdout.push_str(&text),
                    StreamName::Stderr => summary.stderr.push_str(&text),
                },
                ExecuteEvent::ExecuteResult { data, .. } => summary.results.push(data),
                ExecuteEvent::DisplayData { data, buffers, .. } => {
                    summary.displays.push(data);
                    summary.display_buffers.extend(buffers);
                }
                ExecuteEvent::Error(error) => summary.error = Some(error),
                ExecuteEvent::Reply(reply) => {
                    summary.status = reply.status;
                    summary.execution_count = reply.execution_count;
                    summary.user_expressions = reply.user_expressions;
                    if summary.error.is_none() {
                        summary.error = reply.error;
                    }
                    return Ok(summary);
                }
                ExecuteEvent::KernelRestarted => return Err(Error::KernelRestarted),
                ExecuteEvent::KernelDied { exit } => return Err(Error::KernelDied { exit }),
                ExecuteEvent::KernelShutdown => return Err(Error::NotRunning),
                ExecuteEvent::ConnectionLost => return Err(Error::ConnectionLost),
                ExecuteEvent::ServerStopped => {
                    return Err(Error::ServerStopped {
                        message: "the server that ran the kernel was stopped".to_owned(),
                    });
                }
                ExecuteEvent::Busy
                | ExecuteEvent::Input { .. }
                | ExecuteEvent::UpdateDisplayData { .. }
                | ExecuteEvent::ClearOutput { .. }
                | ExecuteEvent::ActionRequired { .. }
                | ExecuteEvent::Replied { .. }
                | ExecuteEvent::Idle => {}
            }
        }
        Err(Error::ConnectionLost)
    }
}

/// What `execute_collect` gathered from one request.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecuteResultSummary {
    pub status: ReplyStatus,
    pub execution_count: Option<u64>,
    /// All stdout text, concatenated.
    pub stdout: String,
    /// All stderr text, concatenated.
    pub stderr: String,
    /// The `execute_result` bundles (none when the request was silent).
    pub results: Vec<JsonObject>,
    /// The `display_data` bundles.
    pub displays: Vec<JsonObject>,
    /// The binary buffers of the `display_data` messages, in arrival order.
    pub display_buffers: Vec<Vec<u8>>,
    /// The error from IOPub, or else from the reply.
    pub error: Option<ErrorOutput>,
    /// The reply's `user_expressions`.
    pub user_expressions: JsonObject,
}

impl Default for ExecuteResultSummary {
    fn default() -> Self {
        ExecuteResultSummary {
            status: ReplyStatus::Ok,
            execution_count: None,
            stdout: String::new(),
            stderr: String::new(),
            results: Vec::new(),
            displays: Vec::new(),
            display_buffers: Vec::new(),
            error: None,
            user_expressions: JsonObject::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: ReplyStatus) -> ExecuteEvent {
        ExecuteEvent::Reply(ExecuteReply {
            status,
            execution_count: Some(4),
            user_expressions: JsonObject::new(),
            payload: Vec::new(),
            error: None,
        })
    }

    #[tokio::test]
    async fn handle_stops_after_the_terminal_event() {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut handle = ExecuteHandle::new("m".into(), 1, receiver);
        sender.send(ExecuteEvent::Busy).unwrap();
        sender.send(reply(ReplyStatus::Ok)).unwrap();
        sender.send(ExecuteEvent::Idle).unwrap();
        assert_eq!(handle.next().await, Some(ExecuteEvent::Busy));
        assert!(matches!(handle.next().await, Some(ExecuteEvent::Reply(_))));
        assert_eq!(handle.next().await, None);
    }

    #[tokio::test]
    async fn a_vanished_source_yields_connection_lost_once() {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut handle = ExecuteHandle::new("m".into(), 1, receiver);
        drop(sender);
        assert_eq!(handle.next().await, Some(ExecuteEvent::ConnectionLost));
        assert_eq!(handle.next().await, None);
    }

    #[tokio::test]
    async fn summarize_folds_streams_results_and_the_reply() {
        let (sender, receiver) = mpsc::unbounded_channel();
        let handle = ExecuteHandle::new("m".into(), 1, receiver);
        let mut data = JsonObject::new();
        data.insert("text/plain".into(), Value::from("2"));
        for event in [
            ExecuteEvent::Busy,
            ExecuteEvent::Stream {
                name: StreamName::Stdout,
                text: "a".into(),
            },
            ExecuteEvent::Stream {
                name: StreamName::Stderr,
                text: "e".into(),
            },
            ExecuteEvent::Stream {
                name: StreamName::Stdout,
                text: "b".into(),
            },
            ExecuteEvent::ExecuteResult {
                execution_count: Some(4),
                data: data.clone(),
                metadata: JsonObject::new(),
            },
            ExecuteEvent::Idle,
            reply(ReplyStatus::Ok),
        ] {
            sender.send(event).unwrap();
        }
        let summary = handle.summarize().await.unwrap();
        assert_eq!(summary.stdout, "ab");
        assert_eq!(summary.stderr, "e");
        assert_eq!(summary.results, vec![data]);
        assert_eq!(summary.execution_count, Some(4));
    }

    #[tokio::test]
    async fn summarize_turns_a_death_into_an_error() {
        let (sender, receiver) = mpsc::unbounded_channel();
        let handle = ExecuteHandle::new("m".into(), 1, receiver);
        let exit = ProcessExit {
            code: None,
            signal: Some(9),
        };
        sender.send(ExecuteEvent::KernelDied { exit }).unwrap();
        assert!(matches!(
            handle.summarize().await,
            Err(Error::KernelDied { exit: e }) if e == exit
        ));
    }
}
