//! **EXPERIMENTAL, off by default.** A client of Colab's tunnel API (`/tun/m/…`) with the
//! user's own Google credentials: it finds, creates, keeps alive and releases Colab runtimes
//! the way Google's VS Code extension and google-colab-cli do. The tunnel API is not a
//! documented public API; everything here follows the public facts in
//! `shared/spec/colab-facts.md` and the Colab stand-in (`tests/colab/standin.py`), and may
//! break whenever Google changes its side. Nothing uses it unless the host is configured to.
//!
//! - Credentials: Google application-default credentials (ADC) of type `authorized_user`, from
//!   `GOOGLE_APPLICATION_CREDENTIALS` or gcloud's default file. An access token comes from
//!   the OAuth refresh-token grant, is cached until shortly before it expires, and is renewed
//!   early when the tunnel answers 401. Every failure to get one says what to run
//!   ([`LOGIN_COMMAND`]).
//! - Assignments are found by a notebook hash derived from the setup's alias
//!   ([`notebook_hash`]), so the same alias finds the same runtime again.
//! - [`ColabTunnel::perform`] answers the colab-setup commands the tunnel route dispatches.
//!
//! Never logged or shown: the credentials file's secrets, access tokens, XSRF tokens, runtime
//! proxy tokens.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use colab_setup::{AssignRefusal, CommandKind, Failure, Reply, ServerAlias};
use http::{Method, Request, header};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use tokio::time::Instant;

use super::XSSI_PREFIX;

/// Where the tunnel API lives.
pub const DEFAULT_TUNNEL_BASE_URL: &str = "https://colab.research.google.com/";
/// Google's OAuth token endpoint, when the credentials file names none.
pub const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// The environment variable that names the credentials file.
pub const CREDENTIALS_ENV: &str = "GOOGLE_APPLICATION_CREDENTIALS";
/// gcloud's application-default credentials file under the home folder.
pub const DEFAULT_CREDENTIALS_FILE: &str = ".config/gcloud/application_default_credentials.json";
/// The OAuth scope the tunnel API wants.
pub const COLAB_SCOPE: &str = "https://www.googleapis.com/auth/colaboratory";
/// What a user runs to get credentials the tunnel accepts (gcloud insists on the
/// cloud-platform scope being among them).
pub const LOGIN_COMMAND: &str = "gcloud auth application-default login --scopes=https://www.googleapis.com/auth/colaboratory,https://www.googleapis.com/auth/userinfo.email,openid,https://www.googleapis.com/auth/cloud-platform";

/// The tunnel's assignment path (GET for an existing one or an XSRF token, POST to create).
const ASSIGN_PATH: &str = "tun/m/assign";
/// The tunnel's release path, followed by the endpoint (GET for an XSRF token, then POST).
const UNASSIGN_PATH: &str = "tun/m/unassign/";
/// The header that carries the XSRF token of the `GET` back on the `POST`.
const XSRF_HEADER: &str = "X-Goog-Colab-Token";
/// The keep-alive's header and its value.
const TUNNEL_HEADER: (&str, &str) = ("X-Colab-Tunnel", "Google");
/// The assignment's query besides the notebook hash: a CPU runtime of the default variant.
const ASSIGN_QUERY: &str = "variant=DEFAULT&shape=STANDARD&authuser=0";
/// The `outcome` values of an assignment answer. Success, and the two quota denials (the
/// requested variant denied, the usage time used up); any other non-success outcome of an
/// answer without a runtime counts as a quota denial too, the one refusal Colab reports there.
const OUTCOME_SUCCESS: i64 = 4;
const OUTCOME_QUOTA_DENIED_REQUESTED_VARIANTS: i64 = 1;
const OUTCOME_QUOTA_EXCEEDED_USAGE_TIME: i64 = 2;
/// An access token is renewed this long before Google says it expires.
const ACCESS_TOKEN_MARGIN: Duration = Duration::from_secs(120);
/// What is hashed before the alias: a domain of our own, so that our notebook hashes never
/// collide with those of Colab's other clients.
const NOTEBOOK_HASH_DOMAIN: &str = "jupyter-mcp/colab-tunnel/alias/v1:";

/// The notebook hash (`nbh`) of an alias: the unpadded URL-safe base64 of
/// SHA-256(`jupyter-mcp/colab-tunnel/alias/v1:` + alias), 43 characters. Deterministic, so
/// a lookup of the alias finds the runtime its creation assigned; Colab keys at most one
/// assignment per notebook hash.
pub fn notebook_hash(alias: &ServerAlias) -> String {
    let digest = Sha256::digest(format!("{NOTEBOOK_HASH_DOMAIN}{}", alias.as_str()).as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
}

/// The accelerator of a new runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accelerator {
    /// A CPU runtime (`NONE`).
    Cpu,
    /// An accelerator by Colab's name for it (`T4`, `V5E1`, …).
    Named(String),
}

impl Accelerator {
    fn wire(&self) -> &str {
        match self {
            Accelerator::Cpu => "NONE",
            Accelerator::Named(name) => name.as_str(),
        }
    }
}

/// How to reach the tunnel API.
#[derive(Debug, Clone)]
pub struct TunnelConfig {
    /// The tunnel API's base URL ([`DEFAULT_TUNNEL_BASE_URL`]).
    pub base_url: String,
    /// The application-default credentials file; `None` looks where gcloud puts it
    /// ([`default_credentials_file`]).
    pub credentials_file: Option<PathBuf>,
    /// Which certificate authorities to trust, for the tunnel and the token endpoint.
    pub tls: kernels::TlsTrust,
    /// How long one request may take.
    pub request_timeout: Duration,
    /// How long a keep-alive may take; one that was sent and timed out counts as done.
    pub keep_alive_timeout: Duration,
}

impl Default for TunnelConfig {
    fn default() -> Self {
        TunnelConfig {
            base_url: DEFAULT_TUNNEL_BASE_URL.to_owned(),
            credentials_file: None,
            tls: kernels::TlsTrust::default(),
            request_timeout: Duration::from_secs(60),
            keep_alive_timeout: Duration::from_secs(10),
        }
    }
}

/// The credentials file to use: `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's default file.
pub fn default_credentials_file() -> Option<PathBuf> {
    match std::env::var_os(CREDENTIALS_ENV) {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => dirs::home_dir().map(|home| home.join(DEFAULT_CREDENTIALS_FILE)),
    }
}

/// Application-default credentials of type `authorized_user`: what the refresh-token grant
/// needs. Its `Debug` shows no secret.
#[derive(Clone, PartialEq, Eq)]
pub struct AdcCredentials {
    client_id: String,
    client_secret: String,
    refresh_token: String,
    /// Where access tokens come from.
    pub token_uri: String,
}

impl fmt::Debug for AdcCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdcCredentials")
            .field("token_uri", &self.token_uri)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct AdcFile {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    client_id: String,
    #[serde(default)]
    client_secret: String,
    #[serde(default)]
    refresh_token: String,
    #[serde(default)]
    token_uri: Option<String>,
}

/// Parses an application-default credentials file's text (`path` only names it in errors).
pub fn parse_adc(text: &str, path: &Path) -> Result<AdcCredentials, TunnelError> {
    let invalid = |reason: String| TunnelError::Credentials {
        path: path.display().to_string(),
        reason,
    };
    let file: AdcFile = serde_json::from_str(text)
        .map_err(|_| invalid("it is not a JSON credentials file".to_owned()))?;
    if file.kind != "authorized_user" {
        return Err(invalid(format!(
            "its type is {:?}, and only `authorized_user` (a user's own sign-in) can use Colab",
            file.kind
        )));
    }
    if file.client_id.is_empty() || file.client_secret.is_empty() || file.refresh_token.is_empty() {
        return Err(invalid(
            "it lacks client_id, client_secret or refresh_token".to_owned(),
        ));
    }
    let token_uri = file
        .token_uri
        .filter(|uri| !uri.is_empty())
        .unwrap_or_else(|| DEFAULT_TOKEN_URI.to_owned());
    if !(token_uri.starts_with("https://") || is_loopback_http(&token_uri)) {
        return Err(invalid("its token_uri is not an https:// URL".to_owned()));
    }
    Ok(AdcCredentials {
        client_id: file.client_id,
        client_secret: file.client_secret,
        refresh_token: file.refresh_token,
        token_uri,
    })
}

fn is_loopback_http(url: &str) -> bool {
    [
        "http://127.0.0.1:",
        "http://127.0.0.1/",
        "http://localhost:",
        "http://[::1]:",
    ]
    .iter()
    .any(|prefix| url.starts_with(prefix))
}

/// The cached access token: renewed [`ACCESS_TOKEN_MARGIN`] before Google says it expires, or
/// at once after a 401.
#[derive(Default)]
struct TokenCache {
    current: Option<(String, Instant)>,
}

impl TokenCache {
    fn fresh(&self, now: Instant) -> Option<&str> {
        match &self.current {
            Some((token, renew_at)) if now < *renew_at => Some(token),
            _ => None,
        }
    }

    fn store(&mut self, token: String, expires_in: Duration, now: Instant) {
        self.current = Some((token, now + expires_in.saturating_sub(ACCESS_TOKEN_MARGIN)));
    }

    fn forget(&mut self) {
        self.current = None;
    }
}

/// A runtime Colab assigned: its endpoint, and its proxy URL and token when the answer had
/// them. Its `Debug` shows no token.
#[derive(Clone, PartialEq, Eq)]
pub struct Assignment {
    /// Colab's endpoint id of the runtime.
    pub endpoint: String,
    /// The runtime's proxy base URL.
    pub url: Option<String>,
    proxy_token: Option<String>,
    /// How long the proxy token lives, as the answer said.
    pub token_expires_in: Option<Duration>,
}

impl fmt::Debug for Assignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Assignment")
            .field("endpoint", &self.endpoint)
            .field("url", &self.url)
            .field("token_expires_in", &self.token_expires_in)
            .finish_non_exhaustive()
    }
}

impl Assignment {
    /// The runtime's proxy token, for [`super::runtime_profile`].
    pub fn proxy_token(&self) -> Option<kernels::ServerToken> {
        self.proxy_token
            .as_deref()
            .and_then(kernels::ServerToken::new)
    }

    fn from_json(value: &Value) -> Option<Assignment> {
        let endpoint = value["endpoint"].as_str().filter(|e| !e.is_empty())?;
        let proxy = &value["runtimeProxyInfo"];
        Some(Assignment {
            endpoint: endpoint.to_owned(),
            url: proxy["url"].as_str().map(str::to_owned),
            proxy_token: proxy["token"].as_str().map(str::to_owned),
            token_expires_in: proxy["tokenExpiresInSeconds"]
                .as_u64()
                .map(Duration::from_secs),
        })
    }
}

/// What a lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupOutcome {
    /// The alias's notebook has this runtime.
    Found(Assignment),
    /// It has none.
    NotAssigned,
}

/// What a creation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateOutcome {
    /// A new runtime.
    Created(Assignment),
    /// The alias's notebook already had this runtime; nothing was created.
    AlreadyAssigned(Assignment),
    /// Colab refused; nothing was created.
    Refused(AssignRefusal),
    /// The `POST` was sent and no usable answer came: a runtime may have been created.
    Unconfirmed,
}

/// What a keep-alive did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepAlive {
    /// Colab answered.
    Confirmed,
    /// It was sent and the answer timed out, which Colab commonly does even when it worked.
    PresumedDone,
}

/// Why a tunnel call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TunnelError {
    /// The credentials file is missing or cannot be used.
    #[error(
        "Google application-default credentials in {path} cannot be used: {reason}; run `{LOGIN_COMMAND}` (or set {CREDENTIALS_ENV} to an authorized_user credentials file)"
    )]
    Credentials {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// Google refused to turn the refresh token into an access token.
    #[error(
        "Google refused the application-default credentials ({reason}); sign in again with `{LOGIN_COMMAND}`"
    )]
    RefreshRefused {
        /// Google's error code (`invalid_grant`, …) or the HTTP status.
        reason: String,
    },
    /// The tunnel refused a fresh access token.
    #[error(
        "Colab refused the Google access token even after renewing it; sign in again with `{LOGIN_COMMAND}` (the colaboratory scope is needed)"
    )]
    Unauthorized,
    /// A service could not be reached; nothing was done.
    #[error("{service} cannot be reached: {reason}")]
    Unreachable {
        /// The tunnel API or the token endpoint.
        service: &'static str,
        /// Why.
        reason: String,
    },
    /// A request that changes something was sent and no usable answer came.
    #[error("{operation} was sent and no usable answer came; it may have taken effect")]
    Unconfirmed {
        /// What was asked.
        operation: &'static str,
    },
    /// An answer this client does not understand.
    #[error("{operation}: the tunnel answered HTTP {status} in a shape this client does not know")]
    Unexpected {
        /// What was asked.
        operation: &'static str,
        /// The status.
        status: u16,
    },
    /// Colab does not know that runtime (any more).
    #[error("Colab has no runtime {endpoint}")]
    NoSuchRuntime {
        /// The endpoint.
        endpoint: String,
    },
    /// Not a Colab endpoint id.
    #[error("{endpoint:?} is not a Colab endpoint id")]
    InvalidEndpoint {
        /// What was given.
        endpoint: String,
    },
    /// The tunnel's base URL would send the Google access token in the clear.
    #[error("the Colab tunnel URL {url} must start with https:// (http:// only on loopback)")]
    BaseUrl {
        /// The URL.
        url: String,
    },
    /// The TLS settings cannot be used.
    #[error("{reason}")]
    Tls {
        /// Why.
        reason: String,
    },
}

impl TunnelError {
    /// How colab-setup sees this failure.
    pub fn failure(&self) -> Failure {
        match self {
            TunnelError::Credentials { .. }
            | TunnelError::RefreshRefused { .. }
            | TunnelError::Unauthorized => Failure::AuthenticationRequired,
            TunnelError::Unconfirmed { .. } => Failure::Unconfirmed,
            TunnelError::InvalidEndpoint { .. } | TunnelError::BaseUrl { .. } => {
                Failure::NotPerformed
            }
            TunnelError::Unreachable { .. }
            | TunnelError::Unexpected { .. }
            | TunnelError::NoSuchRuntime { .. }
            | TunnelError::Tls { .. } => Failure::Unavailable,
        }
    }
}

/// A client of Colab's tunnel API. **Experimental**: see the module's documentation.
pub struct ColabTunnel {
    config: TunnelConfig,
    base: String,
    http: kernels::HttpClient,
    tokens: tokio::sync::Mutex<TokenCache>,
    known: Mutex<BTreeMap<String, Assignment>>,
}

impl fmt::Debug for ColabTunnel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ColabTunnel")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

const TUNNEL: &str = "Colab's tunnel API";
const TOKEN_ENDPOINT: &str = "Google's OAuth token endpoint";

impl ColabTunnel {
    /// A client as `config` says. Reads nothing yet: credentials are read at the first call.
    /// The base URL must be `https://` (plain `http://` only on loopback), since every call
    /// carries the user's Google access token.
    pub fn new(config: TunnelConfig) -> Result<ColabTunnel, TunnelError> {
        if !(config.base_url.starts_with("https://") || is_loopback_http(&config.base_url)) {
            return Err(TunnelError::BaseUrl {
                url: config.base_url.chars().take(200).collect(),
            });
        }
        let http =
            kernels::HttpClient::new(&config.tls, Duration::from_secs(20)).map_err(|error| {
                TunnelError::Tls {
                    reason: error.to_string(),
                }
            })?;
        let mut base = config.base_url.clone();
        if !base.ends_with('/') {
            base.push('/');
        }
        Ok(ColabTunnel {
            config,
            base,
            http,
            tokens: tokio::sync::Mutex::new(TokenCache::default()),
            known: Mutex::new(BTreeMap::new()),
        })
    }

    /// Whether the credentials exist and Google turns them into an access token.
    pub async fn check_credentials(&self) -> Result<(), TunnelError> {
        self.access_token().await.map(|_| ())
    }

    /// The runtime the alias's notebook has, by the tunnel's `GET assign` only (never a
    /// `POST`, so nothing is created).
    pub async fn lookup(&self, alias: &ServerAlias) -> Result<LookupOutcome, TunnelError> {
        let operation = "looking up the assignment";
        let answer = self
            .call_sent(Method::GET, &assign_path(alias, &Accelerator::Cpu), None)
            .await?;
        match parse_assign_get(answer.status, &answer.body) {
            AssignGet::Existing(assignment) => {
                self.remember(&assignment);
                Ok(LookupOutcome::Found(assignment))
            }
            AssignGet::Xsrf(_) => Ok(LookupOutcome::NotAssigned),
            AssignGet::Unexpected(status) => Err(TunnelError::Unexpected { operation, status }),
        }
    }

    /// A runtime for the alias's notebook: the tunnel's `GET assign`, then, when it has none,
    /// the `POST` with the XSRF token the `GET` gave.
    pub async fn create(
        &self,
        alias: &ServerAlias,
        accelerator: &Accelerator,
    ) -> Result<CreateOutcome, TunnelError> {
        let path = assign_path(alias, accelerator);
        let answer = self.call_sent(Method::GET, &path, None).await?;
        let xsrf = match parse_assign_get(answer.status, &answer.body) {
            AssignGet::Existing(assignment) => {
                self.remember(&assignment);
                return Ok(CreateOutcome::AlreadyAssigned(assignment));
            }
            AssignGet::Xsrf(token) => token,
            AssignGet::Unexpected(status) => {
                return Err(TunnelError::Unexpected {
                    operation: "asking for an assignment",
                    status,
                });
            }
        };
        let sent = self
            .call(
                Method::POST,
                &path,
                Some((XSRF_HEADER, xsrf.as_str())),
                self.config.request_timeout,
            )
            .await?;
        let answer = match sent {
            Ok(answer) => answer,
            Err(kernels::HttpFailure::NotSent { reason }) => {
                return Err(TunnelError::Unreachable {
                    service: TUNNEL,
                    reason,
                });
            }
            Err(kernels::HttpFailure::NoAnswer { .. }) => return Ok(CreateOutcome::Unconfirmed),
        };
        let outcome = classify_assign_post(answer.status, &answer.body);
        match &outcome {
            PostOutcome::Created(assignment) => self.remember(assignment),
            PostOutcome::Unexpected(status) => {
                return Err(TunnelError::Unexpected {
                    operation: "creating an assignment",
                    status: *status,
                });
            }
            _ => {}
        }
        Ok(match outcome {
            PostOutcome::Created(assignment) => CreateOutcome::Created(assignment),
            PostOutcome::Refused(refusal) => CreateOutcome::Refused(refusal),
            PostOutcome::Unconfirmed | PostOutcome::Unexpected(_) => CreateOutcome::Unconfirmed,
        })
    }

    /// Releases a runtime: the tunnel's `GET unassign/<endpoint>` for an XSRF token, then the
    /// `POST`. A runtime Colab no longer has counts as released.
    pub async fn release(&self, endpoint: &str) -> Result<(), TunnelError> {
        check_endpoint(endpoint)?;
        let path = format!("{UNASSIGN_PATH}{endpoint}");
        let operation = "releasing the runtime";
        let answer = self.call_sent(Method::GET, &path, None).await?;
        if answer.status == 404 {
            self.forget(endpoint);
            return Ok(());
        }
        let xsrf = match (answer.status, parse_json(&answer.body)) {
            (200, Some(value)) => value["token"].as_str().map(str::to_owned),
            _ => None,
        }
        .ok_or(TunnelError::Unexpected {
            operation,
            status: answer.status,
        })?;
        let answer = match self
            .call(
                Method::POST,
                &path,
                Some((XSRF_HEADER, xsrf.as_str())),
                self.config.request_timeout,
            )
            .await?
        {
            Ok(answer) => answer,
            Err(kernels::HttpFailure::NotSent { reason }) => {
                return Err(TunnelError::Unreachable {
                    service: TUNNEL,
                    reason,
                });
            }
            Err(kernels::HttpFailure::NoAnswer { .. }) => {
                return Err(TunnelError::Unconfirmed { operation });
            }
        };
        match answer.status {
            200 | 204 | 404 => {
                self.forget(endpoint);
                Ok(())
            }
            status if status >= 500 => Err(TunnelError::Unconfirmed { operation }),
            status => Err(TunnelError::Unexpected { operation, status }),
        }
    }

    /// Tells Colab the runtime is in use (`GET <endpoint>/keep-alive/` with
    /// `X-Colab-Tunnel: Google`), so that it is not reclaimed as idle.
    pub async fn keep_alive(&self, endpoint: &str) -> Result<KeepAlive, TunnelError> {
        check_endpoint(endpoint)?;
        let path = format!("tun/m/{endpoint}/keep-alive/");
        match self
            .call(
                Method::GET,
                &path,
                Some(TUNNEL_HEADER),
                self.config.keep_alive_timeout,
            )
            .await?
        {
            Ok(answer) => match answer.status {
                200 | 204 => Ok(KeepAlive::Confirmed),
                404 => Err(TunnelError::NoSuchRuntime {
                    endpoint: endpoint.to_owned(),
                }),
                status => Err(TunnelError::Unexpected {
                    operation: "keeping the runtime alive",
                    status,
                }),
            },
            // Colab's keep-alive commonly times out on read even when it worked.
            Err(kernels::HttpFailure::NoAnswer {
                timed_out: true, ..
            }) => Ok(KeepAlive::PresumedDone),
            Err(failure) => Err(TunnelError::Unreachable {
                service: TUNNEL,
                reason: failure.to_string(),
            }),
        }
    }

    /// The last thing the tunnel said about a runtime this client looked up or created (its
    /// proxy URL and token), until it is released.
    pub fn assignment(&self, endpoint: &str) -> Option<Assignment> {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(endpoint)
            .cloned()
    }

    /// Performs one colab-setup command of the tunnel route and answers it as the command's
    /// documentation asks: `CheckProvider` (credentials exist and refresh), `LookupAssignment`,
    /// `CreateAssignment` (a CPU runtime) and `ReleaseRuntime`. Any other command is not the
    /// tunnel's: `Failed(NotPerformed)`.
    pub async fn perform(&self, command: &CommandKind) -> Reply {
        match command {
            CommandKind::CheckProvider => done_reply(self.check_credentials().await),
            CommandKind::LookupAssignment { alias } => lookup_reply(self.lookup(alias).await),
            CommandKind::CreateAssignment { alias } => {
                create_reply(self.create(alias, &Accelerator::Cpu).await)
            }
            CommandKind::ReleaseRuntime { endpoint } => done_reply(self.release(endpoint).await),
            _ => Reply::Failed(Failure::NotPerformed),
        }
    }

    fn remember(&self, assignment: &Assignment) {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(assignment.endpoint.clone(), assignment.clone());
    }

    fn forget(&self, endpoint: &str) {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(endpoint);
    }

    /// A call whose failure to be answered means nothing was done (a `GET`).
    async fn call_sent(
        &self,
        method: Method,
        path: &str,
        extra: Option<(&str, &str)>,
    ) -> Result<kernels::HttpAnswer, TunnelError> {
        self.call(method, path, extra, self.config.request_timeout)
            .await?
            .map_err(|failure| TunnelError::Unreachable {
                service: TUNNEL,
                reason: failure.to_string(),
            })
    }

    /// One tunnel call with the access token; a 401 renews the token and tries once more (a
    /// refused request did nothing, so repeating it is safe).
    async fn call(
        &self,
        method: Method,
        path: &str,
        extra: Option<(&str, &str)>,
        timeout: Duration,
    ) -> Result<Result<kernels::HttpAnswer, kernels::HttpFailure>, TunnelError> {
        let url = format!("{}{path}", self.base);
        for attempt in 0..2 {
            let token = self.access_token().await?;
            let mut request = Request::builder()
                .method(method.clone())
                .uri(&url)
                .header(header::ACCEPT, "application/json")
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .header(super::CLIENT_AGENT_HEADER, super::CLIENT_AGENT);
            if let Some((name, value)) = extra {
                request = request.header(name, value);
            }
            let request = request
                .body(Bytes::new())
                .map_err(|_| TunnelError::InvalidEndpoint {
                    endpoint: path.to_owned(),
                })?;
            let sent = self.http.send(request, timeout).await;
            if let Ok(answer) = &sent
                && answer.status == 401
            {
                self.tokens.lock().await.forget();
                if attempt == 0 {
                    continue;
                }
                return Err(TunnelError::Unauthorized);
            }
            return Ok(sent);
        }
        Err(TunnelError::Unauthorized)
    }

    /// The cached access token, or a new one from the refresh-token grant.
    async fn access_token(&self) -> Result<String, TunnelError> {
        let mut cache = self.tokens.lock().await;
        if let Some(token) = cache.fresh(Instant::now()) {
            return Ok(token.to_owned());
        }
        let path = match &self.config.credentials_file {
            Some(path) => path.clone(),
            None => default_credentials_file().ok_or_else(|| TunnelError::Credentials {
                path: DEFAULT_CREDENTIALS_FILE.to_owned(),
                reason: "this machine has no home folder".to_owned(),
            })?,
        };
        let text =
            tokio::fs::read_to_string(&path)
                .await
                .map_err(|error| TunnelError::Credentials {
                    path: path.display().to_string(),
                    reason: format!("it cannot be read ({})", error.kind()),
                })?;
        let credentials = parse_adc(&text, &path)?;
        let body = form_encode(&[
            ("grant_type", "refresh_token"),
            ("client_id", &credentials.client_id),
            ("client_secret", &credentials.client_secret),
            ("refresh_token", &credentials.refresh_token),
        ]);
        let request = Request::post(&credentials.token_uri)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json")
            .body(Bytes::from(body))
            .map_err(|_| TunnelError::Credentials {
                path: path.display().to_string(),
                reason: "its token_uri is not a usable URL".to_owned(),
            })?;
        let now = Instant::now();
        let answer = self
            .http
            .send(request, self.config.request_timeout)
            .await
            .map_err(|failure| TunnelError::Unreachable {
                service: TOKEN_ENDPOINT,
                reason: failure.to_string(),
            })?;
        let (token, expires_in) = parse_token_answer(answer.status, &answer.body)?;
        cache.store(token.clone(), expires_in, now);
        Ok(token)
    }
}

/// `assign?nbh=…&…` for the alias.
fn assign_path(alias: &ServerAlias, accelerator: &Accelerator) -> String {
    format!(
        "{ASSIGN_PATH}?nbh={}&accelerator={}&{ASSIGN_QUERY}",
        notebook_hash(alias),
        form_component(accelerator.wire())
    )
}

/// Endpoint ids go into URL paths: letters, digits, `-`, `_` and `.` only.
fn check_endpoint(endpoint: &str) -> Result<(), TunnelError> {
    let valid = !endpoint.is_empty()
        && endpoint.len() <= 200
        && !endpoint.starts_with('.')
        && endpoint
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'));
    if valid {
        Ok(())
    } else {
        Err(TunnelError::InvalidEndpoint {
            endpoint: endpoint.chars().take(80).collect(),
        })
    }
}

/// The JSON of a Colab answer, without the `)]}'` prefix (and its newline) when present.
fn parse_json(body: &[u8]) -> Option<Value> {
    let prefix = XSSI_PREFIX.trim_end_matches('\n').as_bytes();
    let body = match body.strip_prefix(prefix) {
        Some(rest) => rest.strip_prefix(b"\n").unwrap_or(rest),
        None => body,
    };
    serde_json::from_slice(body).ok()
}

/// What the `GET assign` said.
#[derive(Debug, PartialEq, Eq)]
enum AssignGet {
    /// The notebook has this runtime.
    Existing(Assignment),
    /// It has none; this XSRF token goes on the `POST`.
    Xsrf(String),
    /// Neither.
    Unexpected(u16),
}

fn parse_assign_get(status: u16, body: &[u8]) -> AssignGet {
    let Some(value) = (status == 200).then(|| parse_json(body)).flatten() else {
        return AssignGet::Unexpected(status);
    };
    if let Some(assignment) = Assignment::from_json(&value) {
        return AssignGet::Existing(assignment);
    }
    match value["token"].as_str() {
        Some(token) if !token.is_empty() => AssignGet::Xsrf(token.to_owned()),
        _ => AssignGet::Unexpected(status),
    }
}

/// What the `POST assign` said.
#[derive(Debug, PartialEq, Eq)]
enum PostOutcome {
    Created(Assignment),
    Refused(AssignRefusal),
    /// A server error after the request arrived: it may have been created.
    Unconfirmed,
    /// An answer that says nothing was done, in a shape not known here.
    Unexpected(u16),
}

fn classify_assign_post(status: u16, body: &[u8]) -> PostOutcome {
    match status {
        412 => return PostOutcome::Refused(AssignRefusal::TooManyAssignments),
        503 => return PostOutcome::Refused(AssignRefusal::AcceleratorUnavailable),
        200 => {}
        status if status >= 500 => return PostOutcome::Unconfirmed,
        status => return PostOutcome::Unexpected(status),
    }
    let Some(value) = parse_json(body) else {
        // A 200 we cannot read: something may have been assigned.
        return PostOutcome::Unconfirmed;
    };
    let outcome = value["outcome"].as_i64();
    if matches!(
        outcome,
        Some(OUTCOME_QUOTA_DENIED_REQUESTED_VARIANTS | OUTCOME_QUOTA_EXCEEDED_USAGE_TIME)
    ) {
        return PostOutcome::Refused(AssignRefusal::QuotaDenied);
    }
    match Assignment::from_json(&value) {
        Some(assignment) => PostOutcome::Created(assignment),
        None => match outcome {
            Some(outcome) if outcome != OUTCOME_SUCCESS && outcome != 0 => {
                PostOutcome::Refused(AssignRefusal::QuotaDenied)
            }
            _ => PostOutcome::Unconfirmed,
        },
    }
}

/// The access token and its lifetime from the token endpoint's answer.
fn parse_token_answer(status: u16, body: &[u8]) -> Result<(String, Duration), TunnelError> {
    let value: Value = serde_json::from_slice(body).unwrap_or_default();
    if status != 200 {
        let code = value["error"]
            .as_str()
            .filter(|code| code.len() <= 64 && code.bytes().all(|b| b.is_ascii_graphic()))
            .map(str::to_owned)
            .unwrap_or_else(|| format!("HTTP {status}"));
        return Err(match status {
            400 | 401 | 403 => TunnelError::RefreshRefused { reason: code },
            _ => TunnelError::Unreachable {
                service: TOKEN_ENDPOINT,
                reason: code,
            },
        });
    }
    let token = value["access_token"]
        .as_str()
        .filter(|token| !token.is_empty())
        .ok_or_else(|| TunnelError::RefreshRefused {
            reason: "no access_token in the answer".to_owned(),
        })?;
    let expires_in = Duration::from_secs(value["expires_in"].as_u64().unwrap_or(3600));
    Ok((token.to_owned(), expires_in))
}

fn form_component(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

fn form_encode(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(name, value)| format!("{}={}", form_component(name), form_component(value)))
        .collect::<Vec<_>>()
        .join("&")
}

fn done_reply(result: Result<(), TunnelError>) -> Reply {
    match result {
        Ok(()) => Reply::Done,
        Err(error) => Reply::Failed(error.failure()),
    }
}

fn lookup_reply(result: Result<LookupOutcome, TunnelError>) -> Reply {
    match result {
        Ok(LookupOutcome::Found(assignment)) => Reply::AssignmentFound {
            endpoint: assignment.endpoint,
        },
        Ok(LookupOutcome::NotAssigned) => Reply::NoAssignment,
        Err(error) => Reply::Failed(error.failure()),
    }
}

fn create_reply(result: Result<CreateOutcome, TunnelError>) -> Reply {
    match result {
        Ok(CreateOutcome::Created(assignment)) => Reply::AssignmentCreated {
            endpoint: assignment.endpoint,
        },
        Ok(CreateOutcome::AlreadyAssigned(assignment)) => Reply::AssignmentFound {
            endpoint: assignment.endpoint,
        },
        Ok(CreateOutcome::Refused(refusal)) => Reply::AssignmentRefused(refusal),
        Ok(CreateOutcome::Unconfirmed) => Reply::Failed(Failure::Unconfirmed),
        Err(error) => Reply::Failed(error.failure()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alias() -> ServerAlias {
        ServerAlias::parse("m0123abcd").unwrap()
    }

    #[test]
    fn the_prefix_is_stripped_when_present_and_plain_json_still_parses() {
        assert_eq!(parse_json(b")]}'\n{\"a\": 1}").unwrap()["a"], 1);
        assert_eq!(parse_json(b")]}'{\"a\": 2}").unwrap()["a"], 2);
        assert_eq!(parse_json(b"{\"a\": 3}").unwrap()["a"], 3);
        assert_eq!(parse_json(b")]}'\nnot json"), None);
    }

    #[test]
    fn the_assign_get_gives_an_existing_runtime_or_an_xsrf_token() {
        let existing = br#")]}'
{"endpoint": "e1", "runtimeProxyInfo": {"token": "pt", "tokenExpiresInSeconds": 3000, "url": "https://x/"}}"#;
        let AssignGet::Existing(found) = parse_assign_get(200, existing) else {
            panic!("not found");
        };
        assert_eq!(found.endpoint, "e1");
        assert_eq!(found.url.as_deref(), Some("https://x/"));
        assert_eq!(found.token_expires_in, Some(Duration::from_secs(3000)));
        assert!(found.proxy_token().is_some());
        assert!(!format!("{found:?}").contains("pt\""), "{found:?}");
        let fresh = br#")]}'
{"acc": "NONE", "nbh": "h", "token": "xsrf", "variant": "DEFAULT"}"#;
        assert_eq!(
            parse_assign_get(200, fresh),
            AssignGet::Xsrf("xsrf".to_owned())
        );
        assert_eq!(parse_assign_get(500, fresh), AssignGet::Unexpected(500));
        assert_eq!(parse_assign_get(200, b"{}"), AssignGet::Unexpected(200));
    }

    #[test]
    fn refusals_come_from_412_503_and_the_outcome_field() {
        assert_eq!(
            classify_assign_post(412, b"{\"error\": \"too many\"}"),
            PostOutcome::Refused(AssignRefusal::TooManyAssignments)
        );
        assert_eq!(
            classify_assign_post(503, b""),
            PostOutcome::Refused(AssignRefusal::AcceleratorUnavailable)
        );
        for outcome in [1, 2, 5] {
            assert_eq!(
                classify_assign_post(200, format!(")]}}'\n{{\"outcome\": {outcome}}}").as_bytes()),
                PostOutcome::Refused(AssignRefusal::QuotaDenied),
                "{outcome}"
            );
        }
        let created = br#")]}'
{"endpoint": "e2", "outcome": 4, "runtimeProxyInfo": {"token": "t", "url": "https://y/"}}"#;
        assert!(
            matches!(classify_assign_post(200, created), PostOutcome::Created(a) if a.endpoint == "e2")
        );
        assert_eq!(classify_assign_post(502, b""), PostOutcome::Unconfirmed);
        assert_eq!(
            classify_assign_post(200, b"garbage"),
            PostOutcome::Unconfirmed
        );
        assert_eq!(
            classify_assign_post(400, b"{}"),
            PostOutcome::Unexpected(400)
        );
    }

    #[test]
    fn outcomes_become_the_replies_colab_setup_expects() {
        let assignment = Assignment {
            endpoint: "e".to_owned(),
            url: None,
            proxy_token: None,
            token_expires_in: None,
        };
        assert_eq!(
            create_reply(Ok(CreateOutcome::Created(assignment.clone()))),
            Reply::AssignmentCreated {
                endpoint: "e".to_owned()
            }
        );
        assert_eq!(
            create_reply(Ok(CreateOutcome::AlreadyAssigned(assignment.clone()))),
            Reply::AssignmentFound {
                endpoint: "e".to_owned()
            }
        );
        assert_eq!(
            create_reply(Ok(CreateOutcome::Refused(AssignRefusal::QuotaDenied))),
            Reply::AssignmentRefused(AssignRefusal::QuotaDenied)
        );
        assert_eq!(
            create_reply(Ok(CreateOutcome::Unconfirmed)),
            Reply::Failed(Failure::Unconfirmed)
        );
        assert_eq!(
            lookup_reply(Ok(LookupOutcome::NotAssigned)),
            Reply::NoAssignment
        );
        assert_eq!(
            lookup_reply(Err(TunnelError::Unauthorized)),
            Reply::Failed(Failure::AuthenticationRequired)
        );
        assert_eq!(
            done_reply(Err(TunnelError::RefreshRefused {
                reason: "invalid_grant".to_owned()
            })),
            Reply::Failed(Failure::AuthenticationRequired)
        );
        assert_eq!(
            done_reply(Err(TunnelError::Unconfirmed {
                operation: "releasing the runtime"
            })),
            Reply::Failed(Failure::Unconfirmed)
        );
    }

    #[test]
    fn adc_files_are_parsed_strictly_and_failures_say_what_to_run() {
        let path = Path::new("/adc.json");
        let parsed = parse_adc(
            r#"{"type": "authorized_user", "client_id": "id", "client_secret": "s",
                "refresh_token": "r", "quota_project_id": "q"}"#,
            path,
        )
        .unwrap();
        assert_eq!(parsed.token_uri, DEFAULT_TOKEN_URI);
        assert!(!format!("{parsed:?}").contains("\"r\""));
        let custom = parse_adc(
            r#"{"type": "authorized_user", "client_id": "id", "client_secret": "s",
                "refresh_token": "r", "token_uri": "https://127.0.0.1:9/standin/oauth/token"}"#,
            path,
        )
        .unwrap();
        assert_eq!(custom.token_uri, "https://127.0.0.1:9/standin/oauth/token");
        for bad in [
            "not json",
            r#"{"type": "service_account", "client_id": "id"}"#,
            r#"{"type": "authorized_user", "client_id": "id", "client_secret": "s"}"#,
            r#"{"type": "authorized_user", "client_id": "id", "client_secret": "s",
                "refresh_token": "r", "token_uri": "http://evil.example/token"}"#,
        ] {
            let error = parse_adc(bad, path).unwrap_err();
            assert_eq!(error.failure(), Failure::AuthenticationRequired);
            let message = error.to_string();
            assert!(
                message.contains("gcloud auth application-default login --scopes=https://www.googleapis.com/auth/colaboratory,"),
                "{message}"
            );
        }
    }

    #[test]
    fn token_answers_are_read_and_refusals_need_a_new_sign_in() {
        let (token, expires) =
            parse_token_answer(200, br#"{"access_token": "a", "expires_in": 3599}"#).unwrap();
        assert_eq!((token.as_str(), expires), ("a", Duration::from_secs(3599)));
        let refused = parse_token_answer(
            400,
            br#"{"error": "invalid_grant", "error_description": "x"}"#,
        )
        .unwrap_err();
        assert_eq!(
            refused,
            TunnelError::RefreshRefused {
                reason: "invalid_grant".to_owned()
            }
        );
        assert!(matches!(
            parse_token_answer(502, b"").unwrap_err(),
            TunnelError::Unreachable { .. }
        ));
    }

    #[test]
    fn the_access_token_is_cached_until_shortly_before_it_expires() {
        let start = Instant::now();
        let mut cache = TokenCache::default();
        assert_eq!(cache.fresh(start), None);
        cache.store("a".to_owned(), Duration::from_secs(3600), start);
        assert_eq!(cache.fresh(start + Duration::from_secs(3000)), Some("a"));
        assert_eq!(
            cache.fresh(start + Duration::from_secs(3600) - ACCESS_TOKEN_MARGIN),
            None
        );
        cache.forget();
        assert_eq!(cache.fresh(start), None);
        // A lifetime shorter than the margin is never served from the cache.
        cache.store("b".to_owned(), Duration::from_secs(30), start);
        assert_eq!(cache.fresh(start), None);
    }

    #[test]
    fn the_notebook_hash_is_deterministic_per_alias_and_url_safe() {
        let hash = notebook_hash(&alias());
        assert_eq!(hash, notebook_hash(&alias()));
        assert_eq!(hash.len(), 43);
        assert!(
            hash.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_ne!(
            hash,
            notebook_hash(&ServerAlias::parse("m0123abce").unwrap())
        );
        assert!(assign_path(&alias(), &Accelerator::Cpu).contains("accelerator=NONE"));
    }

    #[test]
    fn the_access_token_never_goes_to_a_plain_http_tunnel_off_loopback() {
        let config = |base_url: &str| TunnelConfig {
            base_url: base_url.to_owned(),
            ..TunnelConfig::default()
        };
        assert!(matches!(
            ColabTunnel::new(config("http://colab.example/")),
            Err(TunnelError::BaseUrl { .. })
        ));
        assert!(ColabTunnel::new(config("http://127.0.0.1:9/")).is_ok());
        assert!(ColabTunnel::new(TunnelConfig::default()).is_ok());
    }

    #[test]
    fn endpoints_that_could_leave_the_path_are_refused() {
        assert!(check_endpoint("standin-0a1b2c").is_ok());
        for bad in ["", "../x", "a/b", "a?b", ".."] {
            assert!(check_endpoint(bad).is_err(), "{bad}");
        }
    }
}
