//! [`ScriptedSummarizer`]: a language model that answers from the cell ids.

use std::sync::{Arc, Mutex};

use mcp_contract::BoxFuture;

/// A [`Summarizer`](crate::summary::Summarizer) that answers every cell with `Model tldr of
/// <id>` and records the ids of each request, so a test sees what the tools asked for. Clones
/// share the record.
#[derive(Clone)]
pub struct ScriptedSummarizer {
    model: String,
    requests: Arc<Mutex<Vec<Vec<String>>>>,
    failure: Arc<Mutex<Option<String>>>,
}

impl ScriptedSummarizer {
    /// A summarizer that says it is `model`.
    pub fn new(model: &str) -> ScriptedSummarizer {
        ScriptedSummarizer {
            model: model.to_owned(),
            requests: Arc::new(Mutex::new(Vec::new())),
            failure: Arc::new(Mutex::new(None)),
        }
    }

    /// The cell ids of each request so far, oldest first.
    pub fn requests(&self) -> Vec<Vec<String>> {
        self.requests.lock().expect("requests lock").clone()
    }

    /// Makes later requests fail with `reason` (`None`: answer again).
    pub fn fail_with(&self, reason: Option<&str>) {
        *self.failure.lock().expect("failure lock") = reason.map(str::to_owned);
    }
}

impl crate::summary::Summarizer for ScriptedSummarizer {
    fn model(&self) -> &str {
        &self.model
    }

    fn summarize<'a>(
        &'a self,
        cells: &'a [crate::summary::SummaryRequest],
    ) -> BoxFuture<'a, Result<Vec<crate::summary::SummaryResponse>, String>> {
        let ids: Vec<String> = cells.iter().map(|cell| cell.id.clone()).collect();
        self.requests.lock().expect("requests lock").push(ids);
        let failure = self.failure.lock().expect("failure lock").clone();
        let answer = match failure {
            Some(reason) => Err(reason),
            None => Ok(cells
                .iter()
                .map(|cell| crate::summary::SummaryResponse {
                    id: cell.id.clone(),
                    tldr: format!("Model tldr of {}", cell.id),
                    description: format!("What the model says of a {} cell.", cell.kind),
                    output_summary: if cell.outputs.is_empty() {
                        String::new()
                    } else {
                        "The model read its outputs.".to_owned()
                    },
                })
                .collect()),
        };
        Box::pin(std::future::ready(answer))
    }
}
