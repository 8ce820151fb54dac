//! `format_outputs`: a cell's nbformat outputs → bounded, condensed text plus images.

use notebook_model::outputs::OutputView;
use serde_json::Value;

use crate::CondenseError;
use crate::html::analyze_html;
use crate::images::{
    decode_base64, downscale_image, encode_base64, image_dimensions, summarize_svg,
};
use crate::mode::OutputMode;
use crate::rich::{summarize_plotly, summarize_vega, summarize_widget};
use crate::table::{TableLimits, parse_frame_shape, render_table};
use crate::terminal::{group_thousands, render_terminal};
use crate::traceback::{TracebackOptions, condense_traceback};
use bundle::{
    is_default_repr, is_javascript, is_plotly, is_textual, is_vega, is_widget, json_size,
    multiline_text, sorted_bundle, textual_body,
};
use summary::format_summary;

mod bundle;
mod fit;
mod summary;

/// Options of [`format_outputs`]. `FormatOptions::default()` gives the documented defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatOptions {
    /// How much of each output to show: `summary`, `text` (condensed) or `full`. Default `text`.
    pub mode: OutputMode,
    /// Bound on the returned text, in characters (Unicode scalar values). The caller clamps it;
    /// below [`MIN_TEXT_BOUND`] the text may still take up to that many characters, the room for
    /// one marker. Default 12,000.
    pub max_chars: usize,
    /// Return PNG and JPEG images as images (otherwise a placeholder line says they exist).
    /// Default true.
    pub include_images: bool,
    /// Most images returned per call. Default 8.
    pub max_images: usize,
    /// Most bytes of returned images per call, counted on the encoded (binary, not base64)
    /// images. Default 2,000,000.
    pub max_image_bytes: usize,
    /// Images are downscaled so that their long side is at most this many pixels. Default 1,200.
    pub max_image_side: u32,
    /// Most data rows of a table shown in `text` mode (head and tail). Default 50.
    pub max_table_rows: usize,
    /// Most data columns of a table shown in `text` mode (first and last). Default 40.
    pub max_table_columns: usize,
    /// How tracebacks are trimmed in `text` mode.
    pub traceback: TracebackOptions,
}

/// The smallest bound [`format_outputs`] can honour: the room for one truncation marker.
pub const MIN_TEXT_BOUND: usize = 80;

impl Default for FormatOptions {
    fn default() -> Self {
        Self {
            mode: OutputMode::Text,
            max_chars: 12_000,
            include_images: true,
            max_images: 8,
            max_image_bytes: 2_000_000,
            max_image_side: 1_200,
            max_table_rows: 50,
            max_table_columns: 40,
            traceback: TracebackOptions::default(),
        }
    }
}

/// An image to return to the agent as image content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnedImage {
    /// 0-based index of the output it came from (the text says `output index+1`).
    pub output_index: usize,
    /// `image/png` or `image/jpeg`: the format of `base64`, read from the bytes.
    pub mime: &'static str,
    /// The encoded image, base64 (standard alphabet, padded).
    pub base64: String,
    /// Width in pixels of the image as returned (after any downscaling).
    pub width: u32,
    /// Height in pixels of the image as returned (after any downscaling).
    pub height: u32,
    /// Size of the encoded image in bytes (before base64).
    pub byte_len: usize,
    /// Whether it was resized (to fit `max_image_side` or the byte budget) and re-encoded.
    pub downscaled: bool,
}

/// What happened to one image found in the outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageOutcome {
    /// Returned as `images[image_number - 1]`.
    Returned {
        /// 1-based position of the image among those returned by the call.
        image_number: usize,
        /// Whether the image was resized (to fit `max_image_side` or the byte budget) and
        /// re-encoded.
        downscaled: bool,
    },
    /// Images were not requested (`include_images` false).
    NotRequested,
    /// Over the `max_images` limit of the call.
    OverImageLimit,
    /// Over the `max_image_bytes` budget of the call, even after further downscaling.
    OverByteBudget,
    /// Not a raster format that is returned (SVG is summarised, GIF and others only noted).
    NotReturnedFormat,
    /// The data could not be decoded; the reason is short and safe to show.
    Undecodable(String),
}

/// Per-image information, for every image in the outputs (`text` and `full` modes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageReport {
    /// 0-based index of the output the image is in.
    pub output_index: usize,
    /// The MIME type under which the output stored it.
    pub mime: String,
    /// Decoded size in bytes (for SVG, the size of the text), or 0 when undecodable.
    pub original_bytes: usize,
    /// Width and height, when known.
    pub original_size: Option<(u32, u32)>,
    /// Whether the image was returned, and why not when it was not.
    pub outcome: ImageOutcome,
}

/// The result of [`format_outputs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormattedOutputs {
    /// The condensed text, at most `max_chars` characters (see [`FormatOptions::max_chars`]).
    pub text: String,
    /// Images to return as image content, in the order their placeholders appear in `text`.
    pub images: Vec<ReturnedImage>,
    /// Every image seen and what became of it.
    pub image_reports: Vec<ImageReport>,
    /// Whether any content was cut (to fit `max_chars`, table limits or traceback trimming);
    /// every cut is marked in `text`.
    pub truncated: bool,
    /// Characters of condensed text left out by those cuts.
    pub dropped_chars: usize,
}

/// What a part's body holds, for deduplication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PartKind {
    Body,
    /// A table: always deduplicated across outputs.
    Table,
}

#[derive(Debug, Clone)]
struct Part {
    /// Parts of one output (or one merged stream section) are separated by one line break;
    /// groups by a blank line.
    group: usize,
    header: String,
    /// Empty for single-line parts (placeholders, summaries), which the budget never cuts.
    body: String,
    /// Errors are served first when the budget is shared: the reason a cell failed matters more
    /// than the log before it.
    priority: bool,
}

/// Sections in a run of stream outputs above which stdout and stderr are merged per stream
/// rather than shown in their exact interleaving (a progress bar on stderr between prints).
const MAX_STREAM_SECTIONS: usize = 6;
/// Bodies shorter than this are not deduplicated (a repeated `42` needs no cross-reference).
const MIN_DEDUP_CHARS: usize = 200;
/// Text around an HTML table beyond which the HTML is treated as a document (converted to text
/// with the table inline), not as a table.
const MAX_TABLE_SURROUNDING_CHARS: usize = 80;

/// Formats a cell's outputs (nbformat v4 output dicts) for an agent. Deterministic: the same
/// outputs and options always give the same result, whatever the order of keys in the bundles.
pub fn format_outputs(outputs: &[Value], options: &FormatOptions) -> FormattedOutputs {
    if options.mode == OutputMode::Summary {
        return format_summary(outputs, options);
    }
    let mut formatter = Formatter::new(options);
    let mut index = 0;
    while index < outputs.len() {
        let output = &outputs[index];
        match OutputView::of(output) {
            OutputView::Stream { .. } => {
                let end = index
                    + outputs[index..]
                        .iter()
                        .take_while(|output| OutputView::of(output).is_stream())
                        .count();
                formatter.streams(&outputs[index..end], index);
                index = end;
                continue;
            }
            OutputView::Error { .. } => formatter.error(index, output),
            OutputView::Rich { .. } => formatter.rich(index, output),
            OutputView::Unknown { output_type: other } => {
                let group = formatter.next_group();
                let kind = if other.is_empty() {
                    "output without an output_type".to_owned()
                } else {
                    format!("unknown output type {other:?}")
                };
                formatter.line(
                    group,
                    format!(
                        "[output {} | {kind}, {} bytes]",
                        index + 1,
                        group_thousands(json_size(output))
                    ),
                );
            }
        }
        index += 1;
    }
    formatter.finish(outputs.is_empty())
}

fn output_label(first: usize, last: usize) -> String {
    if first == last {
        format!("output {}", first + 1)
    } else {
        format!("outputs {}–{}", first + 1, last + 1)
    }
}

struct Formatter<'o> {
    options: &'o FormatOptions,
    parts: Vec<Part>,
    groups: usize,
    images: Vec<ReturnedImage>,
    image_reports: Vec<ImageReport>,
    image_bytes: usize,
    dropped_chars: usize,
    truncated: bool,
    /// Bodies already shown, for `(same table as output k)`.
    shown_bodies: Vec<(String, usize)>,
}

impl<'o> Formatter<'o> {
    fn new(options: &'o FormatOptions) -> Self {
        Self {
            options,
            parts: Vec::new(),
            groups: 0,
            images: Vec::new(),
            image_reports: Vec::new(),
            image_bytes: 0,
            dropped_chars: 0,
            truncated: false,
            shown_bodies: Vec::new(),
        }
    }

    fn trims(&self) -> bool {
        self.options.mode == OutputMode::Text
    }

    fn next_group(&mut self) -> usize {
        self.groups += 1;
        self.groups
    }

    fn line(&mut self, group: usize, header: String) {
        self.parts.push(Part {
            group,
            header,
            body: String::new(),
            priority: false,
        });
    }

    /// One representation's text under the header `[<label> | <mime>]`.
    fn mime_body(&mut self, group: usize, index: usize, label: &str, mime: &str, body: String) {
        self.body(
            group,
            index,
            format!("[{label} | {mime}]"),
            body,
            PartKind::Body,
        );
    }

    fn body(
        &mut self,
        group: usize,
        output_index: usize,
        header: String,
        body: String,
        kind: PartKind,
    ) {
        let dedup = kind == PartKind::Table || body.chars().count() >= MIN_DEDUP_CHARS;
        let body = match self.shown_bodies.iter().find(|(shown, _)| *shown == body) {
            Some((_, earlier)) if dedup => {
                if kind == PartKind::Table {
                    format!("(same table as output {})", earlier + 1)
                } else {
                    format!("(same as output {})", earlier + 1)
                }
            }
            _ => {
                if dedup {
                    self.shown_bodies.push((body.clone(), output_index));
                }
                body
            }
        };
        self.parts.push(Part {
            group,
            header,
            body,
            priority: false,
        });
    }

    fn streams(&mut self, outputs: &[Value], first_index: usize) {
        // (name, first output index, last output index, raw text)
        let mut sections: Vec<(String, usize, usize, String)> = Vec::new();
        for (offset, output) in outputs.iter().enumerate() {
            let index = first_index + offset;
            let name = output
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("stdout")
                .to_owned();
            let text = output.get("text").map(multiline_text).unwrap_or_default();
            match sections.last_mut() {
                Some(section) if section.0 == name => {
                    section.2 = index;
                    section.3.push_str(&text);
                }
                _ => sections.push((name, index, index, text)),
            }
        }
        let mut interleaved = false;
        if sections.len() > MAX_STREAM_SECTIONS {
            interleaved = true;
            let mut merged: Vec<(String, usize, usize, String)> = Vec::new();
            for (name, first, last, text) in sections {
                match merged.iter_mut().find(|section| section.0 == name) {
                    Some(section) => {
                        section.2 = last;
                        section.3.push_str(&text);
                    }
                    None => merged.push((name, first, last, text)),
                }
            }
            sections = merged;
        }
        let names: Vec<String> = sections.iter().map(|section| section.0.clone()).collect();
        for (name, first, last, text) in sections {
            let rendered = render_terminal(&text);
            let body = rendered.trim_end_matches('\n');
            let body = body.trim_start_matches('\n');
            if body.trim().is_empty() {
                continue;
            }
            let mut header = format!("[{} | {name}", output_label(first, last));
            if interleaved {
                let others: Vec<&str> = names
                    .iter()
                    .filter(|other| **other != name)
                    .map(String::as_str)
                    .collect();
                if !others.is_empty() {
                    header.push_str(&format!(", interleaved with {}", others.join(", ")));
                }
            }
            header.push(']');
            let group = self.next_group();
            self.parts.push(Part {
                group,
                header,
                body: body.to_owned(),
                priority: false,
            });
        }
    }

    fn error(&mut self, index: usize, output: &Value) {
        let ename = output
            .get("ename")
            .and_then(Value::as_str)
            .unwrap_or("Error");
        let evalue = output.get("evalue").map(multiline_text).unwrap_or_default();
        let traceback: Vec<String> = match output.get("traceback") {
            Some(Value::Array(items)) => items.iter().map(multiline_text).collect(),
            Some(Value::String(text)) => vec![text.clone()],
            _ => Vec::new(),
        };
        let condensed = condense_traceback(
            &render_terminal(ename),
            &render_terminal(&evalue),
            &traceback,
            self.trims(),
            &self.options.traceback,
        );
        if condensed.dropped_chars > 0 {
            self.truncated = true;
            self.dropped_chars += condensed.dropped_chars;
        }
        let group = self.next_group();
        self.parts.push(Part {
            group,
            header: format!("[output {} | error]", index + 1),
            body: condensed.text,
            priority: true,
        });
    }

    fn rich(&mut self, index: usize, output: &Value) {
        let group = self.next_group();
        let label = format!("output {}", index + 1);
        let bundle = sorted_bundle(output);
        if bundle.is_empty() {
            self.line(
                group,
                format!(
                    "[{label} | {} with no data]",
                    OutputView::of(output).output_type()
                ),
            );
            return;
        }
        let produced_before = self.parts.len();
        let has_chart = bundle
            .iter()
            .any(|(mime, _)| is_plotly(mime) || is_vega(mime));
        let has_image = bundle.iter().any(|(mime, _)| mime.starts_with("image/"));

        // Summaries and images first: they are single lines that are never cut.
        for &(mime, value) in &bundle {
            if is_plotly(mime) {
                self.line(group, format!("[{label} | {}]", summarize_plotly(value)));
            } else if is_vega(mime) {
                self.line(
                    group,
                    format!("[{label} | {}]", summarize_vega(mime, value)),
                );
            } else if is_widget(mime) {
                self.line(group, format!("[{label} | {}]", summarize_widget(value)));
            } else if is_javascript(mime) {
                self.line(
                    group,
                    format!(
                        "[{label} | {mime}, {} bytes: not run, not shown]",
                        group_thousands(json_size(value))
                    ),
                );
            } else if mime == "image/png" || mime == "image/jpeg" {
                let placeholder = self.raster_image(index, mime, value);
                self.line(group, format!("[{label} | {placeholder}]"));
            } else if mime.starts_with("image/") {
                let text = multiline_text(value);
                let (size, outcome, line) = if mime == "image/svg+xml" {
                    let bytes = group_thousands(text.len());
                    (
                        text.len(),
                        ImageOutcome::NotReturnedFormat,
                        format!(
                            "{mime}, {bytes} bytes, summarised (not rendered): {}",
                            summarize_svg(&text)
                        ),
                    )
                } else {
                    let bytes = decode_base64(&text).map_or(0, |bytes| bytes.len());
                    (
                        bytes,
                        ImageOutcome::NotReturnedFormat,
                        format!(
                            "{mime}, {} bytes omitted: only PNG and JPEG are returned as images",
                            group_thousands(bytes)
                        ),
                    )
                };
                self.image_reports.push(ImageReport {
                    output_index: index,
                    mime: mime.to_owned(),
                    original_bytes: size,
                    original_size: None,
                    outcome,
                });
                self.line(group, format!("[{label} | {line}]"));
            }
        }

        // `full` shows every textual representation, vendor JSON included; `text` chooses among
        // the reference's text types, so that vendor JSON (Bokeh, custom renderers) never shows.
        let full = self.options.mode == OutputMode::Full;
        let textual: Vec<(&str, &Value)> = bundle
            .iter()
            .copied()
            .filter(|(mime, _)| {
                is_textual(mime)
                    && (full || mime.starts_with("text/") || *mime == "application/json")
            })
            .collect();
        if full {
            for (mime, value) in textual {
                let body = textual_body(mime, value);
                if !body.trim().is_empty() {
                    self.mime_body(group, index, &label, mime, body);
                }
            }
        } else {
            let others_shown = self.parts.len() > produced_before;
            self.preferred_text(
                group,
                index,
                &label,
                &textual,
                has_chart,
                has_image,
                others_shown,
            );
        }

        if self.parts.len() == produced_before {
            let listed: Vec<String> = bundle
                .iter()
                .map(|(mime, value)| format!("{mime} {} bytes", group_thousands(json_size(value))))
                .collect();
            self.line(
                group,
                format!("[{label} | {}: not shown]", listed.join(", ")),
            );
        }
    }

    /// `text` mode: one representation, in the reference's order of preference, except that a
    /// DataFrame-like HTML table wins over its `text/plain` repr.
    #[allow(
        clippy::too_many_arguments,
        reason = "private helper of `rich`, called once"
    )]
    fn preferred_text(
        &mut self,
        group: usize,
        index: usize,
        label: &str,
        textual: &[(&str, &Value)],
        has_chart: bool,
        has_image: bool,
        others_shown: bool,
    ) {
        let find = |wanted: &str| {
            textual
                .iter()
                .find(|(mime, _)| *mime == wanted)
                .map(|(_, value)| *value)
        };
        if has_chart {
            // The chart summary says it all; the HTML is an embedding script and the text a
            // "renderer not enabled" notice.
            return;
        }
        let markdown = find("text/markdown");
        let html = find("text/html").map(multiline_text);
        if markdown.is_none()
            && let Some(html) = &html
            && self.table(group, index, label, html)
        {
            return;
        }
        // A `<... object>` repr is kept only as the last resort.
        let mut default_repr: Option<String> = None;
        for &(mime, value) in textual {
            if mime == "text/html" {
                let text = html
                    .as_deref()
                    .map(crate::html::html_to_text)
                    .unwrap_or_default();
                if !text.trim().is_empty() {
                    self.body(
                        group,
                        index,
                        format!("[{label} | text/html as text]"),
                        text,
                        PartKind::Body,
                    );
                    return;
                }
                if textual.len() == 1 && !has_image {
                    self.line(
                        group,
                        format!(
                            "[{label} | text/html, {} bytes: no readable text (scripts or styles only)]",
                            group_thousands(json_size(value))
                        ),
                    );
                    return;
                }
                continue;
            }
            let body = textual_body(mime, value);
            if body.trim().is_empty() {
                continue;
            }
            if mime == "text/plain" && (textual.len() > 1 || others_shown) && is_default_repr(&body)
            {
                default_repr = Some(body);
                continue;
            }
            self.mime_body(group, index, label, mime, body);
            return;
        }
        if let Some(body) = default_repr.filter(|_| !others_shown) {
            self.mime_body(group, index, label, "text/plain", body);
        }
    }

    /// Shows HTML that is essentially one table (a DataFrame display) as a table; returns
    /// whether it did.
    fn table(&mut self, group: usize, index: usize, label: &str, html: &str) -> bool {
        let analysis = analyze_html(html);
        let surrounding = analysis.text_outside_tables.chars().count();
        if analysis.tables.len() != 1 || surrounding > MAX_TABLE_SURROUNDING_CHARS {
            return false;
        }
        let table = &analysis.tables[0];
        if table.header_rows.is_empty() && table.body_rows.is_empty() {
            return false;
        }
        let limits = TableLimits {
            max_rows: self.options.max_table_rows,
            max_columns: self.options.max_table_columns,
        };
        let rendered = render_table(table, &analysis.text_outside_tables, limits);
        if rendered.dropped_chars > 0 {
            self.truncated = true;
            self.dropped_chars += rendered.dropped_chars;
        }
        // What surrounds the table is a footer (`5 rows × 3 columns`, already in the description)
        // or a short note, kept after the table.
        let mut text = rendered.text;
        let note = analysis.text_outside_tables.trim();
        if !note.is_empty() && parse_frame_shape(note).is_none() {
            text.push('\n');
            text.push_str(note);
        }
        self.body(
            group,
            index,
            format!("[{label} | table from text/html]"),
            text,
            PartKind::Table,
        );
        true
    }

    /// Handles one PNG or JPEG: returns the placeholder text (without brackets).
    fn raster_image(&mut self, index: usize, mime: &str, value: &Value) -> String {
        let mut report = ImageReport {
            output_index: index,
            mime: mime.to_owned(),
            original_bytes: 0,
            original_size: None,
            outcome: ImageOutcome::NotRequested,
        };
        let bytes = match decode_base64(&multiline_text(value)) {
            Ok(bytes) => bytes,
            Err(_) => {
                report.outcome = ImageOutcome::Undecodable("invalid base64".to_owned());
                self.image_reports.push(report);
                return format!("{mime}: not shown (invalid base64)");
            }
        };
        report.original_bytes = bytes.len();
        let (width, height) = match image_dimensions(&bytes) {
            Ok((_, width, height)) => (width, height),
            Err(error) => {
                let what = format!("{mime}, {} bytes", group_thousands(bytes.len()));
                return self.undecodable(report, &error, what);
            }
        };
        report.original_size = Some((width, height));
        let omitted = format!(
            "{mime} {width}×{height}, {} bytes omitted",
            group_thousands(bytes.len())
        );
        if !self.options.include_images {
            self.image_reports.push(report);
            return omitted;
        }
        if self.images.len() >= self.options.max_images {
            report.outcome = ImageOutcome::OverImageLimit;
            self.image_reports.push(report);
            return format!(
                "{omitted}: over the limit of {} images per call",
                group_thousands(self.options.max_images)
            );
        }
        let mut result = match downscale_image(&bytes, self.options.max_image_side) {
            Ok(result) => result,
            Err(error) => {
                let what = format!(
                    "{mime} {width}×{height}, {} bytes",
                    group_thousands(bytes.len())
                );
                return self.undecodable(report, &error, what);
            }
        };
        let remaining = self
            .options
            .max_image_bytes
            .saturating_sub(self.image_bytes);
        if result.bytes.len() > remaining {
            // One more try at a size expected to fit: bytes scale roughly with the pixel count.
            let ratio = (remaining as f64 / result.bytes.len() as f64).sqrt() * 0.9;
            let side = (f64::from(result.width.max(result.height)) * ratio) as u32;
            match downscale_image(&bytes, side) {
                Ok(smaller) if side >= 64 && smaller.bytes.len() <= remaining => result = smaller,
                _ => {
                    report.outcome = ImageOutcome::OverByteBudget;
                    self.image_reports.push(report);
                    return format!(
                        "{omitted}: over the {}-byte image budget of this call",
                        group_thousands(self.options.max_image_bytes)
                    );
                }
            }
        }
        self.image_bytes += result.bytes.len();
        let image_number = self.images.len() + 1;
        let format = result.format;
        self.images.push(ReturnedImage {
            output_index: index,
            mime: format.mime(),
            base64: encode_base64(&result.bytes),
            width: result.width,
            height: result.height,
            byte_len: result.bytes.len(),
            downscaled: result.downscaled,
        });
        report.outcome = ImageOutcome::Returned {
            image_number,
            downscaled: result.downscaled,
        };
        self.image_reports.push(report);
        let mut placeholder = format!(
            "image {image_number}: {} {}×{}",
            format.mime(),
            result.width,
            result.height
        );
        if result.downscaled {
            placeholder.push_str(&format!(" (downscaled from {width}×{height})"));
        }
        if format.mime() != mime {
            placeholder.push_str(&format!(" (stored as {mime})"));
        }
        placeholder.push_str(", returned as image content");
        placeholder
    }

    /// Reports an image that could not be decoded or re-encoded; `what` names it in the text.
    fn undecodable(
        &mut self,
        mut report: ImageReport,
        error: &CondenseError,
        what: String,
    ) -> String {
        let reason = short_reason(error);
        report.outcome = ImageOutcome::Undecodable(reason.clone());
        self.image_reports.push(report);
        format!("{what}: not shown ({reason})")
    }
}

fn short_reason(error: &CondenseError) -> String {
    match error {
        CondenseError::UnsupportedImageFormat(_) => "not a PNG or JPEG".to_owned(),
        CondenseError::Base64(_) => "invalid base64".to_owned(),
        CondenseError::ImageEncode(_) => "could not re-encode".to_owned(),
        _ => "could not decode the image".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn text_of(outputs: &[Value], options: &FormatOptions) -> String {
        format_outputs(outputs, options).text
    }

    #[test]
    fn stream_chunks_merge_and_carriage_returns_collapse_across_chunks() {
        let outputs = [
            json!({"output_type": "stream", "name": "stderr", "text": " 10%|#  |\r"}),
            json!({"output_type": "stream", "name": "stderr", "text": ["100%|###|", "\n"]}),
        ];
        assert_eq!(
            text_of(&outputs, &FormatOptions::default()),
            "[outputs 1–2 | stderr]\n100%|###|"
        );
    }

    #[test]
    fn errors_keep_their_room_when_a_log_fills_the_budget() {
        let log: String = (0..5_000).map(|i| format!("line {i}\n")).collect();
        let outputs = [
            json!({"output_type": "stream", "name": "stdout", "text": log}),
            json!({"output_type": "error", "ename": "ValueError", "evalue": "bad input", "traceback": ["\u{1b}[31mValueError\u{1b}[0m: bad input"]}),
        ];
        let options = FormatOptions {
            max_chars: 1_000,
            ..FormatOptions::default()
        };
        let result = format_outputs(&outputs, &options);
        assert!(
            result
                .text
                .ends_with("[output 2 | error]\nValueError: bad input"),
            "{}",
            result.text
        );
        assert!(result.text.chars().count() <= 1_000);
        assert!(result.truncated);
        assert!(result.text.contains("lines dropped] …"));
    }

    #[test]
    fn text_mode_prefers_markdown_then_plain_and_skips_object_reprs() {
        let bundle =
            |data: Value| [json!({"output_type": "display_data", "data": data, "metadata": {}})];
        let options = FormatOptions::default();
        assert_eq!(
            text_of(
                &bundle(
                    json!({"text/plain": "plain", "text/markdown": "# md", "text/html": "<b>h</b>"})
                ),
                &options
            ),
            "[output 1 | text/markdown]\n# md"
        );
        assert_eq!(
            text_of(
                &bundle(json!({"text/plain": "plain", "text/html": "<b>h</b>"})),
                &options
            ),
            "[output 1 | text/plain]\nplain"
        );
        assert_eq!(
            text_of(
                &bundle(
                    json!({"text/plain": "<IPython.core.display.JSON object>", "application/json": {"a": 1}})
                ),
                &options
            ),
            "[output 1 | application/json]\n{\n  \"a\": 1\n}"
        );
        assert_eq!(
            text_of(
                &bundle(json!({"text/html": "<p>only <i>html</i></p>"})),
                &options
            ),
            "[output 1 | text/html as text]\nonly html"
        );
    }

    #[test]
    fn full_mode_shows_every_textual_representation() {
        let outputs = [
            json!({"output_type": "execute_result", "data": {"text/plain": "p", "text/html": "<b>h</b>"}, "metadata": {}}),
        ];
        let options = FormatOptions {
            mode: OutputMode::Full,
            ..FormatOptions::default()
        };
        assert_eq!(
            text_of(&outputs, &options),
            "[output 1 | text/plain]\np\n[output 1 | text/html]\n<b>h</b>"
        );
    }

    #[test]
    fn summary_mode_decodes_nothing() {
        let outputs = [
            json!({"output_type": "display_data", "data": {"image/png": "bm90IGFuIGltYWdl", "text/plain": ["a", "b"]}}),
            json!({"output_type": "stream", "name": "stdout", "text": "hello"}),
        ];
        let options = FormatOptions {
            mode: OutputMode::Summary,
            ..FormatOptions::default()
        };
        let result = format_outputs(&outputs, &options);
        assert_eq!(
            result.text,
            "[output 1: display_data text/plain 2 bytes, image/png 16 bytes]\n[output 2: stream stdout, 5 bytes]"
        );
        assert!(result.image_reports.is_empty());
    }

    #[test]
    fn many_tiny_outputs_still_respect_the_bound() {
        let outputs: Vec<Value> = (0..2_000)
            .map(|i| json!({"output_type": "display_data", "data": {"text/plain": format!("{i}")}}))
            .collect();
        let options = FormatOptions {
            max_chars: 1_000,
            ..FormatOptions::default()
        };
        let result = format_outputs(&outputs, &options);
        assert!(result.text.chars().count() <= 1_000);
        assert!(result.truncated && result.dropped_chars > 0);
    }

    fn arbitrary_output() -> impl Strategy<Value = Value> {
        let text = "(\\PC|[\u{1b}\r\n\u{8}<>&;\\[\\]/=\"]){0,60}";
        prop_oneof![
            (prop_oneof![Just("stdout"), Just("stderr")], text).prop_map(|(name, text)| json!({"output_type": "stream", "name": name, "text": text})),
            (text, text).prop_map(|(plain, html)| json!({"output_type": "display_data", "data": {"text/plain": plain, "text/html": format!("<table><tr><th>{html}</th><td>{plain}</td></tr></table>{html}")}})),
            proptest::collection::vec(text, 0..5).prop_map(|traceback| json!({"output_type": "error", "ename": "E", "evalue": "v", "traceback": traceback})),
            text.prop_map(|svg| json!({"output_type": "display_data", "data": {"image/svg+xml": svg, "application/vnd.plotly.v1+json": {"data": [{"name": svg}]}}})),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn every_mode_respects_the_bound_and_is_deterministic(
            outputs in proptest::collection::vec(arbitrary_output(), 0..8),
            max_chars in 0usize..600,
        ) {
            for mode in [OutputMode::Summary, OutputMode::Text, OutputMode::Full] {
                let options = FormatOptions { mode, max_chars, ..FormatOptions::default() };
                let result = format_outputs(&outputs, &options);
                prop_assert!(result.text.chars().count() <= max_chars.max(MIN_TEXT_BOUND));
                prop_assert!(result.dropped_chars == 0 || result.truncated);
                prop_assert_eq!(&format_outputs(&outputs, &options), &result);
            }
        }

        #[test]
        fn check_format_outputs_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            crate::check_format_outputs(&data);
        }
    }
}
