//! A JupyterHub user's server as the place kernels run: finds the token's user, uses the
//! running server or starts it and follows the spawn's progress, and tells a stopped server
//! from a network hiccup after a failure. The data and decisions are in `hub`; this is the
//! HTTP around them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http::{Method, StatusCode};
use http_body_util::BodyExt as _;
use tokio::time::Instant;

use super::hub::{
    EventStream, ServerState, StartAnswer, UserProblem, hub_base, hub_said, parse_user,
    progress_api_path, server_api_path, server_label, start_answer,
};
use super::profile::{ConnectionProfile, CredentialSource, TlsTrust};
use super::server::{Rest, ServerToken, ServerUrl, Transport};
use crate::error::{Error, Result};
use crate::progress;

/// How to use a JupyterHub.
#[derive(Debug, Clone)]
pub struct JupyterHubConfig {
    /// The hub's public URL (`https://hub.example.org/`; `…/hub/` and `…/hub/api` are read as
    /// the same).
    pub url: ServerUrl,
    /// The user's API token (never from the command line).
    pub credential: CredentialSource,
    /// The named server to use; empty for the default server.
    pub server_name: String,
    /// Start the server again when the hub stopped or culled it after we began using it.
    /// (A server that is not running when jupyter-mcp first needs it is always started: that
    /// is what pointing jupyter-mcp at a hub asks for.)
    pub restart_stopped: bool,
    /// Certificate authorities trusted besides the platform's.
    pub tls: TlsTrust,
    /// Plain `http://` to a host other than loopback.
    pub allow_insecure_http: bool,
    /// How long a spawn may take before we give up waiting. Default 5 minutes (a hub on a
    /// cluster may pull images first).
    pub spawn_timeout: Duration,
}

impl JupyterHubConfig {
    /// The defaults for the hub at `url` with `credential`.
    pub fn new(url: ServerUrl, credential: CredentialSource) -> Self {
        JupyterHubConfig {
            url,
            credential,
            server_name: String::new(),
            restart_stopped: false,
            tls: TlsTrust::default(),
            allow_insecure_http: false,
            spawn_timeout: Duration::from_secs(300),
        }
    }

    /// The connection profile of the hub and of the user's servers behind its proxy: the
    /// token in `Authorization: token …` (the hub ignores it in URLs), on both.
    pub fn profile(&self) -> ConnectionProfile {
        ConnectionProfile {
            allow_insecure_http: self.allow_insecure_http,
            tls: self.tls.clone(),
            credential_hint: "check --token-file or JUPYTERHUB_API_TOKEN (the token must belong to a user, with the scopes read:servers, servers and access:servers)".to_owned(),
            ..ConnectionProfile::jupyter_server(hub_base(&self.url), Some(self.credential.clone()))
        }
    }
}

/// A user's server on a JupyterHub.
pub(crate) struct JupyterHub {
    config: JupyterHubConfig,
    /// The hub's API (base URL: the hub's public base).
    rest: Rest,
    /// The token's user, once known.
    user: Mutex<Option<String>>,
    /// The server ran for us at least once: starting it again needs `restart_stopped`.
    used: AtomicBool,
    /// The user server's URL when it last ran.
    server_url: Mutex<Option<ServerUrl>>,
    /// One start at a time.
    starting: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for JupyterHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JupyterHub")
            .field("url", &self.rest.url)
            .field("server", &self.config.server_name)
            .finish_non_exhaustive()
    }
}

/// How often a stop in progress is looked at.
const STOP_POLL: Duration = Duration::from_millis(500);
/// How long after a failed start answer the progress stream may still name the failure.
const FAILURE_GRACE: Duration = Duration::from_secs(2);

impl JupyterHub {
    pub(crate) fn new(
        config: JupyterHubConfig,
        transport: Arc<Transport>,
        timeout: Duration,
    ) -> Self {
        let rest = Rest::new(transport, hub_base(&config.url), timeout);
        JupyterHub {
            config,
            rest,
            user: Mutex::new(None),
            used: AtomicBool::new(false),
            server_url: Mutex::new(None),
            starting: tokio::sync::Mutex::new(()),
        }
    }

    /// The hub's URL, for display.
    pub(crate) fn url(&self) -> &ServerUrl {
        &self.rest.url
    }

    /// The user's name, once the hub said it.
    pub(crate) fn user_name(&self) -> Option<String> {
        self.user
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn server_name(&self) -> &str {
        &self.config.server_name
    }

    /// The user server's URL when it last ran.
    pub(crate) fn server_url(&self) -> Option<ServerUrl> {
        self.server_url
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records that the server runs at `path` and returns its URL.
    fn running_at(&self, path: &str) -> ServerUrl {
        self.used.store(true, Ordering::SeqCst);
        let url = self.rest.url.with_base_path(path);
        *self
            .server_url
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(url.clone());
        url
    }

    fn label(&self) -> String {
        server_label(&self.config.server_name)
    }

    fn hub_error(&self, message: String) -> Error {
        Error::Hub { message }
    }

    async fn token(&self) -> Option<ServerToken> {
        let credential = self.rest.transport.credential.as_ref()?;
        credential.current().await.ok()?.0
    }

    /// `GET hub/api/user`.
    async fn user(&self) -> Result<super::hub::HubUser> {
        const OPERATION: &str = "asking the JupyterHub who the token belongs to";
        let answer = self
            .rest
            .exchange(
                Method::GET,
                "hub/api/user",
                None,
                OPERATION,
                self.rest.timeout,
            )
            .await?;
        match answer.status {
            StatusCode::OK => {}
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                return Err(self.rest.transport.auth_error(
                    &self.rest.url,
                    OPERATION,
                    answer.status.as_u16(),
                ));
            }
            StatusCode::NOT_FOUND => {
                return Err(self.hub_error(format!(
                    "{} does not answer as a JupyterHub (no hub/api/user there); pass the hub's public URL to --jupyterhub",
                    self.rest.url
                )));
            }
            status => {
                return Err(Error::ServerStatus {
                    url: self.rest.url.to_string(),
                    operation: OPERATION,
                    status: status.as_u16(),
                });
            }
        }
        let user = parse_user(&answer.body).map_err(|problem| match problem {
            UserProblem::NotAUser => self.hub_error(
                "the JupyterHub token belongs to a service, not a user; use a user's API token (the hub's Token page makes one)".to_owned(),
            ),
            UserProblem::Unreadable => Error::ServerProtocol {
                url: self.rest.url.to_string(),
                operation: OPERATION,
            },
        })?;
        *self.user.lock().unwrap_or_else(PoisonError::into_inner) = Some(user.name.clone());
        Ok(user)
    }

    /// The state of our server now.
    async fn state(&self) -> Result<(String, ServerState)> {
        let user = self.user().await?;
        let state = super::hub::server_state(&user, &self.config.server_name);
        if state == ServerState::Hidden {
            return Err(self.hub_error(
                "the JupyterHub token may not see the user's servers: make a token with the scopes read:servers, servers and access:servers".to_owned(),
            ));
        }
        Ok((user.name, state))
    }

    /// Whether the server still runs (after a dropped socket or a refused request). An error
    /// means the hub could not say.
    pub(crate) async fn still_running(&self) -> Result<bool> {
        let (_, state) = self.state().await?;
        Ok(matches!(
            state,
            ServerState::Ready { .. } | ServerState::Spawning
        ))
    }

    /// Makes sure the server runs and returns its URL: the running one, or one started now
    /// (following the spawn, reported as start progress). A server the hub stopped after we
    /// used it is started again only with `restart_stopped`.
    pub(crate) async fn ensure_running(&self) -> Result<ServerUrl> {
        let _one_at_a_time = self.starting.lock().await;
        let deadline = Instant::now() + self.config.spawn_timeout;
        loop {
            let (user, state) = self.state().await?;
            match state {
                ServerState::Ready { path } => return Ok(self.running_at(&path)),
                ServerState::Spawning => {
                    progress::report(
                        0.0,
                        format!("JupyterHub is starting your server {}", self.label()),
                    );
                    return self.follow(&user, None, deadline).await;
                }
                ServerState::Stopping => {
                    if Instant::now() > deadline {
                        return Err(self.hub_error(format!(
                            "the JupyterHub is still stopping your server {}; try again in a moment",
                            self.label()
                        )));
                    }
                    tokio::time::sleep(STOP_POLL).await;
                }
                ServerState::Absent => {
                    if self.used.load(Ordering::SeqCst) && !self.config.restart_stopped {
                        return Err(Error::ServerStopped {
                            message: format!(
                                "your JupyterHub server {} is not running any more (the hub stopped or culled it); start it from the hub's home page, or restart jupyter-mcp with --jupyterhub-start to let it start the server again",
                                self.label()
                            ),
                        });
                    }
                    return self.start(&user, deadline).await;
                }
                ServerState::Hidden => unreachable!("state() refuses a hidden server"),
            }
        }
    }

    /// Asks the hub to start the server and follows the spawn to its end.
    async fn start(&self, user: &str, deadline: Instant) -> Result<ServerUrl> {
        const OPERATION: &str = "asking the JupyterHub to start your server";
        progress::report(
            0.0,
            format!("asking JupyterHub to start your server {}", self.label()),
        );
        tracing::info!(hub = %self.rest.url, server = %self.label(), "starting the JupyterHub server");
        let rest = self.rest.clone();
        let path = server_api_path(user, &self.config.server_name);
        // The hub answers the start request only after up to its slow_spawn_timeout (10 s by
        // default): follow the progress meanwhile.
        let post = tokio::spawn(async move {
            let answer = rest
                .exchange(
                    Method::POST,
                    &path,
                    None,
                    OPERATION,
                    rest.timeout.max(Duration::from_secs(60)),
                )
                .await?;
            Ok::<_, Error>(start_answer(answer.status.as_u16(), &answer.body))
        });
        self.follow(user, Some(post), deadline).await
    }

    /// Follows the spawn's progress until the server is ready (its URL), the spawn failed, or
    /// the deadline passed. `post` is the start request, when we made it: its answer can end
    /// the wait too (a failure the stream does not report).
    async fn follow(
        &self,
        user: &str,
        mut post: Option<tokio::task::JoinHandle<Result<StartAnswer>>>,
        deadline: Instant,
    ) -> Result<ServerUrl> {
        const OPERATION: &str = "following the JupyterHub spawn";
        let path = progress_api_path(user, &self.config.server_name);
        let token = self.token().await;
        let mut last_message = String::new();
        let mut failed_start: Option<u16> = None;
        let mut failure_deadline: Option<Instant> = None;
        let mut answered: Option<Result<StartAnswer>> = None;
        loop {
            let answer = match answered.take() {
                Some(answer) => Some(answer),
                None => take_finished(&mut post).await,
            };
            if let Some(answer) = answer {
                match answer? {
                    StartAnswer::Ready | StartAnswer::AlreadyThere => {
                        return self.ready_url(deadline, true).await;
                    }
                    StartAnswer::Pending => {}
                    StartAnswer::Forbidden { message } => {
                        return Err(self.hub_error(format!(
                            "the JupyterHub refused to start your server {}: the token lacks the `servers` scope{}; start it from the hub's home page or use a token with that scope",
                            self.label(),
                            message
                                .map(|message| format!(" (the hub said: \"{}\")", hub_said(&message, token.as_ref())))
                                .unwrap_or_default()
                        )));
                    }
                    StartAnswer::Failed { status } => {
                        failed_start = Some(status);
                        failure_deadline = Some(Instant::now() + FAILURE_GRACE);
                    }
                }
            }
            let give_up = match failure_deadline {
                Some(failure) => failure.min(deadline),
                None => deadline,
            };
            if Instant::now() >= give_up {
                return Err(self.spawn_failure(failed_start, None, &last_message));
            }
            // The stream: 400 while the hub has not registered the spawn yet (or any more).
            let response =
                tokio::time::timeout_at(give_up, self.rest.open_stream(&path, OPERATION)).await;
            let response = match response {
                Err(_) => continue,
                Ok(Err(error)) => return Err(error),
                Ok(Ok(response)) => response,
            };
            match response.status() {
                StatusCode::OK => {}
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                    return Err(self.rest.transport.auth_error(
                        &self.rest.url,
                        OPERATION,
                        response.status().as_u16(),
                    ));
                }
                _ => {
                    // Not starting (yet, or any more): the start answer or the user model says
                    // how it ended.
                    if post.is_none() && failed_start.is_none() {
                        let (_, state) = self.state().await?;
                        match state {
                            ServerState::Ready { path } => return Ok(self.running_at(&path)),
                            ServerState::Spawning => {}
                            _ => {
                                return Err(self.spawn_failure(None, None, &last_message));
                            }
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    continue;
                }
            }
            let mut body = response.into_body();
            let mut events = EventStream::default();
            // Once the start request is answered, the stream has a moment to bring its last
            // events (the hub's ready or failed event and its words); then the outer loop acts
            // on the answer.
            let mut grace: Option<Instant> = None;
            loop {
                let until = grace.map_or(give_up, |grace| grace.min(give_up));
                let frame = tokio::select! {
                    frame = tokio::time::timeout_at(until, body.frame()) => frame,
                    answer = wait_finished(&mut post), if post.is_some() => {
                        answered = Some(answer);
                        grace = Some(Instant::now() + FAILURE_GRACE);
                        continue;
                    }
                };
                let chunk = match frame {
                    Err(_) => break,
                    Ok(None) => break,
                    Ok(Some(Err(_))) => break,
                    Ok(Some(Ok(frame))) => match frame.into_data() {
                        Ok(data) => data,
                        Err(_) => continue,
                    },
                };
                for event in events.push(&chunk) {
                    let message = hub_said(&event.message, token.as_ref());
                    if !message.is_empty() {
                        last_message.clone_from(&message);
                    }
                    if event.failed {
                        return Err(self.spawn_failure(
                            failed_start,
                            Some(&message),
                            &last_message,
                        ));
                    }
                    progress::report(event.progress.unwrap_or(0.0) / 100.0, message);
                    if event.ready {
                        return self.ready_url(deadline, false).await;
                    }
                }
            }
        }
    }

    /// The server's URL once the hub says it is ready; `announce` reports that as the last
    /// progress when the stream did not (the start request's answer came first).
    async fn ready_url(&self, deadline: Instant, announce: bool) -> Result<ServerUrl> {
        loop {
            let (_, state) = self.state().await?;
            match state {
                ServerState::Ready { path } => {
                    tracing::info!(hub = %self.rest.url, server = %self.label(), "the JupyterHub server is ready");
                    if announce {
                        progress::report(
                            1.0,
                            format!("your JupyterHub server {} is ready at {path}", self.label()),
                        );
                    }
                    return Ok(self.running_at(&path));
                }
                ServerState::Spawning if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                _ => return Err(self.spawn_failure(None, None, "")),
            }
        }
    }

    fn spawn_failure(
        &self,
        status: Option<u16>,
        failed_message: Option<&str>,
        last_message: &str,
    ) -> Error {
        let label = self.label();
        let message = match (failed_message, status) {
            (Some(said), _) if !said.is_empty() && said != "Spawn failed:" => format!(
                "JupyterHub could not start your server {label}; the hub said: \"{said}\". Check the hub's log or ask its administrator, then try again"
            ),
            (Some(_), _) | (None, Some(_)) => format!(
                "JupyterHub could not start your server {label} and gave no reason (it may have timed out); check the hub's log or ask its administrator, then try again"
            ),
            (None, None) if !last_message.is_empty() => format!(
                "JupyterHub did not finish starting your server {label} within {} s (its last word: \"{last_message}\"); try again, or start it from the hub's home page",
                self.config.spawn_timeout.as_secs()
            ),
            (None, None) => format!(
                "JupyterHub did not finish starting your server {label} within {} s; try again, or start it from the hub's home page",
                self.config.spawn_timeout.as_secs()
            ),
        };
        tracing::warn!("{message}");
        self.hub_error(message)
    }
}

/// The start request's answer if it has come.
async fn take_finished(
    post: &mut Option<tokio::task::JoinHandle<Result<StartAnswer>>>,
) -> Option<Result<StartAnswer>> {
    if !post.as_ref()?.is_finished() {
        return None;
    }
    let handle = post.take()?;
    Some(
        handle
            .await
            .unwrap_or(Ok(StartAnswer::Failed { status: 0 })),
    )
}

/// Waits for the start request's answer.
async fn wait_finished(
    post: &mut Option<tokio::task::JoinHandle<Result<StartAnswer>>>,
) -> Result<StartAnswer> {
    let Some(handle) = post.as_mut() else {
        return std::future::pending().await;
    };
    // Polled by reference, so that dropping this future (another branch won) keeps the
    // request's answer for later.
    let answer = handle
        .await
        .unwrap_or(Ok(StartAnswer::Failed { status: 0 }));
    *post = None;
    answer
}
