//! Notebooks and their parts as MCP resources: the URI grammar, the MIME types and the
//! templates clients are told about.
//!
//! A notebook's resource URI is its own URI (`file:///…/analysis.ipynb`, `memory:///a.ipynb`);
//! its parts add a fragment: `#cells/<cellId>/source` for a cell's source and
//! `#cells/<cellId>/outputs/<index>` for one of its saved outputs (every representation of it:
//! text for text, a blob for an image, so a client can fetch the whole of what a reply cut or
//! left out). Cell ids are nbformat ids, percent-encoded where they hold characters a fragment
//! cannot.
//!
//! ```
//! use mcp_contract::resources::{Part, ResourceUri};
//!
//! let uri = ResourceUri::cell_output("file:///work/a.ipynb", "load", 2);
//! assert_eq!(uri.to_string(), "file:///work/a.ipynb#cells/load/outputs/2");
//! let parsed = ResourceUri::parse(&uri.to_string()).unwrap();
//! assert_eq!(parsed.part, Part::CellOutput { cell_id: "load".into(), index: 2 });
//! ```

use std::fmt;

/// The MIME type of a notebook resource (nbformat JSON).
pub const NOTEBOOK_MIME: &str = "application/x-ipynb+json";

/// The URI template of a cell's source (RFC 6570; `notebook` is a notebook resource's URI).
pub const CELL_SOURCE_TEMPLATE: &str = "{+notebook}#cells/{cellId}/source";

/// The URI template of one saved output of a cell (`index` counts from 0).
pub const CELL_OUTPUT_TEMPLATE: &str = "{+notebook}#cells/{cellId}/outputs/{index}";

/// A resource template: its URI template, a name, and what it gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Template {
    /// The RFC 6570 URI template.
    pub uri_template: &'static str,
    /// A short name.
    pub name: &'static str,
    /// What reading one gives.
    pub description: &'static str,
}

/// The templates of a server whose host has notebooks.
pub const TEMPLATES: [Template; 2] = [
    Template {
        uri_template: CELL_SOURCE_TEMPLATE,
        name: "cell-source",
        description: "A cell's source: a notebook's URI, then #cells/<cellId>/source.",
    },
    Template {
        uri_template: CELL_OUTPUT_TEMPLATE,
        name: "cell-output",
        description: "One saved output of a cell, every representation of it (text, or an image's bytes as a blob): a notebook's URI, then #cells/<cellId>/outputs/<index> (from 0).",
    },
];

/// Which part of a notebook a resource URI names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// The whole notebook.
    Notebook,
    /// A cell's source.
    CellSource {
        /// The cell's nbformat id.
        cell_id: String,
    },
    /// One saved output of a cell.
    CellOutput {
        /// The cell's nbformat id.
        cell_id: String,
        /// The output's position among the cell's outputs, from 0.
        index: usize,
    },
}

/// A resource URI: a notebook and a part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceUri {
    /// The notebook's own URI (no fragment).
    pub notebook: String,
    /// What of it.
    pub part: Part,
}

/// Why a string is not a resource URI of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{uri}` is not a notebook resource: {reason}")]
pub struct ResourceUriError {
    /// The string, shortened.
    pub uri: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Characters kept as they are in a fragment's cell id.
fn keep(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

fn encode(text: &str) -> String {
    crate::refs::percent_encode(text, keep)
}

impl ResourceUri {
    /// The whole notebook `notebook`.
    pub fn notebook(notebook: &str) -> ResourceUri {
        ResourceUri {
            notebook: notebook.to_owned(),
            part: Part::Notebook,
        }
    }

    /// The source of cell `cell_id` of `notebook`.
    pub fn cell_source(notebook: &str, cell_id: &str) -> ResourceUri {
        ResourceUri {
            notebook: notebook.to_owned(),
            part: Part::CellSource {
                cell_id: cell_id.to_owned(),
            },
        }
    }

    /// Output `index` of cell `cell_id` of `notebook`.
    pub fn cell_output(notebook: &str, cell_id: &str, index: usize) -> ResourceUri {
        ResourceUri {
            notebook: notebook.to_owned(),
            part: Part::CellOutput {
                cell_id: cell_id.to_owned(),
                index,
            },
        }
    }

    /// Reads a resource URI.
    pub fn parse(uri: &str) -> Result<ResourceUri, ResourceUriError> {
        let failure = |reason| ResourceUriError {
            uri: uri.chars().take(200).collect(),
            reason,
        };
        let (notebook, fragment) = match uri.split_once('#') {
            Some((notebook, fragment)) => (notebook, Some(fragment)),
            None => (uri, None),
        };
        if notebook.is_empty() || !notebook.contains(':') {
            return Err(failure(
                "it has no scheme (expected a notebook URI such as file:///…)",
            ));
        }
        let part = match fragment {
            None => Part::Notebook,
            Some(fragment) => {
                let pieces: Vec<&str> = fragment.split('/').collect();
                let cell_id = |encoded: &str| {
                    crate::refs::percent_decode(encoded)
                        .filter(|id| !id.is_empty())
                        .ok_or_else(|| failure("its cell id is empty or badly encoded"))
                };
                match pieces.as_slice() {
                    ["cells", id, "source"] => Part::CellSource {
                        cell_id: cell_id(id)?,
                    },
                    ["cells", id, "outputs", index] => Part::CellOutput {
                        cell_id: cell_id(id)?,
                        index: index
                            .parse()
                            .map_err(|_| failure("its output index is not a number"))?,
                    },
                    _ => {
                        return Err(failure(
                            "its fragment is neither #cells/<id>/source nor #cells/<id>/outputs/<n>",
                        ));
                    }
                }
            }
        };
        Ok(ResourceUri {
            notebook: notebook.to_owned(),
            part,
        })
    }
}

impl fmt::Display for ResourceUri {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.notebook)?;
        match &self.part {
            Part::Notebook => Ok(()),
            Part::CellSource { cell_id } => write!(formatter, "#cells/{}/source", encode(cell_id)),
            Part::CellOutput { cell_id, index } => {
                write!(formatter, "#cells/{}/outputs/{index}", encode(cell_id))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_odd_ids_are_encoded() {
        for uri in [
            ResourceUri::notebook("file:///a%20b/c.ipynb"),
            ResourceUri::cell_source("memory:///x.ipynb", "cell with/slash#hash"),
            ResourceUri::cell_output("file:///w/a.ipynb", "ünï", 12),
        ] {
            let text = uri.to_string();
            assert_eq!(
                text.matches('#').count(),
                usize::from(uri.part != Part::Notebook)
            );
            assert_eq!(ResourceUri::parse(&text).unwrap(), uri, "{text}");
        }
    }

    #[test]
    fn what_is_not_ours_is_refused() {
        for bad in [
            "",
            "a.ipynb",
            "file:///a.ipynb#cells/x",
            "file:///a.ipynb#cells//source",
            "file:///a.ipynb#cells/x/outputs/one",
            "file:///a.ipynb#outputs/1",
        ] {
            assert!(ResourceUri::parse(bad).is_err(), "{bad}");
        }
    }
}
