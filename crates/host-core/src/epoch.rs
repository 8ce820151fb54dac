//! Epochs for kernels whose host reports none (an editor's kernel API, such as VS Code's Jupyter
//! extension): the tools derive one from a stamp they leave in the kernel process.
//!
//! Freshness needs to know that a cell ran on the kernel that is live now. A host that sees its
//! kernels start and restart gives each start an epoch ([`KernelSession::epoch`]). Where it
//! cannot, the tools write a random token into the kernel's `sys` module on first contact (by
//! helper code that leaves no name in the user's namespace and no history) and read it back
//! before every run and whenever the host reports a lifecycle change
//! ([`KernelSession::lifecycle_changes`]). A process that lost the stamp, or carries one we did
//! not write, is a new kernel: it gets a new epoch, so every cell that ran before is stale. Until
//! a stamp was read back, no cell counts as fresh. Derived epochs are drawn above
//! [`DERIVED_BASE`], apart from every host's own, so a notebook whose kernel changes between an
//! editor's and ours can never match an old record by accident.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::kernel::{ExecuteOptions, KernelSession, SharedSession};

/// Derived epochs count up from here; hosts' own epochs stay far below it.
const DERIVED_BASE: u64 = 1 << 62;
/// How long reading the stamp may take. The request queues behind whatever the kernel runs, so
/// a kernel busy for longer is not stamped now (its cells are then not fresh), rather than
/// delaying the run that asked.
const STAMP_DEADLINE: Duration = Duration::from_secs(10);
/// The line prefix the stamp program prints before the stamp.
const STAMP_MARKER: &str = "__JUPYTER_MCP_STAMP__:";

/// Reads the stamp, writing `TOKEN` first when there is none, in a namespace of its own.
const STAMP_PROGRAM: &str = r#"
import sys as _sys
_stamp = getattr(_sys, "_jupyter_mcp_stamp", None)
if not isinstance(_stamp, str):
    _sys._jupyter_mcp_stamp = _stamp = TOKEN
print(MARKER + _stamp)
"#;

/// The derived epochs of one host's notebooks.
#[derive(Default)]
pub(crate) struct DerivedEpochs {
    /// By notebook URI.
    records: Mutex<HashMap<String, Record>>,
    next: AtomicU64,
}

/// What was proven of a notebook's kernel by its stamp.
struct Record {
    /// The session the stamp was read through.
    session: Weak<dyn KernelSession>,
    /// The stamp in that kernel.
    token: String,
    epoch: u64,
    /// [`KernelSession::lifecycle_changes`] when the stamp was read.
    lifecycle: u64,
}

fn same_session(weak: &Weak<dyn KernelSession>, session: &SharedSession) -> bool {
    std::ptr::addr_eq(weak.as_ptr(), Arc::as_ptr(session))
}

/// The stamp program for `token`, as one line of helper code.
fn stamp_code(token: &str) -> String {
    let quoted = |text: &str| serde_json::Value::String(text.to_owned()).to_string();
    format!(
        "(lambda b: b.exec(b.compile({}, \"<jupyter-mcp-stamp>\", \"exec\"), \
         {{\"__builtins__\": b, \"TOKEN\": {}, \"MARKER\": {}}}))(__import__(\"builtins\"))",
        quoted(STAMP_PROGRAM),
        quoted(token),
        quoted(STAMP_MARKER)
    )
}

/// Whether stamps can be read in a kernel of this language (the program is Python).
fn stamps_language(language: &str) -> bool {
    language.is_empty() || language.eq_ignore_ascii_case("python")
}

impl DerivedEpochs {
    /// The derived epoch of the notebook's kernel while it holds: the stamp was read through
    /// this session and the host has reported no lifecycle change since. Never waits.
    pub(crate) fn current(&self, uri: &str) -> Option<u64> {
        let records = self.records.lock().expect("derived epochs lock");
        let record = records.get(uri)?;
        let session = record.session.upgrade()?;
        let holds =
            session.lifecycle_changes() == record.lifecycle && !session.status().borrow().is_dead();
        holds.then_some(record.epoch)
    }

    /// The epoch of `session` for the notebook at `uri`: its own, or one derived by reading (and,
    /// on first contact, writing) its stamp. `None` when neither can be had (not a Python kernel,
    /// no kernel yet, or no answer within [`STAMP_DEADLINE`]): then no cell counts as fresh.
    pub(crate) async fn verify(&self, uri: &str, session: &SharedSession) -> Option<u64> {
        if let Some(epoch) = session.epoch() {
            return Some(epoch);
        }
        if !stamps_language(&session.info().language) {
            self.forget(uri);
            return None;
        }
        let lifecycle = session.lifecycle_changes();
        let offered = format!(
            "{:016x}{:016x}",
            crate::execution::state::random_u64(),
            crate::execution::state::random_u64()
        );
        let read = tokio::time::timeout(STAMP_DEADLINE, async {
            let events = session
                .execute(stamp_code(&offered), ExecuteOptions::quiet())
                .await
                .ok()?;
            let collected = crate::kernel::collect(events).await.ok()?;
            collected
                .stdout
                .lines()
                .find_map(|line| line.strip_prefix(STAMP_MARKER))
                .map(|stamp| stamp.trim().to_owned())
                .filter(|stamp| !stamp.is_empty())
        })
        .await;
        let Ok(Some(stamp)) = read else {
            self.forget(uri);
            return None;
        };
        let mut records = self.records.lock().expect("derived epochs lock");
        let known = records
            .get(uri)
            .filter(|record| record.token == stamp)
            .map(|record| record.epoch);
        // A stamp we wrote earlier in this very process keeps its epoch; our fresh token (the
        // kernel had none) or a stamp of unknown origin means a kernel we have not seen run.
        let epoch =
            known.unwrap_or_else(|| DERIVED_BASE + self.next.fetch_add(1, Ordering::Relaxed));
        records.insert(
            uri.to_owned(),
            Record {
                session: Arc::downgrade(session),
                token: stamp,
                epoch,
                lifecycle,
            },
        );
        Some(epoch)
    }

    /// The epoch, derived or own, that `session` had when it was last proven, when it still
    /// holds; else it is proven again.
    pub(crate) async fn current_or_verify(
        &self,
        uri: &str,
        session: &SharedSession,
    ) -> Option<u64> {
        if let Some(epoch) = session.epoch() {
            return Some(epoch);
        }
        let held = {
            let records = self.records.lock().expect("derived epochs lock");
            records
                .get(uri)
                .filter(|record| same_session(&record.session, session))
                .map(|record| record.epoch)
        };
        match held.filter(|_| self.current(uri).is_some()) {
            Some(epoch) => Some(epoch),
            None => self.verify(uri, session).await,
        }
    }

    /// Drops what was proven of the notebook's kernel (a restart was requested).
    pub(crate) fn forget(&self, uri: &str) {
        self.records
            .lock()
            .expect("derived epochs lock")
            .remove(uri);
    }
}

/// What the scripted kernel of [`crate::testing`] needs to answer the stamp program.
#[cfg(any(test, feature = "testing"))]
pub(crate) mod script {
    /// The token a stamp request offers, when `code` is one.
    pub(crate) fn offered_token(code: &str) -> Option<String> {
        if !code.contains("<jupyter-mcp-stamp>") {
            return None;
        }
        let after = code.split("\"TOKEN\": \"").nth(1)?;
        Some(after.split('"').next()?.to_owned())
    }

    /// The line the stamp program prints for `stamp`.
    pub(crate) fn answer(stamp: &str) -> String {
        format!("{}{stamp}", super::STAMP_MARKER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_program_is_one_exec_that_names_its_token_and_marker() {
        let code = stamp_code("abc123");
        assert!(code.starts_with("(lambda b: b.exec("));
        assert!(!code.contains('\n'), "one line: {code}");
        assert_eq!(script::offered_token(&code).as_deref(), Some("abc123"));
        assert!(code.contains(&serde_json::Value::String(STAMP_MARKER.into()).to_string()));
        assert_eq!(script::offered_token("print(1)"), None);
    }

    #[test]
    fn only_python_kernels_are_stamped() {
        assert!(stamps_language("python"));
        assert!(stamps_language("Python"));
        assert!(stamps_language(""));
        assert!(!stamps_language("r"));
        assert!(!stamps_language("julia"));
    }
}
