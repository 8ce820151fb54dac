//! The decisions of a VS Code window's Colab preparation tools (`get_colab_preflight`,
//! `list_colab_terminals`, `close_colab_terminals`, `prepare_colab_environment`,
//! `get_colab_environment_preparation`): which blockers a window raises, which terminals an
//! inventory lets a client close, which folder a preparation uses and whether the window must
//! become a workspace, and what a preparation's receipt says now.
//!
//! The host reads the window (its folders, counts, terminals) and performs what is decided here;
//! time comes in as milliseconds, and the host passes what it alone can check (whether a folder
//! exists, whether a generated folder still holds its marker, whether the native driver binds).

use std::collections::BTreeMap;
use std::fmt;

/// The suffix a converted folder's display name gets.
pub const COLAB_FOLDER_SUFFIX: &str = " (Colab)";
/// A terminal inventory lives this long.
pub const INVENTORY_TTL_MS: u64 = 60_000;
/// At most this many terminals are listed in one inventory.
pub const MAX_INVENTORY_TERMINALS: usize = 64;
/// A listed terminal's name is cut to this many characters.
pub const MAX_TERMINAL_NAME_CHARS: usize = 64;
/// A listed terminal's shell type is cut to this many characters.
pub const MAX_SHELL_TYPE_CHARS: usize = 32;

/// What a window has open that turning it into a workspace would restore rather than carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenWork {
    /// Open notebook documents.
    pub notebooks_open: usize,
    /// Text documents with unsaved changes.
    pub dirty_documents: usize,
    /// Untitled text documents.
    pub untitled_documents: usize,
    /// Open terminals.
    pub terminals: usize,
    /// Running debug sessions.
    pub debug_sessions: usize,
}

impl OpenWork {
    /// The blockers this open work raises, in a fixed order (none when nothing is open).
    pub fn blockers(&self) -> Vec<String> {
        let mut blockers = Vec::new();
        if self.notebooks_open > 0 {
            blockers.push("notebooks_open".to_owned());
        }
        if self.dirty_documents > 0 || self.untitled_documents > 0 {
            blockers.push("documents_unsaved".to_owned());
        }
        if self.terminals > 0 {
            blockers.push("terminals_open".to_owned());
        }
        if self.debug_sessions > 0 {
            blockers.push("debugging_active".to_owned());
        }
        blockers
    }
}

/// What a preflight knows of a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowFacts {
    /// The Colab extension is installed.
    pub extension_installed: bool,
    /// Its activation failed (a cached failure counts).
    pub activation_failed: bool,
    /// A native debugging port is configured.
    pub native_configured: bool,
    /// The configured port answered.
    pub native_reachable: bool,
    /// The window is a workspace (it has a workspace file).
    pub is_workspace: bool,
    /// What the window has open.
    pub open_work: OpenWork,
}

/// The preflight's blockers: what stands between this window and a Colab setup. Open work
/// counts only in a window that is not a workspace yet, since only a conversion disturbs it.
pub fn preflight_blockers(facts: &WindowFacts) -> Vec<String> {
    let mut blockers = Vec::new();
    if !facts.extension_installed {
        blockers.push("colab_extension_missing".to_owned());
    }
    if facts.activation_failed {
        blockers.push("colab_activation_failed".to_owned());
    }
    if !facts.native_configured {
        blockers.push("native_not_configured".to_owned());
    } else if !facts.native_reachable {
        blockers.push("native_unreachable".to_owned());
    }
    if !facts.is_workspace {
        blockers.extend(facts.open_work.blockers());
    }
    blockers
}

/// The terminal's name as listed: at most [`MAX_TERMINAL_NAME_CHARS`] characters.
pub fn listed_terminal_name(name: &str) -> String {
    name.chars().take(MAX_TERMINAL_NAME_CHARS).collect()
}

/// The shell type as listed: at most [`MAX_SHELL_TYPE_CHARS`] characters.
pub fn listed_shell_type(kind: &str) -> String {
    kind.chars().take(MAX_SHELL_TYPE_CHARS).collect()
}

/// The shell's process id as listed: only a positive id that fits a `u32` is a shell's.
pub fn listed_shell_pid(process_id: Option<i64>) -> Option<u32> {
    process_id
        .and_then(|pid| u32::try_from(pid).ok())
        .filter(|pid| *pid > 0)
}

/// A terminal inventory: opaque references to what a window listed, valid for
/// [`INVENTORY_TTL_MS`] and only while it is the window's latest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminalInventory<T> {
    id: String,
    made_at_ms: u64,
    entries: BTreeMap<String, T>,
}

/// Why a close request names no terminal to close. Nothing is closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InventoryRefusal {
    /// The id is not the window's latest inventory.
    NotLatest {
        /// The id the client sent.
        inventory_id: String,
    },
    /// The inventory is older than [`INVENTORY_TTL_MS`].
    Expired {
        /// The id the client sent.
        inventory_id: String,
    },
    /// A reference is not in the inventory.
    UnknownReference {
        /// The id the client sent.
        inventory_id: String,
        /// The reference not found.
        reference: String,
    },
}

impl fmt::Display for InventoryRefusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InventoryRefusal::NotLatest { inventory_id } => write!(
                formatter,
                "`{inventory_id}` is not this window's latest terminal inventory (a newer listing \
                 replaced it, or the window restarted): call list_colab_terminals again. Nothing \
                 was closed"
            ),
            InventoryRefusal::Expired { inventory_id } => write!(
                formatter,
                "the terminal inventory `{inventory_id}` expired (it lives 60 s): call \
                 list_colab_terminals again. Nothing was closed"
            ),
            InventoryRefusal::UnknownReference {
                inventory_id,
                reference,
            } => write!(
                formatter,
                "`{reference}` is not a terminalRef of inventory `{inventory_id}`. Nothing was \
                 closed"
            ),
        }
    }
}

impl<T: Clone> TerminalInventory<T> {
    /// An inventory `id` made at `made_at_ms` of `entries` (reference, what the host needs to
    /// close that terminal).
    pub fn new(
        id: String,
        made_at_ms: u64,
        entries: impl IntoIterator<Item = (String, T)>,
    ) -> Self {
        TerminalInventory {
            id,
            made_at_ms,
            entries: entries.into_iter().collect(),
        }
    }

    /// The inventory's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The terminals `references` name, in the order named, if `inventory_id` is this inventory
    /// and it has not expired at `now_ms`; all or nothing.
    pub fn targets(
        &self,
        inventory_id: &str,
        references: &[String],
        now_ms: u64,
    ) -> Result<Vec<(String, T)>, InventoryRefusal> {
        if self.id != inventory_id {
            return Err(InventoryRefusal::NotLatest {
                inventory_id: inventory_id.to_owned(),
            });
        }
        if now_ms.saturating_sub(self.made_at_ms) > INVENTORY_TTL_MS {
            return Err(InventoryRefusal::Expired {
                inventory_id: inventory_id.to_owned(),
            });
        }
        references
            .iter()
            .map(|reference| match self.entries.get(reference) {
                Some(entry) => Ok((reference.clone(), entry.clone())),
                None => Err(InventoryRefusal::UnknownReference {
                    inventory_id: inventory_id.to_owned(),
                    reference: reference.clone(),
                }),
            })
            .collect()
    }
}

/// The terminals to close, from the window's latest inventory (none yet: not the latest).
pub fn close_targets<T: Clone>(
    latest: Option<&TerminalInventory<T>>,
    inventory_id: &str,
    references: &[String],
    now_ms: u64,
) -> Result<Vec<(String, T)>, InventoryRefusal> {
    match latest {
        Some(inventory) => inventory.targets(inventory_id, references, now_ms),
        None => Err(InventoryRefusal::NotLatest {
            inventory_id: inventory_id.to_owned(),
        }),
    }
}

/// What closing one terminal came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClosureOutcome {
    /// The window disposed of it.
    Closed,
    /// It was gone already.
    AlreadyGone,
    /// No clear answer: it may still be open.
    Uncertain,
}

impl ClosureOutcome {
    /// The outcome of the window's answer (`None`: no answer).
    pub fn from_answer(answer: Option<&str>) -> Self {
        match answer {
            Some("closed") => ClosureOutcome::Closed,
            Some("already_gone") => ClosureOutcome::AlreadyGone,
            _ => ClosureOutcome::Uncertain,
        }
    }

    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ClosureOutcome::Closed => "closed",
            ClosureOutcome::AlreadyGone => "already_gone",
            ClosureOutcome::Uncertain => "uncertain",
        }
    }
}

/// Whether a close request was partial: some terminal was not closed by it.
pub fn closure_partial(outcomes: &[ClosureOutcome]) -> bool {
    outcomes
        .iter()
        .any(|outcome| *outcome != ClosureOutcome::Closed)
}

/// A workspace folder as the window lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowFolder {
    /// Its URI.
    pub uri: String,
    /// Its URI in canonical form, for comparisons.
    pub canonical_uri: String,
    /// Its display name.
    pub name: String,
}

impl WindowFolder {
    fn is_local(&self) -> bool {
        self.uri.starts_with("file:")
    }
}

/// Which folder a preparation uses, and what the host must do for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FolderPlan {
    /// A folder of the window's workspace, as it is: nothing changes.
    Keep {
        /// The folder's URI.
        uri: String,
        /// Its display name.
        name: String,
    },
    /// The window becomes a workspace holding this folder under this name.
    Convert {
        /// The folder's URI.
        uri: String,
        /// Its display name once converted.
        name: String,
        /// The host must first check that the folder exists (the window had none open).
        must_exist: bool,
    },
    /// The host creates an isolated folder (marked as this preparation's), and the window
    /// becomes a workspace holding it under this name.
    Generate {
        /// Its display name once converted.
        name: String,
    },
}

/// Why a preparation cannot choose a folder. Nothing is changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FolderRefusal {
    /// `folderUri` is not a `file:` URI.
    NotLocal {
        /// The URI given.
        uri: String,
    },
    /// The workspace has no such local folder.
    NotInWorkspace,
    /// The window has another folder open.
    AnotherFolderOpen,
    /// Several folders and no workspace.
    FoldersWithoutWorkspace,
}

impl FolderRefusal {
    /// The blocker it raises (none: an invalid argument).
    pub fn blocker(&self) -> Option<&'static str> {
        match self {
            FolderRefusal::NotLocal { .. } => None,
            FolderRefusal::NotInWorkspace | FolderRefusal::AnotherFolderOpen => {
                Some("folder_mismatch")
            }
            FolderRefusal::FoldersWithoutWorkspace => Some("folders_without_workspace"),
        }
    }
}

impl fmt::Display for FolderRefusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FolderRefusal::NotLocal { uri } => write!(
                formatter,
                "folderUri must be a file: URI of a local folder, not `{uri}`"
            ),
            FolderRefusal::NotInWorkspace => formatter.write_str(
                "the window's workspace has no such local folder; this build never adds a \
                 different folder to a configured workspace",
            ),
            FolderRefusal::AnotherFolderOpen => formatter.write_str(
                "the window has another folder open; open the notebook's folder in its own window \
                 (or omit folderUri to prepare this one)",
            ),
            FolderRefusal::FoldersWithoutWorkspace => formatter.write_str(
                "the window has several folders but no workspace; save it as a workspace first",
            ),
        }
    }
}

/// The folder a preparation uses. `wanted` is `folderUri` as given and `wanted_canonical` its
/// canonical form; `folders` are the window's workspace folders; `preparation_id` names a
/// generated folder.
pub fn plan_folder(
    is_workspace: bool,
    folders: &[WindowFolder],
    wanted: Option<(&str, &str)>,
    preparation_id: &str,
) -> Result<FolderPlan, FolderRefusal> {
    if let Some((uri, _)) = wanted
        && !uri.starts_with("file:")
    {
        return Err(FolderRefusal::NotLocal {
            uri: uri.to_owned(),
        });
    }
    let wanted_canonical = wanted.map(|(_, canonical)| canonical);
    let local: Vec<&WindowFolder> = folders.iter().filter(|folder| folder.is_local()).collect();
    if is_workspace {
        let folder = match wanted_canonical {
            Some(canonical) => local
                .iter()
                .find(|folder| folder.canonical_uri == canonical),
            None => local.first(),
        };
        let folder = folder.ok_or(FolderRefusal::NotInWorkspace)?;
        return Ok(FolderPlan::Keep {
            uri: folder.uri.clone(),
            name: folder.name.clone(),
        });
    }
    if let [only] = local.as_slice() {
        if wanted_canonical.is_some_and(|canonical| only.canonical_uri != canonical) {
            return Err(FolderRefusal::AnotherFolderOpen);
        }
        return Ok(FolderPlan::Convert {
            uri: only.uri.clone(),
            name: format!("{}{COLAB_FOLDER_SUFFIX}", only.name),
            must_exist: false,
        });
    }
    if !folders.is_empty() {
        return Err(FolderRefusal::FoldersWithoutWorkspace);
    }
    Ok(match wanted_canonical {
        Some(canonical) => {
            let name = canonical.rsplit('/').next().unwrap_or("folder");
            FolderPlan::Convert {
                uri: canonical.to_owned(),
                name: format!("{name}{COLAB_FOLDER_SUFFIX}"),
                must_exist: true,
            }
        }
        None => FolderPlan::Generate {
            name: format!("{preparation_id}{COLAB_FOLDER_SUFFIX}"),
        },
    })
}

/// Why a conversion is refused while the window has open work.
pub fn open_work_message(blockers: &[String]) -> String {
    format!(
        "turning the window into a workspace restarts its extension host, and the window has \
         open work ({}); close or save it (list_colab_terminals and close_colab_terminals for \
         terminals) and call prepare_colab_environment again. Nothing was changed",
        blockers.join(", ")
    )
}

/// Why `restartMode` is refused: the one mode named is not supported by this build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestartModeRefusal {
    /// `restore-clean-workspace`: not supported (blocker `restart_unsupported`).
    Unsupported,
    /// Not a mode at all: an invalid argument.
    Unknown(String),
}

/// Every `restartMode` is refused; this says how.
pub fn restart_mode_refusal(mode: &str) -> RestartModeRefusal {
    if mode == "restore-clean-workspace" {
        RestartModeRefusal::Unsupported
    } else {
        RestartModeRefusal::Unknown(mode.to_owned())
    }
}

impl fmt::Display for RestartModeRefusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestartModeRefusal::Unsupported => formatter.write_str(
                "restartMode restore-clean-workspace (restarting VS Code with a debugging port) \
                 is not supported by this build: start VS Code with --remote-debugging-port=N, \
                 set jupyterMcp.nativeDebugPort to N, and call prepare_colab_environment without \
                 restartMode",
            ),
            RestartModeRefusal::Unknown(mode) => write!(
                formatter,
                "restartMode `{mode}` is not a mode; the only one named is \
                 restore-clean-workspace, which this build does not support"
            ),
        }
    }
}

/// Where a preparation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreparationStatus {
    /// The window is turning into a workspace (its extension host restarts).
    Converting,
    /// Every check passed.
    Ready,
    /// A blocker remains.
    Failed,
}

impl PreparationStatus {
    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            PreparationStatus::Converting => "converting",
            PreparationStatus::Ready => "ready",
            PreparationStatus::Failed => "failed",
        }
    }

    /// The status of a stored wire name (anything unknown counts as failed).
    pub fn parse(text: &str) -> Self {
        match text {
            "converting" => PreparationStatus::Converting,
            "ready" => PreparationStatus::Ready,
            _ => PreparationStatus::Failed,
        }
    }

    /// What the client does next.
    pub fn next_step(self) -> &'static str {
        match self {
            PreparationStatus::Ready => {
                "open the notebook with open_notebooks (windowId of this window), then \
                 configure_kernel with runtime \"colab\""
            }
            PreparationStatus::Converting => {
                "the window is still turning into a workspace: reconnect, call list_notebooks, \
                 then get_colab_environment_preparation again"
            }
            PreparationStatus::Failed => {
                "see blockers: fix what they name and call prepare_colab_environment again"
            }
        }
    }
}

/// What the client does next right after asking the window to become a workspace.
pub const NEXT_AFTER_CONVERSION: &str = "the window becomes an untitled workspace and its \
extension host restarts: reconnect, call list_notebooks, then get_colab_environment_preparation \
with this preparationId and the window's new windowId";

/// A recorded preparation, as far as checking it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreparationRecord<'a> {
    /// The folder's URI.
    pub folder_uri: &'a str,
    /// Its display name once prepared.
    pub folder_name: &'a str,
    /// The window was turned into a workspace.
    pub converted: bool,
    /// The folder was generated by the preparation.
    pub generated: bool,
    /// The status recorded last.
    pub status: PreparationStatus,
}

/// The window as a preparation is checked against it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreparationView<'a> {
    /// The window's folders: (URI, display name).
    pub folders: &'a [(&'a str, &'a str)],
    /// The window is a workspace.
    pub is_workspace: bool,
    /// The workspace is trusted.
    pub trusted: bool,
    /// A generated folder still holds its marker naming this preparation.
    pub generated_folder_owned: bool,
    /// Why the native driver does not bind to this window (none: it binds).
    pub native_blocker: Option<&'a str>,
}

/// A preparation's blockers and status, checked afresh against the window as it is now.
pub fn check_preparation(
    record: &PreparationRecord<'_>,
    view: &PreparationView<'_>,
) -> (PreparationStatus, Vec<String>) {
    let mut blockers = Vec::new();
    match view
        .folders
        .iter()
        .find(|(uri, _)| *uri == record.folder_uri)
    {
        None => blockers.push("folder_missing".to_owned()),
        Some((_, name)) if *name != record.folder_name => {
            blockers.push("folder_renamed".to_owned())
        }
        Some(_) => {}
    }
    if record.converted && !view.is_workspace {
        blockers.push("workspace_not_converted".to_owned());
    }
    if !view.trusted {
        blockers.push("workspace_untrusted".to_owned());
    }
    if record.generated && !view.generated_folder_owned {
        blockers.push("generated_folder_changed".to_owned());
    }
    if let Some(blocker) = view.native_blocker {
        blockers.push(blocker.to_owned());
    }
    let status = if blockers.is_empty() {
        PreparationStatus::Ready
    } else if record.status == PreparationStatus::Converting {
        PreparationStatus::Converting
    } else {
        PreparationStatus::Failed
    };
    (status, blockers)
}

#[cfg(test)]
mod tests;
