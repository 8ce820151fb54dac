//! Notebooks and their parts as MCP resources (the URI grammar is `mcp_contract::resources`):
//! listing, reading every representation of a part, the versions change notifications are
//! made from, and the links a reply adds for what it condensed or left out.

use std::collections::HashSet;

use mcp_contract::resources::{NOTEBOOK_MIME, Part, ResourceUri};
use mcp_contract::{ResourceBody, ResourceEntry, ResourceError};
use notebook_model::Notebook;
use notebook_model::outputs::joined_text;
use serde_json::Value;

use crate::host::{NotebookHost, NotebookLocation};
use crate::tools::Tools;

/// An output longer than this many characters of text gets a link when its cell's reply was
/// cut: the link leads to the whole of it.
const LINKED_TEXT_CHARS: usize = 2_000;

/// MIME types returned as blobs (base64 bytes) rather than text.
fn is_binary(mime: &str) -> bool {
    mime.starts_with("image/") && mime != "image/svg+xml"
}

/// Every representation of one saved output: each MIME type of a rich output, a stream's text,
/// an error's name, value and traceback.
fn output_bodies(uri: &str, output: &Value) -> Vec<ResourceBody> {
    let text = |mime: &str, text: String| ResourceBody {
        uri: uri.to_owned(),
        mime_type: mime.to_owned(),
        text: Some(text),
        blob: None,
    };
    match output.get("output_type").and_then(Value::as_str) {
        Some("stream") => vec![text("text/plain", joined_text(output.get("text")))],
        Some("error") => {
            let texts = notebook_model::outputs::output_texts(output);
            texts
                .into_iter()
                .map(|(_, body)| text("text/plain", body))
                .collect()
        }
        _ => {
            let Some(Value::Object(bundle)) = output.get("data") else {
                return Vec::new();
            };
            bundle
                .iter()
                .map(|(mime, value)| {
                    if is_binary(mime) {
                        // nbformat keeps images as base64, possibly split into lines.
                        let base64: String = joined_text(Some(value))
                            .chars()
                            .filter(|c| !c.is_ascii_whitespace())
                            .collect();
                        ResourceBody {
                            uri: uri.to_owned(),
                            mime_type: mime.clone(),
                            text: None,
                            blob: Some(base64),
                        }
                    } else if value.is_string() || value.is_array() {
                        text(mime, joined_text(Some(value)))
                    } else {
                        text(mime, value.to_string())
                    }
                })
                .collect()
        }
    }
}

/// The text size of an output and whether it holds an image.
fn output_size(output: &Value) -> (usize, Option<String>) {
    let image = output
        .get("data")
        .and_then(Value::as_object)
        .and_then(|bundle| bundle.keys().find(|mime| is_binary(mime)).cloned());
    let text: usize = notebook_model::outputs::output_texts(output)
        .iter()
        .map(|(_, text)| text.chars().count())
        .sum();
    (text, image)
}

/// Links to the outputs of `cell_id` in `notebook` (at `uri`) that a reply did not show whole:
/// with `cut`, every long text output; every image output not in `returned_images` (output
/// indices); and the full image of each output in `thumbnails`.
pub(crate) fn output_links(
    uri: &str,
    notebook: &Notebook,
    cell_id: &str,
    cut: bool,
    returned_images: &HashSet<usize>,
    thumbnails: &HashSet<usize>,
) -> Vec<ResourceEntry> {
    let Some(cell) = notebook
        .position_of_id(cell_id)
        .and_then(|index| notebook.cell(index))
    else {
        return Vec::new();
    };
    let mut links = Vec::new();
    for (index, output) in cell.outputs().iter().enumerate() {
        let (chars, image) = output_size(output);
        let (mime, why) = match image {
            Some(mime) if thumbnails.contains(&index) => (
                mime,
                "the full-size image; the reply shows a thumbnail".to_owned(),
            ),
            Some(mime) if !returned_images.contains(&index) => {
                (mime, "an image the reply did not include".to_owned())
            }
            Some(_) => continue,
            None if cut && chars > LINKED_TEXT_CHARS => (
                "text/plain".to_owned(),
                format!("the whole output ({chars} characters); the reply shows it condensed"),
            ),
            None => continue,
        };
        links.push(ResourceEntry {
            uri: ResourceUri::cell_output(uri, cell_id, index).to_string(),
            name: format!("cell {cell_id} output {index}"),
            title: None,
            mime_type: mime,
            description: Some(why),
            size: None,
        });
    }
    links
}

fn not_found(uri: &str, why: impl Into<String>) -> ResourceError {
    ResourceError::NotFound {
        uri: uri.to_owned(),
        message: why.into(),
    }
}

impl<H: NotebookHost> Tools<H> {
    /// Every notebook the host serves, as a resource.
    pub(crate) async fn list_resources(&self) -> Vec<ResourceEntry> {
        let Ok(listing) = self.host.list().await else {
            return Vec::new();
        };
        listing
            .notebooks
            .into_iter()
            .map(|location| ResourceEntry {
                name: location
                    .path
                    .clone()
                    .unwrap_or_else(|| location.uri.rsplit('/').next().unwrap_or("").to_owned()),
                uri: location.uri,
                title: None,
                mime_type: NOTEBOOK_MIME.to_owned(),
                description: Some("a notebook (nbformat JSON)".to_owned()),
                size: None,
            })
            .collect()
    }

    /// The notebook a resource URI belongs to, if this host serves it.
    async fn resource_location(
        &self,
        uri: &str,
    ) -> Result<(ResourceUri, NotebookLocation), ResourceError> {
        let parsed =
            ResourceUri::parse(uri).map_err(|failure| not_found(uri, failure.to_string()))?;
        let location = self
            .host
            .locate(&parsed.notebook)
            .await
            .map_err(|failure| not_found(uri, failure.to_string()))?;
        Ok((parsed, location))
    }

    /// Every representation of a resource.
    pub(crate) async fn read_resource(
        &self,
        uri: &str,
    ) -> Result<Vec<ResourceBody>, ResourceError> {
        let (parsed, location) = self.resource_location(uri).await?;
        let document = self
            .host
            .load(&location)
            .await
            .map_err(|failure| not_found(uri, failure.to_string()))?;
        let notebook = &document.notebook;
        let cell = |cell_id: &str| {
            notebook
                .position_of_id(cell_id)
                .and_then(|index| notebook.cell(index))
                .ok_or_else(|| {
                    not_found(
                        uri,
                        format!(
                            "the notebook has no cell `{cell_id}` (any more); read its outline for current ids"
                        ),
                    )
                })
        };
        Ok(match parsed.part {
            Part::Notebook => vec![ResourceBody {
                uri: uri.to_owned(),
                mime_type: NOTEBOOK_MIME.to_owned(),
                text: Some(notebook.to_ipynb_string()),
                blob: None,
            }],
            Part::CellSource { cell_id } => {
                let cell = cell(&cell_id)?;
                let mime = match notebook.cell_language(cell) {
                    "markdown" => "text/markdown",
                    "python" => "text/x-python",
                    _ => "text/plain",
                };
                vec![ResourceBody {
                    uri: uri.to_owned(),
                    mime_type: mime.to_owned(),
                    text: Some(cell.source().to_owned()),
                    blob: None,
                }]
            }
            Part::CellOutput { cell_id, index } => {
                let cell = cell(&cell_id)?;
                let output = cell.outputs().get(index).ok_or_else(|| {
                    not_found(
                        uri,
                        format!(
                            "cell `{cell_id}` has {} saved output(s), so there is no output {index}",
                            cell.outputs().len()
                        ),
                    )
                })?;
                output_bodies(uri, output)
            }
        })
    }

    /// The document version of each notebook resource (parts share their notebook's).
    pub(crate) async fn resource_versions(&self, uris: &[String]) -> Vec<Option<u64>> {
        let mut versions = Vec::with_capacity(uris.len());
        for uri in uris {
            let version = match self.resource_location(uri).await {
                Ok((_, location)) => self
                    .host
                    .load(&location)
                    .await
                    .ok()
                    .map(|document| document.version),
                Err(_) => None,
            };
            versions.push(version);
        }
        versions
    }
}
