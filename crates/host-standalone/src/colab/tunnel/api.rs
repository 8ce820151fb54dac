//! Colab's tunnel API as data and pure decisions: the endpoints' paths, the credentials file,
//! the answers of the assign, unassign and token endpoints and what they decide, and the
//! replies colab-setup expects. No HTTP here: [`super::ColabTunnel`] sends the requests.

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use colab_setup::{AssignRefusal, Failure, Reply, ServerAlias};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::colab::XSSI_PREFIX;

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
pub(super) const ASSIGN_PATH: &str = "tun/m/assign";
/// The tunnel's release path, followed by the endpoint (GET for an XSRF token, then POST).
pub(super) const UNASSIGN_PATH: &str = "tun/m/unassign/";
/// The header that carries the XSRF token of the `GET` back on the `POST`.
pub(super) const XSRF_HEADER: &str = "X-Goog-Colab-Token";
/// The keep-alive's header and its value.
pub(super) const TUNNEL_HEADER: (&str, &str) = ("X-Colab-Tunnel", "Google");
/// The assignment's query besides the notebook hash: a CPU runtime of the default variant.
pub(super) const ASSIGN_QUERY: &str = "variant=DEFAULT&shape=STANDARD&authuser=0";
/// The services a failure names.
pub(super) const TUNNEL: &str = "Colab's tunnel API";
pub(super) const TOKEN_ENDPOINT: &str = "Google's OAuth token endpoint";

/// The `outcome` values of an assignment answer. Success, and the two quota denials (the
/// requested variant denied, the usage time used up); any other non-success outcome of an
/// answer without a runtime counts as a quota denial too, the one refusal Colab reports there.
pub(super) const OUTCOME_SUCCESS: i64 = 4;
pub(super) const OUTCOME_QUOTA_DENIED_REQUESTED_VARIANTS: i64 = 1;
pub(super) const OUTCOME_QUOTA_EXCEEDED_USAGE_TIME: i64 = 2;

/// What is hashed before the alias: a domain of our own, so that our notebook hashes never
/// collide with those of Colab's other clients.
pub(super) const NOTEBOOK_HASH_DOMAIN: &str = "jupyter-mcp/colab-tunnel/alias/v1:";

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

/// Application-default credentials of type `authorized_user`: what the refresh-token grant
/// needs. Its `Debug` shows no secret.
#[derive(Clone, PartialEq, Eq)]
pub struct AdcCredentials {
    pub(super) client_id: String,
    pub(super) client_secret: String,
    pub(super) refresh_token: String,
    /// Where access tokens come from.
    pub token_uri: String,
}

kernels::debug_fields!(AdcCredentials { token_uri });

#[derive(Deserialize)]
pub(super) struct AdcFile {
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

pub(super) fn is_loopback_http(url: &str) -> bool {
    [
        "http://127.0.0.1:",
        "http://127.0.0.1/",
        "http://localhost:",
        "http://[::1]:",
    ]
    .iter()
    .any(|prefix| url.starts_with(prefix))
}

/// A runtime Colab assigned: its endpoint, and its proxy URL and token when the answer had
/// them. Its `Debug` shows no token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// Colab's endpoint id of the runtime.
    pub endpoint: String,
    /// The runtime's proxy base URL.
    pub url: Option<String>,
    /// A `ServerToken`, whose `Debug` is redacted.
    proxy_token: Option<kernels::ServerToken>,
    /// How long the proxy token lives, as the answer said.
    pub token_expires_in: Option<Duration>,
}

impl Assignment {
    /// The runtime's proxy token, for [`super::runtime_profile`].
    pub fn proxy_token(&self) -> Option<kernels::ServerToken> {
        self.proxy_token.clone()
    }

    fn from_json(value: &Value) -> Option<Assignment> {
        let endpoint = value["endpoint"].as_str().filter(|e| !e.is_empty())?;
        let proxy = &value["runtimeProxyInfo"];
        Some(Assignment {
            endpoint: endpoint.to_owned(),
            url: proxy["url"].as_str().map(str::to_owned),
            proxy_token: proxy["token"].as_str().and_then(kernels::ServerToken::new),
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

/// `assign?nbh=…&…` for the alias.
pub(super) fn assign_path(alias: &ServerAlias, accelerator: &Accelerator) -> String {
    format!(
        "{ASSIGN_PATH}?nbh={}&accelerator={}&{ASSIGN_QUERY}",
        notebook_hash(alias),
        kernels::encode_segment(accelerator.wire())
    )
}

/// Endpoint ids go into URL paths: letters, digits, `-`, `_` and `.` only.
pub(super) fn check_endpoint(endpoint: &str) -> Result<(), TunnelError> {
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
pub(super) fn parse_json(body: &[u8]) -> Option<Value> {
    let prefix = XSSI_PREFIX.trim_end_matches('\n').as_bytes();
    let body = match body.strip_prefix(prefix) {
        Some(rest) => rest.strip_prefix(b"\n").unwrap_or(rest),
        None => body,
    };
    serde_json::from_slice(body).ok()
}

/// What the `GET assign` said.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum AssignGet {
    /// The notebook has this runtime.
    Existing(Assignment),
    /// It has none; this XSRF token goes on the `POST`.
    Xsrf(String),
    /// Neither.
    Unexpected(u16),
}

pub(super) fn parse_assign_get(status: u16, body: &[u8]) -> AssignGet {
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
pub(super) enum PostOutcome {
    Created(Assignment),
    Refused(AssignRefusal),
    /// A server error after the request arrived: it may have been created.
    Unconfirmed,
    /// An answer that says nothing was done, in a shape not known here.
    Unexpected(u16),
}

pub(super) fn classify_assign_post(status: u16, body: &[u8]) -> PostOutcome {
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
pub(super) fn parse_token_answer(
    status: u16,
    body: &[u8],
) -> Result<(String, Duration), TunnelError> {
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

/// `application/x-www-form-urlencoded` pairs, each name and value percent-encoded by the one
/// encoder of `kernels` (RFC 3986's unreserved characters kept).
pub(super) fn form_encode(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(name, value)| {
            format!(
                "{}={}",
                kernels::encode_segment(name),
                kernels::encode_segment(value)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

pub(super) fn done_reply(result: Result<(), TunnelError>) -> Reply {
    match result {
        Ok(()) => Reply::Done,
        Err(error) => Reply::Failed(error.failure()),
    }
}

pub(super) fn lookup_reply(result: Result<LookupOutcome, TunnelError>) -> Reply {
    match result {
        Ok(LookupOutcome::Found(assignment)) => Reply::AssignmentFound {
            endpoint: assignment.endpoint,
        },
        Ok(LookupOutcome::NotAssigned) => Reply::NoAssignment,
        Err(error) => Reply::Failed(error.failure()),
    }
}

pub(super) fn create_reply(result: Result<CreateOutcome, TunnelError>) -> Reply {
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
    fn endpoints_that_could_leave_the_path_are_refused() {
        assert!(check_endpoint("standin-0a1b2c").is_ok());
        for bad in ["", "../x", "a/b", "a?b", ".."] {
            assert!(check_endpoint(bad).is_err(), "{bad}");
        }
    }
}
