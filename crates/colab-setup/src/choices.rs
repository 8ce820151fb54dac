//! Kernel-choice listings: the actual kernels a setup's server offers, each under an opaque id
//! that is fresh per listing.
//!
//! A listing is made only when the client asks (`list_setup_kernels`) from what the host
//! observes at that moment. Asking again invalidates every id of the previous listing at once,
//! before the new observation arrives. There is no default and no first-item selection: the
//! client must send one id of the latest listing. A listing that is incomplete (still loading,
//! filtered, longer than [`MAX_CHOICES`]) is refused and can be retried; one with duplicate
//! labels fails the setup, because a label could not name one of them.

use serde::Serialize;

use crate::error::SetupError;
use crate::names::ChoiceId;

/// The most choices a listing shows; more means the listing is not complete.
pub const MAX_CHOICES: usize = 64;
/// The longest label a listing shows, in characters.
pub const MAX_LABEL_CHARS: usize = 200;

/// One kernel choice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelChoice {
    /// The id to pass to `select_setup_kernel`.
    pub kernel_choice_id: ChoiceId,
    /// The label, as observed.
    pub label: String,
}

/// One listing of a setup's kernel choices.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChoiceListing {
    /// The listing's number within its setup (1 for the first).
    pub listing: u32,
    /// When the host observed the choices.
    pub listed_at_ms: u64,
    /// The choices, in the order shown.
    pub choices: Vec<KernelChoice>,
}

impl ChoiceListing {
    /// Validates observed labels and names them with fresh ids.
    pub(crate) fn new(
        listing: u32,
        token: [u8; 4],
        labels: &[String],
        complete: bool,
        now_ms: u64,
    ) -> Result<Self, SetupError> {
        check_labels(labels, complete)?;
        let choices = labels
            .iter()
            .enumerate()
            .map(|(position, label)| KernelChoice {
                kernel_choice_id: ChoiceId::new(listing, token, position),
                label: label.clone(),
            })
            .collect();
        Ok(ChoiceListing {
            listing,
            listed_at_ms: now_ms,
            choices,
        })
    }

    /// The position and choice with this id.
    pub fn find(&self, id: &str) -> Option<(usize, &KernelChoice)> {
        self.choices
            .iter()
            .enumerate()
            .find(|(_, choice)| choice.kernel_choice_id.as_str() == id)
    }

    /// The labels in order.
    pub fn labels(&self) -> Vec<String> {
        self.choices
            .iter()
            .map(|choice| choice.label.clone())
            .collect()
    }
}

/// The rules a listing's labels must satisfy.
pub(crate) fn check_labels(labels: &[String], complete: bool) -> Result<(), SetupError> {
    if !complete || labels.len() > MAX_CHOICES {
        return Err(SetupError::ChoicesIncomplete);
    }
    if labels.iter().any(|label| {
        label.trim().is_empty()
            || label.chars().count() > MAX_LABEL_CHARS
            || label.chars().any(char::is_control)
    }) {
        // A label that cannot be shown whole cannot be compared whole either.
        return Err(SetupError::ChoicesIncomplete);
    }
    if labels.is_empty() {
        return Err(SetupError::ChoicesEmpty);
    }
    for (position, label) in labels.iter().enumerate() {
        if labels[..position].contains(label) {
            return Err(SetupError::ChoicesDuplicate {
                label: label.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| (*item).to_owned()).collect()
    }

    #[test]
    fn a_listing_names_each_label_with_a_fresh_id() {
        let listing =
            ChoiceListing::new(2, [1, 2, 3, 4], &labels(&["Python 3", "R"]), true, 77).unwrap();
        let json = serde_json::to_string(&listing).unwrap();
        assert_eq!(
            json,
            r#"{"listing":2,"listedAtMs":77,"choices":[{"kernelChoiceId":"kc2-01020304-0","label":"Python 3"},{"kernelChoiceId":"kc2-01020304-1","label":"R"}]}"#
        );
        assert_eq!(listing.find("kc2-01020304-1").unwrap().0, 1);
        assert!(listing.find("kc1-01020304-1").is_none());
        assert_eq!(listing.labels(), labels(&["Python 3", "R"]));
    }

    #[test]
    fn unsafe_listings_are_refused() {
        let refuse = |items: &[&str], complete| {
            ChoiceListing::new(1, [0; 4], &labels(items), complete, 0)
                .unwrap_err()
                .code()
        };
        assert_eq!(refuse(&["Python 3"], false), "choices_incomplete");
        assert_eq!(refuse(&[], true), "choices_empty");
        assert_eq!(refuse(&["Python 3", "Python 3"], true), "choices_duplicate");
        assert_eq!(refuse(&["Python 3", " "], true), "choices_incomplete");
        assert_eq!(refuse(&["Py\nthon"], true), "choices_incomplete");
        let long = "x".repeat(MAX_LABEL_CHARS + 1);
        assert_eq!(refuse(&[long.as_str()], true), "choices_incomplete");
        let many: Vec<String> = (0..=MAX_CHOICES).map(|n| format!("k{n}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(refuse(&many, true), "choices_incomplete");
    }
}
