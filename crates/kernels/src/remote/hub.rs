//! JupyterHub's REST API as data and decisions, without I/O: the user model of
//! `GET /hub/api/user`, what state the user's server is in, what the answer to a start request
//! means, the progress event stream, which failures of a server request may mean the hub
//! stopped the server, and the hub's messages made fit to show. `hub_client` does the HTTP.
//!
//! Verified against JupyterHub 6.1.1 with configurable-http-proxy 5.3.0: server `url`s are
//! absolute paths on the hub's public origin (`/user/alice/`, `/user/alice/work/`), the
//! default server's key is `""`, `servers` lists only running or pending servers and is absent
//! when the token lacks `read:servers`, and a token of a service answers `"kind": "service"`.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::path::encode_segment;
use super::server::{ServerToken, ServerUrl};

/// `GET /hub/api/user`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct HubUser {
    #[serde(default)]
    pub kind: Option<String>,
    pub name: String,
    /// Absent when the token may not read servers.
    #[serde(default)]
    pub servers: Option<BTreeMap<String, HubServer>>,
}

/// One entry of the user's `servers`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct HubServer {
    #[serde(default)]
    pub ready: bool,
    /// `"spawn"`, `"stop"` or null.
    #[serde(default)]
    pub pending: Option<String>,
    #[serde(default)]
    pub stopped: bool,
    /// An absolute path on the hub's origin, e.g. `/user/alice/`.
    #[serde(default)]
    pub url: Option<String>,
}

/// Why a user model cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UserProblem {
    /// Not JSON of a user.
    Unreadable,
    /// The token is a service's (or something else's), not a user's.
    NotAUser,
}

/// Reads `GET /hub/api/user`.
pub(crate) fn parse_user(body: &[u8]) -> Result<HubUser, UserProblem> {
    let user: HubUser = serde_json::from_slice(body).map_err(|_| UserProblem::Unreadable)?;
    match user.kind.as_deref() {
        None | Some("user") => Ok(user),
        Some(_) => Err(UserProblem::NotAUser),
    }
}

/// The state of one of the user's servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ServerState {
    /// Running and answering, at this absolute path.
    Ready { path: String },
    /// Being started.
    Spawning,
    /// Being stopped.
    Stopping,
    /// Not running.
    Absent,
    /// The token may not see servers (no `read:servers`).
    Hidden,
}

/// The state of the user's server `name` (`""`: the default server).
pub(crate) fn server_state(user: &HubUser, name: &str) -> ServerState {
    let Some(servers) = &user.servers else {
        return ServerState::Hidden;
    };
    let Some(server) = servers.get(name) else {
        return ServerState::Absent;
    };
    match server.pending.as_deref() {
        Some("spawn") => return ServerState::Spawning,
        Some("stop") => return ServerState::Stopping,
        _ => {}
    }
    match &server.url {
        Some(path) if server.ready && !server.stopped && is_hub_path(path) => {
            ServerState::Ready { path: path.clone() }
        }
        // Stopped, not ready, or ready without a path we can connect to.
        _ => ServerState::Absent,
    }
}

/// A path the hub may send us to: absolute, without a scheme, host, query or climbing.
fn is_hub_path(path: &str) -> bool {
    path.starts_with('/')
        && !path.starts_with("//")
        && !path.contains(['?', '#', '\\'])
        && !path.split('/').any(|part| part == "..")
}

/// What the answer to `POST …/server` means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StartAnswer {
    /// 201: started and ready.
    Ready,
    /// 202: still starting; follow the progress.
    Pending,
    /// 400 "is already running" (or pending): look again.
    AlreadyThere,
    /// 403: the token may not start servers.
    Forbidden { message: Option<String> },
    /// 500 (the spawn failed within the hub's wait) or another status.
    Failed { status: u16 },
}

/// Reads the answer to a start request.
pub(crate) fn start_answer(status: u16, body: &[u8]) -> StartAnswer {
    let message = || {
        serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|value| value.get("message")?.as_str().map(str::to_owned))
    };
    match status {
        201 | 200 => StartAnswer::Ready,
        202 => StartAnswer::Pending,
        400 => StartAnswer::AlreadyThere,
        401 | 403 => StartAnswer::Forbidden { message: message() },
        status => StartAnswer::Failed { status },
    }
}

/// One event of a spawn's progress stream.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProgressEvent {
    /// 0 to 100, when given.
    pub progress: Option<f64>,
    pub message: String,
    pub ready: bool,
    pub failed: bool,
    /// The server's path, on the ready event.
    pub url: Option<String>,
}

/// Splits a `text/event-stream` body into progress events: `data: <json>` lines, events
/// ended by a blank line, keepalives (blank lines alone) and other fields ignored.
#[derive(Debug, Default)]
pub(crate) struct EventStream {
    pending: Vec<u8>,
    data: String,
}

/// The longest line kept; a longer one is dropped, so a misbehaving hub cannot fill memory.
const MAX_LINE: usize = 64 * 1024;

impl EventStream {
    /// Takes the next piece of the body; returns the events it completed.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<ProgressEvent> {
        self.pending.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = self.pending.iter().position(|byte| *byte == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() {
                    let data = std::mem::take(&mut self.data);
                    events.extend(progress_event(&data));
                }
            } else if let Some(value) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(value.strip_prefix(' ').unwrap_or(value));
            }
        }
        if self.pending.len() > MAX_LINE {
            self.pending.clear();
        }
        events
    }
}

fn progress_event(data: &str) -> Option<ProgressEvent> {
    let value: serde_json::Value = serde_json::from_str(data).ok()?;
    let flag = |name: &str| value.get(name).and_then(serde_json::Value::as_bool) == Some(true);
    Some(ProgressEvent {
        progress: value.get("progress").and_then(serde_json::Value::as_f64),
        message: value
            .get("message")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        ready: flag("ready"),
        failed: flag("failed"),
        url: value
            .get("url")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned),
    })
}

/// The hub's own words made fit to show: one line, control characters out, at most 300
/// characters, and the token (should the hub echo it) replaced.
pub(crate) fn hub_said(message: &str, token: Option<&ServerToken>) -> String {
    let mut text = message
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if let Some(token) = token
        && token.appears_in(&text)
    {
        text = text.replace(token.expose(), "<redacted>");
    }
    if text.chars().count() > 300 {
        text = text.chars().take(299).collect::<String>() + "…";
    }
    text
}

/// `hub/api/users/<user>/server` or `hub/api/users/<user>/servers/<name>`.
pub(crate) fn server_api_path(user: &str, name: &str) -> String {
    if name.is_empty() {
        format!("hub/api/users/{}/server", encode_segment(user))
    } else {
        format!(
            "hub/api/users/{}/servers/{}",
            encode_segment(user),
            encode_segment(name)
        )
    }
}

/// The progress stream of that server.
pub(crate) fn progress_api_path(user: &str, name: &str) -> String {
    format!("{}/progress", server_api_path(user, name))
}

/// The hub's base URL from what a user may pass: the public URL with or without `hub/`,
/// `hub/api/` or `hub/home` at the end.
pub(crate) fn hub_base(url: &ServerUrl) -> ServerUrl {
    let path = url.base_path();
    for suffix in ["hub/api/", "hub/home/", "hub/"] {
        if let Some(base) = path.strip_suffix(suffix) {
            return url.with_base_path(base);
        }
    }
    url.clone()
}

/// How a server is named in messages.
pub(crate) fn server_label(name: &str) -> String {
    if name.is_empty() {
        "default".to_owned()
    } else {
        name.to_owned()
    }
}

/// Whether an HTTP status from the user's server (through the hub's proxy) may mean the hub
/// stopped it: the proxy's route is gone (302 to `/hub/…`, 424) or its target is (502, 503),
/// or the hub's own handler refused a request meant for the server (403 without xsrf).
pub(crate) fn status_suggests_stopped(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 403 | 424 | 502 | 503)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(value: serde_json::Value) -> HubUser {
        parse_user(value.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn the_users_server_states_come_from_the_hubs_model() {
        // Captured from JupyterHub 6.1.1 (trimmed).
        let running = user(
            json!({"kind": "user", "name": "alice", "server": "/user/alice/",
            "servers": {"": {"name": "", "ready": true, "pending": null, "stopped": false,
                             "url": "/user/alice/", "progress_url": "/hub/api/users/alice/server/progress"},
                        "work": {"name": "work", "ready": false, "pending": "spawn", "stopped": false,
                                 "url": "/user/alice/work/"}}}),
        );
        assert_eq!(
            server_state(&running, ""),
            ServerState::Ready {
                path: "/user/alice/".into()
            }
        );
        assert_eq!(server_state(&running, "work"), ServerState::Spawning);
        assert_eq!(server_state(&running, "other"), ServerState::Absent);
        let none = user(json!({"kind": "user", "name": "alice", "server": null, "servers": {}}));
        assert_eq!(server_state(&none, ""), ServerState::Absent);
        let stopping =
            user(json!({"name": "alice", "servers": {"": {"ready": false, "pending": "stop"}}}));
        assert_eq!(server_state(&stopping, ""), ServerState::Stopping);
        let stopped = user(
            json!({"name": "alice", "servers": {"": {"ready": false, "stopped": true, "url": "/user/alice/"}}}),
        );
        assert_eq!(server_state(&stopped, ""), ServerState::Absent);
        // A token without read:servers gets no `servers` at all.
        let hidden = user(json!({"kind": "user", "name": "alice", "admin": false}));
        assert_eq!(server_state(&hidden, ""), ServerState::Hidden);
        // A path that would leave the hub's origin is not followed.
        let elsewhere = user(
            json!({"name": "alice", "servers": {"": {"ready": true, "url": "//evil.example/"}}}),
        );
        assert_eq!(server_state(&elsewhere, ""), ServerState::Absent);
        assert_eq!(
            parse_user(br#"{"kind": "service", "name": "test-admin"}"#).unwrap_err(),
            UserProblem::NotAUser
        );
        assert_eq!(parse_user(b"<html>").unwrap_err(), UserProblem::Unreadable);
    }

    #[test]
    fn start_answers_mean_what_the_hub_documents() {
        assert_eq!(start_answer(201, b""), StartAnswer::Ready);
        assert_eq!(start_answer(202, b""), StartAnswer::Pending);
        assert_eq!(
            start_answer(
                400,
                br#"{"status": 400, "message": "alice is already running"}"#
            ),
            StartAnswer::AlreadyThere
        );
        assert_eq!(
            start_answer(
                403,
                br#"{"status": 403, "message": "Action is not authorized with current scopes; requires any of [start:servers]"}"#
            ),
            StartAnswer::Forbidden {
                message: Some(
                    "Action is not authorized with current scopes; requires any of [start:servers]"
                        .into()
                )
            }
        );
        assert_eq!(
            start_answer(
                500,
                br#"{"status": 500, "message": "Internal Server Error"}"#
            ),
            StartAnswer::Failed { status: 500 }
        );
    }

    #[test]
    fn the_progress_stream_yields_events_whatever_the_chunking() {
        // A real capture: keepalives first, three events, CRLF or LF line ends.
        let body = "\n\ndata: {\"progress\": 0, \"message\": \"Server requested\"}\n\n\
                    data: {\"progress\": 50, \"message\": \"Spawning server...\"}\r\n\r\n\
                    \n\
                    data: {\"progress\": 100, \"ready\": true, \"message\": \"Server ready at /user/alice/\", \"url\": \"/user/alice/\"}\n\n";
        for chunk_size in [1, 3, 7, body.len()] {
            let mut stream = EventStream::default();
            let events: Vec<ProgressEvent> = body
                .as_bytes()
                .chunks(chunk_size)
                .flat_map(|chunk| stream.push(chunk))
                .collect();
            assert_eq!(events.len(), 3, "chunks of {chunk_size}");
            assert_eq!(events[0].progress, Some(0.0));
            assert_eq!(events[1].message, "Spawning server...");
            assert!(events[2].ready && !events[2].failed);
            assert_eq!(events[2].url.as_deref(), Some("/user/alice/"));
        }
        let mut stream = EventStream::default();
        let failed = stream.push(
            b"data: {\"progress\": 100, \"failed\": true, \"message\": \"Spawn failed: [Errno 2] No such file\"}\n\nevent: x\ndata: not json\n\n",
        );
        assert_eq!(failed.len(), 1);
        assert!(failed[0].failed);
    }

    #[test]
    fn hub_messages_are_one_short_line_without_the_token() {
        let token = ServerToken::new("alice-secret").unwrap();
        assert_eq!(
            hub_said("Spawn failed:\n\x1b[31m boom alice-secret \t", Some(&token)),
            "Spawn failed: [31m boom <redacted>"
        );
        assert_eq!(hub_said(&"x".repeat(1000), None).chars().count(), 300);
    }

    #[test]
    fn paths_and_bases() {
        assert_eq!(server_api_path("alice", ""), "hub/api/users/alice/server");
        assert_eq!(
            progress_api_path("a@b.org", "my work"),
            "hub/api/users/a%40b.org/servers/my%20work/progress"
        );
        for given in [
            "https://hub.example.org/",
            "https://hub.example.org/hub/",
            "https://hub.example.org/hub/api",
        ] {
            assert_eq!(
                hub_base(&ServerUrl::parse(given).unwrap()).to_string(),
                "https://hub.example.org/"
            );
        }
        assert_eq!(
            hub_base(&ServerUrl::parse("https://h.org/jh/hub/").unwrap()).to_string(),
            "https://h.org/jh/"
        );
        assert_eq!(server_label(""), "default");
        assert!(status_suggests_stopped(424) && status_suggests_stopped(302));
        assert!(!status_suggests_stopped(500) && !status_suggests_stopped(404));
    }
}
