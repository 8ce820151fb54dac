//! Resource change notifications, for the clients that asked: legacy `resources/subscribe`
//! (2025 sessions; the notification goes to the subscribing session's peer) and 2026-07-28
//! `subscriptions/listen` (a long-lived request whose stream carries them). One watcher per
//! server looks at the versions of every subscribed notebook a few times a second
//! ([`mcp_contract::ToolDispatch::resource_versions`]: anyone's edit, a run's outputs, a change
//! on disk) and runs only while someone is subscribed; nothing is sent to anyone else.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_contract::ToolDispatch;
use mcp_contract::resources::ResourceUri;
use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::{Peer, RoleServer};
use tokio::sync::broadcast;

/// How often subscribed notebooks are looked at.
const WATCH_INTERVAL: Duration = Duration::from_millis(200);

/// How long a baseline taken for a stream that is being acknowledged waits for the stream.
const RESERVATION: Duration = Duration::from_secs(30);

/// The notebook a subscribed URI follows (a part's notebook, for a cell's source or output).
fn notebook_of(uri: &str) -> String {
    ResourceUri::parse(uri).map_or_else(|_| uri.to_owned(), |parsed| parsed.notebook)
}

#[derive(Default)]
struct State {
    /// Legacy subscriptions: (URI, the session that subscribed, its peer).
    peers: Vec<(String, u64, Peer<RoleServer>)>,
    /// `subscriptions/listen` streams by id, with their URIs.
    listeners: HashMap<u64, Vec<String>>,
    next_listener: u64,
    /// The last version seen of each watched notebook.
    versions: BTreeMap<String, Option<u64>>,
    /// Notebooks whose baseline was taken for a `subscriptions/listen` stream that is being
    /// acknowledged and not registered yet, with when.
    reserved: Vec<(String, Instant)>,
    watching: bool,
}

/// The subscriptions of one server (shared by every session's handler).
pub(crate) struct Subscriptions {
    dispatch: Arc<dyn ToolDispatch>,
    state: Mutex<State>,
    /// Changed URIs (as subscribed), for the listen streams.
    changes: broadcast::Sender<String>,
}

/// A registered `subscriptions/listen` stream; unregisters when dropped.
pub(crate) struct Listener {
    subscriptions: Arc<Subscriptions>,
    id: u64,
    /// The changes it hears.
    pub(crate) changes: broadcast::Receiver<String>,
    /// The URIs it listens to.
    pub(crate) uris: Vec<String>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        let mut state = self.subscriptions.lock();
        state.listeners.remove(&self.id);
    }
}

impl Subscriptions {
    pub(crate) fn new(dispatch: Arc<dyn ToolDispatch>) -> Arc<Subscriptions> {
        Arc::new(Subscriptions {
            dispatch,
            state: Mutex::new(State::default()),
            changes: broadcast::channel(256).0,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Legacy session `session` subscribes to `uri`.
    pub(crate) fn subscribe(self: &Arc<Self>, uri: String, session: u64, peer: Peer<RoleServer>) {
        let mut state = self.lock();
        state
            .peers
            .retain(|(subscribed, owner, _)| !(*subscribed == uri && *owner == session));
        state.peers.push((uri, session, peer));
        drop(state);
        self.watch();
    }

    /// Legacy session `session` unsubscribes from `uri`.
    pub(crate) fn unsubscribe(&self, uri: &str, session: u64) {
        self.lock()
            .peers
            .retain(|(subscribed, owner, _)| !(subscribed == uri && *owner == session));
    }

    /// Reads the versions of the notebooks of `uris` not watched yet, as the baseline a new
    /// subscription is compared against, so that a change made as soon as the subscription is
    /// acknowledged is news (the watcher's next look may come after it). `reserve` keeps the
    /// baseline for a stream that registers later (see [`Subscriptions::listen`]).
    pub(crate) async fn take_baseline(&self, uris: &[String], reserve: bool) {
        let mut notebooks: Vec<String> = uris.iter().map(|uri| notebook_of(uri)).collect();
        notebooks.sort();
        notebooks.dedup();
        let unknown: Vec<String> = {
            let mut state = self.lock();
            if reserve {
                let now = Instant::now();
                state
                    .reserved
                    .extend(notebooks.iter().map(|notebook| (notebook.clone(), now)));
            }
            notebooks
                .into_iter()
                .filter(|notebook| !state.versions.contains_key(notebook))
                .collect()
        };
        if unknown.is_empty() {
            return;
        }
        let versions = self.dispatch.resource_versions(unknown.clone()).await;
        let mut state = self.lock();
        for (notebook, version) in unknown.into_iter().zip(versions) {
            // A baseline taken meanwhile is older, so it is the one to compare against.
            state.versions.entry(notebook).or_insert(version);
        }
    }

    /// A `subscriptions/listen` stream starts listening to `uris`.
    pub(crate) fn listen(self: &Arc<Self>, uris: Vec<String>) -> Listener {
        let id = {
            let mut state = self.lock();
            // Its reservations (taken while it was acknowledged) give way to the stream itself.
            for uri in &uris {
                let notebook = notebook_of(uri);
                if let Some(index) = state
                    .reserved
                    .iter()
                    .position(|(reserved, _)| *reserved == notebook)
                {
                    state.reserved.remove(index);
                }
            }
            state.next_listener += 1;
            let id = state.next_listener;
            state.listeners.insert(id, uris.clone());
            id
        };
        let listener = Listener {
            subscriptions: self.clone(),
            id,
            changes: self.changes.subscribe(),
            uris,
        };
        self.watch();
        listener
    }

    /// The notebooks someone follows now.
    fn watched(&self) -> Vec<String> {
        let state = self.lock();
        let mut notebooks: Vec<String> = state
            .peers
            .iter()
            .map(|(uri, _, _)| notebook_of(uri))
            .chain(
                state
                    .listeners
                    .values()
                    .flatten()
                    .map(|uri| notebook_of(uri)),
            )
            .collect();
        notebooks.sort();
        notebooks.dedup();
        notebooks
    }

    /// Starts the watcher unless it runs.
    fn watch(self: &Arc<Self>) {
        {
            let mut state = self.lock();
            if state.watching {
                return;
            }
            state.watching = true;
        }
        let subscriptions = self.clone();
        tokio::spawn(async move { subscriptions.run().await });
    }

    async fn run(self: Arc<Self>) {
        let mut interval = tokio::time::interval(WATCH_INTERVAL);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            let notebooks = self.watched();
            if notebooks.is_empty() {
                let mut state = self.lock();
                // Checked again under the lock: a subscription made since then keeps it going.
                if state.peers.is_empty() && state.listeners.is_empty() && state.reserved.is_empty()
                {
                    state.watching = false;
                    state.versions.clear();
                    return;
                }
                continue;
            }
            let versions = self.dispatch.resource_versions(notebooks.clone()).await;
            let changed: Vec<String> = {
                let mut state = self.lock();
                let mut changed = Vec::new();
                for (notebook, version) in notebooks.iter().zip(versions) {
                    match state.versions.insert(notebook.clone(), version) {
                        // First sight is the baseline; only a change after it is news.
                        None => {}
                        Some(before) if before != version => changed.push(notebook.clone()),
                        Some(_) => {}
                    }
                }
                let now = Instant::now();
                state
                    .reserved
                    .retain(|(_, since)| now.duration_since(*since) < RESERVATION);
                let State {
                    versions, reserved, ..
                } = &mut *state;
                versions.retain(|notebook, _| {
                    notebooks.contains(notebook)
                        || reserved.iter().any(|(reserved, _)| reserved == notebook)
                });
                changed
            };
            for notebook in changed {
                self.announce(&notebook).await;
            }
        }
    }

    /// Tells every subscriber of `notebook` (or of one of its parts) that it changed.
    async fn announce(&self, notebook: &str) {
        let (peers, uris): (Vec<(String, Peer<RoleServer>)>, Vec<String>) = {
            let mut state = self.lock();
            state
                .peers
                .retain(|(_, _, peer)| !peer.is_transport_closed());
            let peers = state
                .peers
                .iter()
                .filter(|(uri, _, _)| notebook_of(uri) == notebook)
                .map(|(uri, _, peer)| (uri.clone(), peer.clone()))
                .collect();
            let mut uris: Vec<String> = state
                .listeners
                .values()
                .flatten()
                .filter(|uri| notebook_of(uri) == notebook)
                .cloned()
                .collect();
            uris.sort();
            uris.dedup();
            (peers, uris)
        };
        for uri in uris {
            let _ = self.changes.send(uri);
        }
        for (uri, peer) in peers {
            if let Err(error) = peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await
            {
                tracing::debug!(%error, "resource update not delivered");
            }
        }
    }
}
