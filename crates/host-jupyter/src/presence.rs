//! The agent as a collaborator: who it is (the MCP client's name when it gave one), and its
//! entry in JupyterLab's collaborator list.
//!
//! JupyterLab draws a remote cursor from a notebook room's awareness (`user` and `cursors`,
//! published by each [`crate::room::Room`]), but lists collaborators from the transient room
//! `JupyterLab:globalAwareness` (`user`, `current` — the widget's `notebook:<path>` — and
//! `documents`). This module keeps that second connection and the identity both use.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite;
use yrs::sync::{Awareness, SyncMessage};
use yrs::{ReadTxn as _, Transact as _};

use crate::protocol::{self, RoomMessage};
use crate::rest::Rest;

/// The name shown when the MCP client gave none.
pub const DEFAULT_NAME: &str = "AI agent (jupyter-mcp)";
/// The agent's colour in JupyterLab (cursor, avatar).
const COLOR: &str = "#7b1fa2";
/// Renewal period of the awareness state (peers drop states older than 30 s).
const RENEW: Duration = Duration::from_secs(10);

/// What the agent publishes about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct State {
    name: String,
    /// `notebook:<path>` of the notebook it last worked in.
    current: Option<String>,
    /// The notebooks it has open.
    documents: Vec<String>,
}

/// The agent's identity and its collaborator entry. Cheap to share.
pub struct Presence {
    /// Stable for the life of the server, so JupyterLab keeps one entry for it.
    username: String,
    state: watch::Sender<State>,
    /// The global awareness connection, once started.
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    stop: watch::Sender<bool>,
}

impl std::fmt::Debug for Presence {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Presence")
            .field("username", &self.username)
            .field("state", &*self.state.borrow())
            .finish()
    }
}

/// Up to two initials of a name, for JupyterLab's avatar disc.
fn initials(name: &str) -> String {
    let letters: String = name
        .split(|character: char| !character.is_alphanumeric())
        .filter_map(|word| word.chars().next())
        .take(2)
        .collect::<String>()
        .to_uppercase();
    if letters.is_empty() {
        "AI".to_owned()
    } else {
        letters
    }
}

impl Presence {
    /// A presence under [`DEFAULT_NAME`] until a client names itself.
    pub fn new() -> Arc<Presence> {
        Arc::new(Presence {
            username: format!("jupyter-mcp-{}", uuid::Uuid::new_v4().simple()),
            state: watch::channel(State {
                name: DEFAULT_NAME.to_owned(),
                current: None,
                documents: Vec::new(),
            })
            .0,
            task: Mutex::new(None),
            stop: watch::channel(false).0,
        })
    }

    /// Shows the agent under `client_name` (the MCP client's name), with `(jupyter-mcp)` so a
    /// person sees it is an agent.
    pub fn set_client_name(&self, client_name: &str) {
        let client_name: String = client_name
            .chars()
            .filter(|character| !character.is_control())
            .take(60)
            .collect();
        let client_name = client_name.trim();
        if client_name.is_empty() {
            return;
        }
        let name = format!("{client_name} (jupyter-mcp)");
        self.state.send_if_modified(|state| {
            let changed = state.name != name;
            state.name = name.clone();
            changed
        });
    }

    /// The name shown now.
    pub fn name(&self) -> String {
        self.state.borrow().name.clone()
    }

    /// The `user` object of awareness states, as JupyterLab's identity provider makes it.
    pub fn user(&self) -> Value {
        let name = self.name();
        json!({
            "username": self.username,
            "name": name,
            "display_name": name,
            "initials": initials(&name),
            "color": COLOR,
            "avatar_url": null,
        })
    }

    /// Changes of the identity or of what the agent works on.
    pub(crate) fn subscribe(&self) -> watch::Receiver<State> {
        self.state.subscribe()
    }

    /// The agent worked in the notebook at `path` (it becomes `current`).
    pub(crate) fn touched(&self, path: &str) {
        let current = format!("notebook:{path}");
        self.state.send_if_modified(|state| {
            let mut changed = state.current.as_deref() != Some(current.as_str());
            state.current = Some(current.clone());
            if !state.documents.iter().any(|document| document == path) {
                state.documents.push(path.to_owned());
                changed = true;
            }
            changed
        });
    }

    /// The agent closed the notebook at `path`.
    pub(crate) fn left(&self, path: &str) {
        self.state.send_if_modified(|state| {
            let before = state.documents.len();
            state.documents.retain(|document| document != path);
            if state.current.as_deref() == Some(format!("notebook:{path}").as_str()) {
                state.current = None;
            }
            state.documents.len() != before
        });
    }

    fn global_state(&self) -> Value {
        let state = self.state.borrow().clone();
        let mut value = json!({"user": self.user(), "documents": state.documents});
        if let Some(current) = state.current {
            value["current"] = Value::from(current);
        }
        value
    }

    /// Starts the collaborator-list connection (once).
    pub(crate) fn start(self: &Arc<Self>, rest: Rest) {
        let mut task = self
            .task
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if task.is_none() {
            *task = Some(tokio::spawn(Arc::clone(self).run(rest)));
        }
    }

    /// Withdraws the agent from the collaborator list.
    pub(crate) async fn stop(&self) {
        self.stop.send_replace(true);
        let task = self
            .task
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .take();
        if let Some(task) = task {
            let _ = tokio::time::timeout(Duration::from_secs(3), task).await;
        }
    }

    async fn run(self: Arc<Self>, rest: Rest) {
        let mut stop = self.stop.subscribe();
        let mut backoff = Duration::from_millis(200);
        loop {
            if *stop.borrow() {
                return;
            }
            if let Err(reason) = self.serve(&rest, &mut stop).await {
                tracing::debug!(%reason, "the collaborator-list room disconnected");
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = crate::room::stopped(&mut stop) => return,
            }
            backoff = (backoff * 2).min(Duration::from_secs(10));
        }
    }

    /// One connection to `JupyterLab:globalAwareness`; `Ok` when stopped.
    async fn serve(&self, rest: &Rest, stop: &mut watch::Receiver<bool>) -> Result<(), String> {
        let socket = rest
            .connection()
            .client()
            .websocket(
                "api/collaboration/room/JupyterLab:globalAwareness",
                "joining the collaborator list",
            )
            .await
            .map_err(|failure| crate::room::socket_failure(rest.connection(), failure))?;
        let (mut sink, mut stream) = socket.split();
        let mut awareness = Awareness::new(crate::ydoc::new_doc());
        let me = awareness.client_id();
        let frame = |awareness: &mut Awareness, state: Option<Value>| -> Option<Vec<u8>> {
            match state {
                Some(state) => awareness.set_local_state(state).ok()?,
                None => awareness.clean_local_state(),
            }
            awareness
                .update_with_clients([me])
                .ok()
                .map(protocol::awareness_frame)
        };
        let send = |frame: Vec<u8>| tungstenite::Message::binary(frame);
        let step1 = protocol::sync_frame(SyncMessage::SyncStep1(Default::default()));
        sink.send(send(step1))
            .await
            .map_err(|_| "closed".to_owned())?;
        if let Some(hello) = frame(&mut awareness, Some(self.global_state())) {
            sink.send(send(hello))
                .await
                .map_err(|_| "closed".to_owned())?;
        }
        let mut changes = self.state.subscribe();
        let mut renew = tokio::time::interval(RENEW);
        renew.tick().await;
        loop {
            let update = tokio::select! {
                message = stream.next() => match message {
                    Some(Ok(tungstenite::Message::Binary(data))) => {
                        // The room's document is empty; answer its first sync step so the
                        // server counts us as synced.
                        if let Ok(RoomMessage::Sync(SyncMessage::SyncStep1(vector))) = protocol::decode(&data) {
                            let update = awareness.doc().transact().encode_state_as_update_v1(&vector);
                            Some(protocol::sync_frame(SyncMessage::SyncStep2(update)))
                        } else {
                            None
                        }
                    }
                    Some(Ok(tungstenite::Message::Close(_))) | Some(Err(_)) | None => {
                        return Err("closed".to_owned());
                    }
                    Some(Ok(_)) => None,
                },
                _ = renew.tick() => frame(&mut awareness, Some(self.global_state())),
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    frame(&mut awareness, Some(self.global_state()))
                }
                () = crate::room::stopped(stop) => {
                    if let Some(goodbye) = frame(&mut awareness, None) {
                        let _ = sink.send(send(goodbye)).await;
                    }
                    let _ = sink.send(tungstenite::Message::Close(None)).await;
                    return Ok(());
                }
            };
            if let Some(update) = update {
                sink.send(send(update))
                    .await
                    .map_err(|_| "closed".to_owned())?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_is_shown_under_its_clients_name() {
        let presence = Presence::new();
        assert_eq!(presence.user()["display_name"], DEFAULT_NAME);
        presence.set_client_name("Claude Code");
        let user = presence.user();
        assert_eq!(user["display_name"], "Claude Code (jupyter-mcp)");
        assert_eq!(user["initials"], "CC");
        presence.set_client_name("  \n ");
        assert_eq!(
            presence.name(),
            "Claude Code (jupyter-mcp)",
            "blank names are ignored"
        );
        assert_eq!(initials("—"), "AI");
    }

    #[test]
    fn the_collaborator_entry_names_the_notebook_worked_in() {
        let presence = Presence::new();
        presence.touched("a/b.ipynb");
        presence.touched("c.ipynb");
        let state = presence.global_state();
        assert_eq!(state["current"], "notebook:c.ipynb");
        assert_eq!(state["documents"], json!(["a/b.ipynb", "c.ipynb"]));
        presence.left("c.ipynb");
        assert!(presence.global_state().get("current").is_none());
    }
}
