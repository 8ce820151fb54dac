//! Cell summaries from the Anthropic Messages API, when `ANTHROPIC_API_KEY` is set.
//!
//! One request summarises a batch of cells; the reply is a JSON array that the tool layer caches
//! in the cells' metadata. Errors come back as short sentences without the API's raw text.

use std::time::Duration;

use bytes::Bytes;
use host_core::BoxFuture;
use host_core::summary::{Summarizer, SummaryRequest, SummaryResponse};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

/// The default model.
pub const DEFAULT_MODEL: &str = "claude-haiku-4-5";
const API_VERSION: &str = "2023-06-01";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);

const INSTRUCTIONS: &str = "You summarise Jupyter notebook cells for an AI agent that works on \
the notebook. For each cell you get its id, kind, source and condensed outputs. Reply with only \
a JSON array, one object per cell, with the keys id (as given), tldr (at most 12 words), \
description (one to three sentences on what the cell does and why), and outputSummary (one \
sentence on what its outputs show, or an empty string when it has none). No prose outside the \
JSON.";

/// Talks to the Messages API.
pub struct AnthropicSummarizer {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    endpoint: String,
    api_key: String,
    model: String,
}

impl std::fmt::Debug for AnthropicSummarizer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("AnthropicSummarizer")
            .field("endpoint", &self.endpoint)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl AnthropicSummarizer {
    /// From the environment: `ANTHROPIC_API_KEY` (required), `ANTHROPIC_BASE_URL` (default the
    /// public API) and `JUPYTER_MCP_SUMMARY_MODEL` (default [`DEFAULT_MODEL`]).
    pub fn from_env() -> Option<AnthropicSummarizer> {
        let api_key = std::env::var("ANTHROPIC_API_KEY")
            .ok()
            .filter(|key| !key.trim().is_empty())?;
        let base = std::env::var("ANTHROPIC_BASE_URL")
            .unwrap_or_else(|_| "https://api.anthropic.com".to_owned());
        let model = std::env::var("JUPYTER_MCP_SUMMARY_MODEL")
            .ok()
            .filter(|model| !model.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_MODEL.to_owned());
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .ok()?
            .https_or_http()
            .enable_http1()
            .build();
        Some(AnthropicSummarizer {
            client: Client::builder(TokioExecutor::new()).build(connector),
            endpoint: format!("{}/v1/messages", base.trim_end_matches('/')),
            api_key: api_key.trim().to_owned(),
            model,
        })
    }

    async fn request(&self, cells: &[SummaryRequest]) -> Result<Vec<SummaryResponse>, String> {
        let listing: Vec<Value> = cells
            .iter()
            .map(|cell| {
                json!({"id": cell.id, "kind": cell.kind, "source": cell.source, "outputs": cell.outputs})
            })
            .collect();
        let body = json!({
            "model": self.model,
            "max_tokens": 4096,
            "system": INSTRUCTIONS,
            "messages": [{"role": "user", "content": Value::Array(listing).to_string()}],
        });
        let request = http::Request::post(&self.endpoint)
            .header("x-api-key", &self.api_key)
            .header("anthropic-version", API_VERSION)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|_| "the request could not be built".to_owned())?;
        let response = tokio::time::timeout(REQUEST_TIMEOUT, self.client.request(request))
            .await
            .map_err(|_| "the API did not answer within 90 s".to_owned())?
            .map_err(|_| "the API could not be reached".to_owned())?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|_| "the API's answer was cut off".to_owned())?
            .to_bytes();
        if !status.is_success() {
            return Err(format!("the API answered HTTP {}", status.as_u16()));
        }
        let reply: Value = serde_json::from_slice(&bytes)
            .map_err(|_| "the API's answer is not JSON".to_owned())?;
        let text: String = reply["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|block| block["type"] == "text")
            .filter_map(|block| block["text"].as_str())
            .collect();
        parse_summaries(&text)
            .ok_or_else(|| "the model's answer is not the JSON asked for".to_owned())
    }
}

/// The JSON array in a model's answer (tolerating text or code fences around it).
fn parse_summaries(text: &str) -> Option<Vec<SummaryResponse>> {
    let start = text.find('[')?;
    let end = text.rfind(']')?;
    let items: Vec<Value> = serde_json::from_str(text.get(start..=end)?).ok()?;
    let field = |item: &Value, key: &str| {
        item.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    Some(
        items
            .iter()
            .filter_map(|item| {
                let id = field(item, "id");
                (!id.is_empty()).then(|| SummaryResponse {
                    tldr: field(item, "tldr"),
                    description: field(item, "description"),
                    output_summary: field(item, "outputSummary"),
                    id,
                })
            })
            .collect(),
    )
}

impl Summarizer for AnthropicSummarizer {
    fn model(&self) -> &str {
        &self.model
    }

    fn summarize<'a>(
        &'a self,
        cells: &'a [SummaryRequest],
    ) -> BoxFuture<'a, Result<Vec<SummaryResponse>, String>> {
        Box::pin(self.request(cells))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_with_fences_and_prose_parse() {
        let text = "Here you go:\n```json\n[{\"id\": \"a\", \"tldr\": \"Loads data\", \"description\": \"d\", \"outputSummary\": \"\"}]\n```";
        let parsed = parse_summaries(text).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].tldr, "Loads data");
        assert!(parse_summaries("no json here").is_none());
    }
}
