//! What a VS Code host's DOM driver reports of the kernel picker, and the labels the setup looks
//! for in it.
//!
//! The driver projects the open quick pick or input box into a [`PickerView`]: bounded labels,
//! no DOM tree, no screenshot. Every label the setup matches lives in [`PickerLabels`], the one
//! place to change when VS Code or the Colab extension renames a row.

use crate::servers::{Availability, ServerRow};

/// The labels of VS Code's and the Colab extension's picker rows and prompts (Colab 0.9.x, VS
/// Code 1.14x).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PickerLabels {
    /// VS Code's row that leaves the suggested kernels for the source picker.
    pub select_another_kernel: &'static str,
    /// The Colab extension's kernel source.
    pub colab_source: &'static str,
    /// The server picker's row for a new server.
    pub new_server: &'static str,
    /// The accelerator row for a CPU server (never a GPU or TPU).
    pub cpu: &'static str,
    /// The machine-shape row, when that prompt appears.
    pub standard_shape: &'static str,
    /// The runtime-version row, when that prompt appears.
    pub latest_version: &'static str,
    /// What the alias input box must name: the kind of server being named.
    pub alias_prompt_server: &'static str,
}

impl PickerLabels {
    /// The labels of the Colab extension 0.9.x in VS Code 1.14x.
    pub const COLAB_0_9: PickerLabels = PickerLabels {
        select_another_kernel: "Select Another Kernel...",
        colab_source: "Colab",
        new_server: "New Colab Server",
        cpu: "CPU",
        standard_shape: "Standard",
        latest_version: "Latest",
        alias_prompt_server: "Colab CPU",
    };
}

impl Default for PickerLabels {
    fn default() -> Self {
        PickerLabels::COLAB_0_9
    }
}

/// One row of a quick pick, as the driver read it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PickerRow {
    /// The row's label text (icons removed by the driver).
    pub label: String,
    /// Whether the row can be chosen.
    pub enabled: bool,
}

impl PickerRow {
    /// An enabled row.
    pub fn new(label: impl Into<String>) -> Self {
        PickerRow {
            label: label.into(),
            enabled: true,
        }
    }

    /// A disabled row: shown, but not choosable.
    pub fn disabled(label: impl Into<String>) -> Self {
        PickerRow {
            enabled: false,
            ..PickerRow::new(label)
        }
    }
}

/// A prompt that needs the user rather than the setup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UserPrompt {
    /// Google sign-in (including MFA).
    SignIn,
    /// A consent dialog (for example the Jupyter extension's code-execution consent).
    Consent,
    /// Any other modal Colab or VS Code prompt.
    Other,
}

/// What the picker shows at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PickerView {
    /// No quick pick or input box is open.
    Closed,
    /// A quick pick.
    QuickPick {
        /// Its title (or placeholder), bounded.
        title: String,
        /// Its rows, in order.
        rows: Vec<PickerRow>,
        /// Whether it shows its busy indicator (rows still loading).
        busy: bool,
    },
    /// An input box.
    InputBox {
        /// Its title, bounded.
        title: String,
        /// Its prompt (the text under the input), bounded.
        prompt: String,
        /// The text currently in it.
        value: String,
    },
    /// A prompt for the user (sign-in, consent, …).
    Prompt(UserPrompt),
}

impl PickerView {
    /// Whether this is the workbench's kernel picker (the kernel or kernel-source list), the one
    /// thing a dismissal may close again: anything else opened meanwhile is the user's.
    pub fn is_kernel_picker(&self, labels: &PickerLabels) -> bool {
        match self {
            PickerView::QuickPick { title, rows, .. } => {
                title.contains("Kernel")
                    || rows.iter().any(|row| {
                        row.label == labels.colab_source
                            || same_label(&row.label, labels.select_another_kernel)
                    })
            }
            _ => false,
        }
    }

    /// Whether a settled quick pick still shows the row `label` (allowing "…" for "..."): a
    /// click has not shown yet while it does.
    pub fn still_shows_row(&self, label: &str) -> bool {
        match self {
            PickerView::QuickPick { rows, busy, .. } => {
                !busy && rows.iter().any(|row| same_label(&row.label, label))
            }
            _ => false,
        }
    }

    /// Whether a settled quick pick offers an enabled row named exactly `label`: the row a host
    /// waits for before choosing it.
    pub fn offers_row(&self, label: &str) -> bool {
        match self {
            PickerView::QuickPick { rows, busy, .. } => {
                !busy && rows.iter().any(|row| row.label == label && row.enabled)
            }
            _ => false,
        }
    }
}

/// Whether two labels are the same, allowing VS Code's "…" for "...".
pub(crate) fn same_label(observed: &str, expected: &str) -> bool {
    observed == expected || observed.replace('…', "...") == expected
}

/// How many rows carry `label`, and the position of the first enabled one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowMatch {
    /// No row has the label.
    Absent,
    /// Exactly one row has it, enabled.
    One,
    /// Several rows have it, or the one row is disabled: it cannot be chosen safely.
    Unusable,
}

pub(crate) fn find_row(rows: &[PickerRow], label: &str) -> RowMatch {
    let mut matching = rows.iter().filter(|row| same_label(&row.label, label));
    match (matching.next(), matching.next()) {
        (None, _) => RowMatch::Absent,
        (Some(row), None) if row.enabled => RowMatch::One,
        _ => RowMatch::Unusable,
    }
}

/// The picker rows as server rows, for exact alias resolution.
pub(crate) fn server_rows(rows: &[PickerRow]) -> Vec<ServerRow> {
    rows.iter()
        .map(|row| ServerRow {
            name: row.label.clone(),
            availability: if row.enabled {
                Availability::Available
            } else {
                Availability::Disabled
            },
            endpoint: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick_pick(title: &str, labels: &[&str], busy: bool) -> PickerView {
        PickerView::QuickPick {
            title: title.into(),
            rows: labels.iter().map(|label| PickerRow::new(*label)).collect(),
            busy,
        }
    }

    #[test]
    fn only_the_kernel_lists_count_as_the_kernel_picker() {
        let labels = PickerLabels::default();
        assert!(quick_pick("Select Kernel", &[], false).is_kernel_picker(&labels));
        assert!(
            quick_pick("", &["Colab", "Python Environments..."], false).is_kernel_picker(&labels)
        );
        assert!(quick_pick("", &["Select Another Kernel…"], false).is_kernel_picker(&labels));
        assert!(!quick_pick("Go to File", &["main.py"], false).is_kernel_picker(&labels));
        assert!(!PickerView::Closed.is_kernel_picker(&labels));
        let input = PickerView::InputBox {
            title: "Kernel".into(),
            prompt: String::new(),
            value: String::new(),
        };
        assert!(!input.is_kernel_picker(&labels));
    }

    #[test]
    fn a_clicked_row_shows_until_the_pick_changes_or_loads() {
        let view = quick_pick("", &["Select Another Kernel…"], false);
        assert!(view.still_shows_row("Select Another Kernel..."));
        assert!(!view.still_shows_row("Colab"));
        assert!(!quick_pick("", &["Colab"], true).still_shows_row("Colab"));
        assert!(!PickerView::Closed.still_shows_row("Colab"));
    }

    #[test]
    fn a_row_is_offered_only_enabled_exact_and_settled() {
        assert!(quick_pick("", &["my-alias"], false).offers_row("my-alias"));
        assert!(!quick_pick("", &["my-alias"], true).offers_row("my-alias"));
        assert!(!quick_pick("", &["my-alias2"], false).offers_row("my-alias"));
        let disabled = PickerView::QuickPick {
            title: String::new(),
            rows: vec![PickerRow::disabled("my-alias")],
            busy: false,
        };
        assert!(!disabled.offers_row("my-alias"));
    }

    #[test]
    fn ellipsis_forms_match_and_nothing_else_does() {
        assert!(same_label(
            "Select Another Kernel…",
            "Select Another Kernel..."
        ));
        assert!(same_label(
            "Select Another Kernel...",
            "Select Another Kernel..."
        ));
        assert!(!same_label(
            "Select Another Kernel",
            "Select Another Kernel..."
        ));
        assert!(!same_label("colab", "Colab"));
        assert!(!same_label(" Colab", "Colab"));
    }

    #[test]
    fn a_row_is_usable_only_when_single_and_enabled() {
        let rows = vec![
            PickerRow::new("Colab"),
            PickerRow::new("Python Environments..."),
            PickerRow::disabled("Existing Jupyter Server..."),
        ];
        assert_eq!(find_row(&rows, "Colab"), RowMatch::One);
        assert_eq!(find_row(&rows, "New Colab Server"), RowMatch::Absent);
        assert_eq!(
            find_row(&rows, "Existing Jupyter Server..."),
            RowMatch::Unusable
        );
        let doubled = vec![PickerRow::new("Colab"), PickerRow::new("Colab")];
        assert_eq!(find_row(&doubled, "Colab"), RowMatch::Unusable);
    }
}
