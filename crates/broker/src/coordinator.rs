//! The coordinator of one process on the shared port: it takes the port (and is broker) or
//! registers with the process that has it (and is a peer), heartbeats every tick, and takes the
//! port over when the broker goes away. The decisions are `routing`'s election functions; this
//! module does the binding, the HTTP and the timing around them.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Method;
use mcp_server::http::ExtraRoutes;
use mcp_server::{HttpApp, HttpSecurity, McpHandler};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
// Tokio's clock: on a paused test clock, heartbeats, staleness and deadlines keep one time.
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use mcp_contract::{ToolDispatch, WindowInfo};

use crate::broker::{BrokerDispatch, BrokerRoutes, BrokerState};
use crate::client::{Call, LoopbackClient};
use crate::error::BrokerError;
use crate::peer::PeerEndpoint;
use crate::protocol::{AUTH_HEADER, Health, PROTOCOL, Registered, Registration, Unregistration};
use crate::routing::{self, ElectionEvent, FollowUp, Role, TickStep};
use crate::secret::{Secret, TokenFile, random_hex};

/// The clock of the broker protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// Heartbeat and takeover check interval (1 s).
    pub tick: Duration,
    /// A peer not heard from for longer than this is dropped (5 s).
    pub stale_after: Duration,
    /// Limit of control requests: health, registration, listing a window (1.5 s).
    pub control_timeout: Duration,
    /// How long a starting process keeps trying to join a broker that does not accept it yet
    /// (during a takeover, say) before giving up (5 s).
    pub join_deadline: Duration,
}

impl Default for Timings {
    fn default() -> Timings {
        Timings {
            tick: Duration::from_millis(1000),
            stale_after: Duration::from_millis(5000),
            control_timeout: Duration::from_millis(1500),
            join_deadline: Duration::from_millis(5000),
        }
    }
}

/// Everything a process needs to share a port.
#[derive(Clone)]
pub struct CoordinatorConfig {
    /// The shared loopback port (not 0).
    pub port: u16,
    /// This process's window.
    pub window: WindowInfo,
    /// This window's tools.
    pub local: Arc<dyn ToolDispatch>,
    /// Where the broker secret file lives (see [`crate::secret::default_runtime_dir`]).
    pub runtime_dir: PathBuf,
    /// How `/mcp` is protected while this process is broker.
    pub security: HttpSecurity,
    pub timings: Timings,
}

impl std::fmt::Debug for CoordinatorConfig {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("CoordinatorConfig")
            .field("port", &self.port)
            .field("window", &self.window)
            .field("runtime_dir", &self.runtime_dir)
            .field("timings", &self.timings)
            .finish_non_exhaustive()
    }
}

/// How a process joined the port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Joined {
    /// It took the port and serves `/mcp` for every window.
    Broker { owner_id: String },
    /// It registered with the broker `owner_id`.
    Peer { owner_id: String },
}

/// The broker epoch this process runs while it holds the port.
struct Serving {
    state: Arc<BrokerState>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

pub(crate) struct Shared {
    config: CoordinatorConfig,
    client: LoopbackClient,
    peer: Arc<PeerEndpoint>,
    peer_port: u16,
    role: watch::Sender<Role>,
    serving: Mutex<Option<Serving>>,
    secret_file: TokenFile,
}

/// One process's membership of the shared port.
pub struct Coordinator {
    pub(crate) shared: Arc<Shared>,
    stop: CancellationToken,
    ticker: JoinHandle<()>,
    peer_server: (CancellationToken, JoinHandle<()>),
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Coordinator")
            .field("port", &self.shared.config.port)
            .field("role", &*self.shared.role.borrow())
            .finish_non_exhaustive()
    }
}

/// Why a startup attempt to join did not work out (yet).
enum JoinProblem {
    /// The holder of the port is not a jupyter-mcp broker: give up at once.
    Foreign(BrokerError),
    /// Worth another try until the deadline (a takeover may be under way).
    Transient(BrokerError),
    /// Final: the broker refused this window.
    Fatal(BrokerError),
}

async fn bind(port: u16) -> std::io::Result<TcpListener> {
    mcp_server::bind_loopback(port)
        .await
        .map(|(listener, _)| listener)
}

impl Shared {
    fn role(&self) -> Role {
        self.role.borrow().clone()
    }

    fn set_role(&self, role: Role) {
        let previous = self.role();
        if previous != role {
            match &role {
                Role::Broker { owner_id } => tracing::info!(
                    port = self.config.port,
                    %owner_id,
                    "became the broker of the shared port"
                ),
                Role::Peer { owner_id } => {
                    tracing::info!(port = self.config.port, %owner_id, "joined the broker as a peer")
                }
                Role::Blocked => tracing::info!(
                    port = self.config.port,
                    "could neither register with a broker nor take the port; retrying"
                ),
                Role::Stopped => {}
            }
        }
        self.role.send_replace(role);
    }

    async fn health(&self) -> Result<Health, BrokerError> {
        self.client
            .json::<Health>(Call {
                port: self.config.port,
                method: Method::GET,
                path: "/broker/health",
                headers: Vec::new(),
                body: None,
                timeout: Some(self.config.timings.control_timeout),
                max_answer_bytes: 64 * 1024,
            })
            .await
    }

    /// Registers (or heartbeats) with whoever holds the port; returns its owner id.
    async fn register(&self) -> Result<String, BrokerError> {
        let port = self.config.port;
        let secret = self.secret_file.read_secret()?;
        let registration = Registration {
            protocol: PROTOCOL.to_owned(),
            id: self.config.window.id.clone(),
            label: self.config.window.label.clone(),
            peer_port: self.peer_port,
            tools: self
                .config
                .local
                .specs()
                .iter()
                .map(|spec| spec.name.to_owned())
                .collect(),
            nonce: random_hex(16),
        };
        let body = serde_json::to_vec(&registration).expect("a registration serialises");
        let tag = secret.sign("register", &[&body]);
        let registered: Registered = self
            .client
            .json(Call {
                port,
                method: Method::POST,
                path: "/broker/register",
                headers: vec![(AUTH_HEADER, tag)],
                body: Some(body),
                timeout: Some(self.config.timings.control_timeout),
                max_answer_bytes: 64 * 1024,
            })
            .await?;
        if registered.protocol != PROTOCOL {
            return Err(BrokerError::BadAnswer {
                port,
                problem: format!("protocol `{}`", registered.protocol),
            });
        }
        if !secret.verify(
            "registered",
            &[
                registration.nonce.as_bytes(),
                registered.owner_id.as_bytes(),
            ],
            &registered.proof,
        ) {
            return Err(BrokerError::BadAnswer {
                port,
                problem: "its answer is not signed with the secret of the broker token file"
                    .to_owned(),
            });
        }
        self.peer.trust(Some(secret));
        Ok(registered.owner_id)
    }

    pub(crate) async fn unregister(&self) {
        let Ok(secret) = self.secret_file.read_secret() else {
            return;
        };
        let body = serde_json::to_vec(&Unregistration {
            protocol: PROTOCOL.to_owned(),
            id: self.config.window.id.clone(),
            peer_port: self.peer_port,
        })
        .expect("an unregistration serialises");
        let tag = secret.sign("unregister", &[&body]);
        let _ = self
            .client
            .send(Call {
                port: self.config.port,
                method: Method::POST,
                path: "/broker/unregister",
                headers: vec![(AUTH_HEADER, tag)],
                body: Some(body),
                timeout: Some(self.config.timings.control_timeout),
                max_answer_bytes: 64 * 1024,
            })
            .await;
    }

    /// What `/mcp` serves while this process is broker.
    #[cfg(test)]
    pub(crate) fn broker_dispatch(&self) -> Option<Arc<dyn ToolDispatch>> {
        let serving = self.serving.lock().expect("serving lock");
        let state = serving.as_ref()?.state.clone();
        Some(Arc::new(BrokerDispatch { state }))
    }

    /// How many peers the broker of this process has (0 when it is not broker).
    #[cfg(test)]
    pub(crate) fn peer_count(&self) -> usize {
        let serving = self.serving.lock().expect("serving lock");
        serving
            .as_ref()
            .map_or(0, |serving| serving.state.peer_count())
    }

    /// Starts a broker epoch on a freshly bound shared port; returns the new owner id.
    fn become_broker(&self, listener: TcpListener) -> Result<String, BrokerError> {
        let secret = Secret::generate();
        // The file is written before the first request is served, so that peers arriving at
        // once can authenticate.
        self.secret_file.write_secret(&secret)?;
        let owner_id = random_hex(12);
        let state = Arc::new(BrokerState::new(
            owner_id.clone(),
            secret,
            &self.config,
            self.client.clone(),
        ));
        let cancel = CancellationToken::new();
        let dispatch: Arc<dyn ToolDispatch> = Arc::new(BrokerDispatch {
            state: state.clone(),
        });
        let routes: Arc<dyn ExtraRoutes> = Arc::new(BrokerRoutes {
            state: state.clone(),
        });
        let app = HttpApp::new(
            McpHandler::new(dispatch),
            self.config.security.clone(),
            Some(routes),
            cancel.clone(),
        );
        let task = tokio::spawn(mcp_server::serve(listener, app, cancel.clone()));
        // A broker calls its own tools directly; nobody should call its peer endpoint.
        self.peer.trust(None);
        *self.serving.lock().expect("serving lock") = Some(Serving {
            state,
            cancel,
            task,
        });
        Ok(owner_id)
    }

    /// Ends the broker epoch, if any.
    async fn stop_serving(&self) {
        let serving = self.serving.lock().expect("serving lock").take();
        if let Some(serving) = serving {
            serving.cancel.cancel();
            serving.state.close();
            let _ = serving.task.await;
            self.secret_file.remove_if_holds(serving.state.secret());
        }
    }

    /// One tick of the election.
    async fn tick(&self) {
        let role = self.role();
        match routing::tick_step(&role) {
            TickStep::Nothing => {}
            TickStep::Prune => {
                let closed = {
                    let serving = self.serving.lock().expect("serving lock");
                    match serving.as_ref() {
                        Some(serving) if !serving.task.is_finished() => {
                            serving.state.prune();
                            false
                        }
                        _ => true,
                    }
                };
                if closed {
                    tracing::warn!("the broker's server closed unexpectedly");
                    self.stop_serving().await;
                    let (role, _) = routing::next_role(&role, ElectionEvent::ServerClosed);
                    self.set_role(role);
                }
            }
            TickStep::Register => {
                let event = match self.register().await {
                    Ok(owner_id) => ElectionEvent::Registered { owner_id },
                    Err(error) => {
                        tracing::debug!(%error, "registration failed");
                        ElectionEvent::RegistrationFailed
                    }
                };
                let (role, follow_up) = routing::next_role(&role, event);
                self.set_role(role.clone());
                if follow_up == Some(FollowUp::TryBind) {
                    let event = match bind(self.config.port).await {
                        Ok(listener) => match self.become_broker(listener) {
                            Ok(owner_id) => ElectionEvent::Bound { owner_id },
                            Err(error) => {
                                tracing::warn!(%error, "cannot start a broker");
                                ElectionEvent::BindFailed
                            }
                        },
                        Err(error) => {
                            if error.kind() != std::io::ErrorKind::AddrInUse {
                                tracing::warn!(%error, port = self.config.port, "cannot bind the shared port");
                            }
                            ElectionEvent::BindFailed
                        }
                    };
                    let (role, _) = routing::next_role(&role, event);
                    self.set_role(role);
                }
            }
        }
    }

    /// One attempt to join at startup.
    async fn try_join(&self) -> Result<Joined, JoinProblem> {
        let port = self.config.port;
        match bind(port).await {
            Ok(listener) => {
                let owner_id = self.become_broker(listener).map_err(JoinProblem::Fatal)?;
                return Ok(Joined::Broker { owner_id });
            }
            Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => {}
            Err(source) => return Err(JoinProblem::Fatal(BrokerError::Bind { port, source })),
        }
        let foreign =
            |what: String| JoinProblem::Foreign(BrokerError::PortHeldByOther { port, what });
        match self.health().await {
            Ok(health) if health.protocol == PROTOCOL => {}
            Ok(health) => {
                return Err(foreign(format!("it speaks protocol `{}`", health.protocol)));
            }
            Err(BrokerError::Unreachable { reason, .. }) => {
                // The holder may have just closed (a takeover); or it does not speak HTTP.
                return Err(JoinProblem::Transient(BrokerError::PortHeldByOther {
                    port,
                    what: format!("it does not answer HTTP: {reason}"),
                }));
            }
            Err(BrokerError::TimedOut { millis, .. }) => {
                return Err(foreign(format!(
                    "it did not answer an HTTP request within {millis} ms"
                )));
            }
            Err(BrokerError::Refused {
                status, message, ..
            }) => {
                return Err(foreign(format!(
                    "it answered /broker/health with HTTP {status}: {message}"
                )));
            }
            Err(error) => return Err(foreign(error.to_string())),
        }
        match self.register().await {
            Ok(owner_id) => Ok(Joined::Peer { owner_id }),
            Err(BrokerError::Refused {
                status: 409,
                message,
                ..
            }) => Err(JoinProblem::Fatal(BrokerError::WindowTaken { message })),
            Err(error) => Err(JoinProblem::Transient(BrokerError::CannotJoin {
                port,
                problem: error.to_string(),
            })),
        }
    }
}

impl Coordinator {
    /// Joins the shared port: takes it (broker) or registers with its holder (peer), then keeps
    /// heartbeating and takes over when the broker goes away. Fails when something else holds
    /// the port, or when the broker refuses this window.
    pub async fn start(config: CoordinatorConfig) -> Result<(Coordinator, Joined), BrokerError> {
        let (peer_listener, peer_address) = mcp_server::bind_loopback(0)
            .await
            .map_err(|source| BrokerError::Bind { port: 0, source })?;
        let peer = Arc::new(PeerEndpoint::new(
            config.window.id.clone(),
            peer_address.port(),
            config.local.clone(),
        ));
        let peer_cancel = CancellationToken::new();
        let peer_task = tokio::spawn(mcp_server::http::serve_routes(
            peer_listener,
            peer.clone() as Arc<dyn ExtraRoutes>,
            peer_cancel.clone(),
        ));
        let shared = Arc::new(Shared {
            secret_file: TokenFile::broker_secret(&config.runtime_dir, config.port),
            client: LoopbackClient::new(),
            peer,
            peer_port: peer_address.port(),
            role: watch::channel(Role::Blocked).0,
            serving: Mutex::new(None),
            config,
        });
        let deadline = Instant::now() + shared.config.timings.join_deadline;
        let joined = loop {
            match shared.try_join().await {
                Ok(joined) => break joined,
                Err(JoinProblem::Foreign(error) | JoinProblem::Fatal(error)) => {
                    peer_cancel.cancel();
                    return Err(error);
                }
                Err(JoinProblem::Transient(error)) => {
                    if Instant::now() >= deadline {
                        peer_cancel.cancel();
                        return Err(error);
                    }
                    tracing::debug!(%error, "cannot join yet; retrying");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        shared.set_role(match &joined {
            Joined::Broker { owner_id } => Role::Broker {
                owner_id: owner_id.clone(),
            },
            Joined::Peer { owner_id } => Role::Peer {
                owner_id: owner_id.clone(),
            },
        });
        let stop = CancellationToken::new();
        let ticker = {
            let shared = shared.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut interval = tokio::time::interval(shared.config.timings.tick);
                interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                interval.tick().await;
                loop {
                    tokio::select! {
                        _ = interval.tick() => {}
                        () = stop.cancelled() => break,
                    }
                    // Ticks never overlap: the next one waits for this one.
                    shared.tick().await;
                }
            })
        };
        Ok((
            Coordinator {
                shared,
                stop,
                ticker,
                peer_server: (peer_cancel, peer_task),
            },
            joined,
        ))
    }

    /// The URL every client uses, whoever is broker.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.shared.config.port)
    }

    /// The current role.
    pub fn role(&self) -> Role {
        self.shared.role()
    }

    /// Follows role changes.
    pub fn watch_role(&self) -> watch::Receiver<Role> {
        self.shared.role.subscribe()
    }

    /// This process's private peer port.
    pub fn peer_port(&self) -> u16 {
        self.shared.peer_port
    }

    /// Leaves the port: a broker stops serving (and removes its secret file), a peer
    /// unregisters. Calls in flight through this broker to peers fail at once.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.ticker.await;
        let role = self.shared.role();
        match role {
            Role::Broker { .. } => self.shared.stop_serving().await,
            Role::Peer { .. } => self.shared.unregister().await,
            Role::Blocked | Role::Stopped => {}
        }
        self.shared
            .set_role(routing::next_role(&role, ElectionEvent::Stop).0);
        let (peer_cancel, peer_task) = self.peer_server;
        peer_cancel.cancel();
        let _ = peer_task.await;
    }
}
