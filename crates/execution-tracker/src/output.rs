//! Turning kernel IOPub events into nbformat v4 outputs, with bounded memory.
//!
//! The host converts each IOPub message whose parent is one of a run's execute requests into an
//! [`IopubEvent`] and feeds it to the run's [`OutputAccumulator`] together with the position of
//! the cell it belongs to. The accumulator keeps, per cell, the list of outputs exactly as nbformat
//! stores them (`transient` data is never persisted), honours `clear_output` (including
//! `wait: true`), merges consecutive stream outputs of the same name, and applies
//! `update_display_data` to every earlier output of the run that carries the same display id.
//! As front ends do, a carriage return that is not part of `\r\n` erases the current line of a
//! stream, so a progress bar keeps only its latest state; backspaces are kept as they are.
//!
//! Memory is bounded per cell. A cell keeps a *head* (the first half of each budget) and a *tail*
//! (the most recent outputs, within the other half); what falls between them is counted, and the
//! rendered output list shows a marker line `… [N characters dropped] …` in its place, so a
//! kernel that floods gigabytes of text leaves at most the configured budget in memory. When the
//! tail's stream text overflows, it is cut back to a quarter of the budget at once, so the tail
//! shows between a quarter and a half of the budget of the latest text.

use std::collections::{HashMap, VecDeque};

use notebook_model::outputs::OutputView;
use serde::Deserialize;
use serde_json::{Map, Value};

/// Default cap on the stream text kept for one cell (1 MiB).
pub const DEFAULT_MAX_STREAM_BYTES_PER_CELL: usize = 1024 * 1024;
/// Default cap on the number of outputs kept for one cell.
pub const DEFAULT_MAX_OUTPUTS_PER_CELL: usize = 1000;
/// Default cap on the size of rich (non-stream) outputs kept for one cell (16 MiB).
pub const DEFAULT_MAX_RICH_BYTES_PER_CELL: usize = 16 * 1024 * 1024;

/// Per-cell memory budgets of the accumulator. Each budget is split in half between the head
/// (oldest outputs, kept once accepted) and the tail (newest outputs, a sliding window).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLimits {
    /// Bytes of stream text (UTF-8) kept per cell.
    pub max_stream_bytes_per_cell: usize,
    /// Number of outputs kept per cell (stream outputs count once each).
    pub max_outputs_per_cell: usize,
    /// Approximate bytes of rich outputs (`execute_result`, `display_data`, `error`) per cell,
    /// measured as the total length of the strings they contain.
    pub max_rich_bytes_per_cell: usize,
}

impl Default for OutputLimits {
    fn default() -> Self {
        OutputLimits {
            max_stream_bytes_per_cell: DEFAULT_MAX_STREAM_BYTES_PER_CELL,
            max_outputs_per_cell: DEFAULT_MAX_OUTPUTS_PER_CELL,
            max_rich_bytes_per_cell: DEFAULT_MAX_RICH_BYTES_PER_CELL,
        }
    }
}

/// The `transient` part of a display message: never stored, used only to route updates.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Transient {
    /// The display's id, which `update_display_data` messages name to replace it; `None` for
    /// displays that are never updated.
    #[serde(default)]
    pub display_id: Option<String>,
}

/// One IOPub message, reduced to what output accumulation needs. It deserializes from the
/// message content plus its `msg_type`, e.g. `{"msg_type":"stream","name":"stdout","text":"hi"}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "msg_type", rename_all = "snake_case")]
pub enum IopubEvent {
    /// Text written to a stream.
    Stream {
        /// `stdout` or `stderr`.
        name: String,
        /// The text, appended to the cell's stream of that name.
        text: String,
    },
    /// The value of the cell's last expression.
    ExecuteResult {
        /// The MIME bundle (MIME type to content).
        #[serde(default = "empty_object")]
        data: Value,
        /// Metadata per MIME type.
        #[serde(default = "empty_object")]
        metadata: Value,
        /// The kernel's execution count for the request.
        #[serde(default)]
        execution_count: Option<u64>,
        /// The display id, when the result may be updated later.
        #[serde(default)]
        transient: Option<Transient>,
    },
    /// A rich display (`display(...)`, a figure).
    DisplayData {
        /// The MIME bundle (MIME type to content).
        #[serde(default = "empty_object")]
        data: Value,
        /// Metadata per MIME type.
        #[serde(default = "empty_object")]
        metadata: Value,
        /// The display id, when the display may be updated later.
        #[serde(default)]
        transient: Option<Transient>,
    },
    /// A new version of an earlier display, found by its display id.
    UpdateDisplayData {
        /// The replacement MIME bundle.
        #[serde(default = "empty_object")]
        data: Value,
        /// The replacement metadata.
        #[serde(default = "empty_object")]
        metadata: Value,
        /// Names the display to replace; without a display id the update is ignored.
        #[serde(default)]
        transient: Option<Transient>,
    },
    /// An exception raised by the cell.
    Error {
        /// The exception's class name.
        ename: String,
        /// The exception's message.
        evalue: String,
        /// The formatted traceback lines, ANSI colours included.
        #[serde(default)]
        traceback: Vec<String>,
    },
    /// `clear_output()`: the cell's outputs so far are removed.
    ClearOutput {
        /// Clear only when the next output arrives (`clear_output(wait=True)`), to avoid flicker.
        #[serde(default)]
        wait: bool,
    },
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// The outputs of every cell of one run, plus the display-id index that lets
/// `update_display_data` reach outputs of earlier cells of the same run.
#[derive(Clone, Debug)]
pub struct OutputAccumulator {
    limits: OutputLimits,
    cells: Vec<CellOutputs>,
    /// display id → (cell position, output sequence number) of every live output carrying it.
    displays: HashMap<String, Vec<(usize, u64)>>,
}

impl OutputAccumulator {
    /// An accumulator for `cell_count` cells, all without outputs.
    pub fn new(cell_count: usize, limits: OutputLimits) -> Self {
        OutputAccumulator {
            limits,
            cells: (0..cell_count).map(|_| CellOutputs::default()).collect(),
            displays: HashMap::new(),
        }
    }

    /// Number of cells tracked.
    pub fn cell_count(&self) -> usize {
        self.cells.len()
    }

    /// Applies one event that belongs to the cell at `position`, and returns the positions of
    /// the cells whose outputs changed (an update can change earlier cells). Events for a
    /// position outside the run are ignored.
    pub fn apply(&mut self, position: usize, event: IopubEvent) -> Vec<usize> {
        if position >= self.cells.len() {
            return Vec::new();
        }
        match event {
            IopubEvent::ClearOutput { wait: true } => {
                self.cells[position].clear_pending = true;
                Vec::new()
            }
            IopubEvent::ClearOutput { wait: false } => {
                self.cells[position].clear_pending = false;
                if self.clear_cell(position) {
                    vec![position]
                } else {
                    Vec::new()
                }
            }
            IopubEvent::UpdateDisplayData {
                data,
                metadata,
                transient,
            } => match transient.and_then(|transient| transient.display_id) {
                Some(display_id) => self.update_display(&display_id, &data, &metadata),
                None => Vec::new(),
            },
            IopubEvent::Stream { text, .. } if text.is_empty() => {
                let had_pending_clear = self.cells[position].clear_pending;
                self.clear_if_pending(position);
                if had_pending_clear {
                    vec![position]
                } else {
                    Vec::new()
                }
            }
            IopubEvent::Stream { name, text } => {
                self.clear_if_pending(position);
                let evicted = self.cells[position].append_stream(&self.limits, &name, &text);
                self.forget_evicted(position, evicted);
                vec![position]
            }
            IopubEvent::ExecuteResult {
                data,
                metadata,
                execution_count,
                transient,
            } => {
                let count = execution_count.map_or(Value::Null, Value::from);
                let value = rich_output("execute_result", data, Some(count), metadata);
                let display_id = transient.and_then(|transient| transient.display_id);
                self.push_rich(position, value, display_id)
            }
            IopubEvent::DisplayData {
                data,
                metadata,
                transient,
            } => {
                let value = rich_output("display_data", data, None, metadata);
                let display_id = transient.and_then(|transient| transient.display_id);
                self.push_rich(position, value, display_id)
            }
            IopubEvent::Error {
                ename,
                evalue,
                traceback,
            } => {
                let mut value = Map::new();
                value.insert("ename".into(), ename.into());
                value.insert("evalue".into(), evalue.into());
                value.insert("output_type".into(), "error".into());
                value.insert("traceback".into(), traceback.into());
                self.push_rich(position, value, None)
            }
        }
    }

    /// The outputs of the cell at `position` as nbformat v4 output dicts, with a marker stream
    /// line where outputs were dropped. Empty for a position outside the run.
    pub fn outputs(&self, position: usize) -> Vec<Value> {
        self.cells
            .get(position)
            .map(CellOutputs::render)
            .unwrap_or_default()
    }

    /// The `ename` of the last `error` output of the cell, if any.
    pub fn last_error_name(&self, position: usize) -> Option<&str> {
        let cell = self.cells.get(position)?;
        cell.head
            .iter()
            .chain(cell.tail.iter())
            .rev()
            .find_map(|output| match &output.kind {
                StoredKind::Rich { value, .. } => match OutputView::of_fields(value) {
                    OutputView::Error { ename, .. } => ename,
                    _ => None,
                },
                _ => None,
            })
    }

    /// What the cell currently holds in memory, for checking the bounds.
    pub(crate) fn retained(&self, position: usize) -> Cost {
        self.cells
            .get(position)
            .map(|cell| cell.head_cost.plus(cell.tail_cost))
            .unwrap_or_default()
    }

    pub(crate) fn display_entries(&self) -> usize {
        self.displays.values().map(Vec::len).sum()
    }

    fn clear_if_pending(&mut self, position: usize) {
        if self.cells[position].clear_pending {
            self.cells[position].clear_pending = false;
            self.clear_cell(position);
        }
    }

    /// Empties a cell and forgets its display ids. Returns whether it held anything.
    fn clear_cell(&mut self, position: usize) -> bool {
        let cell = &mut self.cells[position];
        let had_outputs = !cell.head.is_empty() || !cell.tail.is_empty() || cell.dropped_anything();
        let next_seq = cell.next_seq;
        *cell = CellOutputs {
            next_seq,
            ..CellOutputs::default()
        };
        self.displays.retain(|_, targets| {
            targets.retain(|&(cell_position, _)| cell_position != position);
            !targets.is_empty()
        });
        had_outputs
    }

    fn push_rich(
        &mut self,
        position: usize,
        value: Map<String, Value>,
        display_id: Option<String>,
    ) -> Vec<usize> {
        self.clear_if_pending(position);
        // As nbclient does: a new display with a known id also refreshes the earlier ones.
        let mut changed = match &display_id {
            Some(display_id) => {
                let data = value.get("data").cloned().unwrap_or_else(empty_object);
                let metadata = value.get("metadata").cloned().unwrap_or_else(empty_object);
                self.update_display(display_id, &data, &metadata)
            }
            None => Vec::new(),
        };
        let (seq, evicted) =
            self.cells[position].push_rich(&self.limits, value, display_id.clone());
        if let (Some(display_id), Some(seq)) = (display_id, seq) {
            self.displays
                .entry(display_id)
                .or_default()
                .push((position, seq));
        }
        self.forget_evicted(position, evicted);
        if !changed.contains(&position) {
            changed.push(position);
        }
        changed
    }

    fn update_display(&mut self, display_id: &str, data: &Value, metadata: &Value) -> Vec<usize> {
        let Some(targets) = self.displays.get(display_id).cloned() else {
            return Vec::new();
        };
        let mut changed = Vec::new();
        for (position, seq) in targets {
            let evicted = self.cells[position].update_rich(&self.limits, seq, data, metadata);
            self.forget_evicted(position, evicted);
            if !changed.contains(&position) {
                changed.push(position);
            }
        }
        changed
    }

    fn forget_evicted(&mut self, position: usize, evicted: Vec<(String, u64)>) {
        for (display_id, seq) in evicted {
            if let Some(targets) = self.displays.get_mut(&display_id) {
                targets.retain(|&target| target != (position, seq));
                if targets.is_empty() {
                    self.displays.remove(&display_id);
                }
            }
        }
    }
}

/// How much of each budget a set of outputs uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cost {
    pub(crate) stream_bytes: usize,
    pub(crate) rich_bytes: usize,
    pub(crate) outputs: usize,
}

impl Cost {
    fn plus(self, other: Cost) -> Cost {
        Cost {
            stream_bytes: self.stream_bytes + other.stream_bytes,
            rich_bytes: self.rich_bytes + other.rich_bytes,
            outputs: self.outputs + other.outputs,
        }
    }

    fn fits_within(self, budget: Cost) -> bool {
        self.stream_bytes <= budget.stream_bytes
            && self.rich_bytes <= budget.rich_bytes
            && self.outputs <= budget.outputs
    }
}

fn head_budget(limits: &OutputLimits) -> Cost {
    Cost {
        stream_bytes: limits.max_stream_bytes_per_cell / 2,
        rich_bytes: limits.max_rich_bytes_per_cell / 2,
        outputs: limits.max_outputs_per_cell / 2,
    }
}

fn tail_budget(limits: &OutputLimits) -> Cost {
    let head = head_budget(limits);
    Cost {
        stream_bytes: limits.max_stream_bytes_per_cell - head.stream_bytes,
        rich_bytes: limits.max_rich_bytes_per_cell - head.rich_bytes,
        outputs: limits.max_outputs_per_cell - head.outputs,
    }
}

#[derive(Clone, Debug)]
struct StoredOutput {
    /// Increasing within a cell; lets the display index find an output after the ones before
    /// it were dropped.
    seq: u64,
    kind: StoredKind,
}

#[derive(Clone, Debug)]
enum StoredKind {
    Stream(StreamText),
    Rich {
        value: Map<String, Value>,
        weight: usize,
        display_id: Option<String>,
    },
}

impl StoredOutput {
    fn cost(&self) -> Cost {
        match &self.kind {
            StoredKind::Stream(stream) => Cost {
                stream_bytes: stream.text.len(),
                rich_bytes: 0,
                outputs: 1,
            },
            StoredKind::Rich { weight, .. } => Cost {
                stream_bytes: 0,
                rich_bytes: *weight,
                outputs: 1,
            },
        }
    }

    fn render(&self) -> Value {
        match &self.kind {
            StoredKind::Stream(stream) => stream_value(&stream.name, stream.rendered_text()),
            StoredKind::Rich { value, .. } => Value::Object(value.clone()),
        }
    }
}

fn stream_value(name: &str, text: String) -> Value {
    let mut value = Map::new();
    value.insert("name".into(), name.into());
    value.insert("output_type".into(), "stream".into());
    value.insert("text".into(), text.into());
    Value::Object(value)
}

/// The text of one stream output, with the terminal-style handling of carriage returns that
/// notebook front ends apply: a `\r` that is not part of `\r\n` erases the current line, so
/// progress bars keep only their latest state instead of every redraw.
#[derive(Clone, Debug)]
struct StreamText {
    name: String,
    text: String,
    /// Byte offset where the current (last) line starts.
    line_start: usize,
    /// The text ended with a `\r` whose meaning depends on the next character.
    pending_carriage_return: bool,
}

impl StreamText {
    fn new(name: &str) -> Self {
        StreamText {
            name: name.to_owned(),
            text: String::new(),
            line_start: 0,
            pending_carriage_return: false,
        }
    }

    fn rendered_text(&self) -> String {
        let mut text = self.text.clone();
        if self.pending_carriage_return {
            text.push('\r');
        }
        text
    }

    fn append(&mut self, chunk: &str) {
        let mut rest = chunk;
        if self.pending_carriage_return {
            self.pending_carriage_return = false;
            if !rest.starts_with('\n') {
                self.text.truncate(self.line_start);
            }
        }
        if !rest.contains('\r') {
            // The common case needs no scanning line by line.
            if let Some(newline) = rest.rfind('\n') {
                self.line_start = self.text.len() + newline + 1;
            }
            self.text.push_str(rest);
            return;
        }
        while let Some(offset) = rest.find(['\r', '\n']) {
            self.text.push_str(&rest[..offset]);
            let after = &rest[offset + 1..];
            if rest.as_bytes()[offset] == b'\n' {
                self.text.push('\n');
                self.line_start = self.text.len();
            } else if after.is_empty() {
                self.pending_carriage_return = true;
            } else if !after.starts_with('\n') {
                self.text.truncate(self.line_start);
            }
            // A `\r` directly followed by `\n` is dropped; the `\n` is handled next.
            rest = after;
        }
        self.text.push_str(rest);
    }

    /// Removes at least the first `bytes` bytes, moving the cut forward to a character
    /// boundary and, when one is near, to the start of the next line. Returns how many
    /// characters went.
    fn drop_front(&mut self, bytes: usize) -> u64 {
        let mut cut = ceil_char_boundary(&self.text, bytes);
        let window = &self.text.as_bytes()[cut..self.text.len().min(cut + LINE_SNAP_WINDOW)];
        if let Some(newline) = window.iter().position(|&byte| byte == b'\n')
            && cut + newline + 1 < self.text.len()
        {
            cut += newline + 1;
        }
        let dropped = self.text[..cut].chars().count() as u64;
        self.text.drain(..cut);
        self.line_start = self.line_start.saturating_sub(cut);
        dropped
    }

    /// Splits off everything after the first `bytes` bytes as a new stream output of the same
    /// name, which takes over the current line. The cut moves back to a character boundary and,
    /// when one is near, to the end of a line.
    fn split_off(&mut self, bytes: usize) -> StreamText {
        let mut cut = floor_char_boundary(&self.text, bytes);
        let window_start = cut.saturating_sub(LINE_SNAP_WINDOW);
        if let Some(newline) = self.text.as_bytes()[window_start..cut]
            .iter()
            .rposition(|&byte| byte == b'\n')
        {
            cut = window_start + newline + 1;
        }
        let rest = self.text.split_off(cut);
        let line_start = rest.rfind('\n').map_or(0, |newline| newline + 1);
        let tail = StreamText {
            name: self.name.clone(),
            text: rest,
            line_start,
            pending_carriage_return: self.pending_carriage_return,
        };
        self.pending_carriage_return = false;
        self.line_start = self.text.len();
        tail
    }
}

/// How far a cut may move to land on a line boundary, so that the kept head and tail show
/// whole lines.
const LINE_SNAP_WINDOW: usize = 256;

fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn ceil_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

/// Approximate size of a JSON value: the bytes of its strings and keys, plus a little per node.
fn json_weight(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len() + 2,
        Value::Array(items) => 2 + items.iter().map(json_weight).sum::<usize>(),
        Value::Object(entries) => {
            2 + entries
                .iter()
                .map(|(key, item)| key.len() + 3 + json_weight(item))
                .sum::<usize>()
        }
        _ => 8,
    }
}

/// The outputs of one cell: a head that only grows until its budget is full, then a tail that
/// keeps the most recent outputs within its budget.
#[derive(Clone, Debug, Default)]
struct CellOutputs {
    head: Vec<StoredOutput>,
    tail: VecDeque<StoredOutput>,
    /// The head is full: new outputs go to the tail.
    truncating: bool,
    head_cost: Cost,
    tail_cost: Cost,
    dropped_chars: u64,
    dropped_outputs: u64,
    /// A `clear_output(wait=True)` is waiting for the next output.
    clear_pending: bool,
    next_seq: u64,
}

type Evicted = Vec<(String, u64)>;

impl CellOutputs {
    fn dropped_anything(&self) -> bool {
        self.dropped_chars > 0 || self.dropped_outputs > 0
    }

    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    fn append_stream(&mut self, limits: &OutputLimits, name: &str, chunk: &str) -> Evicted {
        if self.truncating {
            let merge = matches!(
                self.tail.back(),
                Some(StoredOutput { kind: StoredKind::Stream(stream), .. }) if stream.name == name
            );
            if !merge {
                let seq = self.take_seq();
                self.tail.push_back(StoredOutput {
                    seq,
                    kind: StoredKind::Stream(StreamText::new(name)),
                });
                self.tail_cost.outputs += 1;
            }
            if let Some(StoredOutput {
                kind: StoredKind::Stream(stream),
                ..
            }) = self.tail.back_mut()
            {
                let before = stream.text.len();
                stream.append(chunk);
                self.tail_cost.stream_bytes =
                    self.tail_cost.stream_bytes - before + stream.text.len();
            }
            return self.trim_tail(limits);
        }

        let head_budget = head_budget(limits);
        let merge = matches!(
            self.head.last(),
            Some(StoredOutput { kind: StoredKind::Stream(stream), .. }) if stream.name == name
        );
        if !merge {
            if self.head_cost.outputs + 1 > head_budget.outputs {
                self.truncating = true;
                return self.append_stream(limits, name, chunk);
            }
            let seq = self.take_seq();
            self.head.push(StoredOutput {
                seq,
                kind: StoredKind::Stream(StreamText::new(name)),
            });
            self.head_cost.outputs += 1;
        }
        let Some(StoredOutput {
            kind: StoredKind::Stream(stream),
            ..
        }) = self.head.last_mut()
        else {
            return Vec::new();
        };
        let before = stream.text.len();
        stream.append(chunk);
        let others = self.head_cost.stream_bytes - before;
        let room = head_budget.stream_bytes.saturating_sub(others);
        if stream.text.len() <= room {
            self.head_cost.stream_bytes = others + stream.text.len();
            return Vec::new();
        }
        // The head is full: keep what fits, and start the tail with the rest.
        let rest = stream.split_off(room);
        self.head_cost.stream_bytes = others + stream.text.len();
        if stream.text.is_empty() {
            self.head.pop();
            self.head_cost.outputs -= 1;
        }
        self.truncating = true;
        let seq = self.take_seq();
        self.tail_cost = self.tail_cost.plus(Cost {
            stream_bytes: rest.text.len(),
            rich_bytes: 0,
            outputs: 1,
        });
        self.tail.push_back(StoredOutput {
            seq,
            kind: StoredKind::Stream(rest),
        });
        self.trim_tail(limits)
    }

    /// Appends a rich output. Returns its sequence number (None when it was too big to keep at
    /// all) and the display ids of the outputs that were evicted to make room.
    fn push_rich(
        &mut self,
        limits: &OutputLimits,
        value: Map<String, Value>,
        display_id: Option<String>,
    ) -> (Option<u64>, Evicted) {
        let weight = 2 + value
            .iter()
            .map(|(key, item)| key.len() + 3 + json_weight(item))
            .sum::<usize>();
        let seq = self.take_seq();
        let output = StoredOutput {
            seq,
            kind: StoredKind::Rich {
                value,
                weight,
                display_id,
            },
        };
        let cost = output.cost();
        if !self.truncating && self.head_cost.plus(cost).fits_within(head_budget(limits)) {
            self.head.push(output);
            self.head_cost = self.head_cost.plus(cost);
            return (Some(seq), Vec::new());
        }
        self.truncating = true;
        self.tail.push_back(output);
        self.tail_cost = self.tail_cost.plus(cost);
        let evicted = self.trim_tail(limits);
        let kept = self.tail.back().is_some_and(|last| last.seq == seq);
        (kept.then_some(seq), evicted)
    }

    fn update_rich(
        &mut self,
        limits: &OutputLimits,
        seq: u64,
        data: &Value,
        metadata: &Value,
    ) -> Evicted {
        let update = |output: &mut StoredOutput| -> Option<(usize, usize)> {
            let StoredKind::Rich { value, weight, .. } = &mut output.kind else {
                return None;
            };
            let before = *weight;
            value.insert("data".into(), data.clone());
            value.insert("metadata".into(), metadata.clone());
            *weight = 2 + value
                .iter()
                .map(|(key, item)| key.len() + 3 + json_weight(item))
                .sum::<usize>();
            Some((before, *weight))
        };
        if let Ok(index) = self.head.binary_search_by_key(&seq, |output| output.seq) {
            if let Some((before, after)) = update(&mut self.head[index]) {
                // The head keeps what it accepted; an update may push it past its half of the
                // budget by at most the size of one message per live display.
                self.head_cost.rich_bytes = self.head_cost.rich_bytes - before + after;
            }
            return Vec::new();
        }
        if let Ok(index) = self.tail.binary_search_by_key(&seq, |output| output.seq)
            && let Some((before, after)) = update(&mut self.tail[index])
        {
            self.tail_cost.rich_bytes = self.tail_cost.rich_bytes - before + after;
            return self.trim_tail(limits);
        }
        Vec::new()
    }

    /// Drops the oldest tail outputs (or the front of the oldest stream text) until the tail is
    /// within its budget. Returns the display ids of the rich outputs that were dropped.
    fn trim_tail(&mut self, limits: &OutputLimits) -> Evicted {
        let budget = tail_budget(limits);
        let mut evicted = Vec::new();
        while !self.tail_cost.fits_within(budget) {
            let only_stream_over = self.tail_cost.rich_bytes <= budget.rich_bytes
                && self.tail_cost.outputs <= budget.outputs;
            let Some(front) = self.tail.front_mut() else {
                break;
            };
            if let (true, StoredKind::Stream(stream)) = (only_stream_over, &mut front.kind) {
                // Cutting the front of a string moves the rest, so trim down to half the tail
                // budget rather than to the budget itself: the next cut is then at least that
                // many appended bytes away, which keeps a flood of small chunks linear.
                let excess = self.tail_cost.stream_bytes - budget.stream_bytes / 2;
                if excess < stream.text.len() {
                    let before = stream.text.len();
                    self.dropped_chars += stream.drop_front(excess);
                    self.tail_cost.stream_bytes -= before - stream.text.len();
                    continue;
                }
            }
            let Some(front) = self.tail.pop_front() else {
                break;
            };
            let cost = front.cost();
            self.tail_cost.stream_bytes -= cost.stream_bytes;
            self.tail_cost.rich_bytes -= cost.rich_bytes;
            self.tail_cost.outputs -= cost.outputs;
            match front.kind {
                StoredKind::Stream(stream) => {
                    self.dropped_chars += stream.text.chars().count() as u64;
                }
                StoredKind::Rich { display_id, .. } => {
                    self.dropped_outputs += 1;
                    if let Some(display_id) = display_id {
                        evicted.push((display_id, front.seq));
                    }
                }
            }
        }
        evicted
    }

    fn render(&self) -> Vec<Value> {
        let mut rendered: Vec<(Value, bool)> = self
            .head
            .iter()
            .map(|output| (output.render(), false))
            .collect();
        if self.dropped_anything() {
            let stream_name = |output: Option<&StoredOutput>| match output {
                Some(StoredOutput {
                    kind: StoredKind::Stream(stream),
                    ..
                }) => Some(stream.name.clone()),
                _ => None,
            };
            // The dropped text led into the tail, so the marker prefers the tail's stream.
            let name = stream_name(self.tail.front())
                .or_else(|| stream_name(self.head.last()))
                .unwrap_or_else(|| "stdout".to_owned());
            rendered.push((stream_value(&name, self.marker_line()), true));
        }
        rendered.extend(self.tail.iter().map(|output| (output.render(), false)));
        merge_adjacent_streams(rendered)
    }

    fn marker_line(&self) -> String {
        let what = match (self.dropped_chars, self.dropped_outputs) {
            (chars, 0) => format!("{chars} characters"),
            (0, 1) => "1 output".to_owned(),
            (0, outputs) => format!("{outputs} outputs"),
            (chars, 1) => format!("{chars} characters and 1 output"),
            (chars, outputs) => format!("{chars} characters and {outputs} outputs"),
        };
        format!("… [{what} dropped] …\n")
    }
}

/// Joins consecutive stream outputs of the same name, starting the marker (flagged `true`) on a
/// line of its own.
fn merge_adjacent_streams(outputs: Vec<(Value, bool)>) -> Vec<Value> {
    let mut merged: Vec<Value> = Vec::with_capacity(outputs.len());
    for (output, is_marker) in outputs {
        let same_stream = match (merged.last(), &output) {
            (Some(previous), current) => matches!(
                (OutputView::of(previous), OutputView::of(current)),
                (
                    OutputView::Stream { name: previous, .. },
                    OutputView::Stream { name: current, .. },
                ) if previous == current
            ),
            _ => false,
        };
        if same_stream {
            let next = output
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if let Some(Value::String(text)) =
                merged.last_mut().and_then(|last| last.get_mut("text"))
            {
                if is_marker && !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(next);
            }
        } else {
            merged.push(output);
        }
    }
    merged
}

/// An `execute_result` (with its execution count) or `display_data` output. Keys are inserted in
/// sorted order, which is the order nbformat writes them in, so the output looks the same whether
/// or not serde_json preserves order.
fn rich_output(
    output_type: &str,
    data: Value,
    execution_count: Option<Value>,
    metadata: Value,
) -> Map<String, Value> {
    let mut value = Map::new();
    value.insert("data".into(), data);
    if let Some(count) = execution_count {
        value.insert("execution_count".into(), count);
    }
    value.insert("metadata".into(), metadata);
    value.insert("output_type".into(), output_type.into());
    value
}

#[cfg(test)]
mod tests;
