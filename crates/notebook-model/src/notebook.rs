//! The typed notebook: reading nbformat 4.0–4.5 and writing it back byte for byte as nbformat does.
//!
//! Reading follows `nbformat.reads(text, as_version=4)`: multi-line strings stored as lists are
//! joined, transient keys (`orig_nbformat`, `orig_nbformat_minor`, `signature`, cell `trusted`) are
//! dropped, and 4.5 cells without a usable id get one. Writing follows `nbformat.write`: text is
//! split into lines again, keys are sorted, one-space indentation, a trailing newline.
//! Everything we do not model (unknown keys, unknown output fields, attachments) is kept as raw
//! JSON and written back unchanged.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::error::ParseError;
use crate::identity;
use crate::outputs::{OutputView, RichKind};
use crate::pyjson;

/// The newest nbformat minor version this crate reads and the one it writes after a mutation.
pub const CURRENT_MINOR: u64 = 5;

/// The kind of a cell, from its `cell_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CellKind {
    /// A code cell (`"code"`): it has outputs and an execution count.
    Code,
    /// A markdown cell (`"markdown"`).
    Markdown,
    /// A raw cell (`"raw"`), passed through untouched by nbconvert.
    Raw,
}

impl CellKind {
    /// The nbformat `cell_type` string.
    pub fn as_str(self) -> &'static str {
        match self {
            CellKind::Code => "code",
            CellKind::Markdown => "markdown",
            CellKind::Raw => "raw",
        }
    }

    /// Parses an nbformat `cell_type`.
    pub fn from_cell_type(text: &str) -> Option<CellKind> {
        match text {
            "code" => Some(CellKind::Code),
            "markdown" => Some(CellKind::Markdown),
            "raw" => Some(CellKind::Raw),
            _ => None,
        }
    }
}

/// Where a cell's id came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdOrigin {
    /// The file carried this id.
    File,
    /// The file had none (nbformat < 4.5, or a missing or duplicate id): we assigned one in memory,
    /// deterministically, the way nbformat assigns ids when it upgrades or repairs a notebook.
    Assigned,
}

/// One cell. Cheap to clone through [`Arc`] inside [`Notebook`].
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    kind: CellKind,
    source: String,
    id: String,
    id_origin: IdOrigin,
    metadata: Map<String, Value>,
    /// Outputs of a code cell, each an nbformat output object with multi-line strings joined.
    outputs: Vec<Value>,
    /// `execution_count` of a code cell: `null` or an integer.
    execution_count: Option<i64>,
    /// Every other key of the cell object (attachments, unknown keys), kept verbatim.
    extra: Map<String, Value>,
}

impl Cell {
    /// A new cell with the given id. Code cells start with no outputs and a null execution count.
    pub fn new(kind: CellKind, source: impl Into<String>, id: impl Into<String>) -> Cell {
        Cell {
            kind,
            source: source.into(),
            id: id.into(),
            id_origin: IdOrigin::File,
            metadata: Map::new(),
            outputs: Vec::new(),
            execution_count: None,
            extra: Map::new(),
        }
    }

    /// Code, markdown or raw.
    pub fn kind(&self) -> CellKind {
        self.kind
    }

    /// The source text, with nbformat's line lists joined.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The cell id used everywhere (the nbformat id, or the one assigned in memory).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether the id came from the file or was assigned in memory.
    pub fn id_origin(&self) -> IdOrigin {
        self.id_origin
    }

    /// The cell's nbformat metadata.
    pub fn metadata(&self) -> &Map<String, Value> {
        &self.metadata
    }

    /// Outputs (empty for markdown and raw cells).
    pub fn outputs(&self) -> &[Value] {
        &self.outputs
    }

    /// The saved `execution_count`; `None` when it is `null` (and for markdown and raw cells).
    pub fn execution_count(&self) -> Option<i64> {
        self.execution_count
    }

    /// Keys of the cell object that the model does not interpret (attachments among them).
    pub fn extra(&self) -> &Map<String, Value> {
        &self.extra
    }

    /// The short content hash of this cell (kind and source).
    pub fn rev(&self) -> String {
        identity::rev(self.kind, &self.source)
    }

    /// Changes the kind; outputs and the execution count are left as they are.
    pub fn set_kind(&mut self, kind: CellKind) {
        self.kind = kind;
    }

    /// Replaces the source text.
    pub fn set_source(&mut self, source: impl Into<String>) {
        self.source = source.into();
    }

    /// Replaces the id, recording where it came from.
    pub fn set_id(&mut self, id: impl Into<String>, origin: IdOrigin) {
        self.id = id.into();
        self.id_origin = origin;
    }

    /// The cell's nbformat metadata, to change.
    pub fn metadata_mut(&mut self) -> &mut Map<String, Value> {
        &mut self.metadata
    }

    /// Replaces the outputs and the execution count (`None` writes `null`).
    pub fn set_outputs(&mut self, outputs: Vec<Value>, execution_count: Option<i64>) {
        self.outputs = outputs;
        self.execution_count = execution_count;
    }

    /// The keys of the cell object that the model does not interpret, to change.
    pub fn extra_mut(&mut self) -> &mut Map<String, Value> {
        &mut self.extra
    }

    /// The name stored in `metadata.jupyter_mcp.name`, if any.
    pub fn stored_name(&self) -> Option<&str> {
        self.metadata
            .get(identity::METADATA_KEY)?
            .get("name")?
            .as_str()
    }

    /// Stores `name` in `metadata.jupyter_mcp.name`, keeping other keys of that object.
    pub fn set_stored_name(&mut self, name: &str) {
        let entry = self
            .metadata
            .entry(identity::METADATA_KEY)
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        if let Value::Object(object) = entry {
            object.insert("name".to_owned(), Value::String(name.to_owned()));
        }
    }
}

/// A notebook in nbformat 4.
#[derive(Debug, Clone, PartialEq)]
pub struct Notebook {
    nbformat_minor: u64,
    metadata: Map<String, Value>,
    cells: Vec<Arc<Cell>>,
    /// Top-level keys other than `nbformat`, `nbformat_minor`, `metadata` and `cells`.
    extra: Map<String, Value>,
}

impl Default for Notebook {
    fn default() -> Self {
        Notebook::new()
    }
}

impl Notebook {
    /// An empty nbformat 4.5 notebook.
    pub fn new() -> Notebook {
        Notebook {
            nbformat_minor: CURRENT_MINOR,
            metadata: Map::new(),
            cells: Vec::new(),
            extra: Map::new(),
        }
    }

    /// Reads a notebook from the bytes of an `.ipynb` file.
    ///
    /// Cells are read one at a time from the text into the model: the whole notebook never
    /// exists as a JSON value tree next to the model (that tree would take about twice the
    /// file's size, and the memory it leaves behind would stay with the process).
    pub fn parse(bytes: &[u8]) -> Result<Notebook, ParseError> {
        let bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let top = serde::de::Deserializer::deserialize_any(&mut deserializer, TopVisitor)
            .and_then(|top| deserializer.end().map(|()| top))
            .map_err(|error| {
                if error.classify() == serde_json::error::Category::Syntax
                    && std::str::from_utf8(bytes).is_err()
                {
                    ParseError::InvalidUtf8
                } else {
                    ParseError::InvalidJson {
                        line: error.line(),
                        column: error.column(),
                        message: error.to_string(),
                    }
                }
            })?;
        Notebook::from_top(top)
    }

    /// Reads a notebook from `reader` (the text of an `.ipynb` file) as it arrives, so that the
    /// file's bytes never sit whole in memory beside the model: for a large notebook that halves
    /// what opening it takes at its peak. Slower than [`Notebook::parse`] on bytes already read;
    /// its errors are less precise (a caller wanting the exact one reads the bytes and parses
    /// them).
    pub fn parse_reader<R: std::io::BufRead>(mut reader: R) -> Result<Notebook, ParseError> {
        let io_problem = |error: std::io::Error| ParseError::InvalidJson {
            line: 0,
            column: 0,
            message: error.to_string(),
        };
        // A byte-order mark is skipped, as `parse` skips it; the buffer holds it whole unless the
        // reader hands out fewer bytes at a time, and then it is taken one piece at a time.
        let mut matched = 0;
        while matched < BOM.len() {
            let available = reader.fill_buf().map_err(io_problem)?;
            if available.is_empty() {
                break;
            }
            let take = available.len().min(BOM.len() - matched);
            if available[..take] != BOM[matched..matched + take] {
                if matched > 0 {
                    // Part of a mark and then something else: not JSON either way.
                    return Err(ParseError::InvalidJson {
                        line: 1,
                        column: 1,
                        message: "the file starts with a partial byte-order mark".to_owned(),
                    });
                }
                break;
            }
            reader.consume(take);
            matched += take;
        }
        let mut deserializer = serde_json::Deserializer::from_reader(reader);
        let top = serde::de::Deserializer::deserialize_any(&mut deserializer, TopVisitor)
            .and_then(|top| deserializer.end().map(|()| top))
            .map_err(|error| ParseError::InvalidJson {
                line: error.line(),
                column: error.column(),
                message: error.to_string(),
            })?;
        Notebook::from_top(top)
    }

    /// The notebook of what [`TopVisitor`] read: its fields and cells, or not an object.
    fn from_top(top: Option<(Map<String, Value>, RawCells)>) -> Result<Notebook, ParseError> {
        match top {
            Some((fields, cells)) => Notebook::from_parts(fields, cells),
            None => Err(ParseError::NotAnObject),
        }
    }

    /// Reads a notebook from an already-parsed JSON value.
    pub fn from_value(value: Value) -> Result<Notebook, ParseError> {
        let Value::Object(mut top) = value else {
            return Err(ParseError::NotAnObject);
        };
        let cells = match top.remove("cells") {
            Some(value) => RawCells::Value(value),
            None => RawCells::Absent,
        };
        Notebook::from_parts(top, cells)
    }

    /// The notebook of a top-level object's fields other than `cells`, and its cells.
    fn from_parts(
        mut top: Map<String, Value>,
        raw_cells: RawCells,
    ) -> Result<Notebook, ParseError> {
        let major = match top.get("nbformat") {
            Some(Value::Number(number)) => number.as_u64(),
            Some(_) => None,
            None => return Err(ParseError::MissingVersion),
        }
        .ok_or(ParseError::MissingVersion)?;
        let minor = match top.get("nbformat_minor") {
            Some(value) => value.as_u64(),
            None if major >= 4 => {
                return Err(ParseError::UnsupportedVersion { major, minor: None });
            }
            None => Some(0),
        };
        if major != 4 || minor.is_none_or(|minor| minor > CURRENT_MINOR) {
            return Err(ParseError::UnsupportedVersion { major, minor });
        }
        let minor = minor.unwrap_or(0);
        top.remove("nbformat");
        top.remove("nbformat_minor");

        let mut metadata = match top.remove("metadata") {
            Some(Value::Object(map)) => map,
            None | Some(Value::Null) => Map::new(),
            Some(_) => return Err(ParseError::InvalidNotebookMetadata),
        };
        for transient in ["orig_nbformat", "orig_nbformat_minor", "signature"] {
            metadata.remove(transient);
        }

        let mut cells = match raw_cells {
            RawCells::Absent => Vec::new(),
            RawCells::Value(Value::Array(raw_cells)) => {
                let mut cells = Vec::with_capacity(raw_cells.len());
                for (index, raw) in raw_cells.into_iter().enumerate() {
                    cells.push(parse_cell(index, raw)?);
                }
                cells
            }
            RawCells::Value(_) => return Err(ParseError::CellsNotAList),
            RawCells::Parsed(cells) => cells?,
        };
        identity::assign_missing_ids(&mut cells);
        Ok(Notebook {
            nbformat_minor: minor,
            metadata,
            cells: cells.into_iter().map(Arc::new).collect(),
            extra: top,
        })
    }

    /// The `nbformat_minor` the notebook is written with (0 to 5).
    pub fn nbformat_minor(&self) -> u64 {
        self.nbformat_minor
    }

    /// Marks the notebook as nbformat 4.5, so that every cell id (assigned ones included) is
    /// written. Done before the first write of a mutated notebook, as nbformat's upgrade does.
    pub fn upgrade_to_current_minor(&mut self) {
        if self.nbformat_minor < CURRENT_MINOR {
            self.nbformat_minor = CURRENT_MINOR;
        }
    }

    /// The notebook-level metadata (kernelspec, language_info and the rest).
    pub fn metadata(&self) -> &Map<String, Value> {
        &self.metadata
    }

    /// The notebook-level metadata, to change.
    pub fn metadata_mut(&mut self) -> &mut Map<String, Value> {
        &mut self.metadata
    }

    /// Top-level keys of the notebook object that the model does not interpret, kept verbatim.
    pub fn extra(&self) -> &Map<String, Value> {
        &self.extra
    }

    /// The cells, in document order.
    pub fn cells(&self) -> &[Arc<Cell>] {
        &self.cells
    }

    /// The cell at 0-based `index`; `None` past the last cell.
    pub fn cell(&self, index: usize) -> Option<&Cell> {
        self.cells.get(index).map(Arc::as_ref)
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Whether the notebook has no cells.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Mutable access to one cell (copy on write: other clones of this notebook keep theirs).
    pub fn cell_mut(&mut self, index: usize) -> Option<&mut Cell> {
        self.cells.get_mut(index).map(Arc::make_mut)
    }

    /// Inserts `cell` at `index`, moving the cells from there on down; panics if `index` is past
    /// the end.
    pub fn insert_cell(&mut self, index: usize, cell: Cell) {
        self.cells.insert(index, Arc::new(cell));
    }

    /// Removes and returns the cell at `index`; panics if there is none.
    pub fn remove_cell(&mut self, index: usize) -> Arc<Cell> {
        self.cells.remove(index)
    }

    /// Appends `cell` as the last cell.
    pub fn push_cell(&mut self, cell: Cell) {
        self.cells.push(Arc::new(cell));
    }

    /// Replaces the whole cell list (used by moves, which rebuild the order).
    pub fn set_cells(&mut self, cells: Vec<Arc<Cell>>) {
        self.cells = cells;
    }

    /// Index of the cell with this id.
    pub fn position_of_id(&self, id: &str) -> Option<usize> {
        self.cells.iter().position(|cell| cell.id == id)
    }

    /// The language of code cells: the kernelspec's, then `language_info.name`, else Python.
    pub fn code_language(&self) -> &str {
        let from_kernelspec = self
            .metadata
            .get("kernelspec")
            .and_then(|spec| spec.get("language"))
            .and_then(Value::as_str);
        let from_language_info = self
            .metadata
            .get("language_info")
            .and_then(|info| info.get("name"))
            .and_then(Value::as_str);
        from_kernelspec
            .or(from_language_info)
            .filter(|language| !language.is_empty())
            .unwrap_or("python")
    }

    /// The language of one cell as an editor would show it.
    pub fn cell_language<'a>(&'a self, cell: &'a Cell) -> &'a str {
        let override_language = cell
            .metadata
            .get("vscode")
            .and_then(|vscode| vscode.get("languageId"))
            .and_then(Value::as_str);
        match cell.kind {
            CellKind::Code => override_language.unwrap_or_else(|| self.code_language()),
            CellKind::Markdown => "markdown",
            CellKind::Raw => override_language.unwrap_or("raw"),
        }
    }

    /// The file text, exactly as `nbformat.write(nb, f)` would write this notebook.
    pub fn to_ipynb_string(&self) -> String {
        let mut out = String::with_capacity(4096);
        self.write_ipynb(&mut out, &mut |_| {});
        out
    }

    /// The text of [`Notebook::to_ipynb_string`] handed to `sink` in consecutive pieces of about
    /// `chunk_bytes` (a piece ends after a cell, so one large cell makes a larger piece): a host
    /// can write a large notebook without holding its whole text. The first error of `sink`
    /// stops the pieces and is returned.
    pub fn write_ipynb_chunks<E>(
        &self,
        chunk_bytes: usize,
        mut sink: impl FnMut(&str) -> Result<(), E>,
    ) -> Result<(), E> {
        // Grown as needed: a small notebook's text never asks for a whole chunk's memory.
        let mut out = String::with_capacity(chunk_bytes.min(64 * 1024));
        let mut failure = None;
        self.write_ipynb(&mut out, &mut |out| {
            if out.len() >= chunk_bytes {
                if failure.is_none()
                    && let Err(error) = sink(out)
                {
                    failure = Some(error);
                }
                out.clear();
            }
        });
        match failure {
            Some(error) => Err(error),
            None => sink(&out),
        }
    }

    /// Whether the file texts of `self` and `other` are sure to differ, because their cell
    /// counts differ, or a cell's kind or source does, or a code cell's execution count does
    /// (reading a written file gives back every cell with its kind and source, and every code
    /// cell with its count, so texts that were equal could not have told them apart). A run's
    /// outputs usually come with a new count, so their write needs no comparison with the file.
    /// `false` says nothing: the texts may still differ elsewhere (outputs, metadata). Cheap:
    /// cells the two share (one `Arc`) are not looked into.
    pub fn surely_writes_differently(&self, other: &Notebook) -> bool {
        self.cells.len() != other.cells.len()
            || self.cells.iter().zip(&other.cells).any(|(mine, theirs)| {
                !Arc::ptr_eq(mine, theirs)
                    && (mine.kind != theirs.kind
                        || mine.source != theirs.source
                        || (mine.kind == CellKind::Code
                            && mine.execution_count != theirs.execution_count))
            })
    }

    /// Writes the file text into `out`, calling `after_cell` after each cell is written.
    fn write_ipynb(&self, out: &mut String, after_cell: &mut dyn FnMut(&mut String)) {
        let minor = Value::from(self.nbformat_minor);
        let major = Value::from(4u64);
        let entries = self
            .extra
            .iter()
            .map(|(key, value)| (key.as_str(), TopField::Plain(value)))
            .chain([
                ("cells", TopField::Cells),
                ("metadata", TopField::Plain(&Value::Null)),
                ("nbformat", TopField::Plain(&major)),
                ("nbformat_minor", TopField::Plain(&minor)),
            ]);
        pyjson::write_object(out, entries, 0, |out, key, field, depth| {
            match (key, field) {
                ("cells", _) => pyjson::write_list(out, &self.cells, depth, |out, cell, depth| {
                    write_cell(out, cell, self.nbformat_minor >= CURRENT_MINOR, depth);
                    after_cell(out);
                }),
                ("metadata", _) => pyjson::write_value_map(out, &self.metadata, depth),
                (_, TopField::Plain(value)) => pyjson::write_value(out, value, depth),
                (_, TopField::Cells) => unreachable!("only the cells key holds the cells"),
            }
        });
        out.push('\n');
    }
}

/// The `cells` of a notebook being read.
enum RawCells {
    /// The notebook has no `cells` key.
    Absent,
    /// The JSON value of `cells` (a list of cell objects, or something that is not a list).
    Value(Value),
    /// The cells, read one at a time, or the problem of the first that could not be read.
    Parsed(Result<Vec<Cell>, ParseError>),
}

/// Reads the top level of a notebook: `None` when it is not an object, else its fields other
/// than `cells`, and its cells.
/// The UTF-8 byte-order mark some editors write first.
const BOM: &[u8] = b"\xef\xbb\xbf";

struct TopVisitor;

impl<'de> serde::de::Visitor<'de> for TopVisitor {
    type Value = Option<(Map<String, Value>, RawCells)>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Map::new();
        let mut cells = RawCells::Absent;
        while let Some(key) = map.next_key::<String>()? {
            if key == "cells" {
                cells = map.next_value_seed(CellsSeed)?;
            } else {
                let value = map.next_value::<Value>()?;
                fields.insert(key, value);
            }
        }
        Ok(Some((fields, cells)))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// Reads `cells`: a list is read one cell at a time, each cell's JSON turned into a [`Cell`]
/// before the next is read; anything else is kept as its value.
struct CellsSeed;

impl<'de> serde::de::DeserializeSeed<'de> for CellsSeed {
    type Value = RawCells;

    fn deserialize<D: serde::de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for CellsSeed {
    type Value = RawCells;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut cells = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        let mut index = 0;
        while let Some(raw) = seq.next_element::<Value>()? {
            match parse_cell(index, raw) {
                Ok(cell) => cells.push(cell),
                Err(problem) => {
                    // The first bad cell is the one reported; the rest is only checked as JSON.
                    while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                    return Ok(RawCells::Parsed(Err(problem)));
                }
            }
            index += 1;
        }
        Ok(RawCells::Parsed(Ok(cells)))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(RawCells::Value(Value::Object(Map::new())))
    }

    fn visit_bool<E>(self, value: bool) -> Result<Self::Value, E> {
        Ok(RawCells::Value(Value::Bool(value)))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Self::Value, E> {
        Ok(RawCells::Value(Value::from(value)))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Self::Value, E> {
        Ok(RawCells::Value(Value::from(value)))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Self::Value, E> {
        Ok(RawCells::Value(Value::from(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Self::Value, E> {
        Ok(RawCells::Value(Value::from(value)))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(RawCells::Value(Value::Null))
    }
}

/// A top-level key of the notebook object.
enum TopField<'a> {
    Plain(&'a Value),
    Cells,
}

/// How a key of a cell object is written.
enum CellField<'a> {
    Plain(&'a Value),
    Source(&'a str),
    Metadata(&'a Map<String, Value>),
    Outputs(&'a [Value]),
    Attachments(&'a Value),
}

fn write_cell(out: &mut String, cell: &Cell, write_assigned_ids: bool, depth: usize) {
    let cell_type = Value::String(cell.kind.as_str().to_owned());
    let id_value = Value::String(cell.id.clone());
    let execution_count = cell.execution_count.map_or(Value::Null, Value::from);
    let mut fields: Vec<(&str, CellField<'_>)> = Vec::with_capacity(8 + cell.extra.len());
    for (key, value) in &cell.extra {
        if key == "attachments" {
            fields.push((key, CellField::Attachments(value)));
        } else {
            fields.push((key, CellField::Plain(value)));
        }
    }
    fields.push(("cell_type", CellField::Plain(&cell_type)));
    if cell.id_origin == IdOrigin::File || write_assigned_ids {
        fields.push(("id", CellField::Plain(&id_value)));
    }
    fields.push(("metadata", CellField::Metadata(&cell.metadata)));
    fields.push(("source", CellField::Source(&cell.source)));
    if cell.kind == CellKind::Code {
        fields.push(("execution_count", CellField::Plain(&execution_count)));
        fields.push(("outputs", CellField::Outputs(&cell.outputs)));
    }
    pyjson::write_object(
        out,
        fields.into_iter(),
        depth,
        |out, _, field, depth| match field {
            CellField::Plain(value) => pyjson::write_value(out, value, depth),
            CellField::Source(text) => write_split_string(out, text, depth),
            CellField::Metadata(map) => pyjson::write_value_map(out, map, depth),
            CellField::Outputs(outputs) => pyjson::write_list(out, outputs, depth, write_output),
            CellField::Attachments(value) => write_attachments(out, value, depth),
        },
    );
}

/// Writes a string as nbformat's `split_lines` stores it: a list of lines with their endings.
fn write_split_string(out: &mut String, text: &str, depth: usize) {
    let lines = pyjson::python_splitlines_keepends(text);
    pyjson::write_list(out, &lines, depth, |out, line, _| {
        pyjson::write_string(out, line)
    });
}

fn write_output(out: &mut String, output: &Value, depth: usize) {
    let Value::Object(map) = output else {
        pyjson::write_value(out, output, depth);
        return;
    };
    let view = OutputView::of_fields(map);
    let entries = map.iter().map(|(key, value)| (key.as_str(), value));
    pyjson::write_object(out, entries, depth, |out, key, value, depth| {
        match (view, key, value) {
            (
                OutputView::Rich {
                    kind: RichKind::ExecuteResult | RichKind::DisplayData,
                    ..
                },
                "data",
                Value::Object(bundle),
            ) => write_split_mimebundle(out, bundle, depth),
            (OutputView::Stream { .. }, "text", Value::String(text)) => {
                write_split_string(out, text, depth);
            }
            _ => pyjson::write_value(out, value, depth),
        }
    });
}

fn write_attachments(out: &mut String, attachments: &Value, depth: usize) {
    let Value::Object(map) = attachments else {
        pyjson::write_value(out, attachments, depth);
        return;
    };
    let entries = map.iter().map(|(key, value)| (key.as_str(), value));
    pyjson::write_object(out, entries, depth, |out, _, value, depth| match value {
        Value::Object(bundle) => write_split_mimebundle(out, bundle, depth),
        other => pyjson::write_value(out, other, depth),
    });
}

/// MIME types that nbformat splits into lines although they are not `text/*`.
fn is_split_mime(mime: &str) -> bool {
    mime.starts_with("text/") || mime == "application/javascript" || mime == "image/svg+xml"
}

/// JSON MIME types, whose list values nbformat leaves alone when it rejoins lines.
pub(crate) fn is_json_mime(mime: &str) -> bool {
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

fn write_split_mimebundle(out: &mut String, bundle: &Map<String, Value>, depth: usize) {
    let entries = bundle.iter().map(|(key, value)| (key.as_str(), value));
    pyjson::write_object(out, entries, depth, |out, key, value, depth| match value {
        Value::String(text) if is_split_mime(key) => write_split_string(out, text, depth),
        other => pyjson::write_value(out, other, depth),
    });
}

/// Joins a list of strings as nbformat's `rejoin_lines` does. Returns `None` when the list holds
/// something other than strings.
fn join_string_list(items: &[Value]) -> Option<String> {
    // Sized once: a string grown by pushing keeps up to twice its length allocated.
    let length = items
        .iter()
        .map(|item| item.as_str().map_or(0, str::len))
        .sum();
    let mut joined = String::with_capacity(length);
    for item in items {
        joined.push_str(item.as_str()?);
    }
    Some(joined)
}

fn rejoin_mimebundle(bundle: &mut Map<String, Value>) {
    for (mime, value) in bundle.iter_mut() {
        if is_json_mime(mime) {
            continue;
        }
        if let Value::Array(items) = value
            && let Some(joined) = join_string_list(items)
        {
            *value = Value::String(joined);
        }
    }
}

fn parse_cell(index: usize, raw: Value) -> Result<Cell, ParseError> {
    let invalid = |problem: String| ParseError::InvalidCell { index, problem };
    let Value::Object(mut fields) = raw else {
        return Err(invalid("it is not a JSON object".to_owned()));
    };
    let kind = match fields.remove("cell_type") {
        Some(Value::String(cell_type)) => {
            CellKind::from_cell_type(&cell_type).ok_or_else(|| {
                invalid(format!(
                    "unknown cell_type {cell_type:?} (expected code, markdown or raw)"
                ))
            })?
        }
        Some(_) => return Err(invalid("cell_type is not a string".to_owned())),
        None => return Err(invalid("it has no cell_type".to_owned())),
    };
    let source = match fields.remove("source") {
        Some(Value::String(text)) => text,
        Some(Value::Array(lines)) => join_string_list(&lines)
            .ok_or_else(|| invalid("source is a list with non-string items".to_owned()))?,
        None | Some(Value::Null) => String::new(),
        Some(_) => return Err(invalid("source is neither a string nor a list".to_owned())),
    };
    let id = match fields.remove("id") {
        Some(Value::String(id)) if !id.is_empty() => Some(id),
        Some(Value::String(_)) | None => None,
        Some(_) => return Err(invalid("id is not a string".to_owned())),
    };
    let mut metadata = match fields.remove("metadata") {
        Some(Value::Object(map)) => map,
        None | Some(Value::Null) => Map::new(),
        Some(_) => return Err(invalid("metadata is not an object".to_owned())),
    };
    metadata.remove("trusted");
    if let Some(Value::Object(attachments)) = fields.get_mut("attachments") {
        for attachment in attachments.values_mut() {
            if let Value::Object(bundle) = attachment {
                rejoin_mimebundle(bundle);
            }
        }
    }
    let (outputs, execution_count) = if kind == CellKind::Code {
        let outputs = match fields.remove("outputs") {
            Some(Value::Array(outputs)) => outputs,
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return Err(invalid("outputs is not a list".to_owned())),
        };
        let mut joined_outputs = Vec::with_capacity(outputs.len());
        for (output_index, output) in outputs.into_iter().enumerate() {
            joined_outputs.push(
                parse_output(output)
                    .map_err(|problem| invalid(format!("output {output_index} {problem}")))?,
            );
        }
        let execution_count = match fields.remove("execution_count") {
            Some(Value::Number(number)) => number.as_i64(),
            _ => None,
        };
        (joined_outputs, execution_count)
    } else {
        (Vec::new(), None)
    };
    let (id, id_origin) = match id {
        Some(id) => (id, IdOrigin::File),
        None => (String::new(), IdOrigin::Assigned),
    };
    Ok(Cell {
        kind,
        source,
        id,
        id_origin,
        metadata,
        outputs,
        execution_count,
        extra: fields,
    })
}

fn parse_output(output: Value) -> Result<Value, String> {
    let Value::Object(mut map) = output else {
        return Err("is not a JSON object".to_owned());
    };
    let output_type = match map.get("output_type") {
        Some(Value::String(output_type)) => output_type.clone(),
        _ => return Err("has no output_type".to_owned()),
    };
    if output_type == "execute_result" || output_type == "display_data" {
        if let Some(Value::Object(bundle)) = map.get_mut("data") {
            rejoin_mimebundle(bundle);
        }
    } else if let Some(Value::Array(lines)) = map.get("text") {
        let joined =
            join_string_list(lines).ok_or_else(|| "has a text list with non-strings".to_owned())?;
        map.insert("text".to_owned(), Value::String(joined));
    }
    Ok(Value::Object(map))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r##"{
 "cells": [
  {
   "cell_type": "markdown",
   "id": "intro",
   "metadata": {},
   "source": [
    "# Title\n",
    "Some text"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 1,
   "id": "c1",
   "metadata": {
    "tags": [
     "x"
    ]
   },
   "outputs": [
    {
     "name": "stdout",
     "output_type": "stream",
     "text": [
      "hi\n"
     ]
    },
    {
     "data": {
      "image/png": "iVBORw0KGgo=",
      "text/plain": [
       "<Figure>"
      ]
     },
     "metadata": {},
     "output_type": "display_data"
    }
   ],
   "source": [
    "print('hi')"
   ]
  }
 ],
 "metadata": {
  "kernelspec": {
   "display_name": "Python 3",
   "language": "python",
   "name": "python3"
  }
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

    #[test]
    fn round_trips_a_canonical_notebook_byte_for_byte() {
        let notebook = Notebook::parse(SAMPLE.as_bytes()).unwrap();
        assert_eq!(notebook.len(), 2);
        assert_eq!(notebook.cells()[0].source(), "# Title\nSome text");
        assert_eq!(notebook.to_ipynb_string(), SAMPLE);
    }

    #[test]
    fn a_streamed_read_refuses_what_a_read_of_bytes_refuses() {
        assert_eq!(
            Notebook::parse_reader(SAMPLE.as_bytes()).unwrap(),
            Notebook::parse(SAMPLE.as_bytes()).unwrap()
        );
        for bad in ["[1, 2]", "{\"cells\": [", "", "\u{feff}"] {
            assert!(Notebook::parse(bad.as_bytes()).is_err(), "{bad:?}");
            assert!(Notebook::parse_reader(bad.as_bytes()).is_err(), "{bad:?}");
        }
        assert_eq!(
            Notebook::parse_reader(&b"[1]"[..]),
            Err(ParseError::NotAnObject)
        );
    }

    /// Reading cell by cell gives what reading the whole JSON value first gives, problems
    /// included, and in the same order of precedence.
    #[test]
    fn reading_cell_by_cell_agrees_with_reading_a_value() {
        let inputs: &[&str] = &[
            SAMPLE,
            "[1, 2]",
            "3",
            "\"text\"",
            "null",
            "true",
            "{}",
            r#"{"nbformat": 4, "nbformat_minor": 5, "cells": null}"#,
            r#"{"nbformat": 4, "nbformat_minor": 5, "cells": {"a": [1]}}"#,
            r#"{"nbformat": 4, "nbformat_minor": 5, "cells": "x"}"#,
            r#"{"nbformat": 4, "nbformat_minor": 5, "cells": [{"cell_type": "code"}, 7, {"x": 1}]}"#,
            r#"{"cells": [7], "nbformat": 4, "nbformat_minor": 9}"#,
            r#"{"cells": [7], "nbformat": 4, "nbformat_minor": 5, "metadata": []}"#,
            r#"{"cells": [7], "metadata": {}}"#,
            r#"{"cells": [], "cells": [{"cell_type": "raw", "source": "x"}], "nbformat": 4, "nbformat_minor": 5}"#,
            r#"{"cells": [{"cell_type": "raw", "source": "x"}], "nbformat": 4, "nbformat_minor": 5} x"#,
            r#"{"cells": [{"cell_type": "raw", "source": "x"}, ], "nbformat": 4}"#,
            r#"{"cells": [{"cell_type": "raw", "source": "x"}"#,
        ];
        for input in inputs {
            let streamed = Notebook::parse(input.as_bytes());
            let whole = match serde_json::from_str::<Value>(input) {
                Ok(value) => Notebook::from_value(value),
                Err(_) => {
                    assert!(
                        matches!(streamed, Err(ParseError::InvalidJson { .. })),
                        "{input}: {streamed:?}"
                    );
                    continue;
                }
            };
            assert_eq!(streamed, whole, "{input}");
        }
        let invalid = Notebook::parse(b"{\"cells\": [1,,]}").unwrap_err();
        let reference = serde_json::from_str::<Value>("{\"cells\": [1,,]}").unwrap_err();
        assert_eq!(
            invalid,
            ParseError::InvalidJson {
                line: reference.line(),
                column: reference.column(),
                message: reference.to_string(),
            }
        );
        assert_eq!(
            Notebook::parse(b"{\"cells\": [\"\xff\"]}"),
            Err(ParseError::InvalidUtf8)
        );
    }

    #[test]
    fn chunks_put_together_are_the_whole_text() {
        let notebook = Notebook::parse(SAMPLE.as_bytes()).unwrap();
        for chunk_bytes in [0, 1, 100, usize::MAX] {
            let mut pieces = Vec::new();
            notebook
                .write_ipynb_chunks(chunk_bytes, |piece| {
                    pieces.push(piece.to_owned());
                    Ok::<(), ()>(())
                })
                .unwrap();
            assert_eq!(pieces.concat(), SAMPLE, "chunks of {chunk_bytes}");
            if chunk_bytes <= 100 {
                assert!(pieces.len() > 1, "chunks of {chunk_bytes}: {pieces:?}");
            }
        }
        let mut calls = 0;
        let failed = notebook.write_ipynb_chunks(1, |_| {
            calls += 1;
            Err("disk full")
        });
        assert_eq!(failed, Err("disk full"));
        assert_eq!(calls, 1, "the first failure stops the pieces");
    }

    #[test]
    fn sure_differences_are_cell_counts_kinds_sources_and_execution_counts() {
        let notebook = Notebook::parse(SAMPLE.as_bytes()).unwrap();
        assert!(!notebook.surely_writes_differently(&notebook.clone()));
        let code = notebook.cell(1).unwrap();
        assert_eq!(code.kind, CellKind::Code);
        let mut outputs_changed = notebook.clone();
        outputs_changed
            .cell_mut(1)
            .unwrap()
            .set_outputs(Vec::new(), code.execution_count());
        assert!(!notebook.surely_writes_differently(&outputs_changed));
        let mut count_changed = notebook.clone();
        count_changed.cell_mut(1).unwrap().set_outputs(
            code.outputs().to_vec(),
            Some(code.execution_count().unwrap_or(0) + 1),
        );
        assert!(notebook.surely_writes_differently(&count_changed));
        assert_ne!(notebook.to_ipynb_string(), count_changed.to_ipynb_string());
        let mut source_changed = notebook.clone();
        source_changed.cell_mut(0).unwrap().set_source("# Other");
        assert!(notebook.surely_writes_differently(&source_changed));
        let mut kind_changed = notebook.clone();
        kind_changed.cell_mut(0).unwrap().set_kind(CellKind::Raw);
        assert!(notebook.surely_writes_differently(&kind_changed));
        let mut inserted = notebook.clone();
        inserted.push_cell(Cell::new(CellKind::Code, "", "new"));
        assert!(notebook.surely_writes_differently(&inserted));
    }

    #[test]
    fn refuses_other_versions_with_the_version_named() {
        let v3 = br#"{"nbformat": 3, "nbformat_minor": 0, "worksheets": []}"#;
        let error = Notebook::parse(v3).unwrap_err();
        assert!(error.to_string().contains("nbformat 3.0"), "{error}");
        assert!(error.to_string().contains("nbconvert"), "{error}");
        let v46 = br#"{"nbformat": 4, "nbformat_minor": 6, "cells": [], "metadata": {}}"#;
        assert!(
            Notebook::parse(v46)
                .unwrap_err()
                .to_string()
                .contains("4.6")
        );
    }

    #[test]
    fn older_minor_versions_get_ids_in_memory_only() {
        let v44 = br#"{"nbformat": 4, "nbformat_minor": 4, "metadata": {},
            "cells": [{"cell_type": "code", "metadata": {}, "source": "x = 1",
                       "outputs": [], "execution_count": null}]}"#;
        let mut notebook = Notebook::parse(v44).unwrap();
        let id = notebook.cells()[0].id().to_owned();
        assert_eq!(id.len(), 8);
        assert!(!notebook.to_ipynb_string().contains(&id));
        notebook.upgrade_to_current_minor();
        assert!(
            notebook
                .to_ipynb_string()
                .contains(&format!("\"id\": \"{id}\""))
        );
    }

    #[test]
    fn transient_keys_are_dropped_and_unknown_keys_kept() {
        let text = br#"{"nbformat": 4, "nbformat_minor": 5, "zzz": 1,
            "metadata": {"signature": "x", "custom": {"a": 1}},
            "cells": [{"cell_type": "raw", "id": "r", "metadata": {"trusted": true},
                       "source": "", "mystery": [1]}]}"#;
        let notebook = Notebook::parse(text).unwrap();
        let written = notebook.to_ipynb_string();
        assert!(!written.contains("signature"));
        assert!(!written.contains("trusted"));
        assert!(written.contains("\"mystery\""));
        assert!(written.contains("\"zzz\": 1"));
        assert!(written.contains("\"custom\""));
    }
}
