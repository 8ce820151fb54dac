//! The three renderings of outputs. The type lives here, with the condensing it selects; the
//! tool contract (`mcp-contract`) re-exports it as the `outputMode` parameter, so its serde names
//! and JSON schema are part of the published contract.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How outputs are rendered (`outputMode`), by the condensing of `read_notebook` and by run
/// receipts alike. The names are those of the reference implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutputMode {
    /// One line per output: its type, MIME types and byte sizes. Nothing is decoded.
    Summary,
    /// Condensed: one preferred representation per output, tables as CSV, trimmed tracebacks,
    /// images returned as images (the default).
    #[default]
    Text,
    /// Every textual representation (raw HTML included) and whole tracebacks, still condensed
    /// and bounded.
    Full,
}

impl OutputMode {
    /// Every mode.
    pub const ALL: [OutputMode; 3] = [OutputMode::Summary, OutputMode::Text, OutputMode::Full];

    /// The name used on the wire: `summary`, `text` or `full`.
    pub const fn as_str(self) -> &'static str {
        match self {
            OutputMode::Summary => "summary",
            OutputMode::Text => "text",
            OutputMode::Full => "full",
        }
    }

    /// The mode with this wire name.
    pub fn from_word(word: &str) -> Option<OutputMode> {
        OutputMode::ALL
            .into_iter()
            .find(|mode| mode.as_str() == word)
    }
}
