//! A third-party host in under 150 lines: notebooks in memory, served to any MCP client over
//! stdio through jupyter-mcp's tools. A host implements `host_core::NotebookHost` (where
//! notebooks live, how a change is committed); `host_core::Tools` does the rest. This one runs no
//! code, so `tools/list` shows no kernel tools (hand out `NotebookHost::kernels` and `files` to
//! add those); `undo_last` comes with the tools, as every host's. Run: `cargo run -p embedded-host`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use host_core::{
    Commit, Document, HostError, Listing, NotebookHost, NotebookLocation, OpenStatus, Services,
    ToolDispatch, Tools, WindowInfo,
};
use notebook_model::Notebook;

/// Notebooks by URI (`memory:///<path>`), each with the version the tools quote back.
struct MemoryNotebooks {
    notebooks: Mutex<BTreeMap<String, Arc<Document>>>,
    versions: AtomicU64,
}

impl MemoryNotebooks {
    fn location(path: &str) -> NotebookLocation {
        NotebookLocation {
            uri: format!("memory:///{path}"),
            path: Some(path.to_owned()),
        }
    }

    fn store(&self, location: &NotebookLocation, notebook: Notebook) -> Arc<Document> {
        let document = Arc::new(Document {
            location: location.clone(),
            notebook,
            version: self.versions.fetch_add(1, Ordering::Relaxed),
        });
        let mut notebooks = self.notebooks.lock().expect("notebooks lock");
        notebooks.insert(location.uri.clone(), document.clone());
        document
    }

    fn get(&self, location: &NotebookLocation) -> Result<Arc<Document>, HostError> {
        let notebooks = self.notebooks.lock().expect("notebooks lock");
        let found = notebooks.get(&location.uri).cloned();
        found.ok_or_else(|| HostError::NotFound {
            reference: location.uri.clone(),
        })
    }
}

impl NotebookHost for MemoryNotebooks {
    fn window(&self) -> WindowInfo {
        WindowInfo {
            id: "embedded".to_owned(),
            label: "Embedded example".to_owned(),
        }
    }

    async fn list(&self) -> Result<Listing, HostError> {
        let notebooks = self.notebooks.lock().expect("notebooks lock");
        let locations = notebooks.values().map(|document| document.location.clone());
        Ok(Listing {
            notebooks: locations.collect(),
            unreadable: Vec::new(),
        })
    }

    async fn locate(&self, reference: &str) -> Result<NotebookLocation, HostError> {
        let path = reference.strip_prefix("memory:///").unwrap_or(reference);
        match path.ends_with(".ipynb") && !path.split('/').any(|part| part == "..") {
            true => Ok(Self::location(path)),
            false => Err(HostError::NotANotebook {
                reference: reference.to_owned(),
            }),
        }
    }

    async fn open(&self, at: &NotebookLocation) -> Result<(OpenStatus, Arc<Document>), HostError> {
        Ok((OpenStatus::AlreadyOpen, self.get(at)?))
    }

    async fn load(&self, location: &NotebookLocation) -> Result<Arc<Document>, HostError> {
        self.get(location)
    }

    async fn commit(&self, base: &Document, commit: Commit) -> Result<Arc<Document>, HostError> {
        // A change planned against an older version is refused, as the contract requires.
        if self.get(&base.location)?.version != base.version {
            let path = base.location.uri.clone();
            return Err(HostError::ChangedOnDisk { path });
        }
        Ok(self.store(&base.location, commit.notebook))
    }

    async fn create(
        &self,
        at: &NotebookLocation,
        book: Notebook,
    ) -> Result<Arc<Document>, HostError> {
        match self.get(at) {
            Ok(_) => Err(HostError::AlreadyExists {
                path: at.uri.clone(),
            }),
            Err(_) => Ok(self.store(at, book)),
        }
    }

    async fn save(&self, location: &NotebookLocation) -> Result<host_core::Saved, HostError> {
        self.get(location).map(|_| host_core::Saved::Written)
    }

    async fn write_new_file(&self, path: &str, _contents: Vec<u8>) -> Result<String, HostError> {
        let what = format!("writing {path} (this host has no files)");
        Err(HostError::NotSupported { what })
    }
}

const EXAMPLE: &str = r##"{"nbformat": 4, "nbformat_minor": 5, "metadata": {},
 "cells": [{"cell_type": "markdown", "id": "intro", "metadata": {}, "source": "# Hello"},
  {"cell_type": "code", "id": "greet", "metadata": {}, "execution_count": null,
   "outputs": [], "source": "print('hello from memory')"}]}"##;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let host = MemoryNotebooks {
        notebooks: Mutex::new(BTreeMap::new()),
        versions: AtomicU64::new(1),
    };
    let example = Notebook::parse(EXAMPLE.as_bytes()).expect("the example notebook parses");
    host.store(&MemoryNotebooks::location("hello.ipynb"), example);
    // Services come from the embedder, not the host: summaries by the model of
    // ANTHROPIC_API_KEY when it is set, as every jupyter-mcp binary gives them.
    let summarizer = summarizer::from_env(&summarizer::TlsTrust::default());
    let services = Services {
        summarizer: summarizer.map_err(std::io::Error::other)?,
    };
    let tools: Arc<dyn ToolDispatch> = Arc::new(Tools::with_services(Arc::new(host), services));
    mcp_server::serve_stdio(mcp_server::McpHandler::new(tools)).await
}
