//! Every routing decision of the broker, as pure functions: which kind of routing a tool call
//! needs, which window owns a reference, whether that window serves the tool (and who does),
//! how a batch splits by owner, how long the broker waits for an owner, which peers are stale,
//! how batch results merge, and the role a process takes after each step of the election. No
//! I/O, no clock (times come in as milliseconds), no randomness (owner ids come in as
//! arguments): the I/O around them lives in `broker` and `coordinator`.

use std::collections::BTreeMap;
use std::time::Duration;

use mcp_contract::ToolError;
use mcp_contract::refs::{self, RefKind};
use mcp_contract::{BrokerRoute, ErrorCode, ToolName, ToolOutput};
use serde_json::{Map, Value, json};

/// How a tool call is routed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteKind {
    /// `list_notebooks`: every connected window answers, and the broker joins the answers.
    ListAll,
    /// `inspect_colab_environment_preflight`: every connected window answers within
    /// [`PREFLIGHT_PEER_TIMEOUT`], and the broker joins their `windows`.
    EveryWindow,
    /// A tool that names one notebook (`notebookRef`): its owner answers.
    Notebook(String),
    /// A tool that names several notebooks (`notebookRefs`): one call per owner.
    Batch(Vec<String>),
    /// A tool that names no notebook: the window `windowId` names, else the broker's own window.
    Window(Option<String>),
}

/// The routing a call needs, from its tool name and (coerced) arguments. Arguments that do not
/// have the expected shape go to the broker's own window, whose tools report the problem exactly
/// as a lone server would.
pub fn route_kind(tool: &str, arguments: &Map<String, Value>) -> RouteKind {
    match ToolName::parse(tool).map(ToolName::broker_route) {
        Some(BrokerRoute::MergedListing) => return RouteKind::ListAll,
        Some(BrokerRoute::EveryWindow) => return RouteKind::EveryWindow,
        Some(BrokerRoute::ByArguments) | None => {}
    }
    if let Some(Value::String(reference)) = arguments.get("notebookRef") {
        return RouteKind::Notebook(reference.clone());
    }
    if let Some(Value::Array(items)) = arguments.get("notebookRefs") {
        let references: Option<Vec<String>> = items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect();
        if let Some(references) = references.filter(|references| !references.is_empty()) {
            return RouteKind::Batch(references);
        }
        return RouteKind::Window(None);
    }
    RouteKind::Window(
        arguments
            .get("windowId")
            .and_then(Value::as_str)
            .map(str::to_owned),
    )
}

/// How long the broker waits for each window's preflight before listing it as unavailable.
pub const PREFLIGHT_PEER_TIMEOUT: Duration = Duration::from_secs(30);

/// The shortest time the broker waits for an owner's answer to a call with a wait budget.
pub const MIN_INVOKE_TIMEOUT: Duration = Duration::from_millis(1500);

/// How long the broker waits for an owner's answer: `max(1500, waitMs + 1500)` ms for the tools
/// whose `waitMs` bounds their own wait (`run_cells`, `get_execution`, `edit_cells`), otherwise
/// no limit (the call is still abandoned as soon as its owner leaves; see `broker`).
pub fn invoke_timeout(tool: &str, arguments: &Map<String, Value>) -> Option<Duration> {
    if !ToolName::parse(tool).is_some_and(ToolName::wait_bounds_reply) {
        return None;
    }
    let wait_ms = arguments.get("waitMs")?.as_f64()?;
    if !wait_ms.is_finite() || wait_ms < 0.0 {
        return None;
    }
    // f64 → u64 saturates, so an absurd budget waits "forever" rather than overflowing.
    let total = (wait_ms as u64).saturating_add(MIN_INVOKE_TIMEOUT.as_millis() as u64);
    Some(Duration::from_millis(total).max(MIN_INVOKE_TIMEOUT))
}

/// A notebook as a window listed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedNotebook {
    pub notebook_ref: String,
    pub uri: String,
    /// Path relative to the window's root folder, when it has one.
    pub path: Option<String>,
}

/// A window as the broker saw it in one round of listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostListing {
    pub window_id: String,
    pub label: String,
    /// False when the window did not answer (its notebooks are then unknown).
    pub available: bool,
    pub notebooks: Vec<ListedNotebook>,
}

/// Where a call goes and what it names the notebook as there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub window_id: String,
    /// The reference to send to the owner: the listed URI when the listing identified the
    /// notebook, else the reference as the client gave it.
    pub reference: String,
}

/// Why a reference could not be routed. Each variant has its own contract error code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteError {
    /// Starts with `nb_` but is not `nb_` + 24 hex characters.
    Malformed { reference: String },
    /// A well-formed ref that no connected window lists (or that several list).
    UnknownRef {
        reference: String,
        unanswered: Vec<String>,
    },
    /// A URI or path that several windows list.
    Ambiguous {
        reference: String,
        /// `(window label, notebookRef)` of each match.
        matches: Vec<(String, String)>,
    },
    /// A URI or path that no connected window lists.
    NotFound {
        reference: String,
        unanswered: Vec<String>,
    },
    /// `windowId` names no connected window.
    WindowNotConnected { window_id: String },
    /// The owner left (or stopped answering) while or before the call was made.
    WindowUnavailable { label: String, reason: String },
    /// The window a call is routed to does not serve its tool, though other windows do (the
    /// broker lists the union of every window's tools, so the call must not end in
    /// `unknown_tool`).
    ToolNotServed {
        tool: String,
        /// The window the call was routed to.
        window: WindowName,
        /// Every connected window that serves the tool, by label then id.
        served_by: Vec<WindowName>,
        /// Whether the window was chosen as the owner of the call's notebook (else by
        /// `windowId`, or as the broker's own window).
        by_notebook: bool,
    },
}

/// A window as an error names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowName {
    pub label: String,
    pub window_id: String,
}

impl std::fmt::Display for WindowName {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "`{}` (windowId `{}`)",
            self.label, self.window_id
        )
    }
}

fn unanswered_note(unanswered: &[String]) -> String {
    if unanswered.is_empty() {
        String::new()
    } else {
        format!(
            " (these windows did not answer and may have it: {})",
            unanswered.join(", ")
        )
    }
}

impl RouteError {
    /// The contract error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            RouteError::Malformed { .. } => ErrorCode::NotebookRefMalformed,
            RouteError::UnknownRef { .. } => ErrorCode::NotebookRefUnknown,
            RouteError::Ambiguous { .. } => ErrorCode::NotebookAmbiguous,
            RouteError::NotFound { .. } => ErrorCode::NotebookNotFound,
            RouteError::WindowNotConnected { .. } => ErrorCode::WindowNotConnected,
            RouteError::WindowUnavailable { .. } => ErrorCode::WindowUnavailable,
            RouteError::ToolNotServed { .. } => ErrorCode::NotSupported,
        }
    }

    /// The failure a client sees.
    pub fn to_tool_error(&self) -> ToolError {
        let (message, details) = match self {
            RouteError::Malformed { reference } => (
                format!(
                    "Malformed notebook reference `{reference}`: a notebookRef is nb_ followed by \
                     24 lower-case hex characters, as list_notebooks returns it"
                ),
                None,
            ),
            RouteError::UnknownRef {
                reference,
                unanswered,
            } => (
                format!(
                    "the notebookRef `{reference}` is unknown, stale, or collides: no connected \
                     window lists it{} (refs change when a window restarts, and a window that \
                     stopped takes its refs with it); call list_notebooks for current refs",
                    unanswered_note(unanswered)
                ),
                None,
            ),
            RouteError::Ambiguous { reference, matches } => {
                let lines: Vec<String> = matches
                    .iter()
                    .map(|(label, notebook_ref)| format!("{label}: {notebook_ref}"))
                    .collect();
                (
                    format!(
                        "`{reference}` is open in {} windows; pass one of these notebookRefs \
                         instead:\n{}",
                        matches.len(),
                        lines.join("\n")
                    ),
                    Some(json!({
                        "matches": matches
                            .iter()
                            .map(|(label, notebook_ref)| json!({"windowLabel": label, "notebookRef": notebook_ref}))
                            .collect::<Vec<_>>()
                    })),
                )
            }
            RouteError::NotFound {
                reference,
                unanswered,
            } => (
                format!(
                    "no connected window has the notebook `{reference}`{}; call list_notebooks \
                     for the notebooks of every window, or pass windowId to open_notebooks",
                    unanswered_note(unanswered)
                ),
                None,
            ),
            RouteError::WindowNotConnected { window_id } => (
                format!(
                    "window `{window_id}` is not connected to the MCP broker; call list_notebooks \
                     for the connected windows"
                ),
                None,
            ),
            RouteError::WindowUnavailable { label, reason } => (
                format!(
                    "the window `{label}` that owns this notebook {reason}; nothing more is known \
                     about the call. Call list_notebooks to see the connected windows, and retry \
                     once the window is back"
                ),
                None,
            ),
            RouteError::ToolNotServed {
                tool,
                window,
                served_by,
                by_notebook,
            } => {
                let servers: Vec<String> = served_by.iter().map(WindowName::to_string).collect();
                let (whose, what_to_do) = if *by_notebook {
                    (
                        " that owns this notebook",
                        format!(
                            "open the notebook in one of them (open_notebooks with its windowId) \
                             and call {tool} with the notebookRef that answer gives"
                        ),
                    )
                } else {
                    ("", "pass one of their windowIds instead".to_owned())
                };
                let name = |window: &WindowName| {
                    json!({
                        "windowId": window.window_id,
                        "windowLabel": window.label,
                    })
                };
                (
                    format!(
                        "the window {window}{whose} does not serve {tool} (each window lists only \
                         the tools its host supports); these windows do: {}. To use it, \
                         {what_to_do}",
                        servers.join(", ")
                    ),
                    Some(json!({
                        "tool": tool,
                        "window": name(window),
                        "servedBy": served_by.iter().map(name).collect::<Vec<_>>(),
                    })),
                )
            }
        };
        ToolError {
            code: self.code(),
            message,
            details,
        }
    }
}

fn normalise_location(text: &str) -> String {
    text.replace('\\', "/").to_lowercase()
}

/// Resolves a `notebookRef`, URI or path against one round of listings.
///
/// - `nb_` but malformed: [`RouteError::Malformed`].
/// - A well-formed ref must match exactly one listed notebook, else [`RouteError::UnknownRef`].
/// - Anything else is compared case-insensitively with every listed URI and root-relative path
///   (backslashes read as slashes): one window → that window; several windows →
///   [`RouteError::Ambiguous`] listing each window's ref; none → [`RouteError::NotFound`].
/// - When only one window is connected, a reference it does not list still goes to it (it may
///   name a notebook that is not listed yet, and the window explains what is wrong otherwise),
///   so a lone server behaves exactly as without a broker. An empty reference goes to
///   `own_window_id` for the same reason.
pub fn resolve(
    reference: &str,
    hosts: &[HostListing],
    own_window_id: &str,
) -> Result<Target, RouteError> {
    let lone_host = || match hosts {
        [only] => Some(Target {
            window_id: only.window_id.clone(),
            reference: reference.trim().to_owned(),
        }),
        _ => None,
    };
    let unanswered = || -> Vec<String> {
        hosts
            .iter()
            .filter(|host| !host.available)
            .map(|host| host.label.clone())
            .collect()
    };
    match refs::classify(reference) {
        RefKind::Malformed => Err(RouteError::Malformed {
            reference: reference.trim().to_owned(),
        }),
        RefKind::Handle(handle) => {
            let matches: Vec<(&HostListing, &ListedNotebook)> = hosts
                .iter()
                .flat_map(|host| host.notebooks.iter().map(move |notebook| (host, notebook)))
                .filter(|(_, notebook)| notebook.notebook_ref == handle)
                .collect();
            match matches.as_slice() {
                [(host, notebook)] => Ok(Target {
                    window_id: host.window_id.clone(),
                    reference: notebook.uri.clone(),
                }),
                _ => lone_host().ok_or_else(|| RouteError::UnknownRef {
                    reference: handle.to_owned(),
                    unanswered: unanswered(),
                }),
            }
        }
        RefKind::Location(text) => {
            if text.is_empty() {
                return Ok(Target {
                    window_id: own_window_id.to_owned(),
                    reference: String::new(),
                });
            }
            let wanted = normalise_location(text);
            let matches: Vec<(&HostListing, &ListedNotebook)> = hosts
                .iter()
                .flat_map(|host| host.notebooks.iter().map(move |notebook| (host, notebook)))
                .filter(|(_, notebook)| {
                    notebook.uri.to_lowercase() == wanted
                        || notebook
                            .path
                            .as_deref()
                            .is_some_and(|path| normalise_location(path) == wanted)
                })
                .collect();
            let mut windows: Vec<&str> = Vec::new();
            for (host, _) in &matches {
                if !windows.contains(&host.window_id.as_str()) {
                    windows.push(&host.window_id);
                }
            }
            match windows.as_slice() {
                [] => lone_host().ok_or_else(|| RouteError::NotFound {
                    reference: text.to_owned(),
                    unanswered: unanswered(),
                }),
                [window_id] => {
                    let reference = match matches.as_slice() {
                        [(_, notebook)] => notebook.uri.clone(),
                        // Several notebooks of one window differ only in case: the window's
                        // own, exact lookup decides.
                        _ => text.to_owned(),
                    };
                    Ok(Target {
                        window_id: (*window_id).to_owned(),
                        reference,
                    })
                }
                _ => Err(RouteError::Ambiguous {
                    reference: text.to_owned(),
                    matches: matches
                        .iter()
                        .map(|(host, notebook)| (host.label.clone(), notebook.notebook_ref.clone()))
                        .collect(),
                }),
            }
        }
    }
}

/// A connected window and the names of the tools it serves: the broker's own from its dispatch,
/// a peer's from its latest registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowTools {
    pub window_id: String,
    pub label: String,
    pub tools: Vec<String>,
}

/// How the broker picked the window for a call, before asking whether it serves the tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination<'a> {
    /// The owner of the call's notebook (or of one batch part).
    NotebookOwner(&'a str),
    /// The window the call's `windowId` names.
    Named(&'a str),
    /// No `windowId`: the broker's own window. `takes_window_id` says whether the tool accepts
    /// one, so whether the caller could choose another window.
    Own {
        own_window_id: &'a str,
        takes_window_id: bool,
    },
}

/// The window a call to `tool` goes to, given where routing sent it and what every connected
/// window serves.
///
/// - A window that serves the tool gets the call; so does a window that is not in `windows`
///   (the call then reports that it is gone) and any window when no window serves the tool (it
///   is not listed, and the window answers `unknown_tool` as a lone server would).
/// - Otherwise the tool is listed but not served where the call was sent. For the broker's own
///   window by default, the call goes to the one window that serves it, or, when several do, to
///   the first by label then id if the tool takes no `windowId` (the caller cannot choose);
///   with a `windowId` to choose, and for a notebook's owner or a named window, the answer is
///   [`RouteError::ToolNotServed`], which names the window and every window that serves the
///   tool.
pub fn serving_window(
    tool: &str,
    destination: Destination<'_>,
    windows: &[WindowTools],
) -> Result<String, RouteError> {
    let (window_id, by_notebook) = match destination {
        Destination::NotebookOwner(window_id) => (window_id, true),
        Destination::Named(window_id) => (window_id, false),
        Destination::Own { own_window_id, .. } => (own_window_id, false),
    };
    let serves = |window: &WindowTools| window.tools.iter().any(|name| name == tool);
    let Some(routed) = windows.iter().find(|window| window.window_id == window_id) else {
        return Ok(window_id.to_owned());
    };
    let mut servers: Vec<&WindowTools> = windows.iter().filter(|window| serves(window)).collect();
    if serves(routed) || servers.is_empty() {
        return Ok(window_id.to_owned());
    }
    sort_windows(&mut servers, |window| {
        (window.label.as_str(), window.window_id.as_str())
    });
    if let Destination::Own {
        takes_window_id, ..
    } = destination
        && (servers.len() == 1 || !takes_window_id)
    {
        return Ok(servers[0].window_id.clone());
    }
    let name = |window: &WindowTools| WindowName {
        label: window.label.clone(),
        window_id: window.window_id.clone(),
    };
    Err(RouteError::ToolNotServed {
        tool: tool.to_owned(),
        window: name(routed),
        served_by: servers.into_iter().map(name).collect(),
        by_notebook,
    })
}

/// Splits resolved batch members by owner: one group per window, windows in the order they are
/// first named, each group's references in the order given.
pub fn group_by_owner(targets: Vec<Target>) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for target in targets {
        match groups
            .iter_mut()
            .find(|(window_id, _)| *window_id == target.window_id)
        {
            Some((_, references)) => references.push(target.reference),
            None => groups.push((target.window_id, vec![target.reference])),
        }
    }
    groups
}

/// Joins the answers of one batch call per owner, in the order the owners were called. Arrays
/// of the same key are concatenated; other keys keep the first answer's value. When an owner
/// failed, the result is that failure (the first one), and its details say what the other
/// owners did, so nothing that happened is hidden.
pub fn merge_batch(outputs: Vec<ToolOutput>) -> ToolOutput {
    let (failures, successes): (Vec<ToolOutput>, Vec<ToolOutput>) =
        outputs.into_iter().partition(|output| output.is_error);
    let mut merged = Map::new();
    let mut images = Vec::new();
    for output in successes {
        images.extend(output.images);
        let Some(Value::Object(object)) = output.structured else {
            continue;
        };
        for (key, value) in object {
            match (merged.get_mut(&key), value) {
                (Some(Value::Array(existing)), Value::Array(more)) => existing.extend(more),
                (Some(_), _) => {}
                (None, value) => {
                    merged.insert(key, value);
                }
            }
        }
    }
    let merged = Value::Object(merged);
    match failures.into_iter().next() {
        None => ToolOutput::success(merged, images),
        Some(failure) => {
            let mut body: Value =
                serde_json::from_str(&failure.text).unwrap_or_else(|_| json!({"error": {}}));
            if merged.as_object().is_some_and(|object| !object.is_empty())
                && let Some(error) = body.get_mut("error").and_then(Value::as_object_mut)
            {
                let details = error
                    .entry("details")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(details) = details {
                    details.insert("doneByOtherWindows".to_owned(), merged);
                }
            }
            ToolOutput {
                text: body.to_string(),
                structured: None,
                images: failure.images,
                links: failure.links,
                is_error: true,
            }
        }
    }
}

/// The `(notebookRef, uri)` pairs a window's answer names (`open_notebooks`, `create_notebook`),
/// so that the broker can route refs of notebooks no listing shows.
pub fn learned_routes(structured: &Value) -> Vec<(String, String)> {
    fn pair(object: &Map<String, Value>) -> Option<(String, String)> {
        let notebook_ref = object.get("notebookRef")?.as_str()?;
        let uri = object.get("uri")?.as_str()?;
        matches!(refs::classify(notebook_ref), RefKind::Handle(_))
            .then(|| (notebook_ref.to_owned(), uri.to_owned()))
    }
    let Value::Object(top) = structured else {
        return Vec::new();
    };
    let mut found: Vec<(String, String)> = pair(top).into_iter().collect();
    for value in top.values() {
        if let Value::Array(items) = value {
            found.extend(items.iter().filter_map(Value::as_object).filter_map(pair));
        }
    }
    found
}

/// Orders windows as `list_notebooks` shows them: by label, then id.
pub fn sort_windows<T>(windows: &mut [T], key: impl Fn(&T) -> (&str, &str)) {
    windows.sort_by(|left, right| key(left).cmp(&key(right)));
}

/// One registered peer and when the broker last heard from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerRecord<P> {
    pub last_seen_ms: u64,
    pub info: P,
}

/// The broker's table of peers. The broker's own window is not in it, so it is never pruned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerTable<P> {
    entries: BTreeMap<String, PeerRecord<P>>,
}

impl<P> Default for PeerTable<P> {
    fn default() -> Self {
        PeerTable {
            entries: BTreeMap::new(),
        }
    }
}

impl<P> PeerTable<P> {
    /// Records a registration (or heartbeat) at `now_ms`; returns the entry it replaced.
    pub fn register(&mut self, id: &str, info: P, now_ms: u64) -> Option<P> {
        self.entries
            .insert(
                id.to_owned(),
                PeerRecord {
                    last_seen_ms: now_ms,
                    info,
                },
            )
            .map(|previous| previous.info)
    }

    /// Refreshes a peer's time without changing what the table knows about it.
    pub fn touch(&mut self, id: &str, now_ms: u64) -> bool {
        match self.entries.get_mut(id) {
            Some(record) => {
                record.last_seen_ms = record.last_seen_ms.max(now_ms);
                true
            }
            None => false,
        }
    }

    pub fn remove(&mut self, id: &str) -> Option<P> {
        self.entries.remove(id).map(|record| record.info)
    }

    pub fn get(&self, id: &str) -> Option<&P> {
        self.entries.get(id).map(|record| &record.info)
    }

    pub fn record(&self, id: &str) -> Option<&PeerRecord<P>> {
        self.entries.get(id)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &P)> {
        self.entries.iter().map(|(id, record)| (id, &record.info))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Removes and returns the peers not heard from for more than `stale_after_ms`.
    pub fn prune(&mut self, now_ms: u64, stale_after_ms: u64) -> Vec<(String, P)> {
        let stale: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, record)| now_ms.saturating_sub(record.last_seen_ms) > stale_after_ms)
            .map(|(id, _)| id.clone())
            .collect();
        stale
            .into_iter()
            .filter_map(|id| {
                let record = self.entries.remove(&id)?;
                Some((id, record.info))
            })
            .collect()
    }
}

/// The role of a process on the shared port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Holds the shared port and serves `/mcp` for every window.
    Broker {
        owner_id: String,
    },
    /// Registered with the broker `owner_id`.
    Peer {
        owner_id: String,
    },
    /// Could neither register nor bind; tries again on the next tick.
    Blocked,
    Stopped,
}

/// What a process does on a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickStep {
    /// The broker refreshes itself and prunes stale peers.
    Prune,
    /// A peer (or a blocked process) registers again, which is its heartbeat.
    Register,
    Nothing,
}

/// What happened during a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElectionEvent {
    Registered {
        owner_id: String,
    },
    RegistrationFailed,
    /// The process bound the shared port and is broker under a new owner id.
    Bound {
        owner_id: String,
    },
    BindFailed,
    /// The broker's server ended without being asked to.
    ServerClosed,
    Stop,
}

/// What to do next within the same tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowUp {
    /// Registration failed: the broker may be gone, so try to take the port over.
    TryBind,
}

/// The step a process in `role` takes on a tick.
pub fn tick_step(role: &Role) -> TickStep {
    match role {
        Role::Broker { .. } => TickStep::Prune,
        Role::Peer { .. } | Role::Blocked => TickStep::Register,
        Role::Stopped => TickStep::Nothing,
    }
}

/// The role after an event, and what to do next within the tick. A stopped process stays
/// stopped; a broker stays broker until its server closes; anyone else follows the last
/// registration or bind.
pub fn next_role(role: &Role, event: ElectionEvent) -> (Role, Option<FollowUp>) {
    match (role, event) {
        (Role::Stopped, _) | (_, ElectionEvent::Stop) => (Role::Stopped, None),
        (Role::Broker { .. }, ElectionEvent::ServerClosed) => (Role::Blocked, None),
        (Role::Broker { owner_id }, _) => (
            Role::Broker {
                owner_id: owner_id.clone(),
            },
            None,
        ),
        (_, ElectionEvent::Registered { owner_id }) => (Role::Peer { owner_id }, None),
        (_, ElectionEvent::RegistrationFailed) => (Role::Blocked, Some(FollowUp::TryBind)),
        (_, ElectionEvent::Bound { owner_id }) => (Role::Broker { owner_id }, None),
        (_, ElectionEvent::BindFailed | ElectionEvent::ServerClosed) => (Role::Blocked, None),
    }
}

#[cfg(test)]
mod tests;
