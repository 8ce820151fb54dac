//! A simulated host for tests and fuzzing: a Colab world (sessions, tunnel assignments, the VS
//! Code picker, a kernel with `/content`, a file service) that answers every command the way a
//! cooperative host would. Tests steer it through its knobs; the fuzz check mixes its answers
//! with random ones.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::picker::{PickerLabels, PickerRow, PickerView, UserPrompt};
use crate::probe::{CheckCommandKind, CheckReply, KernelFailure};
use crate::servers::ServerRow;
use crate::setup::{CellRun, Command, CommandKind, Reply};

/// The release tag the simulated runtime reports in both places.
pub(crate) const SIM_RELEASE_TAG: &str = "release-colab_20260801-060000_RC00";

/// Where the simulated picker is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Screen {
    Closed,
    KernelPicker,
    SourcePicker,
    /// The empty prompt VS Code shows during a provider hand-off.
    EmptyPrompt,
    ServerPicker,
    Accelerator,
    Shape,
    Version,
    AliasInput {
        value: String,
    },
    /// Colab assigns the server: the picker is closed for `remaining` observations.
    Assigning {
        alias: String,
        remaining: u8,
    },
    KernelList {
        alias: String,
    },
}

/// The simulated world and its knobs.
#[derive(Clone, Debug)]
pub(crate) struct SimHost {
    // Knobs.
    /// The source picker opens directly (no local-kernel suggestions first).
    pub direct_source: bool,
    /// VS Code reopens the source picker once, after an empty prompt.
    pub handoff: bool,
    /// The machine-shape prompt appears.
    pub shape_prompt: bool,
    /// The runtime-version prompt appears.
    pub version_prompt: bool,
    /// A sign-in prompt appears at the first observation after choosing Colab.
    pub sign_in_once: bool,
    /// The kernel's runtime is Colab (has `/content` and `google.colab`, and its file service
    /// sees the kernel's files). False simulates a plain Jupyter server.
    pub colab: bool,
    /// The file service answers nothing (a stale or wrong root).
    pub file_service_down: bool,
    /// The kernels the server offers.
    pub kernel_labels: Vec<String>,
    /// Existing picker servers (their alias labels).
    pub picker_servers: Vec<String>,
    /// google-colab-cli sessions.
    pub sessions: Vec<ServerRow>,
    /// Tunnel assignments by alias.
    pub assignments: BTreeMap<String, String>,
    /// Aliases whose file service is mounted already (a `colab://` workspace folder).
    pub mounted: BTreeSet<String>,

    // State.
    pub screen: Screen,
    pub chose_colab_once: bool,
    /// Files in the kernel's filesystem.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Cells in the notebook.
    pub cells: BTreeSet<String>,
    pub released: Vec<String>,
    pub next_number: u32,
}

impl Default for SimHost {
    fn default() -> Self {
        SimHost {
            direct_source: false,
            handoff: false,
            shape_prompt: false,
            version_prompt: true,
            sign_in_once: false,
            colab: true,
            file_service_down: false,
            kernel_labels: vec!["Python 3 (ipykernel)".to_owned(), "R".to_owned()],
            picker_servers: Vec::new(),
            sessions: Vec::new(),
            assignments: BTreeMap::new(),
            mounted: BTreeSet::new(),
            screen: Screen::Closed,
            chose_colab_once: false,
            files: BTreeMap::new(),
            cells: BTreeSet::new(),
            released: Vec::new(),
            next_number: 0,
        }
    }
}

fn quick_pick(title: &str, labels: &[&str]) -> PickerView {
    PickerView::QuickPick {
        title: title.to_owned(),
        rows: labels.iter().map(|label| PickerRow::new(*label)).collect(),
        busy: false,
    }
}

/// The value of `"KEY": "<value>"` in generated kernel code.
fn code_field(code: &str, key: &str) -> Option<String> {
    let start = code.find(&format!("\"{key}\": \""))? + key.len() + 5;
    let end = code[start..].find('"')? + start;
    Some(code[start..end].to_owned())
}

impl SimHost {
    fn number(&mut self) -> u32 {
        self.next_number += 1;
        self.next_number
    }

    /// The view the picker shows now (observing may move transitional screens along).
    pub(crate) fn view(&mut self) -> PickerView {
        let labels = PickerLabels::default();
        match self.screen.clone() {
            Screen::Closed => PickerView::Closed,
            Screen::KernelPicker => quick_pick(
                "Select Kernel",
                &["Python 3.11.7 (.venv)", labels.select_another_kernel],
            ),
            Screen::SourcePicker => quick_pick(
                "Select Another Kernel",
                &[
                    "Python Environments...",
                    "Existing Jupyter Server...",
                    labels.colab_source,
                ],
            ),
            Screen::EmptyPrompt => {
                self.screen = Screen::SourcePicker;
                quick_pick("", &[])
            }
            Screen::ServerPicker => {
                if self.sign_in_once {
                    self.sign_in_once = false;
                    return PickerView::Prompt(UserPrompt::SignIn);
                }
                let mut rows: Vec<&str> = self.picker_servers.iter().map(String::as_str).collect();
                rows.push(labels.new_server);
                quick_pick("Select a Colab Server", &rows)
            }
            Screen::Accelerator => quick_pick("Select a machine", &["CPU", "T4 GPU", "v5e-1 TPU"]),
            Screen::Shape => quick_pick("Machine shape", &["Standard", "High-RAM"]),
            Screen::Version => quick_pick("Runtime version", &["Latest", "2025.07"]),
            Screen::AliasInput { value } => PickerView::InputBox {
                title: "Alias your server".to_owned(),
                prompt: "Colab CPU".to_owned(),
                value,
            },
            Screen::Assigning { alias, remaining } => {
                self.screen = if remaining == 0 {
                    Screen::KernelList { alias }
                } else {
                    Screen::Assigning {
                        alias,
                        remaining: remaining - 1,
                    }
                };
                PickerView::Closed
            }
            Screen::KernelList { alias } => PickerView::QuickPick {
                title: format!("Select a kernel from {alias}"),
                rows: self
                    .kernel_labels
                    .iter()
                    .map(|label| PickerRow::new(label.clone()))
                    .collect(),
                busy: false,
            },
        }
    }

    fn choose(&mut self, label: &str) -> Reply {
        let labels = PickerLabels::default();
        let next = match (&self.screen, label) {
            (Screen::KernelPicker, label) if label == labels.select_another_kernel => {
                Screen::SourcePicker
            }
            (Screen::SourcePicker, "Colab") => {
                if self.handoff && !self.chose_colab_once {
                    self.chose_colab_once = true;
                    Screen::EmptyPrompt
                } else {
                    Screen::ServerPicker
                }
            }
            (Screen::ServerPicker, "New Colab Server") => Screen::Accelerator,
            (Screen::ServerPicker, alias) if self.picker_servers.iter().any(|s| s == alias) => {
                Screen::KernelList {
                    alias: alias.to_owned(),
                }
            }
            (Screen::Accelerator, "CPU") => {
                if self.shape_prompt {
                    Screen::Shape
                } else if self.version_prompt {
                    Screen::Version
                } else {
                    Screen::AliasInput {
                        value: String::new(),
                    }
                }
            }
            (Screen::Shape, "Standard") => {
                if self.version_prompt {
                    Screen::Version
                } else {
                    Screen::AliasInput {
                        value: String::new(),
                    }
                }
            }
            (Screen::Version, "Latest") => Screen::AliasInput {
                value: String::new(),
            },
            _ => return Reply::RowChanged,
        };
        self.screen = next;
        Reply::Done
    }

    /// A cooperative answer to `command`.
    pub(crate) fn answer(&mut self, command: &Command) -> Reply {
        match &command.kind {
            CommandKind::CheckProvider | CommandKind::ProbeRuntime => Reply::Done,
            CommandKind::ReadSessions => Reply::Servers(self.sessions.clone()),
            CommandKind::LookupAssignment { alias } => match self.assignments.get(alias.as_str()) {
                Some(endpoint) => Reply::AssignmentFound {
                    endpoint: endpoint.clone(),
                },
                None => Reply::NoAssignment,
            },
            CommandKind::CreateAssignment { alias } => {
                let endpoint = format!("gpu-sim-{}", self.number());
                self.assignments.insert(alias.to_string(), endpoint.clone());
                Reply::AssignmentCreated { endpoint }
            }
            CommandKind::ReleaseRuntime { endpoint } => {
                self.assignments.retain(|_, existing| existing != endpoint);
                self.released.push(endpoint.clone());
                Reply::Done
            }
            CommandKind::OpenKernelPicker => {
                self.screen = if self.direct_source {
                    Screen::SourcePicker
                } else {
                    Screen::KernelPicker
                };
                Reply::Done
            }
            CommandKind::ObservePicker => Reply::Picker(self.view()),
            CommandKind::ChooseRow { label, .. } => self.choose(label),
            CommandKind::TypeAlias { alias } => match &mut self.screen {
                Screen::AliasInput { value } => {
                    *value = alias.to_string();
                    Reply::AliasReadBack {
                        value: value.clone(),
                    }
                }
                _ => Reply::Failed(crate::setup::Failure::Unavailable),
            },
            CommandKind::SubmitInput => match self.screen.clone() {
                Screen::AliasInput { value } => {
                    self.picker_servers.push(value.clone());
                    self.screen = Screen::Assigning {
                        alias: value,
                        remaining: 2,
                    };
                    Reply::Done
                }
                _ => Reply::Failed(crate::setup::Failure::Unavailable),
            },
            CommandKind::DismissPicker => {
                self.screen = Screen::Closed;
                Reply::Done
            }
            CommandKind::ObserveKernelChoices => Reply::KernelChoices {
                labels: self.kernel_labels.clone(),
                complete: true,
            },
            CommandKind::SelectKernelChoice { listing, .. } => {
                if *listing == self.kernel_labels {
                    self.screen = Screen::Closed;
                    Reply::KernelSelected {
                        confirmed: Some(true),
                    }
                } else {
                    Reply::ListingChanged
                }
            }
            CommandKind::StartKernel { listing, .. } => {
                if *listing == self.kernel_labels {
                    Reply::Done
                } else {
                    Reply::ListingChanged
                }
            }
            CommandKind::InsertTemporaryCell { .. } => {
                let cell_id = format!("cell-{}", self.number());
                self.cells.insert(cell_id.clone());
                Reply::CellInserted { cell_id }
            }
            CommandKind::RunTemporaryCell { .. } => Reply::CellRan(CellRun::Completed),
            CommandKind::RemoveTemporaryCell { cell_id, .. } => {
                self.cells.remove(cell_id);
                Reply::CellRemoved
            }
            CommandKind::FindMountedServer { alias } => {
                if self.mounted.contains(alias.as_str()) {
                    Reply::FileService {
                        root: crate::names::FileServiceRoot::ColabFs {
                            authority: alias.to_string(),
                        },
                    }
                } else {
                    Reply::NotMounted
                }
            }
            CommandKind::MountServer { alias } => {
                self.mounted.insert(alias.to_string());
                Reply::FileService {
                    root: crate::names::FileServiceRoot::ColabFs {
                        authority: alias.to_string(),
                    },
                }
            }
            CommandKind::ConnectFileService => Reply::FileService {
                root: crate::names::FileServiceRoot::Contents {
                    base_url: "https://8080-sim.prod.colab.dev/".to_owned(),
                },
            },
            CommandKind::Check { command, .. } => Reply::Check(self.check_answer(command)),
        }
    }

    pub(crate) fn check_answer(&mut self, command: &CheckCommandKind) -> CheckReply {
        match command {
            CheckCommandKind::ExecuteKernel { code } => {
                let (Some(op), Some(probe), Some(nonce), Some(marker)) = (
                    code_field(code, "OP"),
                    code_field(code, "PROBE"),
                    code_field(code, "NONCE"),
                    code_field(code, "MARKER"),
                ) else {
                    return CheckReply::KernelFailed(KernelFailure::Error {
                        ename: "SyntaxError".into(),
                    });
                };
                let result = if op == "write" {
                    let mut result = json!({
                        "op": "write",
                        "pid": 4242,
                        "python": "3.12.11",
                        "system": "Linux",
                        "content": self.colab,
                        "colab": self.colab,
                        "releaseTag": if self.colab { Value::from(SIM_RELEASE_TAG) } else { Value::Null },
                    });
                    if !self.colab {
                        result["created"] = Value::from(false);
                        result["error"] = Value::from("FileNotFoundError");
                    } else if let std::collections::btree_map::Entry::Vacant(entry) =
                        self.files.entry(probe)
                    {
                        entry.insert(nonce.into_bytes());
                        result["created"] = Value::from(true);
                    } else {
                        result["created"] = Value::from(false);
                        result["error"] = Value::from("FileExistsError");
                    }
                    result
                } else {
                    let ours = self
                        .files
                        .get(&probe)
                        .map(|bytes| *bytes == nonce.as_bytes());
                    if ours == Some(true) {
                        self.files.remove(&probe);
                    }
                    json!({
                        "op": "remove",
                        "removed": ours == Some(true),
                        "foreign": ours == Some(false),
                        "absent": !self.files.contains_key(&probe),
                    })
                };
                CheckReply::KernelOutput {
                    stdout: format!("{marker}{result}\n"),
                }
            }
            CheckCommandKind::ReadBuildInfo => {
                if self.colab {
                    CheckReply::BuildInfo {
                        release_tag: Some(SIM_RELEASE_TAG.to_owned()),
                    }
                } else {
                    CheckReply::ServiceUnavailable
                }
            }
            CheckCommandKind::ReadFile { path, .. } => {
                if self.file_service_down || !self.colab {
                    return CheckReply::ServiceUnavailable;
                }
                match self.files.get(&format!("/{path}")) {
                    Some(bytes) => CheckReply::FileContent(bytes.clone()),
                    None => CheckReply::FileMissing,
                }
            }
            CheckCommandKind::StatFile { path, .. } => {
                if self.file_service_down || !self.colab {
                    return CheckReply::ServiceUnavailable;
                }
                if self.files.contains_key(&format!("/{path}")) {
                    CheckReply::FileExists
                } else {
                    CheckReply::FileMissing
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_fields_are_found_in_generated_code() {
        let code = r#"exec("x", {"OP": "write", "PROBE": "/content/p.txt"})"#;
        assert_eq!(code_field(code, "OP").as_deref(), Some("write"));
        assert_eq!(code_field(code, "PROBE").as_deref(), Some("/content/p.txt"));
        assert_eq!(code_field(code, "NONCE"), None);
    }
}
