//! The reading tools: `read_notebook` (outline, source, outputs, lint) and `search_cells`.

use super::Tools;
use super::edit::to_cell_ref;
use super::notebooks::state::Derived;
use crate::failure::{ToolResult, cell_ref_error, error, to_json, to_value};

use std::collections::{HashMap, HashSet};

use mcp_contract::params::*;
use mcp_contract::results::*;
use mcp_contract::{ErrorCode, ToolError};
use notebook_model::search::{MatchPlace, SearchQuery};
use notebook_model::{CellKind, Notebook, Resolver, view};

use crate::host::{NotebookHost, NotebookLocation};
use crate::session::FlowView;
use crate::{budget, render};

/// The lint findings of a read, each repeated finding (the same code and message) given once,
/// with the other cells in `alsoIn`: a name undefined in 500 cells is one finding, not 500.
#[derive(Default)]
struct LintGroups {
    findings: Vec<LintFinding>,
    /// Where each (code, message) is in `findings`.
    first: HashMap<(LintCodeName, String), usize>,
}

impl LintGroups {
    fn key(finding: &LintFinding) -> (LintCodeName, String) {
        (finding.code, finding.message.clone())
    }

    /// What the findings of the cell at `index` add to the reply: a repeat only its index.
    fn cost(&self, index: usize, findings: &[LintFinding]) -> usize {
        findings
            .iter()
            .map(|finding| {
                if self.first.contains_key(&Self::key(finding)) {
                    index.to_string().len() + 1
                } else {
                    budget::json_len(finding) + 1
                }
            })
            .sum()
    }

    /// Adds the findings of the cell at `index`.
    fn add(&mut self, index: usize, findings: Vec<LintFinding>) {
        for finding in findings {
            let key = Self::key(&finding);
            match self.first.get(&key) {
                Some(&first) => {
                    let group = &mut self.findings[first];
                    // A cell's repeats of one finding come one after another.
                    if group.cell_index != index && group.also_in.last() != Some(&index) {
                        group.also_in.push(index);
                    }
                }
                None => {
                    self.first.insert(key, self.findings.len());
                    self.findings.push(finding);
                }
            }
        }
    }
}

/// A code cell's state (the kernel's, else the dataflow's), inputs and dependents, by name.
fn add_flow(
    cell_view: &mut CellOutline,
    index: usize,
    live_state: Option<CellFlowState>,
    flow: &FlowView,
    names: &[String],
) {
    cell_view.state =
        live_state.or_else(|| flow.states[index].map(crate::result_words::flow_state));
    let named = |cells: &[usize]| cells.iter().map(|&i| names[i].clone()).collect();
    cell_view.inputs = Some(named(&flow.inputs[index]));
    cell_view.dependents = Some(named(&flow.dependents[index]));
}

/// The reply's reference to an image a read returns; `thumbnails` when the read did not ask
/// for images, so that a downscaled one stands for the full image behind its link.
pub(crate) fn image_ref(
    cell_index: usize,
    image: &render::RenderedImage,
    thumbnails: bool,
) -> ImageRef {
    ImageRef {
        cell_index,
        output_index: image.output_index,
        mime_type: image.content.mime_type.clone(),
        width: image.width,
        height: image.height,
        thumbnail: thumbnails && image.downscaled,
    }
}

/// The notice of a read that returned thumbnails.
pub(crate) fn thumbnail_notice() -> String {
    format!(
        "images are thumbnails (long side at most {} px), each with a resource link to the full \
         image; includeImages: true returns them full size",
        render::THUMBNAIL_SIDE
    )
}

/// The notice of a read that returned as many images as one reply may carry.
pub(crate) fn image_cap_notice(thumbnails: bool) -> String {
    let limit = if thumbnails {
        render::MAX_THUMBNAILS_PER_RESPONSE
    } else {
        render::MAX_IMAGES_PER_RESPONSE
    };
    format!(
        "at most {limit} images are returned per response; the rest are resource links, or read \
         fewer cells (cellIds) to see them"
    )
}

pub(crate) fn lint_finding(finding: &dataflow::Finding, names: &[String]) -> LintFinding {
    LintFinding {
        code: crate::result_words::lint_code(finding.code),
        severity: crate::result_words::lint_severity(finding.code),
        cell_index: finding.cell,
        cell_name: names.get(finding.cell).cloned().unwrap_or_default(),
        line: finding.line.map(|line| line as usize),
        message: finding.message.clone(),
        also_in: Vec::new(),
    }
}

/// Outline entries for the cells at `indices` (all when `None`), from the names, revs and saved
/// run states derived once per version of the notebook.
pub(crate) fn outline_cells(
    notebook: &Notebook,
    indices: Option<&[usize]>,
    derived: &Derived,
) -> Vec<CellOutline> {
    let all: Vec<usize> = match indices {
        Some(_) => Vec::new(),
        None => (0..notebook.len()).collect(),
    };
    indices
        .unwrap_or(&all)
        .iter()
        .filter_map(|&index| {
            let cell = notebook.cell(index)?;
            Some(CellOutline {
                index,
                cell_id: cell.id().to_owned(),
                name: derived.names[index].clone(),
                rev: derived.revs[index].clone(),
                kind: match cell.kind() {
                    CellKind::Code => CellKindName::Code,
                    CellKind::Markdown => CellKindName::Markdown,
                    CellKind::Raw => CellKindName::Raw,
                },
                language: notebook.cell_language(cell).to_owned(),
                line_count: view::line_count(cell.source()),
                execution_state: crate::result_words::saved_run_state(derived.states[index]),
                execution_count: cell.execution_count(),
                output_count: (cell.kind() == CellKind::Code).then_some(cell.outputs().len()),
                ..CellOutline::default()
            })
        })
        .collect()
}

impl<H: NotebookHost> Tools<H> {
    pub(crate) fn resolve_cells(
        notebook: &Notebook,
        cell_ids: Option<&[CellRefParam]>,
    ) -> Result<Vec<usize>, ToolError> {
        let Some(cell_ids) = cell_ids else {
            return Ok((0..notebook.len()).collect());
        };
        let resolver = Resolver::new(notebook);
        cell_ids
            .iter()
            .map(|reference| {
                resolver
                    .resolve(&to_cell_ref(reference))
                    .map_err(cell_ref_error)
            })
            .collect()
    }

    pub(crate) async fn read_notebook(&self, params: ReadNotebookParams) -> ToolResult {
        let (location, document) = self.load(&params.notebook_ref).await?;
        let notebook = &document.notebook;
        let indices = Self::resolve_cells(notebook, params.cell_ids.as_deref())?;
        let view = params.view.unwrap_or_default();
        // The kernel is looked at first, so that freshness is judged against what its host
        // reports now (a restart an editor saw since the last call).
        let kernel = self.kernel_label(&location).await;
        let flow = self.flow_view(&location, &document);
        let derived = self.derived(&document);
        let names = &derived.names;
        let selected: HashSet<usize> = indices.iter().copied().collect();
        if view == ReadView::Lint {
            let result = ReadNotebookResult {
                notebook: location.uri.clone(),
                notebook_ref: self.remember(&location),
                cell_count: notebook.len(),
                cells: Vec::new(),
                lint: Some(
                    flow.lint
                        .iter()
                        .filter(|finding| {
                            params.cell_ids.is_none() || selected.contains(&finding.cell)
                        })
                        .map(|finding| lint_finding(finding, names))
                        .collect(),
                ),
                kernel: kernel.clone(),
                images: Vec::new(),
                notice: None,
                next_cell_offset: None,
            };
            return to_json(&result);
        }
        let offset = params.cell_offset.unwrap_or(0) as usize;
        if offset > indices.len() {
            return Err(error(
                ErrorCode::InvalidArgument,
                format!(
                    "cellOffset {offset} is past the {} selected cells; start from 0",
                    indices.len()
                ),
            ));
        }
        let budget = match params
            .max_response_chars
            .unwrap_or(DEFAULT_MAX_RESPONSE_CHARS)
        {
            0 => usize::MAX,
            chars => chars as usize,
        };
        let with_source = matches!(view, ReadView::Source | ReadView::All);
        let with_outputs = matches!(view, ReadView::Outputs | ReadView::All);
        let max_source_chars = params.max_source_chars.unwrap_or(12_000) as usize;
        let max_output_chars = execution_tracker::clamp_max_output_chars(
            crate::execution::requested_chars(params.max_output_chars),
        );
        let output_mode = params.output_mode.unwrap_or_default();
        let include_images = with_outputs && params.include_images.unwrap_or(true);
        let live: HashMap<String, CellFlowState> =
            self.live_states(&location).into_iter().collect();
        // Lint findings travel with their cell, so that a page carries those of its cells.
        let mut lint_by_cell: HashMap<usize, Vec<LintFinding>> = HashMap::new();
        if view == ReadView::Outline {
            for finding in &flow.lint {
                if params.cell_ids.is_none() || selected.contains(&finding.cell) {
                    lint_by_cell
                        .entry(finding.cell)
                        .or_default()
                        .push(lint_finding(finding, names));
                }
            }
        }
        // Images the read did not ask for (`includeImages` omitted) come as thumbnails, each
        // linked to its full-size output; `includeImages: true` returns them full size.
        let thumbnails = params.include_images.is_none();
        let mut image_budget = if thumbnails {
            render::ImageBudget::thumbnails()
        } else {
            render::ImageBudget::default()
        };
        let mut any_thumbnail = false;
        let mut images = Vec::new();
        let mut image_refs = Vec::new();
        let page = &indices[offset..];
        let mut cells = Vec::new();
        // The envelope (URIs, kernel, counts, a notice) is charged up front; each cell then
        // costs its JSON text plus its lint findings.
        let mut spent = 1_000 + 2 * location.uri.len();
        let mut lint = LintGroups::default();
        let mut returned = 0;
        // Outlines are made one cell at a time: a page of a long notebook costs what it returns.
        for &index in page {
            let Some(mut cell_view) = outline_cells(notebook, Some(&[index]), &derived).pop()
            else {
                continue;
            };
            let cell = notebook.cell(index).expect("resolved index");
            if cell.kind() == CellKind::Code {
                let live_state = live.get(cell.id()).copied();
                add_flow(&mut cell_view, index, live_state, &flow, names);
            }
            // Beside the source, a fallback tldr would only restate its first line: only a
            // model's summary is kept there.
            cell_view.tldr = if with_source {
                crate::summary::cached_tldr(cell)
            } else {
                Some(crate::summary::tldr(cell))
            };
            if with_source {
                let slice = view::slice_source(
                    cell.source(),
                    index,
                    params.start_line,
                    params.end_line,
                    max_source_chars,
                )
                .map_err(|slice_error| error(ErrorCode::SourceRange, slice_error.to_string()))?;
                cell_view.source = Some(slice.text);
                cell_view.source_truncated = slice.truncated.then_some(true);
                cell_view.metadata = (!cell.metadata().is_empty()).then(|| cell.metadata().clone());
            }
            let images_before = image_budget;
            let mut cell_images = Vec::new();
            if with_outputs {
                let rendered = render::render_outputs(
                    cell.outputs(),
                    output_mode,
                    max_output_chars,
                    include_images.then_some(&mut image_budget),
                );
                cell_view.outputs = Some(rendered.text);
                cell_view.outputs_truncated = rendered.truncated.then_some(true);
                cell_images = rendered.images;
            }
            let cell_lint = lint_by_cell.remove(&index).unwrap_or_default();
            // Without a budget (`maxResponseChars: 0`) nothing is counted.
            let cost = if budget == usize::MAX {
                0
            } else {
                let lint_cost = lint.cost(index, &cell_lint);
                // What the cell's images add beside it: a ref each and, from the cell that
                // brings the first thumbnail or spends the last image, the notice saying so.
                let image_cost: usize = cell_images
                    .iter()
                    .map(|image| budget::json_len(&image_ref(index, image, thumbnails)) + 1)
                    .sum();
                let thumbnail_notice_cost = if !any_thumbnail
                    && cell_images
                        .iter()
                        .any(|image| thumbnails && image.downscaled)
                {
                    budget::json_len(&thumbnail_notice()) + 1
                } else {
                    0
                };
                let cap_notice_cost =
                    if include_images && images_before.images > 0 && image_budget.images == 0 {
                        budget::json_len(&image_cap_notice(thumbnails)) + 1
                    } else {
                        0
                    };
                budget::json_len(&cell_view)
                    + lint_cost
                    + 2
                    + image_cost
                    + thumbnail_notice_cost
                    + cap_notice_cost
            };
            // The first cell is always returned, so that every page makes progress.
            if returned > 0 && spent.saturating_add(cost) > budget {
                image_budget = images_before;
                break;
            }
            spent += cost;
            returned += 1;
            cells.push(cell_view);
            lint.add(index, cell_lint);
            for image in cell_images {
                let image_ref = image_ref(index, &image, thumbnails);
                any_thumbnail |= image_ref.thumbnail;
                image_refs.push(image_ref);
                images.push(image.content);
            }
        }
        let left_out: Vec<usize> = page[returned..].to_vec();
        let next_cell_offset = (!left_out.is_empty()).then_some(offset + returned);
        let mut notices = Vec::new();
        if let Some(next_offset) = next_cell_offset {
            notices.push(budget::left_out_notice(
                budget,
                returned,
                indices.len(),
                &left_out,
                next_offset,
            ));
        }
        if any_thumbnail {
            notices.push(thumbnail_notice());
        }
        if include_images && image_budget.images == 0 {
            notices.push(image_cap_notice(thumbnails));
        }
        let result = ReadNotebookResult {
            notebook: location.uri.clone(),
            notebook_ref: self.remember(&location),
            cell_count: notebook.len(),
            cells,
            lint: (view == ReadView::Outline).then_some(lint.findings),
            kernel,
            images: image_refs,
            notice: (!notices.is_empty()).then(|| notices.join(" ")),
            next_cell_offset,
        };
        Ok((to_value(&result), images))
    }

    /// `label (epoch N, status)` of the notebook's live kernel.
    pub(crate) async fn kernel_label(&self, location: &NotebookLocation) -> Option<String> {
        let session = self.running_session(location).await?;
        let status = session.status().borrow().as_str();
        let label = session.info().label;
        Some(match session.epoch() {
            Some(epoch) => format!("{label} (epoch {epoch}, {status})"),
            None => format!("{label} ({status})"),
        })
    }

    pub(crate) async fn search_cells(&self, params: SearchCellsParams) -> ToolResult {
        let (location, document) = self.load(&params.notebook_ref).await?;
        let indices = match &params.cell_ids {
            Some(ids) => Some(Self::resolve_cells(&document.notebook, Some(ids))?),
            None => None,
        };
        let query = SearchQuery {
            query: params.query.clone(),
            case_sensitive: params.case_sensitive.unwrap_or(false),
            regex: params.regex.unwrap_or(false),
            include_outputs: params.include_outputs.unwrap_or(true),
            max_matches: params.max_matches.unwrap_or(200).max(1) as usize,
        };
        let found = notebook_model::search::search(&document.notebook, &query, indices.as_deref())
            .map_err(|search_error| match search_error {
                notebook_model::search::SearchError::EmptyQuery => {
                    error(ErrorCode::InvalidArgument, "query must not be empty")
                }
                invalid => error(ErrorCode::InvalidRegex, invalid.to_string()),
            })?;
        let result = SearchCellsResult {
            notebook: location.uri,
            query: params.query,
            total_matches: found.total_matches,
            truncated: found.truncated,
            cells: found
                .cells
                .into_iter()
                .map(|cell| SearchCellEntry {
                    index: cell.index,
                    cell_id: cell.id,
                    name: cell.name,
                    matches: cell
                        .matches
                        .into_iter()
                        .map(|found| {
                            let (place, output_index, mime) = match found.place {
                                MatchPlace::Source => (MatchPlaceName::Source, None, None),
                                MatchPlace::Name => (MatchPlaceName::Name, None, None),
                                MatchPlace::Output { output_index, mime } => {
                                    (MatchPlaceName::Output, Some(output_index), Some(mime))
                                }
                            };
                            SearchMatchEntry {
                                place,
                                line: found.line,
                                text: found.text,
                                output_index,
                                mime,
                            }
                        })
                        .collect(),
                })
                .collect(),
        };
        to_json(&result)
    }
}
