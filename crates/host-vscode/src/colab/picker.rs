//! The picker path and mounting through the native driver: waiting for rows, settling after a
//! click, a submit or a dismissal, and the `colab://` folder a mount adds.

use std::time::Duration;

use colab_setup::{Failure, PickerLabels, PickerView, Reply, ServerAlias};
use host_core::NotebookLocation;
use tokio::time::Instant;

use crate::native::{Chosen, NativeBlocker, NativeDriver};
use crate::shell::JupyterRequest;

use super::*;

/// How long a click or a submit may take to show in the picker.
pub(super) const SETTLE: Duration = Duration::from_secs(3);
pub(super) const SETTLE_POLL: Duration = Duration::from_millis(100);

/// Waits (bounded) until the quick pick no longer shows the row just clicked: VS Code closes
/// or replaces it a moment after the click, and the setup must not read the old one as the
/// next prompt. A picker that never changes is the setup's to judge.
pub(super) async fn settle_after_click(driver: &NativeDriver, label: &str) {
    let deadline = Instant::now() + SETTLE;
    while Instant::now() < deadline {
        match driver.observe().await {
            Ok(view) if view.still_shows_row(label) => {}
            _ => return,
        }
        tokio::time::sleep(SETTLE_POLL).await;
    }
}

/// Waits (bounded) until the input box just submitted is gone.
pub(super) async fn settle_after_submit(driver: &NativeDriver) {
    let deadline = Instant::now() + SETTLE;
    while Instant::now() < deadline {
        match driver.observe().await {
            Ok(PickerView::InputBox { .. }) => {}
            _ => return,
        }
        tokio::time::sleep(SETTLE_POLL).await;
    }
}

/// How long no quick input may show after a dismissal before it counts: when a kernel source's
/// command comes back empty (as it does once a provider's own prompt is dismissed), VS Code
/// reopens its Select Another Kernel list a moment later.
pub(super) const DISMISS_QUIET: Duration = Duration::from_secs(2);
/// Dismissals tried before the picker is reported as reopening.
pub(super) const DISMISS_ROUNDS: usize = 4;

/// Dismisses the quick input and keeps the kernel picker dismissed: each dismissal is followed
/// by a bounded quiet window, and a kernel picker the workbench reopens in it is dismissed
/// again. A quick input of any other kind that opens meanwhile is left alone.
pub(super) async fn dismiss_settled(driver: &NativeDriver) -> Result<(), NativeBlocker> {
    for _ in 0..DISMISS_ROUNDS {
        driver.dismiss().await?;
        let quiet_until = Instant::now() + DISMISS_QUIET;
        let mut reopened = false;
        while Instant::now() < quiet_until {
            tokio::time::sleep(SETTLE_POLL).await;
            match driver.observe().await? {
                PickerView::Closed => {}
                // The kernel picker is the one thing a dismissal may close again: anything else
                // opened meanwhile is the user's.
                view if view.is_kernel_picker(&PickerLabels::default()) => {
                    reopened = true;
                    break;
                }
                _ => return Ok(()),
            }
        }
        if !reopened {
            return Ok(());
        }
    }
    Err(NativeBlocker::UnexpectedUi(
        "picker_keeps_reopening".to_owned(),
    ))
}

impl WindowColab {
    /// Waits for the open picker to show a row with exactly `label`.
    pub(super) async fn wait_for_row(
        &self,
        driver: &NativeDriver,
        label: &str,
        within: Duration,
    ) -> bool {
        poll(within, || async move {
            let view = driver.observe().await.ok()?;
            view.offers_row(label).then_some(())
        })
        .await
        .is_some()
    }

    /// The root of the one `colab://` workspace folder mounted for `alias`, read from the
    /// window's folders only (no picker, no driver): [`Reply::FileService`], else
    /// [`Reply::NotMounted`]; several folders for one alias, or no answer, fail. `before` gets
    /// the folders seen.
    pub(super) async fn find_mounted(
        &self,
        alias: &ServerAlias,
        before: &mut Vec<Folder>,
    ) -> Reply {
        let Ok(state) = self.ask::<StateReply>(ColabOp::State).await else {
            return Reply::Failed(Failure::Unavailable);
        };
        let mounted: Vec<&Folder> = state
            .folders
            .iter()
            .filter(|folder| folder.uri.starts_with("colab://"))
            .filter(|folder| folder.name.contains(alias.as_str()))
            .collect();
        let reply = match mounted.as_slice() {
            [] => Reply::NotMounted,
            [folder] => match colab_root(&folder.uri) {
                Some(root) => {
                    self.refresh_roots_now().await;
                    Reply::FileService { root }
                }
                None => Reply::Failed(Failure::NotPerformed),
            },
            _ => Reply::Failed(Failure::NotPerformed),
        };
        *before = state.folders;
        reply
    }

    pub(super) async fn mount(&self, alias: &ServerAlias) -> Reply {
        // A folder already mounted for this alias is reused: mounting it again would add a
        // second root for the same server.
        let mut folders = Vec::new();
        match self.find_mounted(alias, &mut folders).await {
            Reply::NotMounted => {}
            found_or_failed => return found_or_failed,
        }
        let Ok(driver) = self.native() else {
            return Reply::Failed(Failure::Unavailable);
        };
        if driver.bind().await.is_err() {
            return Reply::Failed(Failure::Unavailable);
        }
        match self.ask::<AcceptedReply>(ColabOp::MountServer).await {
            Ok(reply) if reply.accepted => {}
            _ => return Reply::Failed(Failure::NotPerformed),
        }
        if !self
            .wait_for_row(driver, alias.as_str(), MOUNT_PICKER_WAIT)
            .await
        {
            let _ = dismiss_settled(driver).await;
            return Reply::Failed(Failure::NotPerformed);
        }
        match driver.choose_row(alias.as_str()).await {
            Ok(Chosen::Clicked) => {}
            Ok(Chosen::RowChanged) | Err(_) => {
                let _ = dismiss_settled(driver).await;
                return Reply::Failed(Failure::NotPerformed);
            }
        }
        // Exactly one new `colab:` folder must appear for the alias.
        let known: Vec<String> = folders.iter().map(|folder| folder.uri.clone()).collect();
        let known = &known;
        poll(MOUNT_FOLDER_WAIT, || async move {
            let now = self.ask::<StateReply>(ColabOp::State).await.ok()?;
            let added: Vec<&Folder> = now
                .folders
                .iter()
                .filter(|folder| folder.uri.starts_with("colab://"))
                .filter(|folder| !known.contains(&folder.uri))
                .collect();
            match added.as_slice() {
                [folder] => {
                    self.refresh_roots_now().await;
                    Some(match colab_root(&folder.uri) {
                        Some(root) => Reply::FileService { root },
                        None => Reply::Failed(Failure::Unconfirmed),
                    })
                }
                [] => None,
                _ => Some(Reply::Failed(Failure::Unconfirmed)),
            }
        })
        .await
        .unwrap_or(Reply::Failed(Failure::Unconfirmed))
    }

    /// Waits until VS Code reports the notebook's kernel with this label.
    pub(super) async fn confirm_selection(
        &self,
        notebook: &NotebookLocation,
        label: &str,
    ) -> Option<bool> {
        let confirmed = poll(SELECTION_CONFIRM_WAIT, || async move {
            let reply = self
                .shell
                .jupyter(JupyterRequest::Kernel {
                    uri: notebook.uri.clone(),
                })
                .await
                .ok()?;
            (reply.kernel?.label.as_deref() == Some(label)).then_some(())
        })
        .await;
        Some(confirmed.is_some())
    }
}
