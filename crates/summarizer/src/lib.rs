//! Cell summaries from the Anthropic Messages API: the one [`Summarizer`] every jupyter-mcp
//! binary builds from its environment and gives its tools (`host_core::Services`), whichever
//! host it serves (files under a root, a Jupyter Server's live notebooks, a VS Code window).
//!
//! Layer 3 (adapter). One request summarises a batch of cells; the reply is a JSON array that
//! the tool layer caches in the cells' metadata. The HTTPS goes through `kernels`'
//! [`HttpClient`], so the API is trusted as kernel servers are: the platform's store (or
//! `SSL_CERT_FILE`) plus `--kernel-server-ca`. Errors come back as short sentences without the
//! API's raw text; the details (credential-free) go to the log. This crate opens no connection
//! of its own, reads no file, and knows nothing of hosts, notebooks, kernels or MCP.
#![warn(missing_docs)]

use std::time::Duration;

use bytes::Bytes;
use host_core::BoxFuture;
use host_core::summary::{SharedSummarizer, Summarizer, SummaryRequest, SummaryResponse};
use http::HeaderValue;
use kernels::{HttpClient, HttpFailure};
use serde_json::{Value, json};

/// The certificate authorities trusted for the API, as for kernel servers.
pub use kernels::TlsTrust;

/// The model used when `JUPYTER_MCP_SUMMARY_MODEL` is unset.
pub const DEFAULT_MODEL: &str = "claude-haiku-4-5";
/// The API used when `ANTHROPIC_BASE_URL` is unset.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
const API_VERSION: &str = "2023-06-01";
const MAX_TOKENS: u32 = 4096;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);

const INSTRUCTIONS: &str = "You summarise Jupyter notebook cells for an AI agent that works on \
the notebook. For each cell you get its id, kind, source and condensed outputs. Reply with only \
a JSON array, one object per cell, with the keys id (as given), tldr (at most 12 words), \
description (one to three sentences on what the cell does and why), and outputSummary (one \
sentence on what its outputs show, or an empty string when it has none). No prose outside the \
JSON.";

/// Why a summarizer cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `ANTHROPIC_BASE_URL` is not an absolute `http://` or `https://` URL.
    #[error(
        "ANTHROPIC_BASE_URL is not an http:// or https:// URL with a host (such as {DEFAULT_BASE_URL})"
    )]
    BaseUrl,
    /// The API key cannot be sent as a header value.
    #[error("ANTHROPIC_API_KEY holds characters that cannot be sent in an HTTP header")]
    ApiKey,
    /// The TLS trust cannot be used (an unreadable `--kernel-server-ca` file).
    #[error("{0}")]
    Tls(#[from] kernels::Error),
}

/// What the summarizer needs to know: where the API is, the key, the model.
#[derive(Clone, PartialEq, Eq)]
pub struct AnthropicConfig {
    /// The API key (`x-api-key`), trimmed.
    pub api_key: String,
    /// The API's base URL; requests go to `<base_url>/v1/messages`.
    pub base_url: String,
    /// The model asked and recorded with each summary.
    pub model: String,
}

// Without the key.
kernels::debug_fields!(AnthropicConfig { base_url, model });

impl AnthropicConfig {
    /// From the process environment; see [`AnthropicConfig::from_variables`].
    pub fn from_env() -> Option<AnthropicConfig> {
        AnthropicConfig::from_variables(|name| std::env::var(name).ok())
    }

    /// From environment variables as `variable` reads them: `ANTHROPIC_API_KEY` (required; a
    /// blank one counts as unset), `ANTHROPIC_BASE_URL` (default [`DEFAULT_BASE_URL`]) and
    /// `JUPYTER_MCP_SUMMARY_MODEL` (default [`DEFAULT_MODEL`]).
    pub fn from_variables(variable: impl Fn(&str) -> Option<String>) -> Option<AnthropicConfig> {
        let set = |name: &str| {
            variable(name)
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
        };
        Some(AnthropicConfig {
            api_key: set("ANTHROPIC_API_KEY")?,
            base_url: set("ANTHROPIC_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
            model: set("JUPYTER_MCP_SUMMARY_MODEL").unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
        })
    }
}

/// The summarizer of the environment (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`,
/// `JUPYTER_MCP_SUMMARY_MODEL`), trusting `trust` for HTTPS; `None` without a key.
pub fn from_env(trust: &TlsTrust) -> Result<Option<SharedSummarizer>, Error> {
    let Some(config) = AnthropicConfig::from_env() else {
        return Ok(None);
    };
    let summarizer = AnthropicSummarizer::new(config, trust)?;
    Ok(Some(std::sync::Arc::new(summarizer)))
}

/// Talks to the Messages API, one connection per request. Its derived `Debug` shows no key:
/// the key is a sensitive `HeaderValue`, whose `Debug` says only `Sensitive`.
#[derive(Debug)]
pub struct AnthropicSummarizer {
    client: HttpClient,
    endpoint: http::Uri,
    api_key: HeaderValue,
    model: String,
}

impl AnthropicSummarizer {
    /// A summarizer for `config`, trusting `trust` for HTTPS.
    pub fn new(config: AnthropicConfig, trust: &TlsTrust) -> Result<AnthropicSummarizer, Error> {
        let endpoint = messages_endpoint(&config.base_url)?;
        let mut api_key = HeaderValue::from_str(&config.api_key).map_err(|_| Error::ApiKey)?;
        api_key.set_sensitive(true);
        Ok(AnthropicSummarizer {
            client: HttpClient::new(trust, CONNECT_TIMEOUT)?,
            endpoint,
            api_key,
            model: config.model,
        })
    }

    /// Where requests go.
    pub fn endpoint(&self) -> &http::Uri {
        &self.endpoint
    }

    /// The request that asks for summaries of `cells`.
    fn request(&self, cells: &[SummaryRequest]) -> http::Request<Bytes> {
        let listing: Vec<Value> = cells
            .iter()
            .map(|cell| {
                json!({"id": cell.id, "kind": cell.kind, "source": cell.source, "outputs": cell.outputs})
            })
            .collect();
        let body = json!({
            "model": self.model,
            "max_tokens": MAX_TOKENS,
            "system": INSTRUCTIONS,
            "messages": [{"role": "user", "content": Value::Array(listing).to_string()}],
        });
        let mut request = http::Request::new(Bytes::from(body.to_string()));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = self.endpoint.clone();
        let headers = request.headers_mut();
        headers.insert("x-api-key", self.api_key.clone());
        headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        request
    }

    async fn ask(&self, cells: &[SummaryRequest]) -> Result<Vec<SummaryResponse>, String> {
        match self.client.send(self.request(cells), REQUEST_TIMEOUT).await {
            Ok(answer) => read_answer(answer.status, &answer.body),
            Err(failure) => {
                // The reason names the host and what failed (a refused certificate, say) and
                // carries no credential: for the user's log, not the agent's reply.
                tracing::warn!(endpoint = %self.endpoint, %failure, "a summary request failed");
                Err(match failure {
                    HttpFailure::NotSent { .. } => {
                        "the API could not be reached (see the server's log)".to_owned()
                    }
                    HttpFailure::NoAnswer {
                        timed_out: true, ..
                    } => format!(
                        "the API did not answer within {} s",
                        REQUEST_TIMEOUT.as_secs()
                    ),
                    HttpFailure::NoAnswer { .. } => "the API's answer was cut off".to_owned(),
                })
            }
        }
    }
}

impl Summarizer for AnthropicSummarizer {
    fn model(&self) -> &str {
        &self.model
    }

    fn summarize<'a>(
        &'a self,
        cells: &'a [SummaryRequest],
    ) -> BoxFuture<'a, Result<Vec<SummaryResponse>, String>> {
        Box::pin(self.ask(cells))
    }
}

/// `<base>/v1/messages`, when `base` is an absolute `http://` or `https://` URL.
fn messages_endpoint(base: &str) -> Result<http::Uri, Error> {
    let endpoint: http::Uri = format!("{}/v1/messages", base.trim().trim_end_matches('/'))
        .parse()
        .map_err(|_| Error::BaseUrl)?;
    let scheme_fits = matches!(endpoint.scheme_str(), Some("http" | "https"));
    if !scheme_fits || endpoint.host().is_none_or(str::is_empty) {
        return Err(Error::BaseUrl);
    }
    Ok(endpoint)
}

/// The summaries in the API's answer, or a short sentence saying why there are none. The
/// API's own error message is not quoted; its error type (`overloaded_error`) is.
fn read_answer(status: u16, body: &[u8]) -> Result<Vec<SummaryResponse>, String> {
    let reply: Option<Value> = serde_json::from_slice(body).ok();
    if !(200..300).contains(&status) {
        let kind = reply
            .as_ref()
            .and_then(|reply| reply["error"]["type"].as_str())
            .filter(|kind| {
                kind.len() <= 40 && kind.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            });
        return Err(match kind {
            Some(kind) => format!("the API answered HTTP {status} ({kind})"),
            None => format!("the API answered HTTP {status}"),
        });
    }
    let reply = reply.ok_or_else(|| "the API's answer is not JSON".to_owned())?;
    let text: String = reply["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect();
    parse_summaries(&text).ok_or_else(|| "the model's answer is not the JSON asked for".to_owned())
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

#[cfg(test)]
mod tests;
