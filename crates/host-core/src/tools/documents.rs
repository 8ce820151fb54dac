//! The document tools: listing, opening, creating, saving and exporting notebooks.

use super::Tools;
use super::read::outline_cells;
use crate::failure::{ToolResult, error, require_items, to_json};

use std::collections::HashSet;

use mcp_contract::params::*;
use mcp_contract::results::*;
use mcp_contract::{ErrorCode, ToolError};
use notebook_model::export::{ExportFormat, ExportOptions};
use notebook_model::{Cell, CellKind, Notebook, identity};
use serde_json::json;

use crate::host::{NotebookHost, NotebookLocation, OpenStatus};

/// A new notebook: a title heading and an empty code cell, Python 3 metadata.
pub fn new_notebook(title: &str) -> Notebook {
    let mut notebook = Notebook::new();
    notebook.metadata_mut().insert(
        "kernelspec".to_owned(),
        json!({"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}),
    );
    notebook
        .metadata_mut()
        .insert("language_info".to_owned(), json!({"name": "python"}));
    let heading = format!("# {title}");
    let mut taken = HashSet::new();
    for (kind, source) in [(CellKind::Markdown, heading.as_str()), (CellKind::Code, "")] {
        let id = identity::fresh_id(kind, source, &taken);
        taken.insert(id.clone());
        let mut cell = Cell::new(kind, source, id);
        let names: HashSet<String> = identity::effective_names(&notebook).into_iter().collect();
        cell.set_stored_name(&identity::unique_name(&identity::base_name(&cell), &names));
        notebook.push_cell(cell);
    }
    notebook
}

impl<H: NotebookHost> Tools<H> {
    pub(crate) async fn list_notebooks(&self) -> ToolResult {
        let window = self.host.window();
        let listing = self.host.list().await?;
        let notebooks = listing
            .notebooks
            .iter()
            .map(|location| self.entry(location))
            .collect();
        let unreadable = listing
            .unreadable
            .iter()
            .map(|(location, problem)| UnreadableNotebook {
                uri: location.uri.clone(),
                problem: problem.clone(),
            })
            .collect();
        let result = ListNotebooksResult {
            windows: vec![WindowEntry {
                window_id: window.id,
                window_label: window.label,
                status: WindowStatus::Available,
                notebooks,
                unreadable,
            }],
        };
        to_json(&result)
    }

    pub(crate) async fn open_notebooks(&self, params: OpenNotebooksParams) -> ToolResult {
        self.check_window(params.window_id.as_ref())?;
        require_items(&params.uris, "uris must list at least one notebook")?;
        let mut notebooks = Vec::with_capacity(params.uris.len());
        for uri in &params.uris {
            let location = self.resolve(uri).await?;
            let (status, document) = self.host.open(&location).await?;
            notebooks.push(OpenedNotebook {
                notebook_ref: self.remember(&location),
                uri: location.uri.clone(),
                status: match status {
                    OpenStatus::Opened => OpenedStatus::Opened,
                    OpenStatus::AlreadyOpen => OpenedStatus::AlreadyOpen,
                },
                cell_count: document.notebook.len(),
            });
        }
        to_json(&OpenNotebooksResult { notebooks })
    }

    pub(crate) async fn create_notebook(&self, params: CreateNotebookParams) -> ToolResult {
        self.check_window(params.window_id.as_ref())?;
        let can_choose = self
            .kernels
            .as_ref()
            .is_some_and(|kernels| kernels.capabilities().choose);
        if params.kernel_id.is_some() && !can_choose {
            return Err(error(
                ErrorCode::NotSupported,
                "this host runs no kernels, so kernelId cannot be recorded; omit it",
            ));
        }
        let title = params.title.unwrap_or_else(|| "New notebook".to_owned());
        let location = match &params.path {
            Some(path) => {
                let path = if path.ends_with(".ipynb") {
                    path.clone()
                } else {
                    format!("{path}.ipynb")
                };
                self.host.locate(&path).await?
            }
            None => self.free_location_for(&title).await?,
        };
        let mut notebook = new_notebook(&title);
        let kernel = self
            .resolve_new_kernel(&location, &mut notebook, params.kernel_id.as_deref())
            .await?;
        let document = self.host.create(&location, notebook).await?;
        self.saw(&document);
        let result = CreateNotebookResult {
            notebook_ref: self.remember(&location),
            uri: location.uri.clone(),
            path: location.path.clone(),
            kernel,
            cells: {
                let derived = self.derived(&document);
                outline_cells(&document.notebook, None, &derived)
            },
        };
        to_json(&result)
    }

    /// A root-level path derived from the title that no notebook uses yet.
    pub(crate) async fn free_location_for(
        &self,
        title: &str,
    ) -> Result<NotebookLocation, ToolError> {
        let base = match identity::slugify(title) {
            slug if slug.is_empty() => "notebook".to_owned(),
            slug => slug,
        };
        let listing = self.host.list().await?;
        let taken: HashSet<String> = listing
            .notebooks
            .iter()
            .filter_map(|location| location.path.clone())
            .collect();
        for attempt in 1..10_000 {
            let path = if attempt == 1 {
                format!("{base}.ipynb")
            } else {
                format!("{base}-{attempt}.ipynb")
            };
            if !taken.contains(&path) {
                return Ok(self.host.locate(&path).await?);
            }
        }
        Err(error(
            ErrorCode::AlreadyExists,
            "could not find a free file name for the notebook; pass a path",
        ))
    }

    pub(crate) async fn save_notebooks(&self, params: NotebookRefsParams) -> ToolResult {
        let locations = self.locations(&params.notebook_refs).await?;
        let mut saved = Vec::new();
        let mut skipped = Vec::new();
        for location in &locations {
            let lock = self.lock_for(&location.uri);
            let _guard = lock.lock().await;
            // Saving writes the document as it is now, changes by others included, and loses
            // nothing: unlike an edit it needs no proof that the agent saw the latest version
            // (in VS Code, outputs the controller writes after a run change the version).
            match self.host.save(location).await? {
                crate::host::Saved::Written => {
                    let after = self.host.load(location).await?;
                    self.saw(&after);
                    saved.push(location.uri.clone());
                }
                crate::host::Saved::Skipped { reason } => skipped.push(SkippedNotebook {
                    notebook: location.uri.clone(),
                    reason,
                }),
            }
        }
        let result = SaveNotebooksResult { saved, skipped };
        to_json(&result)
    }

    pub(crate) async fn export_notebook(&self, params: ExportNotebookParams) -> ToolResult {
        let (location, document) = self.load(&params.notebook_ref).await?;
        let format = match params.format {
            ExportFormatParam::Markdown => ExportFormat::Markdown,
            ExportFormatParam::Python => ExportFormat::Python,
            ExportFormatParam::Html => ExportFormat::Html,
        };
        let content = notebook_model::export::export(
            &document.notebook,
            format,
            ExportOptions {
                include_outputs: params.include_outputs.unwrap_or(false),
            },
        );
        let bytes = content.len();
        let result = match params.output_path {
            Some(path) => {
                let uri = self
                    .host
                    .write_new_file(&path, content.into_bytes())
                    .await?;
                ExportNotebookResult {
                    notebook: location.uri,
                    format: params.format,
                    content: None,
                    output_path: Some(uri),
                    bytes,
                }
            }
            None => ExportNotebookResult {
                notebook: location.uri,
                format: params.format,
                content: Some(content),
                output_path: None,
                bytes,
            },
        };
        to_json(&result)
    }
}
