//! The kernel WebSocket of one remote kernel session, and the one task that owns its flow.
//!
//! A reader task turns the socket into a channel of decoded messages and a writer task turns a
//! channel into socket sends, so the pump only waits on channels. The pump routes replies and
//! outputs to their requests by parent `msg_id` (with the same [`Router`] local kernels use)
//! and survives a dropped socket:
//!
//! - It reconnects with the same `session_id`, so Jupyter Server replays what it buffered for
//!   that session while the socket was down, and routing simply continues. The server only
//!   buffers once it has noticed the drop, so what it wrote into the dying socket is lost: the
//!   output of a request running at that moment gets a marker on stderr saying so, where the
//!   piece may be missing.
//! - Requests sent on a lost socket are confirmed by a marker: an empty silent
//!   `execute_request` sent right after reconnecting. Shell requests run in order, so when the
//!   marker's reply arrives, every earlier request has replied; one whose reply never came was
//!   lost with the socket and ends with `ConnectionLost` instead of waiting forever.
//! - When the server says the kernel is gone (404), pending requests end with `KernelDied`;
//!   when it cannot be reached for `reconnect_timeout`, with `ConnectionLost`. Either way the
//!   caller learns it, nothing hangs.
//! - On a JupyterHub user's server, a reconnection that fails in a way that may mean the hub
//!   stopped the server (a redirect to the hub, 424, 503, a refused or dropped connection) asks
//!   the hub; when it says the server is gone, pending requests end with `ServerStopped`.
//! - The credential comes from the server's connection profile at every handshake; a 401 or
//!   403 renews it once (a token file that changed, a refresh callback) and tries again.
//! - A `restarting` status from the server (its automatic restart after a crash) or a
//!   `starting` status from a new kernel process (a sender other than the process that
//!   answered us) means a new kernel: a new epoch, and pending requests end with
//!   `KernelRestarted`.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};

use super::client::{ByteStream, ServerWebSocket};
use super::frames::{
    Frame, Incoming, Outgoing, Protocol, V1_SUBPROTOCOL, decode_binary, decode_text, iso_date,
};
use super::hub::status_suggests_stopped;
use super::hub_client::JupyterHub;
use super::server::{Placed, Rest, kernel_path, unreachable_error, within};
use crate::error::Error;
use crate::execute::ExecuteEvent;
use crate::router::Router;
use crate::status::{KernelInfo, KernelStatus, ProcessExit, StatusHub};
use crate::tasks::AbortOnDrop;
use crate::wire::{WireMessage, kernel_info};

/// The largest message accepted from the server. Outputs can be large (images, frames), but a
/// bound keeps a misbehaving server from exhausting memory.
const MAX_INCOMING_BYTES: usize = 256 * 1024 * 1024;

/// First and longest pause between reconnection attempts while requests wait.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const WAITING_BACKOFF_CAP: Duration = Duration::from_secs(2);
/// Longest pause between attempts once nothing waits any more.
const IDLE_BACKOFF_CAP: Duration = Duration::from_secs(10);

/// What identifies one WebSocket to one kernel.
#[derive(Debug, Clone)]
pub(crate) struct LinkParams {
    /// The server (its URL, and the transport: TLS, credential).
    pub rest: Rest,
    /// The JupyterHub whose user server this is, to ask after a failure whether it stopped it.
    pub hub: Option<Arc<JupyterHub>>,
    pub kernel_id: String,
    /// Kept across reconnections so the server replays what it buffered.
    pub session_id: String,
    /// Offer the `v1.kernel.websocket.jupyter.org` subprotocol.
    pub offer_binary: bool,
    pub connect_timeout: Duration,
}

/// An open WebSocket: decoded messages come in, frames go out.
pub(crate) struct Link {
    pub protocol: Protocol,
    incoming: mpsc::UnboundedReceiver<LinkEvent>,
    outgoing: mpsc::UnboundedSender<Message>,
    _tasks: AbortOnDrop,
}

#[allow(
    clippy::large_enum_variant,
    reason = "nearly every event is a message: boxing it would add an allocation to each one to \
              save space only on the rare pings"
)]
enum LinkEvent {
    Message(Incoming),
    /// A ping or pong: the socket is alive.
    Heard,
}

/// Why a WebSocket could not be opened.
#[derive(Debug)]
pub(crate) enum LinkFailure {
    /// The server does not know the kernel (404).
    Gone,
    /// The JupyterHub stopped the server (and the kernel with it).
    ServerStopped,
    /// Anything else; worth trying again later.
    Failed(Error),
}

/// Opens the kernel's WebSocket, offering the binary subprotocol when asked and falling back
/// to the JSON protocol when the server (or a proxy) refuses it.
pub(crate) async fn open_link(params: &LinkParams) -> Result<Link, LinkFailure> {
    if params.offer_binary {
        match connect(params, true).await {
            Err(LinkFailure::Failed(Error::ServerProtocol { .. })) => {
                tracing::info!("the kernel server refused the binary subprotocol; using JSON");
                connect(params, false).await
            }
            other => other,
        }
    } else {
        connect(params, false).await
    }
}

/// Reopens the socket after a drop; when that fails on a JupyterHub user's server in a way
/// that may mean the hub stopped it, asks the hub.
pub(crate) async fn reconnect(params: &LinkParams) -> Result<Link, LinkFailure> {
    let failure = match open_link(params).await {
        Err(LinkFailure::Failed(error)) => error,
        other => return other,
    };
    if let Some(hub) = &params.hub
        && may_mean_stopped(&failure)
        && matches!(hub.still_running().await, Ok(false))
    {
        tracing::warn!(kernel = %params.kernel_id, "the JupyterHub stopped the user's server");
        return Err(LinkFailure::ServerStopped);
    }
    Err(LinkFailure::Failed(failure))
}

/// Whether a failed request to a hub user's server may mean the hub stopped the server.
pub(crate) fn may_mean_stopped(error: &Error) -> bool {
    match error {
        Error::ServerStatus { status, .. } | Error::ServerAuth { status, .. } => {
            status_suggests_stopped(*status)
        }
        Error::ServerUnreachable { .. } | Error::Timeout { .. } | Error::ServerProtocol { .. } => {
            true
        }
        _ => false,
    }
}

/// TCP (and TLS, for `https://` servers) to the server.
async fn open_stream(rest: &Rest, operation: &'static str) -> Result<Box<dyn ByteStream>, Error> {
    let url = &rest.url;
    let host = url.host().to_owned();
    let tcp = tokio::net::TcpStream::connect((host.as_str(), url.port()))
        .await
        .map_err(|source| unreachable_error(url, operation, Box::new(source)))?;
    let _ = tcp.set_nodelay(true);
    let tcp = super::QuickAckStream::new(tcp);
    if !url.is_https() {
        return Ok(Box::new(tcp));
    }
    let name = rustls::pki_types::ServerName::try_from(host).map_err(|_| Error::ServerUrl {
        url: url.to_string(),
        reason: "its host is not a valid TLS server name".to_owned(),
    })?;
    let connector = tokio_rustls::TlsConnector::from(Arc::clone(&rest.transport.tls));
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(|source| unreachable_error(url, operation, Box::new(source)))?;
    Ok(Box::new(tls))
}

/// A WebSocket handshake's answer.
pub(crate) type HandshakeResponse = tungstenite::handshake::client::Response;

/// One WebSocket handshake to `path` (relative to the server's base path, with its own query
/// if any), carrying the credential and headers `placed` holds and offering `subprotocol`. A
/// refusal of the credential is `ServerAuth`, another refusal `ServerStatus`, a refused
/// subprotocol `ServerProtocol`, a certificate problem `ServerCertificate`.
pub(crate) async fn handshake(
    rest: &Rest,
    path: &str,
    placed: &Placed,
    subprotocol: Option<&'static str>,
    config: WebSocketConfig,
    timeout: Duration,
    operation: &'static str,
) -> Result<(ServerWebSocket, HandshakeResponse), Error> {
    let url = &rest.url;
    let mut path = path.to_owned();
    for pair in &placed.query {
        path.push(if path.contains('?') { '&' } else { '?' });
        path.push_str(pair);
    }
    // Its own error is not passed on: it would quote the URL, with a credential placed in
    // the query.
    let mut request = url
        .ws(&path)
        .into_client_request()
        .map_err(|_| Error::ServerUrl {
            url: url.to_string(),
            reason: "the WebSocket URL cannot be built".to_owned(),
        })?;
    for (name, value) in &placed.headers {
        request.headers_mut().insert(name.clone(), value.clone());
    }
    if let Some(subprotocol) = subprotocol {
        request.headers_mut().insert(
            http::header::SEC_WEBSOCKET_PROTOCOL,
            http::HeaderValue::from_static(subprotocol),
        );
    }
    let attempt = async {
        let stream = open_stream(rest, operation).await?;
        tokio_tungstenite::client_async_with_config(request, stream, Some(config))
            .await
            .map_err(|error| match error {
                tungstenite::Error::Http(response) => {
                    let status = response.status().as_u16();
                    match status {
                        401 | 403 => rest.transport.auth_error(url, operation, status),
                        code => Error::ServerStatus {
                            url: url.to_string(),
                            operation,
                            status: code,
                        },
                    }
                }
                tungstenite::Error::Protocol(
                    tungstenite::error::ProtocolError::SecWebSocketSubProtocolError(_),
                ) => Error::ServerProtocol {
                    url: url.to_string(),
                    operation,
                },
                other => unreachable_error(url, operation, Box::new(other)),
            })
    };
    within(timeout, operation, attempt).await?
}

async fn connect(params: &LinkParams, offer_binary: bool) -> Result<Link, LinkFailure> {
    let mut retried = false;
    loop {
        match connect_once(params, offer_binary).await {
            Err((LinkFailure::Failed(Error::ServerAuth { .. }), generation))
                if !retried
                    && matches!(params.rest.transport.renew(generation).await, Ok(true)) =>
            {
                retried = true;
            }
            other => return other.map_err(|(failure, _)| failure),
        }
    }
}

/// One handshake; a failure comes with the credential generation it used.
async fn connect_once(params: &LinkParams, offer_binary: bool) -> Result<Link, (LinkFailure, u64)> {
    const OPERATION: &str = "opening the kernel's WebSocket";
    let url = &params.rest.url;
    let placed = params
        .rest
        .transport
        .place(url)
        .await
        .map_err(|error| (LinkFailure::Failed(error), 0))?;
    let generation = placed.generation;
    let path = format!(
        "{}?session_id={}",
        kernel_path(&params.kernel_id, "/channels"),
        params.session_id
    );
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_INCOMING_BYTES))
        .max_frame_size(Some(MAX_INCOMING_BYTES));
    let connected = handshake(
        &params.rest,
        &path,
        &placed,
        offer_binary.then_some(V1_SUBPROTOCOL),
        config,
        params.connect_timeout,
        OPERATION,
    )
    .await;
    let (stream, response) = match connected {
        Ok(connected) => connected,
        Err(Error::ServerStatus { status: 404, .. }) => {
            return Err((LinkFailure::Gone, generation));
        }
        Err(error) => return Err((LinkFailure::Failed(error), generation)),
    };
    let protocol = match response.headers().get(http::header::SEC_WEBSOCKET_PROTOCOL) {
        Some(value) if value.as_bytes() == V1_SUBPROTOCOL.as_bytes() => Protocol::V1,
        _ => Protocol::Json,
    };
    let (mut sink, mut source) = stream.split();
    let (incoming_sender, incoming) = mpsc::unbounded_channel();
    let (outgoing, mut outgoing_receiver) = mpsc::unbounded_channel::<Message>();
    let mut tasks = AbortOnDrop::default();
    tasks.push(tokio::spawn(async move {
        while let Some(item) = source.next().await {
            let event = match item {
                Ok(Message::Text(text)) => decode_text(&text).map(LinkEvent::Message),
                Ok(Message::Binary(bytes)) => {
                    decode_binary(protocol, &bytes).map(LinkEvent::Message)
                }
                Ok(Message::Ping(_) | Message::Pong(_)) => Some(LinkEvent::Heard),
                Ok(Message::Close(_)) => return,
                Ok(Message::Frame(_)) => continue,
                Err(error) => {
                    tracing::debug!(%error, "the kernel WebSocket closed");
                    return;
                }
            };
            match event {
                Some(event) => {
                    if incoming_sender.send(event).is_err() {
                        return;
                    }
                }
                None => tracing::warn!("dropping an unreadable kernel message"),
            }
        }
    }));
    tasks.push(tokio::spawn(async move {
        while let Some(message) = outgoing_receiver.recv().await {
            if let Err(error) = sink.send(message).await {
                tracing::debug!(%error, "sending on the kernel WebSocket failed");
                return;
            }
        }
        let _ = sink.close().await;
    }));
    tracing::debug!(protocol = protocol.as_str(), "kernel WebSocket open");
    Ok(Link {
        protocol,
        incoming,
        outgoing,
        _tasks: tasks,
    })
}

impl Link {
    /// Queues a frame for sending; `false` when the writer is gone.
    fn send(&self, frame: Frame) -> bool {
        let message = match frame {
            Frame::Text(text) => Message::text(text),
            Frame::Binary(bytes) => Message::binary(bytes),
        };
        self.outgoing.send(message).is_ok()
    }
}

/// Whether a `starting` status comes from a kernel process other than the one that answered
/// us (`answered_by`). A process says `starting` once, as it comes up; it says so on IOPub, from
/// a background thread, while it answers requests on the shell socket, so its `starting` can
/// arrive after its first reply. Only a different sender is a new process. A `starting` before
/// any answer is the process we are about to hear from, and one in reply to a request of ours
/// (a parent header) is not the process's own.
fn starts_another_process(message: &WireMessage, answered_by: Option<&str>) -> bool {
    message.parent_msg_id.is_none() && answered_by.is_some_and(|known| known != message.session)
}

/// A fresh message id.
pub(crate) fn new_msg_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The current time for message headers.
pub(crate) fn now_date() -> String {
    iso_date(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default(),
    )
}

pub(crate) enum Command {
    /// Register the request, then send it (or queue it until the socket is back).
    Execute {
        request: Outgoing,
        sink: mpsc::UnboundedSender<ExecuteEvent>,
        /// Stream text queued for the handle and not yet taken (bounds memory on a flood).
        backlog: crate::execute::StreamBacklog,
    },
    /// Ask `kernel_info` and hand back what the kernel says.
    KernelInfo { reply: oneshot::Sender<KernelInfo> },
    /// The server no longer knows the kernel: end everything with `KernelDied` and stop.
    Gone,
    /// The JupyterHub stopped the server: end everything with `ServerStopped` and stop.
    ServerStopped,
    /// Stop on purpose (restart, shutdown): pending requests end with `terminal`.
    Stop { terminal: ExecuteEvent },
}

/// What a pump shares with its kernel.
pub(crate) struct PumpContext {
    pub hub: Arc<StatusHub>,
    /// Set when the JupyterHub stopped the server.
    pub server_stopped: Arc<std::sync::atomic::AtomicBool>,
    pub epochs: Arc<AtomicU64>,
    pub info: Arc<Mutex<KernelInfo>>,
    pub params: LinkParams,
    pub reply_grace: Duration,
    pub reconnect_timeout: Duration,
    pub keepalive: Duration,
}

/// The socket is down: requests wait until `give_up_at` (`None` once given up, until a new
/// request arrives); the next attempt is at `next_attempt`.
struct Outage {
    give_up_at: Option<Instant>,
    next_attempt: Instant,
    backoff: Duration,
}

type Attempt = Pin<Box<dyn Future<Output = Result<Link, LinkFailure>> + Send>>;

/// Why a pump stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PumpEnd {
    /// Stopped on purpose, or its kernel object is gone.
    Stopped,
    /// The server said the kernel is gone or dead.
    KernelGone,
    /// The JupyterHub stopped the server the kernel ran on.
    ServerStopped,
}

pub(crate) struct Pump {
    context: PumpContext,
    epoch: u64,
    commands: mpsc::UnboundedReceiver<Command>,
    link: Option<Link>,
    router: Router,
    outage: Option<Outage>,
    attempt: Option<Attempt>,
    /// Requests waiting for the socket, in order.
    queued: Vec<Outgoing>,
    /// Executes sent on the current socket.
    sent_on_link: HashSet<String>,
    /// Executes sent on a lost socket, not confirmed by a marker yet.
    unconfirmed: HashSet<String>,
    /// Marker id → the requests it confirms.
    markers: HashMap<String, Vec<String>>,
    info_waiters: HashMap<String, oneshot::Sender<KernelInfo>>,
    /// The session (`header.session`) of the kernel process that answered our
    /// `kernel_info_request` on this socket, once one has: a later `starting` status from
    /// another session means a new process.
    answered_by: Option<String>,
    /// A restart was detected and nothing was sent since. One restart often shows twice (the
    /// server's `restarting`, then the new process's `starting`); the second sign then changes
    /// nothing (no request can have been lost, no cell ran on the new epoch) and is skipped.
    quiet_since_restart: bool,
    last_heard: Instant,
}

impl Pump {
    pub(crate) fn new(
        context: PumpContext,
        epoch: u64,
        commands: mpsc::UnboundedReceiver<Command>,
        link: Link,
    ) -> Self {
        let grace = context.reply_grace;
        Pump {
            context,
            epoch,
            commands,
            link: Some(link),
            router: Router::new(grace),
            outage: None,
            attempt: None,
            queued: Vec::new(),
            sent_on_link: HashSet::new(),
            unconfirmed: HashSet::new(),
            markers: HashMap::new(),
            info_waiters: HashMap::new(),
            answered_by: None,
            quiet_since_restart: false,
            last_heard: Instant::now(),
        }
    }

    pub(crate) async fn run(mut self) -> PumpEnd {
        let mut keepalive = tokio::time::interval(self.context.keepalive);
        keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        keepalive.tick().await;
        loop {
            let reply_deadline = self.router.next_deadline();
            let next_attempt = self
                .outage
                .as_ref()
                .filter(|_| self.attempt.is_none())
                .map(|outage| outage.next_attempt);
            let give_up_at = self.outage.as_ref().and_then(|outage| outage.give_up_at);
            tokio::select! {
                biased;
                command = self.commands.recv() => match command {
                    Some(Command::Execute { request, sink, backlog }) => {
                        self.quiet_since_restart = false;
                        self.router.register(request.msg_id.clone(), sink, backlog);
                        self.send_or_queue(request, true);
                    }
                    Some(Command::KernelInfo { reply }) => {
                        let request = self.request("kernel_info_request", json!({}));
                        self.info_waiters.insert(request.msg_id.clone(), reply);
                        self.send_or_queue(request, false);
                    }
                    Some(Command::Gone) => return self.kernel_gone(),
                    Some(Command::ServerStopped) => return self.server_stopped(),
                    Some(Command::Stop { terminal }) => {
                        self.router.end_all(&terminal);
                        return PumpEnd::Stopped;
                    }
                    // The kernel object is gone.
                    None => {
                        self.router.end_all(&ExecuteEvent::KernelShutdown);
                        return PumpEnd::Stopped;
                    }
                },
                event = next_link_event(self.link.as_mut()) => match event {
                    Some(LinkEvent::Message(incoming)) => {
                        self.last_heard = Instant::now();
                        if let Some(end) = self.on_message(incoming) {
                            return end;
                        }
                    }
                    Some(LinkEvent::Heard) => self.last_heard = Instant::now(),
                    None => self.link_lost(),
                },
                outcome = run_attempt(self.attempt.as_mut()) => {
                    self.attempt = None;
                    match outcome {
                        Ok(link) => self.reconnected(link),
                        Err(LinkFailure::Gone) => return self.kernel_gone(),
                        Err(LinkFailure::ServerStopped) => return self.server_stopped(),
                        Err(LinkFailure::Failed(error)) => self.attempt_failed(&error),
                    }
                }
                () = sleep_until(reply_deadline), if reply_deadline.is_some() => {
                    self.router.on_timer(Instant::now());
                }
                () = sleep_until(next_attempt), if next_attempt.is_some() => {
                    let params = self.context.params.clone();
                    self.attempt = Some(Box::pin(async move { reconnect(&params).await }));
                }
                () = sleep_until(give_up_at), if give_up_at.is_some() => self.give_up(),
                _ = keepalive.tick() => self.keep_alive(),
            }
        }
    }

    fn request(&self, msg_type: &str, content: Value) -> Outgoing {
        Outgoing::on_channel(
            "shell",
            msg_type,
            content,
            &self.context.params.session_id,
            new_msg_id(),
            now_date(),
        )
    }

    /// Sends on the socket when there is one, else keeps the request for later (and makes
    /// sure a reconnection is under way).
    fn send_or_queue(&mut self, request: Outgoing, is_execute: bool) {
        if let Some(link) = &self.link {
            if link.send(request.encode(link.protocol)) {
                if is_execute {
                    self.sent_on_link.insert(request.msg_id);
                }
                return;
            }
            self.queued.push(request);
            self.link_lost();
            return;
        }
        self.queued.push(request);
        if let Some(outage) = &mut self.outage
            && outage.give_up_at.is_none()
        {
            // Nothing was waiting: try now, and give this request the full window.
            let now = Instant::now();
            outage.give_up_at = Some(now + self.context.reconnect_timeout);
            outage.next_attempt = now;
            outage.backoff = FIRST_BACKOFF;
        }
    }

    /// Answers at once, on stdin, an IOPub request the profile knows how to answer, so that the
    /// kernel waiting for it goes on.
    fn answer_kernel_request(&mut self, message: &WireMessage, metadata: &Value) {
        let Some(answers) = self.context.params.rest.transport.kernel_requests.clone() else {
            return;
        };
        let Some(answer) = answers.answer(&message.msg_type, &message.content, metadata) else {
            return;
        };
        if let (Some((code, text)), Some(parent)) =
            (answer.action_required, message.parent_msg_id.as_deref())
        {
            self.router.notify(
                parent,
                ExecuteEvent::ActionRequired {
                    code,
                    message: text,
                },
            );
        }
        let value = answer.value;
        tracing::info!(
            kernel = %self.context.params.kernel_id,
            msg_type = %message.msg_type,
            "answered the kernel's request on stdin"
        );
        let reply = Outgoing::on_channel(
            "stdin",
            "input_reply",
            json!({ "value": value }),
            &self.context.params.session_id,
            new_msg_id(),
            now_date(),
        );
        self.send_or_queue(reply, false);
    }

    fn on_message(&mut self, incoming: Incoming) -> Option<PumpEnd> {
        let Incoming {
            channel,
            message,
            metadata,
        } = incoming;
        match channel.as_str() {
            "iopub" => {
                self.answer_kernel_request(&message, &metadata);
                if message.msg_type == "status" {
                    let state = message
                        .content
                        .get("execution_state")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    match state {
                        "restarting" => {
                            self.restarted_by_server("the server restarted the kernel");
                            return None;
                        }
                        "starting" => {
                            if starts_another_process(&message, self.answered_by.as_deref()) {
                                self.restarted_by_server("a new kernel process started");
                            }
                            return None;
                        }
                        "dead" => return Some(self.kernel_gone()),
                        _ => {}
                    }
                }
                if let Some(status) = self.router.on_iopub(message, Instant::now()) {
                    self.context.hub.report_activity(self.epoch, status);
                }
            }
            "shell" => {
                let parent = message.parent_msg_id.as_deref().unwrap_or_default();
                if message.msg_type == "kernel_info_reply" {
                    self.answered_by = Some(message.session.clone());
                    let info = kernel_info(&message.content);
                    *self
                        .context
                        .info
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = info.clone();
                    if let Some(waiter) = self.info_waiters.remove(parent) {
                        let _ = waiter.send(info);
                    }
                    if self.context.hub.epoch() == self.epoch
                        && self.context.hub.get() == KernelStatus::Restarting
                    {
                        self.context.hub.set(KernelStatus::Idle);
                    }
                } else if let Some(confirmed) = self.markers.remove(parent) {
                    for msg_id in confirmed {
                        self.router
                            .end_if_unanswered(&msg_id, &ExecuteEvent::ConnectionLost);
                    }
                } else {
                    self.router.on_shell(&message, Instant::now());
                }
            }
            _ => {}
        }
        None
    }

    /// The server reported a new kernel process behind the same id.
    fn restarted_by_server(&mut self, why: &str) {
        if self.quiet_since_restart {
            tracing::debug!(kernel = %self.context.params.kernel_id, "{why} (already known)");
            return;
        }
        self.quiet_since_restart = true;
        let epoch = self.context.epochs.fetch_add(1, Ordering::SeqCst) + 1;
        tracing::warn!(
            kernel = %self.context.params.kernel_id,
            epoch,
            "{why}; requests in flight are lost"
        );
        self.epoch = epoch;
        self.context.hub.set_epoch(epoch);
        self.context.hub.set(KernelStatus::Restarting);
        self.router.end_all(&ExecuteEvent::KernelRestarted);
        self.unconfirmed.clear();
        self.markers.clear();
        self.answered_by = None;
        // The reply brings the new process's info and ends `Restarting`.
        let request = self.request("kernel_info_request", json!({}));
        self.send_or_queue(request, false);
    }

    fn kernel_gone(&mut self) -> PumpEnd {
        tracing::warn!(kernel = %self.context.params.kernel_id, "the kernel server no longer has the kernel");
        self.router.end_all(&ExecuteEvent::KernelDied {
            exit: ProcessExit::default(),
        });
        if self.context.hub.epoch() == self.epoch {
            self.context.hub.set(KernelStatus::Dead {
                exit: None,
                requested: false,
            });
        }
        PumpEnd::KernelGone
    }

    fn server_stopped(&mut self) -> PumpEnd {
        tracing::warn!(kernel = %self.context.params.kernel_id, "the kernel's server was stopped by its JupyterHub");
        self.context.server_stopped.store(true, Ordering::SeqCst);
        self.router.end_all(&ExecuteEvent::ServerStopped);
        if self.context.hub.epoch() == self.epoch {
            self.context.hub.set(KernelStatus::Dead {
                exit: None,
                requested: false,
            });
        }
        PumpEnd::ServerStopped
    }

    fn link_lost(&mut self) {
        if self.link.take().is_none() {
            return;
        }
        tracing::warn!(kernel = %self.context.params.kernel_id, "lost the kernel WebSocket; reconnecting");
        self.router.mark_gap();
        let sent = std::mem::take(&mut self.sent_on_link);
        self.unconfirmed.extend(sent);
        for (_, waiting) in self.markers.drain() {
            self.unconfirmed.extend(waiting);
        }
        let now = Instant::now();
        self.outage = Some(Outage {
            give_up_at: Some(now + self.context.reconnect_timeout),
            next_attempt: now,
            backoff: FIRST_BACKOFF,
        });
    }

    fn reconnected(&mut self, link: Link) {
        tracing::info!(kernel = %self.context.params.kernel_id, protocol = link.protocol.as_str(), "kernel WebSocket reconnected");
        self.link = Some(link);
        self.outage = None;
        self.last_heard = Instant::now();
        let hub = &self.context.hub;
        if hub.epoch() == self.epoch && hub.get() == KernelStatus::Unreachable {
            hub.set(hub.last_activity());
        }
        if !self.unconfirmed.is_empty() {
            let marker = self.request(
                "execute_request",
                json!({"code": "", "silent": true, "store_history": false,
                       "user_expressions": {}, "allow_stdin": false, "stop_on_error": false}),
            );
            let waiting: Vec<String> = self.unconfirmed.drain().collect();
            self.markers.insert(marker.msg_id.clone(), waiting);
            self.send_or_queue(marker, false);
        }
        for request in std::mem::take(&mut self.queued) {
            let is_execute = request.header["msg_type"] == "execute_request";
            self.send_or_queue(request, is_execute);
        }
    }

    fn attempt_failed(&mut self, error: &Error) {
        let Some(outage) = &mut self.outage else {
            return;
        };
        if matches!(error, Error::ServerAuth { .. }) {
            tracing::warn!(%error, "reconnecting to the kernel failed");
        } else {
            tracing::debug!(%error, "reconnecting to the kernel failed");
        }
        let cap = if outage.give_up_at.is_some() {
            WAITING_BACKOFF_CAP
        } else {
            IDLE_BACKOFF_CAP
        };
        outage.next_attempt = Instant::now() + outage.backoff;
        outage.backoff = (outage.backoff * 2).min(cap);
    }

    /// The socket stayed down for the whole window: what waits ends with `ConnectionLost`.
    fn give_up(&mut self) {
        tracing::warn!(
            kernel = %self.context.params.kernel_id,
            "the kernel server stayed unreachable for {} s; requests in flight are ended",
            self.context.reconnect_timeout.as_secs()
        );
        self.router.end_all(&ExecuteEvent::ConnectionLost);
        self.queued.clear();
        self.unconfirmed.clear();
        self.markers.clear();
        self.info_waiters.clear();
        if let Some(outage) = &mut self.outage {
            outage.give_up_at = None;
        }
        let hub = &self.context.hub;
        if hub.epoch() == self.epoch && matches!(hub.get(), KernelStatus::Idle | KernelStatus::Busy)
        {
            hub.set(KernelStatus::Unreachable);
        }
    }

    /// Pings the server; a socket that has said nothing for two intervals is treated as lost
    /// (a peer that vanished without closing the connection).
    fn keep_alive(&mut self) {
        let Some(link) = &self.link else {
            return;
        };
        if self.last_heard.elapsed() > self.context.keepalive * 2 {
            self.link_lost();
            return;
        }
        if link
            .outgoing
            .send(Message::Ping(Default::default()))
            .is_err()
        {
            self.link_lost();
        }
    }
}

async fn next_link_event(link: Option<&mut Link>) -> Option<LinkEvent> {
    match link {
        Some(link) => link.incoming.recv().await,
        None => std::future::pending().await,
    }
}

async fn run_attempt(attempt: Option<&mut Attempt>) -> Result<Link, LinkFailure> {
    match attempt {
        Some(attempt) => attempt.await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn starting(session: &str, parent: Option<&str>) -> WireMessage {
        let mut message =
            WireMessage::for_test("status", parent, json!({"execution_state": "starting"}));
        message.session = session.to_owned();
        message
    }

    #[test]
    fn a_starting_status_means_a_new_process_only_from_another_sender() {
        // Before anyone answered: the process we are about to hear from.
        assert!(!starts_another_process(&starting("k2", None), None));
        // After that process answered (its IOPub thread was slower than its shell).
        assert!(!starts_another_process(&starting("k2", None), Some("k2")));
        // From a sender other than the one that answered.
        assert!(starts_another_process(&starting("k3", None), Some("k2")));
        // In reply to a request: not a process coming up.
        assert!(!starts_another_process(
            &starting("k3", Some("request")),
            Some("k2")
        ));
    }
}
