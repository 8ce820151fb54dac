//! Connection profiles: how to reach a kernel server and how its credential travels.
//!
//! A [`ConnectionProfile`] says where the server is (its base URL), how the credential is
//! placed on each request (an `Authorization` header in Jupyter's `token` scheme or as a
//! bearer, a header of its own, a query parameter of the kernel WebSocket only), which fixed
//! headers go along (a client-agent name), whether JSON answers carry an anti-XSSI prefix to
//! strip, which certificate authorities are trusted, and where a fresh credential comes from
//! when the server refuses the current one ([`CredentialSource`]: a value, a file re-read when
//! it changes, an environment variable, or a refresh callback).
//!
//! Jupyter Server and Kernel Gateway are two profiles ([`ConnectionProfile::jupyter_server`],
//! [`ConnectionProfile::kernel_gateway`]); a JupyterHub user's server is the first with the hub
//! token; a runtime behind another proxy (Colab's: its own token header, the same token as a
//! WebSocket query parameter, a client-agent header, `)]}'` before JSON) is a profile built
//! field by field, with nothing else to add here.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use futures::future::BoxFuture;

use super::server::{ServerToken, ServerUrl};
use crate::error::{Error, Result};

/// Where the credential goes on each request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialPlacement {
    /// `Authorization: token <credential>` (Jupyter Server, Kernel Gateway, JupyterHub).
    AuthorizationToken,
    /// `Authorization: Bearer <credential>`.
    AuthorizationBearer,
    /// `<name>: <credential>`, on REST calls and the WebSocket handshake.
    Header(String),
    /// `?<name>=<credential>` on the kernel WebSocket's URL only (for proxies that cannot read
    /// headers on WebSockets). The URL with it is never logged or shown.
    WebSocketQuery(String),
}

/// Produces a fresh credential on demand.
pub trait RefreshCredential: Send + Sync {
    /// A credential to use from now on: called before the first request and again when the
    /// server refused the current one.
    fn refresh(&self) -> BoxFuture<'_, Result<ServerToken>>;
}

/// Answers a request a kernel publishes on IOPub and then waits for on stdin, outside the
/// Jupyter protocol (a frontend's own prompts: a kernel that blocks until the frontend replies).
/// A client that cannot do what is asked should still answer, with an error, so that the
/// kernel does not wait until its own timeout.
pub trait AnswerKernelRequest: Send + Sync {
    /// The answer to this IOPub message (its type, content and metadata), or `None` to leave
    /// the message alone.
    fn answer(
        &self,
        msg_type: &str,
        content: &serde_json::Value,
        metadata: &serde_json::Value,
    ) -> Option<KernelRequestAnswer>;
}

/// How a kernel's frontend request was answered.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelRequestAnswer {
    /// The `value` of the `input_reply` sent on stdin.
    pub value: serde_json::Value,
    /// When the answer declined what the kernel asked: a short code and what the user must do
    /// instead, delivered to the request's events as [`crate::ExecuteEvent::ActionRequired`].
    pub action_required: Option<(String, String)>,
}

/// Where the credential comes from.
#[derive(Clone)]
pub enum CredentialSource {
    /// A fixed value.
    Static(ServerToken),
    /// The contents of a file (trimmed), read again whenever the file changes and after the
    /// server refused the current value.
    File(PathBuf),
    /// An environment variable, read again after the server refused the current value.
    Environment(String),
    /// A callback that fetches a fresh one.
    Refresh(Arc<dyn RefreshCredential>),
}

impl fmt::Debug for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialSource::Static(_) => f.write_str("Static(<redacted>)"),
            CredentialSource::File(path) => f.debug_tuple("File").field(path).finish(),
            CredentialSource::Environment(name) => {
                f.debug_tuple("Environment").field(name).finish()
            }
            CredentialSource::Refresh(_) => f.write_str("Refresh(..)"),
        }
    }
}

/// Which certificate authorities a TLS connection trusts. The server's host name is always
/// verified.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsTrust {
    /// PEM files of certificate authorities trusted besides the platform's store (a private
    /// CA: `--kernel-server-ca`).
    pub extra_roots: Vec<PathBuf>,
}

/// How to reach one kernel server.
#[derive(Clone)]
pub struct ConnectionProfile {
    /// Where the server's API lives (`https://host/base/`).
    pub base_url: ServerUrl,
    /// Where the credential comes from; `None` for a server without one.
    pub credential: Option<CredentialSource>,
    /// Where the credential goes (several places are allowed: a header and a WebSocket query).
    pub placements: Vec<CredentialPlacement>,
    /// Fixed, non-secret headers sent on every request (e.g. a client-agent name).
    pub headers: Vec<(String, String)>,
    /// A prefix some servers put before JSON answers (`)]}'\n`), removed before parsing.
    pub strip_prefix: Option<String>,
    /// Plain `http://` to a host other than loopback. Off by default: the credential and the
    /// code would cross the network readable by anyone on the way.
    pub allow_insecure_http: bool,
    /// The certificate authorities trusted for `https://`.
    pub tls: TlsTrust,
    /// What to check when the server refuses the credential, for error messages
    /// (e.g. "check --kernel-server-token-file or JUPYTER_MCP_KERNEL_SERVER_TOKEN").
    pub credential_hint: String,
    /// Answers the kernel's out-of-protocol IOPub requests, when the server's frontend has
    /// such a protocol; `None` leaves them unanswered.
    pub kernel_requests: Option<Arc<dyn AnswerKernelRequest>>,
}

impl fmt::Debug for ConnectionProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionProfile")
            .field("base_url", &self.base_url)
            .field("credential", &self.credential)
            .field("placements", &self.placements)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .field("strip_prefix", &self.strip_prefix)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

const SERVER_HINT: &str = "check --kernel-server-token-file or JUPYTER_MCP_KERNEL_SERVER_TOKEN";

impl ConnectionProfile {
    /// A Jupyter Server (or a JupyterHub user's server): the credential as `Authorization:
    /// token …` on REST calls and the WebSocket.
    pub fn jupyter_server(base_url: ServerUrl, credential: Option<CredentialSource>) -> Self {
        ConnectionProfile {
            base_url,
            credential,
            placements: vec![CredentialPlacement::AuthorizationToken],
            headers: Vec::new(),
            strip_prefix: None,
            allow_insecure_http: false,
            tls: TlsTrust::default(),
            credential_hint: SERVER_HINT.to_owned(),
            kernel_requests: None,
        }
    }

    /// A Kernel Gateway or Enterprise Gateway (`KG_AUTH_TOKEN`): the same placement, which
    /// the gateways accept.
    pub fn kernel_gateway(base_url: ServerUrl, credential: Option<CredentialSource>) -> Self {
        ConnectionProfile::jupyter_server(base_url, credential)
    }

    /// Refuses plain `http://` to anything but loopback unless the profile allows it.
    pub fn check_transport(&self) -> Result<()> {
        if self.base_url.is_https() || self.base_url.is_loopback() || self.allow_insecure_http {
            return Ok(());
        }
        Err(Error::ServerUrl {
            url: self.base_url.to_string(),
            reason: "plain http:// is only used on loopback (127.0.0.1, ::1, localhost): use the server's https:// address, or pass --allow-insecure-http if the network on the way is yours"
                .to_owned(),
        })
    }
}

/// The credential in use, and how to renew it.
pub(crate) struct Credential {
    source: CredentialSource,
    state: Mutex<CredentialState>,
    /// Serialises renewals, so concurrent refusals renew once.
    renewing: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct CredentialState {
    token: Option<ServerToken>,
    /// The file's modification time and length when it was last read.
    stamp: Option<(Option<SystemTime>, u64)>,
    /// Bumped on every change of `token`.
    generation: u64,
    loaded: bool,
}

crate::debug_fields!(Credential { source });

/// A credential and the generation it belongs to.
pub(crate) type Current = (Option<ServerToken>, u64);

impl Credential {
    pub(crate) fn new(source: CredentialSource) -> Arc<Credential> {
        Arc::new(Credential {
            source,
            state: Mutex::new(CredentialState::default()),
            renewing: tokio::sync::Mutex::new(()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CredentialState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The credential to send now. A file source is looked at (its modification time and
    /// length) on every call and read again when it changed.
    pub(crate) async fn current(&self) -> Result<Current> {
        match &self.source {
            CredentialSource::Static(token) => Ok((Some(token.clone()), 0)),
            CredentialSource::File(path) => {
                let stamp = file_stamp(path);
                {
                    let state = self.lock();
                    if state.loaded && stamp.is_some() && state.stamp == stamp {
                        return Ok((state.token.clone(), state.generation));
                    }
                }
                let token = read_file(path)?;
                Ok(self.store(token, stamp))
            }
            CredentialSource::Environment(name) => {
                {
                    let state = self.lock();
                    if state.loaded {
                        return Ok((state.token.clone(), state.generation));
                    }
                }
                let token = std::env::var(name)
                    .ok()
                    .and_then(|value| ServerToken::new(&value));
                Ok(self.store(token, None))
            }
            CredentialSource::Refresh(refresher) => {
                {
                    let state = self.lock();
                    if state.loaded {
                        return Ok((state.token.clone(), state.generation));
                    }
                }
                let _renewing = self.renewing.lock().await;
                if self.lock().loaded {
                    let state = self.lock();
                    return Ok((state.token.clone(), state.generation));
                }
                let token = refresher.refresh().await?;
                Ok(self.store(Some(token), None))
            }
        }
    }

    fn store(
        &self,
        token: Option<ServerToken>,
        stamp: Option<(Option<SystemTime>, u64)>,
    ) -> Current {
        let mut state = self.lock();
        if !state.loaded || state.token != token {
            state.generation += 1;
        }
        state.token = token;
        state.stamp = stamp;
        state.loaded = true;
        (state.token.clone(), state.generation)
    }

    /// After the server refused the credential of generation `refused`: gets a fresh one.
    /// `true` when the credential to send now differs from the refused one (worth one retry).
    pub(crate) async fn renew(&self, refused: u64) -> Result<bool> {
        let _renewing = self.renewing.lock().await;
        if self.lock().generation != refused {
            // Someone renewed it meanwhile.
            return Ok(true);
        }
        let fresh = match &self.source {
            CredentialSource::Static(_) => return Ok(false),
            CredentialSource::File(path) => {
                let stamp = file_stamp(path);
                let token = read_file(path)?;
                self.store(token, stamp)
            }
            CredentialSource::Environment(name) => self.store(
                std::env::var(name)
                    .ok()
                    .and_then(|value| ServerToken::new(&value)),
                None,
            ),
            CredentialSource::Refresh(refresher) => {
                let token = refresher.refresh().await?;
                self.store(Some(token), None)
            }
        };
        if fresh.1 != refused {
            tracing::info!("the kernel server refused the credential; using a fresh one");
        }
        Ok(fresh.1 != refused)
    }
}

fn file_stamp(path: &std::path::Path) -> Option<(Option<SystemTime>, u64)> {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.modified().ok(), metadata.len()))
}

fn read_file(path: &std::path::Path) -> Result<Option<ServerToken>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        context: format!("cannot read the token file {}", path.display()),
        source,
    })?;
    Ok(ServerToken::new(&text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn a_token_file_is_read_again_when_it_changes_and_after_a_refusal() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("token");
        std::fs::write(&path, "first\n").unwrap();
        let credential = Credential::new(CredentialSource::File(path.clone()));
        let (token, generation) = credential.current().await.unwrap();
        assert_eq!(token.unwrap().expose(), "first");
        // A refusal with the file unchanged: nothing new to try.
        assert!(!credential.renew(generation).await.unwrap());
        // Another length changes the stamp, whatever the clock's resolution.
        std::fs::write(&path, "second-token").unwrap();
        let (token, changed) = credential.current().await.unwrap();
        assert_eq!(token.unwrap().expose(), "second-token");
        assert!(changed > generation);
        // A renewal after a change someone else made counts as fresh.
        assert!(credential.renew(generation).await.unwrap());
    }

    struct Counter(AtomicU32);

    impl RefreshCredential for Counter {
        fn refresh(&self) -> BoxFuture<'_, Result<ServerToken>> {
            Box::pin(async move {
                let n = self.0.fetch_add(1, Ordering::SeqCst);
                Ok(ServerToken::new(&format!("token-{n}")).unwrap())
            })
        }
    }

    #[tokio::test]
    async fn a_refresh_callback_is_asked_once_per_refusal() {
        let counter = Arc::new(Counter(AtomicU32::new(0)));
        let credential = Credential::new(CredentialSource::Refresh(counter.clone()));
        let (token, generation) = credential.current().await.unwrap();
        assert_eq!(token.unwrap().expose(), "token-0");
        let (again, same) = credential.current().await.unwrap();
        assert_eq!(again.unwrap().expose(), "token-0");
        assert_eq!(same, generation);
        // Two refusals of the same credential renew it once.
        assert!(credential.renew(generation).await.unwrap());
        assert!(credential.renew(generation).await.unwrap());
        assert_eq!(counter.0.load(Ordering::SeqCst), 2);
        assert_eq!(
            credential.current().await.unwrap().0.unwrap().expose(),
            "token-1"
        );
    }

    #[test]
    fn plain_http_is_for_loopback_unless_allowed() {
        let profile =
            |url: &str| ConnectionProfile::jupyter_server(ServerUrl::parse(url).unwrap(), None);
        assert!(profile("http://127.0.0.1:8888/").check_transport().is_ok());
        assert!(profile("http://localhost:8888/").check_transport().is_ok());
        assert!(profile("http://[::1]:8888/").check_transport().is_ok());
        assert!(
            profile("https://hub.example.org/")
                .check_transport()
                .is_ok()
        );
        let remote = profile("http://hub.example.org/");
        let refused = remote.check_transport().unwrap_err().to_string();
        assert!(refused.contains("--allow-insecure-http"), "{refused}");
        let allowed = ConnectionProfile {
            allow_insecure_http: true,
            ..remote
        };
        assert!(allowed.check_transport().is_ok());
    }

    #[test]
    fn debug_shows_no_secret() {
        let profile = ConnectionProfile {
            headers: vec![("X-Client-Agent".to_owned(), "agent-secret".to_owned())],
            ..ConnectionProfile::jupyter_server(
                ServerUrl::parse("https://h/").unwrap(),
                Some(CredentialSource::Static(
                    ServerToken::new("s3cret").unwrap(),
                )),
            )
        };
        let shown = format!("{profile:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("agent-secret"),
            "{shown}"
        );
    }
}
