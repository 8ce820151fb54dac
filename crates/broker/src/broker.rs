//! The broker: the state of one broker epoch (its owner id, secret and peer table), the
//! `/broker/*` endpoints on the shared port, and [`BrokerDispatch`], the [`ToolDispatch`] that
//! `/mcp` serves, which sends every call to the window that owns its notebook.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use mcp_contract::catalog::{self, ToolSpec};
use mcp_contract::results::{ListNotebooksResult, WindowEntry, WindowStatus};
use mcp_server::http::{Body, ExtraRoutes, RouteFuture, json_response};
use serde_json::{Map, Value, json};
// Tokio's clock: on a paused test clock, heartbeats, staleness and deadlines keep one time.
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use mcp_contract::refs::{self, RefKind};
use mcp_contract::{
    BoxFuture, CallContext, ToolDispatch, ToolName, ToolOutput, ToolRequest, WindowInfo,
};

use crate::client::{Call, LoopbackClient};
use crate::error::BrokerError;
use crate::peer::{either, error_response, parse_body, read_body};
use crate::protocol::{
    AUTH_HEADER, Health, Invocation, InvocationResult, MAX_ANSWER_BODY_BYTES,
    MAX_CONTROL_BODY_BYTES, PEER_TOKEN_HEADER, PROTOCOL, Registered, Registration, Unregistration,
};
use crate::routing::{
    self, Destination, HostListing, ListedNotebook, PeerTable, RouteError, RouteKind, Target,
    WindowTools,
};
use crate::secret::Secret;
use crate::{CoordinatorConfig, Timings};

/// What the broker knows about a registered peer.
#[derive(Debug, Clone)]
struct PeerInfo {
    label: String,
    port: u16,
    /// The token this broker presents on the peer's `/peer/invoke`.
    token: String,
    tools: Vec<String>,
    /// Fired when the peer leaves (unregisters, goes stale, or is replaced): calls in flight to
    /// it fail at once instead of waiting for an answer that will not come.
    departed: CancellationToken,
}

/// One broker epoch: from taking the port to losing it or stopping.
pub(crate) struct BrokerState {
    owner_id: String,
    secret: Secret,
    window: WindowInfo,
    local: Arc<dyn ToolDispatch>,
    timings: Timings,
    client: LoopbackClient,
    started: Instant,
    peers: Mutex<PeerTable<PeerInfo>>,
    /// notebookRef → (window id, URI), from listings and answers.
    routes: Mutex<HashMap<String, (String, String)>>,
    /// Windows that left during this epoch, by id, with their labels (for clear errors).
    departed: Mutex<HashMap<String, String>>,
    /// Input schemas of every catalogue tool, to read stringified arguments before routing.
    input_schemas: HashMap<&'static str, Map<String, Value>>,
}

fn window_failure(error: RouteError) -> ToolOutput {
    ToolOutput::failure(error.to_tool_error())
}

/// Says why a peer call failed, without raw OS text.
fn describe_call_failure(error: &BrokerError) -> String {
    match error {
        BrokerError::TimedOut { millis, .. } => {
            format!("did not answer within {millis} ms")
        }
        BrokerError::Refused { status, .. } => {
            format!("refused the call (HTTP {status})")
        }
        BrokerError::BadAnswer { .. } => "gave an answer the broker cannot read".to_owned(),
        _ => "is not reachable (its process has probably stopped)".to_owned(),
    }
}

impl BrokerState {
    /// The epoch `owner_id` of the process configured by `config`, signing with `secret`.
    pub(crate) fn new(
        owner_id: String,
        secret: Secret,
        config: &CoordinatorConfig,
        client: LoopbackClient,
    ) -> BrokerState {
        let input_schemas = catalog::all_tools()
            .iter()
            .map(|spec| (spec.name, (spec.input_schema)()))
            .collect();
        BrokerState {
            owner_id,
            secret,
            window: config.window.clone(),
            local: config.local.clone(),
            timings: config.timings,
            client,
            started: Instant::now(),
            peers: Mutex::new(PeerTable::default()),
            routes: Mutex::new(HashMap::new()),
            departed: Mutex::new(HashMap::new()),
            input_schemas,
        }
    }

    pub(crate) fn secret(&self) -> &Secret {
        &self.secret
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn depart(&self, id: &str, info: &PeerInfo, why: &str) {
        info.departed.cancel();
        self.departed
            .lock()
            .expect("departed lock")
            .insert(id.to_owned(), info.label.clone());
        tracing::info!(window = %id, label = %info.label, "peer {why}");
    }

    /// Drops the peers not heard from for longer than the stale limit.
    pub(crate) fn prune(&self) {
        let removed = self
            .peers
            .lock()
            .expect("peer table lock")
            .prune(self.now_ms(), self.timings.stale_after.as_millis() as u64);
        for (id, info) in removed {
            self.depart(&id, &info, "went stale and was dropped");
        }
    }

    /// Ends the epoch: every peer call in flight fails at once.
    pub(crate) fn close(&self) {
        let mut peers = self.peers.lock().expect("peer table lock");
        let ids: Vec<String> = peers.iter().map(|(id, _)| id.clone()).collect();
        for id in ids {
            if let Some(info) = peers.remove(&id) {
                info.departed.cancel();
            }
        }
    }

    pub(crate) fn peer_count(&self) -> usize {
        self.peers.lock().expect("peer table lock").len()
    }

    /// The registration of one connected peer, if it is connected.
    fn peer(&self, window_id: &str) -> Option<PeerInfo> {
        self.peers
            .lock()
            .expect("peer table lock")
            .get(window_id)
            .cloned()
    }

    /// A snapshot of the connected peers, so that no lock is held across the calls to them.
    fn peers_now(&self) -> Vec<(String, PeerInfo)> {
        self.peers
            .lock()
            .expect("peer table lock")
            .iter()
            .map(|(id, info)| (id.clone(), info.clone()))
            .collect()
    }

    // ---- /broker/* ----

    async fn register(
        &self,
        registration: Registration,
    ) -> Result<Registered, (StatusCode, String)> {
        if registration.protocol != PROTOCOL {
            return Err((
                StatusCode::BAD_REQUEST,
                format!("unknown protocol `{}`", registration.protocol),
            ));
        }
        if registration.id == self.window.id {
            return Err((
                StatusCode::CONFLICT,
                format!(
                    "the broker itself is window `{}` ({}): the same root is already served on \
                     this port",
                    self.window.id, self.window.label
                ),
            ));
        }
        let existing = self.peer(&registration.id);
        let departed = match existing {
            Some(existing) if existing.port == registration.peer_port => existing.departed,
            Some(existing) => {
                // Same window id on another port: a restart of the same root, or a second
                // server for it. Only a dead predecessor may be replaced.
                let alive = tokio::time::timeout(
                    Duration::from_millis(300),
                    tokio::net::TcpStream::connect(("127.0.0.1", existing.port)),
                )
                .await
                .is_ok_and(|connected| connected.is_ok());
                if alive {
                    return Err((
                        StatusCode::CONFLICT,
                        format!(
                            "window `{}` ({}) is already connected from port {}: the same root \
                             is already served on this port",
                            registration.id, existing.label, existing.port
                        ),
                    ));
                }
                existing.departed.cancel();
                CancellationToken::new()
            }
            None => CancellationToken::new(),
        };
        let info = PeerInfo {
            label: registration.label,
            port: registration.peer_port,
            token: self
                .secret
                .peer_token(&registration.id, registration.peer_port),
            tools: registration.tools,
            departed,
        };
        let replaced = self.peers.lock().expect("peer table lock").register(
            &registration.id,
            info,
            self.now_ms(),
        );
        if replaced.is_none() {
            self.departed
                .lock()
                .expect("departed lock")
                .remove(&registration.id);
            tracing::info!(window = %registration.id, port = registration.peer_port, "peer registered");
        }
        Ok(Registered {
            protocol: PROTOCOL.to_owned(),
            owner_id: self.owner_id.clone(),
            proof: self.secret.sign(
                "registered",
                &[registration.nonce.as_bytes(), self.owner_id.as_bytes()],
            ),
        })
    }

    fn unregister(&self, unregistration: &Unregistration) {
        let mut peers = self.peers.lock().expect("peer table lock");
        let matches = peers
            .get(&unregistration.id)
            .is_some_and(|info| info.port == unregistration.peer_port);
        if matches && let Some(info) = peers.remove(&unregistration.id) {
            drop(peers);
            self.depart(&unregistration.id, &info, "unregistered");
        }
    }

    async fn handle_control(
        &self,
        request: Request<Incoming>,
    ) -> Result<Response<Body>, Response<Body>> {
        let path = request.uri().path().to_owned();
        if path == "/broker/health" {
            if request.method() != Method::GET {
                return Err(error_response(StatusCode::METHOD_NOT_ALLOWED, "use GET"));
            }
            let health = Health {
                protocol: PROTOCOL.to_owned(),
                owner_id: self.owner_id.clone(),
                window_id: self.window.id.clone(),
                peers: self.peer_count(),
            };
            return Ok(json_response(StatusCode::OK, json!(health)));
        }
        if request.method() != Method::POST {
            return Err(error_response(StatusCode::METHOD_NOT_ALLOWED, "use POST"));
        }
        let purpose = if path == "/broker/register" {
            "register"
        } else {
            "unregister"
        };
        let tag = request
            .headers()
            .get(AUTH_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let body = read_body(request, MAX_CONTROL_BODY_BYTES).await?;
        let authentic = tag
            .as_deref()
            .is_some_and(|tag| self.secret.verify(purpose, &[&body], tag));
        if !authentic {
            let message = if tag.is_some() {
                "Unauthorized: the request is not signed with this broker's secret (read it from \
                 the broker's token file)"
            } else {
                "Unauthorized: broker requests must be signed with the broker's secret"
            };
            return Err(error_response(StatusCode::UNAUTHORIZED, message));
        }
        if purpose == "register" {
            let registration: Registration = parse_body(&body, "a registration")?;
            match self.register(registration).await {
                Ok(registered) => Ok(json_response(StatusCode::OK, json!(registered))),
                Err((status, message)) => Err(error_response(status, &message)),
            }
        } else {
            let unregistration: Unregistration = parse_body(&body, "an unregistration")?;
            self.unregister(&unregistration);
            Ok(json_response(
                StatusCode::OK,
                json!({ "protocol": PROTOCOL }),
            ))
        }
    }

    // ---- routing ----

    /// Every connected window's `list_notebooks`, own first; windows that do not answer within
    /// the control timeout are listed as unavailable. Learns the routes of every listed ref.
    async fn listings(&self) -> Vec<WindowEntry> {
        let peers = self.peers_now();
        let control = self.timings.control_timeout;
        let own = async {
            let output = self
                .local
                .dispatch(ToolRequest::new(ToolName::ListNotebooks.as_str(), None))
                .await;
            (
                self.window.id.clone(),
                self.window.label.clone(),
                Some(output),
            )
        };
        let others = peers.into_iter().map(|(id, info)| async move {
            let output = self
                .invoke_peer(
                    &id,
                    &info,
                    ToolName::ListNotebooks.as_str(),
                    Map::new(),
                    Some(control),
                )
                .await
                .ok();
            (id, info.label, output)
        });
        let (own, others) = futures::join!(own, futures::future::join_all(others));
        let mut windows = Vec::new();
        for (window_id, label, output) in std::iter::once(own).chain(others) {
            let listed = output
                .filter(|output| !output.is_error)
                .and_then(|output| output.structured)
                .and_then(|value| serde_json::from_value::<ListNotebooksResult>(value).ok());
            match listed {
                Some(result) => windows.extend(result.windows),
                None => windows.push(WindowEntry {
                    window_id,
                    window_label: label,
                    status: WindowStatus::Unavailable,
                    notebooks: Vec::new(),
                    unreadable: Vec::new(),
                }),
            }
        }
        routing::sort_windows(&mut windows, |window| {
            (window.window_label.as_str(), window.window_id.as_str())
        });
        let mut routes = self.routes.lock().expect("route table lock");
        for window in &windows {
            for notebook in &window.notebooks {
                routes.insert(
                    notebook.notebook_ref.clone(),
                    (window.window_id.clone(), notebook.uri.clone()),
                );
            }
        }
        windows
    }

    /// Every connected window's preflight, own first; a window that fails, answers something
    /// else or takes longer than [`routing::PREFLIGHT_PEER_TIMEOUT`] is listed unavailable, and
    /// so is one that does not serve the tool (it is not asked, so it never answers
    /// `unknown_tool`).
    async fn preflights(&self, tool: &str) -> Vec<mcp_contract::results::PreflightWindow> {
        use mcp_contract::results::{ColabPreflightResult, PreflightWindow};
        let windows = self.window_tools();
        let peers = self.peers_now();
        let answered = |output: Option<ToolOutput>| {
            output
                .filter(|output| !output.is_error)
                .and_then(|output| output.structured)
                .and_then(|value| serde_json::from_value::<ColabPreflightResult>(value).ok())
                .map(|result| result.windows)
        };
        let unavailable = |window_id: String, label: String| PreflightWindow {
            window_id,
            window_label: label.chars().take(256).collect(),
            status: WindowStatus::Unavailable,
            ..PreflightWindow::default()
        };
        let serves = |window_id: &str| {
            routing::serving_window(tool, Destination::Named(window_id), &windows).is_ok()
        };
        let own = async {
            let output = if serves(&self.window.id) {
                tokio::time::timeout(
                    routing::PREFLIGHT_PEER_TIMEOUT,
                    self.local.dispatch(ToolRequest::new(tool, None)),
                )
                .await
                .ok()
            } else {
                None
            };
            answered(output).unwrap_or_else(|| {
                vec![unavailable(
                    self.window.id.clone(),
                    self.window.label.clone(),
                )]
            })
        };
        let others = peers.into_iter().map(|(id, info)| async move {
            let output = if serves(&id) {
                self.invoke_peer(
                    &id,
                    &info,
                    tool,
                    Map::new(),
                    Some(routing::PREFLIGHT_PEER_TIMEOUT),
                )
                .await
                .ok()
            } else {
                None
            };
            answered(output).unwrap_or_else(|| vec![unavailable(id, info.label)])
        });
        let (own, others) = futures::join!(own, futures::future::join_all(others));
        own.into_iter()
            .chain(others.into_iter().flatten())
            .collect()
    }

    fn snapshot(windows: &[WindowEntry]) -> Vec<HostListing> {
        windows
            .iter()
            .map(|window| HostListing {
                window_id: window.window_id.clone(),
                label: window.window_label.clone(),
                available: window.status == WindowStatus::Available,
                notebooks: window
                    .notebooks
                    .iter()
                    .map(|notebook| ListedNotebook {
                        notebook_ref: notebook.notebook_ref.clone(),
                        uri: notebook.uri.clone(),
                        path: notebook.path.clone(),
                    })
                    .collect(),
            })
            .collect()
    }

    fn is_connected(&self, window_id: &str) -> bool {
        window_id == self.window.id || self.peer(window_id).is_some()
    }

    /// Every connected window with the tools it serves, own first: the broker's own from its
    /// dispatch, each peer's from its latest registration.
    fn window_tools(&self) -> Vec<WindowTools> {
        let own = WindowTools {
            window_id: self.window.id.clone(),
            label: self.window.label.clone(),
            tools: self
                .local
                .specs()
                .iter()
                .map(|spec| spec.name.to_owned())
                .collect(),
        };
        let peers = self.peers.lock().expect("peer table lock");
        let peers = peers.iter().map(|(id, info)| WindowTools {
            window_id: id.clone(),
            label: info.label.clone(),
            tools: info.tools.clone(),
        });
        std::iter::once(own).chain(peers).collect()
    }

    /// The window a call to `tool` goes to, or the error naming the windows that serve it when
    /// the routed window does not (see [`routing::serving_window`]).
    fn serving_window(
        &self,
        tool: &str,
        destination: Destination<'_>,
    ) -> Result<String, RouteError> {
        routing::serving_window(tool, destination, &self.window_tools())
    }

    /// A ref whose owner this epoch already knows, without asking anyone.
    fn known_route(&self, reference: &str) -> Option<Result<Target, RouteError>> {
        let RefKind::Handle(handle) = refs::classify(reference) else {
            return None;
        };
        let (window_id, uri) = self
            .routes
            .lock()
            .expect("route table lock")
            .get(handle)
            .cloned()?;
        if self.is_connected(&window_id) {
            return Some(Ok(Target {
                window_id,
                reference: uri,
            }));
        }
        let label = self
            .departed
            .lock()
            .expect("departed lock")
            .get(&window_id)
            .cloned()?;
        Some(Err(RouteError::WindowUnavailable {
            label,
            reason: "has disconnected from the broker".to_owned(),
        }))
    }

    /// Resolves references, listing every window at most once and only when needed.
    async fn resolve_all(&self, references: &[String]) -> Result<Vec<Target>, RouteError> {
        let mut snapshot: Option<Vec<HostListing>> = None;
        let mut targets = Vec::with_capacity(references.len());
        for reference in references {
            if let RefKind::Malformed = refs::classify(reference) {
                return Err(RouteError::Malformed {
                    reference: reference.trim().to_owned(),
                });
            }
            if let Some(known) = self.known_route(reference) {
                targets.push(known?);
                continue;
            }
            if snapshot.is_none() {
                snapshot = Some(BrokerState::snapshot(&self.listings().await));
            }
            let hosts = snapshot.as_deref().expect("listed above");
            targets.push(routing::resolve(reference, hosts, &self.window.id)?);
        }
        Ok(targets)
    }

    async fn invoke_peer(
        &self,
        window_id: &str,
        info: &PeerInfo,
        tool: &str,
        arguments: Map<String, Value>,
        timeout: Option<Duration>,
    ) -> Result<ToolOutput, RouteError> {
        let body = serde_json::to_vec(&Invocation {
            tool: tool.to_owned(),
            arguments: Some(arguments),
        })
        .expect("an invocation serialises");
        let call = self.client.json::<InvocationResult>(Call {
            port: info.port,
            method: Method::POST,
            path: "/peer/invoke",
            headers: vec![(PEER_TOKEN_HEADER, info.token.clone())],
            body: Some(body),
            timeout,
            max_answer_bytes: MAX_ANSWER_BODY_BYTES,
        });
        let unavailable = |reason: String| RouteError::WindowUnavailable {
            label: info.label.clone(),
            reason,
        };
        tokio::select! {
            answer = call => match answer {
                Ok(result) => Ok(result.into()),
                Err(error) => {
                    tracing::debug!(window = %window_id, %error, "peer call failed");
                    Err(unavailable(describe_call_failure(&error)))
                }
            },
            () = info.departed.cancelled() => Err(unavailable(format!(
                "stopped answering heartbeats for {} s and was disconnected while the call was \
                 running",
                self.timings.stale_after.as_secs_f64()
            ))),
        }
    }

    /// Runs a call in a window: locally for the broker's own, over HTTP for a peer.
    async fn invoke(
        &self,
        window_id: &str,
        tool: &str,
        arguments: Map<String, Value>,
        context: CallContext,
    ) -> ToolOutput {
        if window_id == self.window.id {
            return self
                .local
                .dispatch(ToolRequest {
                    name: tool.to_owned(),
                    arguments: Some(arguments),
                    context,
                })
                .await;
        }
        let info = self.peer(window_id);
        let Some(info) = info else {
            let label = self
                .departed
                .lock()
                .expect("departed lock")
                .get(window_id)
                .cloned();
            return window_failure(match label {
                Some(label) => RouteError::WindowUnavailable {
                    label,
                    reason: "has disconnected from the broker".to_owned(),
                },
                None => RouteError::WindowNotConnected {
                    window_id: window_id.to_owned(),
                },
            });
        };
        let timeout = routing::invoke_timeout(tool, &arguments);
        self.invoke_peer(window_id, &info, tool, arguments, timeout)
            .await
            .unwrap_or_else(window_failure)
    }

    fn learn(&self, window_id: &str, output: &ToolOutput) {
        let Some(structured) = output.structured.as_ref().filter(|_| !output.is_error) else {
            return;
        };
        let learned = routing::learned_routes(structured);
        if learned.is_empty() {
            return;
        }
        let mut routes = self.routes.lock().expect("route table lock");
        for (notebook_ref, uri) in learned {
            routes.insert(notebook_ref, (window_id.to_owned(), uri));
        }
    }

    async fn route(&self, request: ToolRequest) -> ToolOutput {
        let ToolRequest {
            name: tool,
            arguments,
            context,
        } = request;
        let mut arguments = arguments.unwrap_or_default();
        if let Some(schema) = self.input_schemas.get(tool.as_str()) {
            let mut value = Value::Object(std::mem::take(&mut arguments));
            mcp_contract::coerce::coerce(&mut value, schema);
            if let Value::Object(coerced) = value {
                arguments = coerced;
            }
        }
        match routing::route_kind(&tool, &arguments) {
            RouteKind::ListAll => {
                let windows = self.listings().await;
                ToolOutput::success(json!(ListNotebooksResult { windows }), Vec::new())
            }
            RouteKind::EveryWindow => {
                let windows = self.preflights(&tool).await;
                ToolOutput::success(
                    json!(mcp_contract::results::ColabPreflightResult::from_windows(
                        windows
                    )),
                    Vec::new(),
                )
            }
            RouteKind::Notebook(reference) => {
                let target = match self.resolve_all(std::slice::from_ref(&reference)).await {
                    Ok(mut targets) => targets.remove(0),
                    Err(error) => return window_failure(error),
                };
                if let Err(error) =
                    self.serving_window(&tool, Destination::NotebookOwner(&target.window_id))
                {
                    return window_failure(error);
                }
                arguments.insert("notebookRef".to_owned(), Value::String(target.reference));
                self.invoke(&target.window_id, &tool, arguments, context)
                    .await
            }
            RouteKind::Batch(references) => {
                let targets = match self.resolve_all(&references).await {
                    Ok(targets) => targets,
                    Err(error) => return window_failure(error),
                };
                let groups = routing::group_by_owner(targets);
                let windows = self.window_tools();
                let calls = groups.into_iter().map(|(window_id, references)| {
                    // An owner that lacks the tool fails its part without being asked.
                    let served = routing::serving_window(
                        &tool,
                        Destination::NotebookOwner(&window_id),
                        &windows,
                    );
                    let mut arguments = arguments.clone();
                    arguments.insert("notebookRefs".to_owned(), json!(references));
                    let context = context.clone();
                    let tool = tool.clone();
                    async move {
                        match served {
                            Ok(window_id) => {
                                self.invoke(&window_id, &tool, arguments, context).await
                            }
                            Err(error) => window_failure(error),
                        }
                    }
                });
                routing::merge_batch(futures::future::join_all(calls).await)
            }
            RouteKind::Window(named) => {
                let destination = match named.as_deref() {
                    Some(window_id) => Destination::Named(window_id),
                    None => Destination::Own {
                        own_window_id: &self.window.id,
                        takes_window_id: self.input_schemas.get(tool.as_str()).is_some_and(
                            |schema| {
                                schema
                                    .get("properties")
                                    .and_then(|properties| properties.get("windowId"))
                                    .is_some()
                            },
                        ),
                    },
                };
                let window_id = match self.serving_window(&tool, destination) {
                    Ok(window_id) => window_id,
                    Err(error) => return window_failure(error),
                };
                let output = self.invoke(&window_id, &tool, arguments, context).await;
                self.learn(&window_id, &output);
                output
            }
        }
    }
}

impl BrokerState {
    /// Runs a reserved resource invocation in a window (see [`crate::protocol::LIST_RESOURCES`]).
    async fn invoke_resources(
        &self,
        window_id: &str,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Option<Value> {
        let output = if window_id == self.window.id {
            crate::protocol::resource_invocation(self.local.as_ref(), name, Some(&arguments))
                .await?
        } else {
            let info = self.peer(window_id)?;
            let timeout = Some(self.timings.control_timeout);
            self.invoke_peer(window_id, &info, name, arguments, timeout)
                .await
                .ok()?
        };
        output.structured.filter(|_| !output.is_error)
    }

    /// Every window that is connected now, own first.
    fn windows(&self) -> Vec<String> {
        let mut windows = vec![self.window.id.clone()];
        windows.extend(
            self.peers
                .lock()
                .expect("peer table lock")
                .iter()
                .map(|(id, _)| id.clone()),
        );
        windows
    }

    /// The window serving the notebook of a resource URI.
    async fn resource_owner(&self, uri: &str) -> Option<String> {
        let notebook = mcp_contract::resources::ResourceUri::parse(uri)
            .ok()?
            .notebook;
        let mut targets = self.resolve_all(&[notebook]).await.ok()?;
        Some(targets.remove(0).window_id)
    }
}

/// The `/broker/*` endpoints on the shared port.
pub(crate) struct BrokerRoutes {
    pub(crate) state: Arc<BrokerState>,
}

impl ExtraRoutes for BrokerRoutes {
    fn handle(&self, request: Request<Incoming>) -> RouteFuture<'_> {
        Box::pin(async move {
            match request.uri().path() {
                "/broker/health" | "/broker/register" | "/broker/unregister" => {
                    Ok(either(self.state.handle_control(request).await))
                }
                _ => Err(request),
            }
        })
    }
}

/// What `/mcp` serves while this process is broker: every tool of every connected window, each
/// call sent to the window that owns its notebook.
pub(crate) struct BrokerDispatch {
    pub(crate) state: Arc<BrokerState>,
}

impl ToolDispatch for BrokerDispatch {
    /// The broker's own tools plus any tool a peer serves, in catalogue order.
    fn specs(&self) -> Vec<ToolSpec> {
        let names: Vec<String> = self
            .state
            .window_tools()
            .into_iter()
            .flat_map(|window| window.tools)
            .collect();
        let mut specs: Vec<ToolSpec> = catalog::all_tools()
            .into_iter()
            .filter(|spec| names.iter().any(|name| name == spec.name))
            .collect();
        // A tool of the broker's own that the catalogue does not have keeps its place at the end.
        for spec in self.state.local.specs() {
            if !specs.iter().any(|listed| listed.name == spec.name) {
                specs.push(spec);
            }
        }
        specs
    }

    fn list_resources(&self) -> BoxFuture<'_, Vec<mcp_contract::ResourceEntry>> {
        Box::pin(async move {
            let windows = self.state.windows();
            let lists = windows.iter().map(|window_id| async move {
                self.state
                    .invoke_resources(window_id, crate::protocol::LIST_RESOURCES, Map::new())
                    .await
                    .and_then(|value| {
                        serde_json::from_value::<Vec<_>>(value["resources"].clone()).ok()
                    })
                    .unwrap_or_default()
            });
            futures::future::join_all(lists)
                .await
                .into_iter()
                .flatten()
                .collect()
        })
    }

    fn read_resource(
        &self,
        uri: String,
    ) -> BoxFuture<'_, Result<Vec<mcp_contract::ResourceBody>, mcp_contract::ResourceError>> {
        Box::pin(async move {
            let not_found = |message: String| mcp_contract::ResourceError::NotFound {
                uri: uri.clone(),
                message,
            };
            let Some(window_id) = self.state.resource_owner(&uri).await else {
                return Err(not_found(format!(
                    "no connected window serves `{uri}`; call resources/list for the notebooks"
                )));
            };
            let mut arguments = Map::new();
            arguments.insert("uri".to_owned(), Value::String(uri.clone()));
            let answer = self
                .state
                .invoke_resources(&window_id, crate::protocol::READ_RESOURCE, arguments)
                .await
                .ok_or_else(|| mcp_contract::ResourceError::Unavailable {
                    message: "the window that serves this notebook did not answer; retry"
                        .to_owned(),
                })?;
            if let Ok(error) = serde_json::from_value(answer["resourceError"].clone()) {
                return Err(error);
            }
            serde_json::from_value(answer["contents"].clone())
                .map_err(|_| not_found("the window's answer could not be read".to_owned()))
        })
    }

    fn resource_versions(&self, uris: Vec<String>) -> BoxFuture<'_, Vec<Option<u64>>> {
        Box::pin(async move {
            let mut versions = vec![None; uris.len()];
            for (index, uri) in uris.iter().enumerate() {
                let Some(window_id) = self.state.resource_owner(uri).await else {
                    continue;
                };
                let mut arguments = Map::new();
                arguments.insert("uris".to_owned(), json!([uri]));
                versions[index] = self
                    .state
                    .invoke_resources(&window_id, crate::protocol::RESOURCE_VERSIONS, arguments)
                    .await
                    .and_then(|answer| answer["versions"][0].as_u64());
            }
            versions
        })
    }

    fn dispatch(&self, request: ToolRequest) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            if self.state.peer_count() == 0
                && self
                    .state
                    .departed
                    .lock()
                    .expect("departed lock")
                    .is_empty()
            {
                // Alone on the port: exactly what a lone server answers, with no listing first.
                return self.state.local.dispatch(request).await;
            }
            self.state.route(request).await
        })
    }
}
