//! The one task per kernel that owns the message flow.
//!
//! Reader tasks turn each socket into a channel of [`WireMessage`]s and writer tasks turn
//! channels into socket sends, so the pump only ever waits on channels: it cannot block on a
//! socket whose peer died, and every branch of its `select!` is cancel-safe.
//!
//! A reader's channel holds at most [`MAX_QUEUED_MESSAGE_BYTES`] of messages (as received) that
//! the pump has not routed yet, plus the one message being read: a reader that is ahead waits for
//! the pump instead of queueing, so a kernel flooding IOPub is slowed down by the socket (its
//! messages wait in the kernel) rather than growing this process. Nothing is dropped here; what
//! the router and the run keep of a flood is bounded downstream, with explicit markers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jupyter_protocol::JupyterMessage;
use jupyter_zmq_client::{Connection, RawMessage};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use tokio::time::Instant;
use zeromq::{SocketRecv, SocketSend};

use super::process::ProcessGroup;
use crate::execute::ExecuteEvent;
use crate::router::Router;
use crate::status::{KernelStatus, ProcessExit, StatusHub};
use crate::tasks::AbortOnDrop;
use crate::wire::WireMessage;

/// Why the pump is being stopped on purpose; decides the terminal event of pending requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    Restart,
    Shutdown,
}

pub(crate) enum PumpCommand {
    /// Register the request, then send it on shell.
    Execute {
        request: JupyterMessage,
        sink: mpsc::UnboundedSender<ExecuteEvent>,
        backlog: crate::execute::StreamBacklog,
    },
    /// Send on control and hand back the reply.
    Control {
        request: JupyterMessage,
        reply: oneshot::Sender<WireMessage>,
    },
    /// From now on the process is expected to exit; optionally send a request on control.
    Stop {
        reason: StopReason,
        request: Option<JupyterMessage>,
    },
}

/// Most bytes of received kernel messages one socket's reader queues for the pump.
pub(crate) const MAX_QUEUED_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// A message read from a socket, holding its share of the reader's byte budget until the pump
/// has routed it (dropped).
pub(crate) struct Queued {
    pub message: WireMessage,
    _budget: OwnedSemaphorePermit,
}

/// A reader's queue to the pump: the channel and the byte budget its messages hold.
pub(crate) fn queue() -> (
    (mpsc::UnboundedSender<Queued>, Arc<Semaphore>),
    mpsc::UnboundedReceiver<Queued>,
) {
    let (sender, receiver) = mpsc::unbounded_channel();
    (
        (sender, Arc::new(Semaphore::new(MAX_QUEUED_MESSAGE_BYTES))),
        receiver,
    )
}

/// Reads a socket into a channel until the socket fails or the pump goes away, waiting while
/// the queued messages use up the byte budget. Messages that fail verification or parsing are
/// dropped one by one.
pub(crate) async fn read_socket<S: SocketRecv>(
    mut connection: Connection<S>,
    (sink, budget): (mpsc::UnboundedSender<Queued>, Arc<Semaphore>),
    channel: &'static str,
) {
    loop {
        let multipart = match connection.socket.recv().await {
            Ok(multipart) => multipart,
            Err(error) => {
                tracing::debug!(channel, %error, "kernel socket closed");
                return;
            }
        };
        let raw = match RawMessage::from_multipart(multipart, &connection.mac) {
            Ok(raw) => raw,
            Err(error) => {
                tracing::warn!(channel, %error, "dropping an unverifiable kernel message");
                continue;
            }
        };
        // A message larger than the whole budget waits until the queue is empty.
        let size: usize = raw.jparts.iter().map(|part| part.len()).sum();
        let permits = u32::try_from(size.clamp(1, MAX_QUEUED_MESSAGE_BYTES)).unwrap_or(u32::MAX);
        let Ok(permit) = Arc::clone(&budget).acquire_many_owned(permits).await else {
            return;
        };
        let Some(message) = WireMessage::from_raw(&raw) else {
            tracing::warn!(channel, "dropping a malformed kernel message");
            continue;
        };
        drop(raw);
        let queued = Queued {
            message,
            _budget: permit,
        };
        if sink.send(queued).is_err() {
            return;
        }
    }
}

/// Sends what arrives on the channel until the channel closes.
pub(crate) async fn write_socket<S: SocketSend>(
    mut connection: Connection<S>,
    mut source: mpsc::UnboundedReceiver<JupyterMessage>,
    channel: &'static str,
) {
    while let Some(message) = source.recv().await {
        if let Err(error) = connection.send(message).await {
            tracing::debug!(channel, %error, "sending to the kernel failed");
        }
    }
}

pub(crate) struct Pump {
    pub epoch: u64,
    pub hub: Arc<StatusHub>,
    pub group: Arc<ProcessGroup>,
    pub commands: mpsc::UnboundedReceiver<PumpCommand>,
    pub iopub: mpsc::UnboundedReceiver<Queued>,
    pub shell: mpsc::UnboundedReceiver<Queued>,
    pub control: mpsc::UnboundedReceiver<Queued>,
    pub shell_out: mpsc::UnboundedSender<JupyterMessage>,
    pub control_out: mpsc::UnboundedSender<JupyterMessage>,
    pub exit: watch::Receiver<Option<ProcessExit>>,
    pub reply_grace: Duration,
    /// The socket reader and writer tasks; they end with the pump.
    pub _io_tasks: AbortOnDrop,
}

impl Pump {
    pub(crate) async fn run(mut self) {
        let mut router = Router::new(self.reply_grace);
        let mut control_pending: HashMap<String, oneshot::Sender<WireMessage>> = HashMap::new();
        let mut stop: Option<StopReason> = None;
        let exit = loop {
            let deadline = router.next_deadline();
            tokio::select! {
                biased;
                command = self.commands.recv() => match command {
                    Some(PumpCommand::Execute { request, sink, backlog }) => {
                        router.register(request.header.msg_id.clone(), sink, backlog);
                        let _ = self.shell_out.send(request);
                    }
                    Some(PumpCommand::Control { request, reply }) => {
                        control_pending.insert(request.header.msg_id.clone(), reply);
                        let _ = self.control_out.send(request);
                    }
                    Some(PumpCommand::Stop { reason, request }) => {
                        // Requests in flight are abandoned now; late replies are ignored.
                        router.end_all(&stop_terminal(reason));
                        stop = Some(reason);
                        if let Some(request) = request {
                            let _ = self.control_out.send(request);
                        }
                    }
                    // The kernel object is gone; its drop kills the process group.
                    None => return,
                },
                Some(Queued { message, .. }) = self.iopub.recv() => {
                    let reported = router.on_iopub(message, Instant::now());
                    if let Some(status) = reported && stop.is_none() {
                        self.hub.report_activity(self.epoch, status);
                    }
                }
                Some(Queued { message, .. }) = self.shell.recv() => {
                    router.on_shell(&message, Instant::now());
                }
                Some(Queued { message, .. }) = self.control.recv() => {
                    if let Some(reply) = message
                        .parent_msg_id
                        .as_ref()
                        .and_then(|parent| control_pending.remove(parent))
                    {
                        let _ = reply.send(message);
                    }
                }
                () = sleep_until_deadline(deadline), if deadline.is_some() => {
                    router.on_timer(Instant::now());
                }
                exited = self.exit.wait_for(Option::is_some) => {
                    break exited.ok().and_then(|exit| *exit).unwrap_or_default();
                }
            }
        };
        let terminal = match stop {
            Some(reason) => stop_terminal(reason),
            None => ExecuteEvent::KernelDied { exit },
        };
        router.end_all(&terminal);
        if stop.is_none() && self.hub.epoch() == self.epoch {
            tracing::warn!(%exit, "the kernel died");
            self.hub.set(KernelStatus::Dead {
                exit: Some(exit),
                requested: false,
            });
        }
        // Helpers the kernel left in its group would otherwise linger.
        self.group.kill_and_disarm();
    }
}

fn stop_terminal(reason: StopReason) -> ExecuteEvent {
    match reason {
        StopReason::Restart => ExecuteEvent::KernelRestarted,
        StopReason::Shutdown => ExecuteEvent::KernelShutdown,
    }
}

async fn sleep_until_deadline(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
