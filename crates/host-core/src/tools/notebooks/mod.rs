//! Notebook references and what clients have seen: resolving a reference to a location,
//! per-notebook locks, the versions clients last saw and what is derived from a version.

pub(crate) mod state;

use super::Tools;
use crate::failure::{error, require_items};
use state::{Derived, Seen, cells_fingerprint};

use std::sync::Arc;

use mcp_contract::results::*;
use mcp_contract::{ErrorCode, ToolError};
use notebook_model::{identity, view};

use crate::host::{Document, HostError, NotebookHost, NotebookLocation};
use crate::refs::{self, RefKind};

impl<H: NotebookHost> Tools<H> {
    pub(crate) fn remember(&self, location: &NotebookLocation) -> String {
        let notebook_ref = refs::notebook_ref(&self.host.window().id, &location.uri);
        self.notebooks
            .known_refs
            .lock()
            .expect("ref table lock")
            .insert(notebook_ref.clone(), location.clone());
        notebook_ref
    }

    pub(crate) fn lock_for(&self, uri: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.notebooks
            .notebook_locks
            .lock()
            .expect("lock table lock")
            .entry(uri.to_owned())
            .or_default()
            .clone()
    }

    /// Resolves a `notebookRef`, URI or path to a location.
    pub async fn resolve(&self, reference: &str) -> Result<NotebookLocation, ToolError> {
        match refs::classify(reference) {
            RefKind::Malformed => Err(error(
                ErrorCode::NotebookRefMalformed,
                format!(
                    "Malformed notebook reference `{reference}`: a notebookRef is nb_ followed by \
                     24 lower-case hex characters, as list_notebooks returns it"
                ),
            )),
            RefKind::Handle(handle) => {
                if let Some(location) = self
                    .notebooks
                    .known_refs
                    .lock()
                    .expect("ref table lock")
                    .get(handle)
                {
                    return Ok(location.clone());
                }
                let listing = self.host.list().await?;
                for location in &listing.notebooks {
                    self.remember(location);
                }
                self.notebooks
                    .known_refs
                    .lock()
                    .expect("ref table lock")
                    .get(handle)
                    .cloned()
                    .ok_or_else(|| {
                        error(
                            ErrorCode::NotebookRefUnknown,
                            format!(
                                "the notebookRef `{handle}` is unknown, stale, or collides with no \
                                 listed notebook (refs change when a server restarts); call \
                                 list_notebooks for current refs"
                            ),
                        )
                    })
            }
            RefKind::Location(text) => {
                if text.is_empty() {
                    return Err(error(ErrorCode::InvalidArgument, "notebookRef is required"));
                }
                let location = self.host.locate(text).await?;
                self.remember(&location);
                Ok(location)
            }
        }
    }

    /// Resolves the `notebookRefs` of a call that acts on several notebooks (at least one).
    pub(crate) async fn locations(
        &self,
        references: &[String],
    ) -> Result<Vec<NotebookLocation>, ToolError> {
        require_items(references, "notebookRefs must list at least one notebook")?;
        let mut locations = Vec::with_capacity(references.len());
        for reference in references {
            locations.push(self.resolve(reference).await?);
        }
        Ok(locations)
    }

    pub(crate) async fn load(
        &self,
        reference: &str,
    ) -> Result<(NotebookLocation, Arc<Document>), ToolError> {
        let location = self.resolve(reference).await?;
        let document = self.host.load(&location).await?;
        self.saw(&document);
        Ok((location, document))
    }

    /// Names and revs of a document version (computed once per version).
    pub(crate) fn derived(&self, document: &Document) -> Arc<Derived> {
        if let Some(derived) = self
            .notebooks
            .derived
            .lock()
            .expect("derived lock")
            .get(&document.location.uri)
            .filter(|derived| derived.version == document.version)
        {
            return derived.clone();
        }
        let derived = Arc::new(Derived {
            version: document.version,
            names: identity::effective_names(&document.notebook),
            revs: document
                .notebook
                .cells()
                .iter()
                .map(|cell| cell.rev())
                .collect(),
            states: document
                .notebook
                .cells()
                .iter()
                .map(|cell| view::execution_state(cell))
                .collect(),
        });
        self.notebooks
            .derived
            .lock()
            .expect("derived lock")
            .insert(document.location.uri.clone(), derived.clone());
        derived
    }

    /// The version clients last saw of a notebook.
    pub(crate) fn seen_version(&self, uri: &str) -> Option<u64> {
        self.notebooks
            .seen_versions
            .lock()
            .expect("seen versions lock")
            .get(uri)
            .map(|seen| seen.version)
    }

    /// Records that clients have seen this version of the document. Versions only grow: a read
    /// that loaded an older version and finishes after a concurrent change must not move the
    /// mark back, or the next change would be refused as if the file had changed on disk.
    pub(crate) fn saw(&self, document: &Document) {
        let mut seen = self
            .notebooks
            .seen_versions
            .lock()
            .expect("seen versions lock");
        let known = seen.get(&document.location.uri);
        if known.is_some_and(|known| known.version >= document.version) {
            return;
        }
        seen.insert(
            document.location.uri.clone(),
            Seen {
                version: document.version,
                cells: cells_fingerprint(&document.notebook),
            },
        );
    }

    /// Fails when someone else changed the document's cells (their ids, order, kinds or
    /// sources; on disk, in the editor) since clients last saw it: the new version is what they
    /// see from now on, and they must read it before changing it. Outputs and metadata others
    /// wrote meanwhile (an editor's kernel writing a run's outputs) change nothing the client's
    /// edits are planned on, and the change applies to the document as it is now, so they are
    /// kept.
    pub(crate) fn check_unchanged_since_seen(&self, document: &Document) -> Result<(), ToolError> {
        let now = Seen {
            version: document.version,
            cells: cells_fingerprint(&document.notebook),
        };
        let previous = self
            .notebooks
            .seen_versions
            .lock()
            .expect("seen versions lock")
            .insert(document.location.uri.clone(), now);
        match (previous, &document.location.path) {
            (Some(previous), path)
                if previous.version != document.version && previous.cells != now.cells =>
            {
                Err(HostError::ChangedOnDisk {
                    path: path
                        .clone()
                        .unwrap_or_else(|| document.location.uri.clone()),
                }
                .into())
            }
            _ => Ok(()),
        }
    }

    pub(crate) fn entry(&self, location: &NotebookLocation) -> NotebookEntry {
        NotebookEntry {
            notebook_ref: self.remember(location),
            uri: location.uri.clone(),
            path: location.path.clone(),
        }
    }

    pub(crate) fn check_window(&self, window_id: Option<&String>) -> Result<(), ToolError> {
        match window_id {
            Some(id) if *id != self.host.window().id => Err(HostError::WindowNotConnected {
                window_id: id.clone(),
            }
            .into()),
            _ => Ok(()),
        }
    }
}
