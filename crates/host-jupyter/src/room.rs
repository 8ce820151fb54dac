//! One notebook's collaboration room: the WebSocket client that keeps a yrs document in sync
//! with the server's (and so with every JupyterLab tab on it), publishes the agent's awareness
//! state (its name and cursor), asks the server to save, and reconnects.
//!
//! Every transaction on the document happens under one lock ([`Room::with_core`]), so a
//! version read with the document describes exactly it, and a commit checks its base version
//! and applies its plan atomically with respect to the person's updates, which the socket task
//! applies under the same lock. The version changes with every transaction that changes the
//! document, whoever made it.
//!
//! Reconnecting: the session endpoint is asked again first (its `sessionId` is one per server
//! process). With the same server and a room that survived, the document is kept and the Yjs
//! sync exchange sends what either side missed. After a server restart, or when the server says
//! our history conflicts with the room's, the document is replaced by a fresh one synced from
//! the server (a document whose history diverged would duplicate content), and edits made
//! meanwhile are refused rather than queued.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use host_core::{Document, HostError, NotebookLocation};
use notebook_model::{CellKind, DocChange, Notebook};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_tungstenite::tungstenite;
use yrs::sync::{Awareness, SyncMessage};
use yrs::updates::decoder::Decode as _;
use yrs::{
    Array as _, Assoc, Doc, IndexedSequence as _, Map as _, MapRef, Out, ReadTxn as _, Text as _,
};
use yrs::{Origin, Transact as _, TransactionMut, Update};

use crate::connection::encode_segment;
use crate::error::JupyterError;
use crate::presence::Presence;
use crate::protocol::{self, JupyterReply, RoomMessage, SaveStatus};
use crate::rest::Rest;
use crate::ydoc::plan::{self, Focus};
use crate::ydoc::{self, Roots, read};

/// The origin of updates that came from the server.
const REMOTE: &str = "remote";
/// The origin of the agent's edits.
const AGENT: &str = "jupyter-mcp";
/// The origin of outputs written during runs.
const OUTPUTS: &str = "jupyter-mcp-outputs";
/// Awareness is renewed this often; peers drop states older than 30 s.
const RENEW: Duration = Duration::from_secs(10);
/// A socket that hears nothing this long (the server echoes our renewals) is dead.
const SILENCE: Duration = Duration::from_secs(35);
/// How long a commit waits for the server to confirm it has the change.
const ACK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long opening waits for the first sync.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a save request waits for its answer.
const SAVE_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the room's connection stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RoomStatus {
    /// Connecting (first time or again).
    Connecting,
    /// The document is in sync with the server's.
    Synced,
    /// The connection failed; retrying.
    Disconnected(String),
    /// The room cannot be used (the file is gone); no more retries.
    Gone(String),
}

/// A cell run that someone else made, seen in the document (its execution count changed in an
/// update from the server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObservedExecution {
    pub cell_id: String,
    pub source: String,
    pub ok: bool,
    pub epoch: u64,
}

/// Where the live kernel epoch of a notebook comes from (the kernels side).
pub(crate) type EpochSource = Arc<dyn Fn(&str) -> Option<u64> + Send + Sync>;

/// The document and everything that changes with it, behind the room's lock.
struct Core {
    doc: Doc,
    roots: Roots,
    awareness: Awareness,
    /// The document as last read, with its version.
    cached: Option<Arc<Document>>,
    /// Execution counts of code cells by id, to notice runs others made.
    counts: HashMap<String, Option<i64>>,
    synced: bool,
    /// Bumped when the document is replaced; frames of an older one are never sent.
    generation: u64,
    /// The agent's cursor.
    focus: Option<Focus>,
    /// The cursor moved and is published once the change that moved it has gone out: an
    /// awareness frame sent just before a document update makes Jupyter Server (whose room
    /// sockets do not set `TCP_NODELAY`) hold the update until each person's delayed
    /// acknowledgement, about 40 ms on Linux.
    cursor_due: bool,
    /// Updates held back so that a run's first writes travel as one frame (see [`Room::hold`]).
    held: Held,
    /// Names the newest hold, so a late deadline does not end a newer one.
    hold_token: u64,
}

/// Document updates held back while a hold lasts (`None`: sent as they are made).
type Held = Arc<Mutex<Option<Vec<Vec<u8>>>>>;

/// The longest a run's first writes are held back waiting for its output.
const HOLD_AT_MOST: Duration = Duration::from_millis(40);

/// A frame to send, with the document generation it belongs to (sync frames only).
struct Outgoing {
    generation: Option<u64>,
    frame: Vec<u8>,
}

struct Inner {
    location: NotebookLocation,
    path: String,
    rest: Rest,
    presence: Arc<Presence>,
    epochs: EpochSource,
    core: Mutex<Core>,
    version: Arc<AtomicU64>,
    changed: Arc<watch::Sender<u64>>,
    status: watch::Sender<RoomStatus>,
    outgoing: mpsc::UnboundedSender<Outgoing>,
    /// The highest clock of our own client that the server has echoed back.
    acked: watch::Sender<u32>,
    saves: Mutex<HashMap<u64, oneshot::Sender<SaveStatus>>>,
    next_save: AtomicU64,
    observed: Mutex<Vec<ObservedExecution>>,
    stop: watch::Sender<bool>,
}

/// One open notebook room. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Room {
    inner: Arc<Inner>,
}

fn fresh_core(
    version: &Arc<AtomicU64>,
    changed: &Arc<watch::Sender<u64>>,
    outgoing: &mpsc::UnboundedSender<Outgoing>,
    generation: u64,
) -> Core {
    let doc = ydoc::new_doc();
    let roots = Roots::of(&doc);
    let counter = Arc::clone(version);
    let watchers = Arc::clone(changed);
    let outgoing = outgoing.clone();
    let remote = Origin::from(REMOTE);
    let held: Held = Arc::new(Mutex::new(None));
    let holding = Arc::clone(&held);
    doc.observe_update_v1("jupyter-mcp-room", move |txn, event| {
        let now = counter.fetch_add(1, Ordering::SeqCst) + 1;
        watchers.send_replace(now);
        if txn.origin() != Some(&remote) {
            let mut holding = holding.lock().unwrap_or_else(|poison| poison.into_inner());
            if let Some(updates) = holding.as_mut() {
                updates.push(event.update.clone());
                return;
            }
            let _ = outgoing.send(Outgoing {
                generation: Some(generation),
                frame: protocol::sync_frame(SyncMessage::Update(event.update.clone())),
            });
        }
    })
    .expect("a new document has no open transaction");
    let awareness = Awareness::new(doc.clone());
    // A fresh document is a change of what the host holds.
    let now = version.fetch_add(1, Ordering::SeqCst) + 1;
    changed.send_replace(now);
    Core {
        doc,
        roots,
        awareness,
        cached: None,
        counts: HashMap::new(),
        synced: false,
        generation,
        focus: None,
        cursor_due: false,
        held,
        hold_token: 0,
    }
}

/// Execution counts of the document's code cells, by id.
fn counts_of<T: yrs::ReadTxn>(txn: &T, roots: &Roots) -> HashMap<String, Option<i64>> {
    let mut counts = HashMap::new();
    for cell in roots.cells.iter(txn) {
        let Out::YMap(cell) = cell else { continue };
        let field = |key: &str| cell.get(txn, key).map(|out| read::out_to_json(txn, &out));
        if field("cell_type").as_ref().and_then(Value::as_str) != Some("code") {
            continue;
        }
        let Some(Value::String(id)) = field("id") else {
            continue;
        };
        counts.insert(
            id,
            field("execution_count").and_then(|count| count.as_i64()),
        );
    }
    counts
}

impl Room {
    /// Opens the room of the notebook at `location` (`path` relative to the server root) and
    /// starts its connection task. It is not synced yet: see [`Room::synced`].
    pub(crate) fn open(
        location: NotebookLocation,
        path: String,
        rest: Rest,
        presence: Arc<Presence>,
        epochs: EpochSource,
    ) -> Room {
        let version = Arc::new(AtomicU64::new(0));
        let changed = Arc::new(watch::channel(0).0);
        let (outgoing, frames) = mpsc::unbounded_channel();
        let core = fresh_core(&version, &changed, &outgoing, 0);
        let room = Room {
            inner: Arc::new(Inner {
                location,
                path,
                rest,
                presence,
                epochs,
                core: Mutex::new(core),
                version,
                changed,
                status: watch::channel(RoomStatus::Connecting).0,
                outgoing,
                acked: watch::channel(0).0,
                saves: Mutex::new(HashMap::new()),
                next_save: AtomicU64::new(1),
                observed: Mutex::new(Vec::new()),
                stop: watch::channel(false).0,
            }),
        };
        tokio::spawn(room.clone().run(frames));
        room
    }

    /// The notebook's path relative to the server root.
    pub(crate) fn path(&self) -> &str {
        &self.inner.path
    }

    /// Runs `work` on the document under the room's lock.
    fn with_core<T>(&self, work: impl FnOnce(&mut Core) -> T) -> T {
        let mut core = self
            .inner
            .core
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        work(&mut core)
    }

    fn host_error(&self, failure: JupyterError) -> HostError {
        crate::host::host_error(&self.inner.location, failure)
    }

    /// Waits until the document is in sync with the server's (at most 30 s).
    pub(crate) async fn synced(&self) -> Result<(), HostError> {
        let mut status = self.inner.status.subscribe();
        let waited = tokio::time::timeout(SYNC_TIMEOUT, async {
            loop {
                let current = status.borrow_and_update().clone();
                match current {
                    RoomStatus::Synced => return Ok(()),
                    RoomStatus::Gone(reason) => return Err(reason),
                    _ => {}
                }
                if status.changed().await.is_err() {
                    return Err("the room closed".to_owned());
                }
            }
        })
        .await;
        let reason = match waited {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(reason)) => reason,
            Err(_) => match self.inner.status.borrow().clone() {
                RoomStatus::Disconnected(reason) => reason,
                _ => "it did not sync within 30 s".to_owned(),
            },
        };
        Err(self.host_error(JupyterError::Disconnected {
            path: self.inner.path.clone(),
            reason,
        }))
    }

    /// Whether the room is gone for good (its file was deleted).
    pub(crate) fn is_gone(&self) -> bool {
        matches!(*self.inner.status.borrow(), RoomStatus::Gone(_))
    }

    /// The document as it is now.
    pub(crate) fn document(&self) -> Result<Arc<Document>, HostError> {
        self.with_core(|core| self.read(core))
    }

    fn read(&self, core: &mut Core) -> Result<Arc<Document>, HostError> {
        let version = self.inner.version.load(Ordering::SeqCst);
        if let Some(cached) = &core.cached
            && cached.version == version
        {
            return Ok(cached.clone());
        }
        let notebook = read::notebook(&core.doc.transact(), &core.roots).map_err(|problem| {
            HostError::Unreadable {
                path: self.inner.path.clone(),
                problem: problem.to_string(),
            }
        })?;
        let document = Arc::new(Document {
            location: self.inner.location.clone(),
            notebook,
            version,
        });
        core.cached = Some(document.clone());
        Ok(document)
    }

    /// Applies `changes` (made to the document at `base_version`, leading to `result`) as one
    /// transaction, and waits until the server confirms it has them. Refused with
    /// `ChangedOnDisk` when the document moved on since `base_version`, and when the room is
    /// not in sync with the server (nothing is queued while disconnected).
    pub(crate) async fn commit(
        &self,
        base_version: u64,
        result: &Notebook,
        changes: &[DocChange],
    ) -> Result<Arc<Document>, HostError> {
        let (document, clock) = self.with_core(|core| {
            if !core.synced || *self.inner.status.borrow() != RoomStatus::Synced {
                return Err(self.host_error(JupyterError::Disconnected {
                    path: self.inner.path.clone(),
                    reason: "it is reconnecting".to_owned(),
                }));
            }
            let base = self.read(core)?;
            if base.version != base_version {
                return Err(HostError::ChangedOnDisk {
                    path: self.inner.path.clone(),
                });
            }
            let applied = {
                let mut txn = core.doc.transact_mut_with(AGENT);
                plan::apply(&mut txn, &core.roots, &base.notebook, result, changes)
            };
            self.refresh_counts(core, false);
            if let Some(focus) = applied.focus {
                core.focus = Some(focus);
                core.cursor_due = true;
            }
            let clock = core
                .doc
                .transact()
                .state_vector()
                .get(&core.doc.client_id());
            Ok((self.read(core)?, clock))
        })?;
        self.inner.presence.touched(&self.inner.path);
        let acked = self.wait_acked(clock).await;
        self.with_core(|core| self.publish_due_cursor(core));
        acked.map(|()| document)
    }

    /// Publishes the agent's cursor if it moved and no hold keeps back the change that moved it.
    fn publish_due_cursor(&self, core: &mut Core) {
        let holding = core
            .held
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .is_some();
        if core.cursor_due && !holding {
            core.cursor_due = false;
            self.publish_awareness(core);
        }
    }

    /// Holds back the agent's document updates (and its cursor) until [`Room::release`] with
    /// the returned token, or [`HOLD_AT_MOST`]: a run's clearing of the cell and its output
    /// then reach the person as one frame. Two frames in a row would not: Jupyter Server sends
    /// the second only once the person acknowledged the first, which a quiet client does after
    /// its delayed-acknowledgement timer (about 40 ms).
    pub(crate) fn hold(&self) -> u64 {
        let token = self.with_core(|core| {
            core.hold_token += 1;
            let mut held = core
                .held
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            held.get_or_insert_with(Vec::new);
            core.hold_token
        });
        let room = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(HOLD_AT_MOST).await;
            room.release(token);
        });
        token
    }

    /// Ends the hold named by `token` (nothing if a newer hold replaced it): what it kept back
    /// goes out as one update, then the agent's cursor.
    pub(crate) fn release(&self, token: u64) {
        self.with_core(|core| {
            if core.hold_token != token {
                return;
            }
            let updates = core
                .held
                .lock()
                .unwrap_or_else(|poison| poison.into_inner())
                .take();
            let updates = updates.unwrap_or_default();
            if !updates.is_empty() {
                match yrs::merge_updates_v1(updates.iter().map(Vec::as_slice)) {
                    Ok(update) => self.send_update(core, update),
                    Err(failure) => {
                        tracing::debug!(%failure, "sending held updates one by one");
                        for update in updates {
                            self.send_update(core, update);
                        }
                    }
                }
            }
            self.publish_due_cursor(core);
        });
    }

    fn send_update(&self, core: &Core, update: Vec<u8>) {
        let _ = self.inner.outgoing.send(Outgoing {
            generation: Some(core.generation),
            frame: protocol::sync_frame(SyncMessage::Update(update)),
        });
    }

    /// Waits until the server has echoed our changes up to `clock` (our client's next clock
    /// after the change: a change that only deletes adds no items, and is confirmed by the
    /// last one that did).
    async fn wait_acked(&self, clock: u32) -> Result<(), HostError> {
        let mut acked = self.inner.acked.subscribe();
        let confirmed =
            tokio::time::timeout(ACK_TIMEOUT, acked.wait_for(|acked| *acked >= clock)).await;
        match confirmed {
            Ok(Ok(_)) => Ok(()),
            _ => Err(HostError::Io {
                action: "confirm the change to",
                path: self.inner.path.clone(),
                reason: "the Jupyter server did not confirm it within 10 s (the change is in \
                         the agent's copy and is sent when the connection comes back); read \
                         the notebook to see whether it arrived"
                    .to_owned(),
            }),
        }
    }

    /// Runs `work` on the cell with `cell_id` in an outputs transaction; false
    /// when no such cell exists.
    pub(crate) fn write_cell(
        &self,
        cell_id: &str,
        work: impl FnOnce(&mut TransactionMut, &MapRef),
    ) -> bool {
        self.with_core(|core| {
            let mut txn = core.doc.transact_mut_with(OUTPUTS);
            let Some(cell) = find_cell(&txn, &core.roots, cell_id) else {
                return false;
            };
            work(&mut txn, &cell);
            drop(txn);
            self.refresh_counts(core, false);
            true
        })
    }

    /// Puts the agent's cursor at the start of the cell with `cell_id`.
    pub(crate) fn focus(&self, cell_id: &str) {
        self.with_core(|core| {
            core.focus = Some(Focus {
                cell_id: cell_id.to_owned(),
                offset: 0,
            });
            core.cursor_due = true;
            self.publish_due_cursor(core);
        });
        self.inner.presence.touched(&self.inner.path);
    }

    /// Asks the server to save the document to its file (the server writes it, as Ctrl+S in
    /// JupyterLab does), and waits for its answer.
    pub(crate) async fn save(&self) -> Result<(), HostError> {
        self.synced().await?;
        let id = self.inner.next_save.fetch_add(1, Ordering::SeqCst);
        let (answer, answered) = oneshot::channel();
        self.inner
            .saves
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .insert(id, answer);
        let _ = self.inner.outgoing.send(Outgoing {
            generation: None,
            frame: protocol::save_frame(id),
        });
        let failed = |reason: &str| HostError::Io {
            action: "save",
            path: self.inner.path.clone(),
            reason: reason.to_owned(),
        };
        match tokio::time::timeout(SAVE_TIMEOUT, answered).await {
            Ok(Ok(SaveStatus::Success | SaveStatus::Skipped)) => Ok(()),
            Ok(Ok(SaveStatus::Failed)) => Err(failed(
                "the Jupyter server could not write the file (its log says why)",
            )),
            Ok(Err(_)) => Err(failed("the connection to the server closed")),
            Err(_) => Err(failed("the Jupyter server did not answer within 60 s")),
        }
    }

    /// Runs others made since the last call.
    pub(crate) fn take_observed(&self) -> Vec<ObservedExecution> {
        std::mem::take(
            &mut *self
                .inner
                .observed
                .lock()
                .unwrap_or_else(|poison| poison.into_inner()),
        )
    }

    /// Leaves the room: the agent's awareness state is withdrawn and the socket closed.
    pub(crate) async fn close(&self) {
        self.inner.stop.send_replace(true);
        let mut status = self.inner.status.subscribe();
        let _ = tokio::time::timeout(
            Duration::from_secs(3),
            status.wait_for(|status| matches!(status, RoomStatus::Gone(_))),
        )
        .await;
    }

    /// Re-reads execution counts; with `record`, a count that changed to a number is a run
    /// someone else made (called after the server's updates only).
    fn refresh_counts(&self, core: &mut Core, record: bool) {
        let txn = core.doc.transact();
        let counts = counts_of(&txn, &core.roots);
        if record && core.synced {
            let epoch = (self.inner.epochs)(&self.inner.path);
            let mut runs = Vec::new();
            for (id, count) in &counts {
                if count.is_some() && core.counts.get(id) != Some(count) {
                    runs.push(id.clone());
                }
            }
            if let (Some(epoch), false) = (epoch, runs.is_empty()) {
                let notebook = read::notebook(&txn, &core.roots).ok();
                let mut observed = self
                    .inner
                    .observed
                    .lock()
                    .unwrap_or_else(|poison| poison.into_inner());
                for id in runs {
                    let Some(cell) = notebook
                        .as_ref()
                        .and_then(|notebook| notebook.position_of_id(&id).map(|at| (notebook, at)))
                        .and_then(|(notebook, at)| notebook.cell(at).cloned())
                    else {
                        continue;
                    };
                    if cell.kind() != CellKind::Code {
                        continue;
                    }
                    let ok = !cell.outputs().iter().any(|output| {
                        output.get("output_type").and_then(Value::as_str) == Some("error")
                    });
                    observed.push(ObservedExecution {
                        cell_id: id,
                        source: cell.source().to_owned(),
                        ok,
                        epoch,
                    });
                }
            }
        }
        drop(txn);
        core.counts = counts;
    }

    /// The agent's awareness state in this room: who it is, and its cursor.
    fn awareness_state(&self, core: &Core) -> Value {
        let mut state = json!({ "user": self.inner.presence.user() });
        if let Some(focus) = &core.focus {
            let txn = core.doc.transact();
            let sticky = find_cell(&txn, &core.roots, &focus.cell_id).and_then(|cell| {
                let Some(Out::YText(source)) = cell.get(&txn, "source") else {
                    return None;
                };
                let length = source.len(&txn);
                if focus.offset < length {
                    source.sticky_index(&txn, focus.offset, Assoc::After)
                } else {
                    // At the end: a position in the text itself (Yjs's end of the type).
                    Some(yrs::StickyIndex::from_type(&txn, &source, Assoc::After))
                }
            });
            if let Some(sticky) = sticky.and_then(|sticky| serde_json::to_value(sticky).ok()) {
                state["cursors"] = json!([{
                    "anchor": sticky, "head": sticky, "primary": true, "empty": true
                }]);
            }
        }
        state
    }

    /// Publishes (renews) the agent's awareness state.
    fn publish_awareness(&self, core: &mut Core) {
        let state = self.awareness_state(core);
        if core.awareness.set_local_state(state).is_err() {
            return;
        }
        let me = core.awareness.client_id();
        if let Ok(update) = core.awareness.update_with_clients([me]) {
            let _ = self.inner.outgoing.send(Outgoing {
                generation: Some(core.generation),
                frame: protocol::awareness_frame(update),
            });
        }
    }

    /// The connection task: connects, serves the socket, reconnects, until closed.
    async fn run(self, mut frames: mpsc::UnboundedReceiver<Outgoing>) {
        let mut stop = self.inner.stop.subscribe();
        let mut server_session: Option<String> = None;
        let mut backoff = Duration::from_millis(100);
        loop {
            if *stop.borrow() {
                break;
            }
            let outcome = match self.inner.rest.room_session(&self.inner.path).await {
                Ok(session) => {
                    if server_session
                        .as_ref()
                        .is_some_and(|previous| *previous != session.session_id)
                    {
                        // The server restarted: its room is new, so is our document.
                        self.reset();
                    }
                    server_session = Some(session.session_id.clone());
                    match self.connect(&session).await {
                        Ok(socket) => {
                            backoff = Duration::from_millis(100);
                            self.serve(socket, &mut frames, &mut stop).await
                        }
                        Err(reason) => Served::Dropped(reason),
                    }
                }
                Err(
                    failure @ (JupyterError::NoCollaboration { .. }
                    | JupyterError::Unauthorized { .. }),
                ) => Served::Gone(failure.to_string()),
                Err(failure) => Served::Dropped(failure.to_string()),
            };
            self.with_core(|core| core.synced = false);
            match outcome {
                Served::Stopped => break,
                Served::Gone(reason) => {
                    self.inner.status.send_replace(RoomStatus::Gone(reason));
                    self.fail_saves();
                    return;
                }
                Served::Conflict => {
                    tracing::warn!(path = %self.inner.path, "the room's history conflicts with ours; fetching the document afresh");
                    self.reset();
                    self.inner
                        .status
                        .send_replace(RoomStatus::Disconnected("it is reconnecting".to_owned()));
                }
                Served::Dropped(reason) => {
                    tracing::info!(path = %self.inner.path, %reason, "collaboration room disconnected");
                    self.inner
                        .status
                        .send_replace(RoomStatus::Disconnected(reason));
                }
            }
            self.fail_saves();
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = stopped(&mut stop) => break,
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
        self.inner
            .status
            .send_replace(RoomStatus::Gone("the room was closed".to_owned()));
        self.fail_saves();
    }

    fn fail_saves(&self) {
        self.inner
            .saves
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clear();
    }

    /// Replaces the document with a fresh, empty one (synced from the server next).
    fn reset(&self) {
        self.with_core(|core| {
            let generation = core.generation + 1;
            let focus = core.focus.take();
            *core = fresh_core(
                &self.inner.version,
                &self.inner.changed,
                &self.inner.outgoing,
                generation,
            );
            core.focus = focus;
        });
        self.inner.acked.send_replace(0);
    }

    async fn connect(
        &self,
        session: &crate::rest::RoomSession,
    ) -> Result<kernels::ServerWebSocket, String> {
        let path = format!(
            "api/collaboration/room/json:notebook:{}?sessionId={}",
            encode_segment(&session.file_id),
            encode_segment(&session.session_id)
        );
        self.inner
            .rest
            .connection()
            .client()
            .websocket(&path, "opening the notebook's collaboration room")
            .await
            .map_err(|failure| socket_failure(self.inner.rest.connection(), failure))
    }

    /// Serves one connection until it ends.
    async fn serve(
        &self,
        socket: kernels::ServerWebSocket,
        frames: &mut mpsc::UnboundedReceiver<Outgoing>,
        stop: &mut watch::Receiver<bool>,
    ) -> Served {
        let (mut sink, mut stream) = socket.split();
        // Our state vector first (the server answers with what we miss), then who we are.
        let hello = self.with_core(|core| {
            let vector = core.doc.transact().state_vector();
            let step1 = protocol::sync_frame(SyncMessage::SyncStep1(vector));
            let state = self.awareness_state(core);
            let _ = core.awareness.set_local_state(state);
            let me = core.awareness.client_id();
            let awareness = core
                .awareness
                .update_with_clients([me])
                .ok()
                .map(protocol::awareness_frame);
            (core.generation, step1, awareness)
        });
        let (_, step1, awareness) = hello;
        // What was queued while disconnected is dropped: our answer to the server's first
        // sync step (which it sends on every connection) carries every change it lacks.
        while frames.try_recv().is_ok() {}
        for frame in std::iter::once(step1).chain(awareness) {
            if sink
                .send(tungstenite::Message::binary(frame))
                .await
                .is_err()
            {
                return Served::Dropped("the socket closed".to_owned());
            }
        }
        let mut renew = tokio::time::interval(RENEW);
        renew.tick().await;
        let mut user = self.inner.presence.subscribe();
        let mut last_heard = tokio::time::Instant::now();
        loop {
            let silence = tokio::time::sleep_until(last_heard + SILENCE);
            tokio::select! {
                message = stream.next() => {
                    last_heard = tokio::time::Instant::now();
                    let frame = match message {
                        Some(Ok(tungstenite::Message::Binary(frame))) => frame,
                        Some(Ok(tungstenite::Message::Close(close))) => {
                            return closed(close);
                        }
                        Some(Ok(_)) => continue,
                        Some(Err(_)) | None => return Served::Dropped("the socket closed".to_owned()),
                    };
                    match self.on_frame(&frame) {
                        Ok(Some(reply)) => {
                            if sink.send(tungstenite::Message::binary(reply)).await.is_err() {
                                return Served::Dropped("the socket closed".to_owned());
                            }
                        }
                        Ok(None) => {}
                        Err(outcome) => return outcome,
                    }
                }
                outgoing = frames.recv() => {
                    let Some(outgoing) = outgoing else { return Served::Stopped };
                    let current = self.with_core(|core| core.generation);
                    if outgoing.generation.is_some_and(|generation| generation != current) {
                        continue;
                    }
                    if sink.send(tungstenite::Message::binary(outgoing.frame)).await.is_err() {
                        return Served::Dropped("the socket closed".to_owned());
                    }
                }
                _ = renew.tick() => {
                    self.with_core(|core| self.publish_awareness(core));
                }
                changed = user.changed() => {
                    if changed.is_ok() {
                        self.with_core(|core| self.publish_awareness(core));
                    }
                }
                () = silence => return Served::Dropped("the server went silent".to_owned()),
                () = stopped(stop) => {
                    // A null state tells the peers at once that the agent left.
                    let goodbye = self.with_core(|core| {
                        core.awareness.clean_local_state();
                        let me = core.awareness.client_id();
                        core.awareness.update_with_clients([me]).ok().map(protocol::awareness_frame)
                    });
                    if let Some(goodbye) = goodbye {
                        let _ = sink.send(tungstenite::Message::binary(goodbye)).await;
                    }
                    let _ = sink.send(tungstenite::Message::Close(None)).await;
                    return Served::Stopped;
                }
            }
        }
    }

    /// Handles one frame from the server; a frame to send back, or how the connection ends.
    fn on_frame(&self, frame: &[u8]) -> Result<Option<Vec<u8>>, Served> {
        let message = match protocol::decode(frame) {
            Ok(message) => message,
            Err(failure) => {
                tracing::debug!(%failure, "ignoring a malformed room frame");
                return Ok(None);
            }
        };
        match message {
            RoomMessage::Sync(SyncMessage::SyncStep1(vector)) => Ok(Some(self.with_core(|core| {
                let update = core.doc.transact().encode_state_as_update_v1(&vector);
                protocol::sync_frame(SyncMessage::SyncStep2(update))
            }))),
            RoomMessage::Sync(SyncMessage::SyncStep2(update)) => {
                self.apply_remote(&update, true);
                Ok(None)
            }
            RoomMessage::Sync(SyncMessage::Update(update)) => {
                self.apply_remote(&update, false);
                Ok(None)
            }
            RoomMessage::Awareness(update) => {
                self.with_core(|core| {
                    let _ = core.awareness.apply_update(update);
                });
                Ok(None)
            }
            RoomMessage::Jupyter(JupyterReply::Saved { id, status }) => {
                if let Some(waiter) = self
                    .inner
                    .saves
                    .lock()
                    .unwrap_or_else(|poison| poison.into_inner())
                    .remove(&id)
                {
                    let _ = waiter.send(status);
                }
                Ok(None)
            }
            RoomMessage::Jupyter(JupyterReply::Conflict) => Err(Served::Conflict),
            RoomMessage::Jupyter(JupyterReply::Unknown) | RoomMessage::Other(_) => Ok(None),
        }
    }

    /// Applies an update from the server (origin `remote`: it is not sent back).
    fn apply_remote(&self, bytes: &[u8], step2: bool) {
        let Ok(update) = Update::decode_v1(bytes) else {
            tracing::debug!("ignoring an update that does not decode");
            return;
        };
        let insertions = update.insertions(true);
        self.with_core(|core| {
            let me = core.doc.client_id();
            // The end of the newest of our own items the server sent back: it has them.
            let echoed = insertions
                .iter()
                .filter(|(client, _)| **client == me)
                .flat_map(|(_, ranges)| ranges.iter().map(|range| range.end).collect::<Vec<_>>())
                .max()
                .unwrap_or(0);
            let applied = core
                .doc
                .transact_mut_with(REMOTE)
                .apply_update(update)
                .is_ok();
            if !applied {
                tracing::debug!("an update from the server could not be applied");
            }
            if echoed > 0 {
                self.inner.acked.send_if_modified(|acked| {
                    let grew = echoed > *acked;
                    *acked = (*acked).max(echoed);
                    grew
                });
            }
            if step2 && !core.synced {
                core.synced = true;
                self.refresh_counts(core, false);
                self.inner.status.send_replace(RoomStatus::Synced);
            } else {
                self.refresh_counts(core, true);
            }
        });
    }
}

/// Waits until `stop` says so (the guard of the value is not held across other awaits).
/// Why a room's WebSocket did not open, in a few words for the `Disconnected` error.
pub(crate) fn socket_failure(
    connection: &crate::connection::ServerConnection,
    failure: kernels::Error,
) -> String {
    match failure {
        kernels::Error::ServerStatus { status, .. } => {
            format!("the server refused the room (HTTP {status})")
        }
        kernels::Error::Timeout { after, .. } => format!(
            "the room's WebSocket did not open within {} s",
            after.as_secs()
        ),
        failure => crate::rest::server_error(connection, failure).to_string(),
    }
}

pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// How one connection ended.
#[derive(Debug)]
enum Served {
    /// We closed it.
    Stopped,
    /// It broke; reconnect with the same document.
    Dropped(String),
    /// The server says our history conflicts; reconnect with a fresh document.
    Conflict,
    /// The room cannot be used again.
    Gone(String),
}

/// What a close frame from the server means.
fn closed(close: Option<tungstenite::protocol::CloseFrame>) -> Served {
    let Some(close) = close else {
        return Served::Dropped("the server closed the room".to_owned());
    };
    match u16::from(close.code) {
        4404 => Served::Gone("the server has no such file".to_owned()),
        1003 => Served::Dropped("the server did not know our session (it restarted)".to_owned()),
        code => Served::Dropped(format!("the server closed the room (code {code})")),
    }
}

/// The cell map with `cell_id`.
fn find_cell<T: yrs::ReadTxn>(txn: &T, roots: &Roots, cell_id: &str) -> Option<MapRef> {
    roots.cells.iter(txn).find_map(|cell| {
        let Out::YMap(cell) = cell else { return None };
        let id = cell.get(txn, "id").map(|id| read::out_to_json(txn, &id));
        (id.as_ref().and_then(Value::as_str) == Some(cell_id)).then_some(cell)
    })
}
