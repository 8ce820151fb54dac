//! `summarize_cells`: batches of cells to the [`Summarizer`](crate::summary::Summarizer),
//! cached by content hash, with the `*` fallbacks.

use notebook_model::CellKind;
use notebook_model::identity::METADATA_KEY;
use serde_json::Value;

use crate::summary::*;

/// Cells per model request, and source characters per request, at most.
const BATCH_CELLS: usize = 16;
const BATCH_CHARS: usize = 40_000;

impl<H: crate::host::NotebookHost> crate::tools::Tools<H> {
    pub(crate) async fn summarize_cells(
        &self,
        params: mcp_contract::params::SummarizeCellsParams,
    ) -> Result<(Value, Vec<crate::tools::ImageContent>), mcp_contract::ToolError> {
        use notebook_model::edit::EditOp;
        use serde_json::json;

        let (location, document) = self.load(&params.notebook_ref).await?;
        let notebook = &document.notebook;
        let indices = Self::resolve_cells(notebook, params.cell_ids.as_deref())?;
        let names = notebook_model::identity::effective_names(notebook);
        let summarizer = self.services.summarizer.clone();
        let force = params.force.unwrap_or(false);

        // What is cached, and what must be asked for.
        let mut results: Vec<(usize, SummaryResponse, &'static str)> = Vec::new();
        let mut wanted: Vec<usize> = Vec::new();
        for &index in &indices {
            let cell = notebook.cell(index).expect("resolved index");
            match cached_full(cell) {
                Some(summary) if !force => results.push((index, summary, "cached")),
                _ => wanted.push(index),
            }
        }
        let mut requests_made = 0;
        let mut notice = None;
        let mut fresh: Vec<(usize, SummaryResponse)> = Vec::new();
        if let Some(summarizer) = &summarizer {
            let mut batch: Vec<SummaryRequest> = Vec::new();
            let mut batches = Vec::new();
            let mut size = 0;
            for &index in &wanted {
                let cell = notebook.cell(index).expect("resolved index");
                let outputs = crate::render::render_outputs(
                    cell.outputs(),
                    mcp_contract::params::OutputMode::Text,
                    2_000,
                    None,
                );
                let request = SummaryRequest {
                    id: cell.id().to_owned(),
                    kind: cell.kind().as_str().to_owned(),
                    source: cell.source().chars().take(8_000).collect(),
                    outputs: if cell.outputs().is_empty() {
                        String::new()
                    } else {
                        outputs.text
                    },
                };
                let cost = request.source.len() + request.outputs.len();
                if !batch.is_empty() && (batch.len() >= BATCH_CELLS || size + cost > BATCH_CHARS) {
                    batches.push(std::mem::take(&mut batch));
                    size = 0;
                }
                size += cost;
                batch.push(request);
            }
            if !batch.is_empty() {
                batches.push(batch);
            }
            for batch in batches {
                requests_made += 1;
                match summarizer.summarize(&batch).await {
                    Ok(responses) => {
                        for response in responses {
                            if let Some(index) = notebook.position_of_id(&response.id)
                                && wanted.contains(&index)
                            {
                                fresh.push((index, response));
                            }
                        }
                    }
                    Err(reason) => {
                        notice = Some(format!(
                            "the model could not summarise some cells ({reason}); they got deterministic summaries marked with *"
                        ));
                    }
                }
            }
        }
        // Cache the model's summaries in the cells' metadata, keyed by content.
        if let Some(summarizer) = &summarizer
            && !fresh.is_empty()
        {
            let ops: Vec<EditOp> = fresh
                .iter()
                .map(|(index, summary)| {
                    let cell = notebook.cell(*index).expect("resolved index");
                    let mut ours = cell
                        .metadata()
                        .get(METADATA_KEY)
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default();
                    ours.insert(
                        "summary".to_owned(),
                        json!({
                            "rev": cell.rev(),
                            "outputsRev": outputs_rev(cell),
                            "tldr": summary.tldr,
                            "description": summary.description,
                            "outputSummary": summary.output_summary,
                            "model": summarizer.model(),
                        }),
                    );
                    let mut patch = serde_json::Map::new();
                    patch.insert(METADATA_KEY.to_owned(), Value::Object(ours));
                    EditOp::Edit {
                        target: notebook_model::CellRef::Text(cell.id().to_owned()),
                        expected_rev: Some(cell.rev()),
                        source: None,
                        language: None,
                        metadata: Some(patch),
                        name: None,
                    }
                })
                .collect();
            self.mutate(
                &params.notebook_ref,
                &ops,
                format!("summarize_cells ({} cell(s))", ops.len()),
            )
            .await?;
        }
        for (index, summary) in fresh {
            results.push((index, summary, "model"));
        }
        for &index in &wanted {
            if results.iter().any(|(done, _, _)| *done == index) {
                continue;
            }
            let cell = notebook.cell(index).expect("resolved index");
            let analysis =
                (cell.kind() == CellKind::Code).then(|| dataflow::analyse_cell(cell.source()));
            results.push((
                index,
                SummaryResponse {
                    id: cell.id().to_owned(),
                    tldr: fallback(cell),
                    description: fallback_description(cell, analysis.as_ref()),
                    output_summary: fallback_output_summary(cell),
                },
                "fallback",
            ));
        }
        results.sort_by_key(|(index, _, _)| *index);
        let cells: Vec<Value> = results
            .into_iter()
            .map(|(index, summary, source)| {
                json!({
                    "index": index,
                    "cell_id": summary.id,
                    "name": names[index],
                    "tldr": summary.tldr,
                    "description": summary.description,
                    "outputSummary": summary.output_summary,
                    "source": source,
                })
            })
            .collect();
        let mut body = json!({
            "notebook": location.uri,
            "model": summarizer.as_ref().map_or("fallback", |summarizer| summarizer.model()),
            "modelRequests": requests_made,
            "cells": cells,
        });
        if summarizer.is_none() {
            body["notice"] =
                json!("no ANTHROPIC_API_KEY: these are deterministic summaries, marked with *");
        } else if let Some(notice) = notice {
            body["notice"] = json!(notice);
        }
        Ok((body, Vec::new()))
    }
}
