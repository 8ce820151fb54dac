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
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use colab_setup::{CommandKind, Failure, Reply, ServerAlias};
use kernels::Method;
use tokio::time::Instant;

mod api;

pub use api::*;

/// An access token is renewed this long before Google says it expires.
const ACCESS_TOKEN_MARGIN: Duration = Duration::from_secs(120);

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

/// A client of Colab's tunnel API. **Experimental**: see the module's documentation.
pub struct ColabTunnel {
    config: TunnelConfig,
    base: String,
    http: kernels::HttpClient,
    tokens: tokio::sync::Mutex<TokenCache>,
    known: Mutex<BTreeMap<String, Assignment>>,
}

kernels::debug_fields!(ColabTunnel { base });

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
            let invalid = |_| TunnelError::InvalidEndpoint {
                endpoint: path.to_owned(),
            };
            let mut request = kernels::HttpRequest::new(method.clone(), &url)
                .and_then(|request| request.header("accept", "application/json"))
                .and_then(|request| {
                    request.secret_header("authorization", &format!("Bearer {token}"))
                })
                .and_then(|request| request.header(super::CLIENT_AGENT_HEADER, super::CLIENT_AGENT))
                .map_err(invalid)?;
            if let Some((name, value)) = extra {
                request = request.header(name, value).map_err(invalid)?;
            }
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
        let request = kernels::HttpRequest::new(Method::POST, &credentials.token_uri)
            .and_then(|request| request.header("content-type", "application/x-www-form-urlencoded"))
            .and_then(|request| request.header("accept", "application/json"))
            .map_err(|_| TunnelError::Credentials {
                path: path.display().to_string(),
                reason: "its token_uri is not a usable URL".to_owned(),
            })?
            .body(body);
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
