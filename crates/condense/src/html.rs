//! A small, forgiving HTML tokenizer, HTML-to-text conversion and HTML table extraction.
//!
//! Notebook HTML is machine-written (pandas, polars, Styler, IPython.display.HTML) and small, so
//! a hand-written tokenizer is enough; it never fails, whatever the input. It knows raw-text
//! elements (`script`, `style`), comments, CDATA, attributes and character references, and
//! nothing about the tree-building rules of a browser.

use std::borrow::Cow;

/// One HTML token. Text is raw: character references are decoded by the consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Token<'a> {
    Start(StartTag),
    End { name: String },
    Text(&'a str),
    Comment(&'a str),
}

impl Token<'_> {
    fn is_start(&self, name: &str) -> bool {
        matches!(self, Token::Start(tag) if tag.name == name)
    }
}

/// A start tag: its name in lower case, its attributes in order, and whether it ends with `/>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StartTag {
    pub(crate) name: String,
    pub(crate) attributes: Vec<(String, String)>,
    pub(crate) self_closing: bool,
}

impl StartTag {
    /// Whether the tag opens one of the elements `names` (so its content follows until the end
    /// tag), rather than closing itself.
    pub(crate) fn opens(&self, names: &[&str]) -> bool {
        !self.self_closing && names.contains(&self.name.as_str())
    }
}

pub(crate) fn attribute<'t>(attributes: &'t [(String, String)], key: &str) -> Option<&'t str> {
    attributes
        .iter()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.as_str())
}

fn is_name_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b':' | b'.')
}

/// Splits HTML (or SVG/XML) into tokens. Never fails: anything that is not markup is text.
pub(crate) fn tokenize(html: &str) -> Vec<Token<'_>> {
    let bytes = html.as_bytes();
    let mut tokens = Vec::new();
    let mut position = 0;
    let mut text_start = 0;
    while position < bytes.len() {
        if bytes[position] != b'<' {
            position += 1;
            continue;
        }
        let rest = &html[position..];
        let (token, end) = if let Some(body) = rest.strip_prefix("<!--") {
            let length = body.find("-->").map_or(body.len(), |end| end + 3);
            (
                Some(Token::Comment(
                    body.get(..length.saturating_sub(3)).unwrap_or(body),
                )),
                position + 4 + length,
            )
        } else if let Some(body) = rest.strip_prefix("<![CDATA[") {
            let length = body.find("]]>").unwrap_or(body.len());
            let end = (position + 9 + length + 3).min(bytes.len());
            (Some(Token::Text(&body[..length])), end)
        } else if rest.starts_with("<!") || rest.starts_with("<?") {
            (
                None,
                position + rest.find('>').map_or(rest.len(), |end| end + 1),
            )
        } else if rest.starts_with("</")
            && rest.as_bytes().get(2).is_some_and(u8::is_ascii_alphabetic)
        {
            let name_end = 2 + rest.as_bytes()[2..]
                .iter()
                .take_while(|&&b| is_name_char(b))
                .count();
            let name = rest[2..name_end].to_ascii_lowercase();
            (
                Some(Token::End { name }),
                position + rest.find('>').map_or(rest.len(), |end| end + 1),
            )
        } else if rest.as_bytes().get(1).is_some_and(u8::is_ascii_alphabetic) {
            let (token, length) = read_start_tag(rest);
            (Some(token), position + length)
        } else {
            // A lone '<' is text.
            position += 1;
            continue;
        };
        if text_start < position {
            tokens.push(Token::Text(&html[text_start..position]));
        }
        position = end;
        text_start = end;
        if let Some(token) = token {
            let raw_text_element = match &token {
                Token::Start(tag) if tag.opens(&["script", "style"]) => Some(tag.name.clone()),
                _ => None,
            };
            tokens.push(token);
            if let Some(name) = raw_text_element {
                // Skip to the matching end tag; its content is never shown.
                let closing = format!("</{name}");
                let rest = &html[position..];
                let skip = find_ascii_case_insensitive(rest, &closing).unwrap_or(rest.len());
                position += skip;
                text_start = position;
            }
        }
    }
    if text_start < bytes.len() {
        tokens.push(Token::Text(&html[text_start..]));
    }
    tokens
}

fn find_ascii_case_insensitive(haystack: &str, needle: &str) -> Option<usize> {
    let needle = needle.as_bytes();
    haystack
        .as_bytes()
        .windows(needle.len())
        .position(|window| window.eq_ignore_ascii_case(needle))
}

/// Reads `<name attr=value ...>` at the start of `rest`; returns the token and its length.
fn read_start_tag(rest: &str) -> (Token<'static>, usize) {
    let bytes = rest.as_bytes();
    let name_end = 1 + bytes[1..].iter().take_while(|&&b| is_name_char(b)).count();
    let name = rest[1..name_end].to_ascii_lowercase();
    let mut attributes = Vec::new();
    let mut position = name_end;
    let mut self_closing = false;
    loop {
        while position < bytes.len() && bytes[position].is_ascii_whitespace() {
            position += 1;
        }
        match bytes.get(position) {
            None => break,
            Some(b'>') => {
                position += 1;
                break;
            }
            Some(b'/') => {
                position += 1;
                if bytes.get(position) == Some(&b'>') {
                    self_closing = true;
                    position += 1;
                    break;
                }
                continue;
            }
            Some(_) => {}
        }
        let attribute_start = position;
        while position < bytes.len()
            && !bytes[position].is_ascii_whitespace()
            && !matches!(bytes[position], b'=' | b'>' | b'/')
        {
            position += 1;
        }
        let key = rest[attribute_start..position].to_ascii_lowercase();
        let mut value = String::new();
        let mut probe = position;
        while probe < bytes.len() && bytes[probe].is_ascii_whitespace() {
            probe += 1;
        }
        if bytes.get(probe) == Some(&b'=') {
            position = probe + 1;
            while position < bytes.len() && bytes[position].is_ascii_whitespace() {
                position += 1;
            }
            match bytes.get(position) {
                Some(&quote @ (b'"' | b'\'')) => {
                    let value_start = position + 1;
                    let length = rest[value_start..]
                        .find(quote as char)
                        .unwrap_or(rest.len() - value_start);
                    value = decode_entities(&rest[value_start..value_start + length]).into_owned();
                    position = (value_start + length + 1).min(bytes.len());
                }
                _ => {
                    let value_start = position;
                    while position < bytes.len()
                        && !bytes[position].is_ascii_whitespace()
                        && bytes[position] != b'>'
                    {
                        position += 1;
                    }
                    value = decode_entities(&rest[value_start..position]).into_owned();
                }
            }
        }
        if !key.is_empty() {
            attributes.push((key, value));
        } else if position == attribute_start {
            // A stray character such as '=': step over it.
            position += 1;
        }
    }
    (
        Token::Start(StartTag {
            name,
            attributes,
            self_closing,
        }),
        position,
    )
}

/// Decodes character references: the common named ones and every numeric one.
pub(crate) fn decode_entities(text: &str) -> Cow<'_, str> {
    if !text.contains('&') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(ampersand) = rest.find('&') {
        out.push_str(&rest[..ampersand]);
        rest = &rest[ampersand..];
        // Character references are short: look at most 32 bytes ahead, on a char boundary.
        let mut end = rest.len().min(33);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let candidate = &rest[1..end];
        let decoded = candidate.find(';').and_then(|semicolon| {
            let name = &candidate[..semicolon];
            decode_entity(name).map(|c| (c, semicolon + 2))
        });
        match decoded {
            Some((c, length)) => {
                out.push(c);
                rest = &rest[length..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

fn decode_entity(name: &str) -> Option<char> {
    if let Some(number) = name.strip_prefix('#') {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse().ok()?,
        };
        return Some(char::from_u32(code).unwrap_or('\u{fffd}'));
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" | "ensp" | "emsp" | "thinsp" => ' ',
        "hellip" => '…',
        "times" => '×',
        "minus" => '−',
        "ndash" => '–',
        "mdash" => '—',
        "middot" => '·',
        "bull" => '•',
        "deg" => '°',
        "plusmn" => '±',
        "copy" => '©',
        "reg" => '®',
        "laquo" => '«',
        "raquo" => '»',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "larr" => '←',
        "rarr" => '→',
        "uarr" => '↑',
        "darr" => '↓',
        "check" => '✓',
        _ => return None,
    })
}

/// Collapses runs of whitespace to one space and trims.
pub(crate) fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An HTML table as rows of cell text, with `colspan`/`rowspan` expanded (a spanning cell's text
/// is repeated in every position it covers, so that rows stay aligned).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HtmlTable {
    /// Header rows: the rows of `<thead>`, or, without one, the leading rows made only of `<th>`
    /// cells. Type rows are not included.
    pub header_rows: Vec<Vec<String>>,
    /// Rows inside `<thead>` made only of `<td>` cells after a header row. Polars puts column
    /// dtypes there; they are never data rows.
    pub type_rows: Vec<Vec<String>>,
    /// Body rows in document order, including rows a display elided as `...`/`…`.
    pub body_rows: Vec<Vec<String>>,
    /// How many leading columns of the body are `<th>` cells: the index columns of a DataFrame.
    pub index_columns: usize,
    /// The `<caption>` text, if any.
    pub caption: Option<String>,
}

/// Most positions a `colspan` or `rowspan` may cover, so that hostile markup cannot make a row
/// or a table explode.
const MAX_SPAN: usize = 1_000;
/// Most cells kept in one row.
const MAX_ROW_CELLS: usize = 10_000;
/// Most cells kept in one table after span expansion. DataFrame displays are far smaller; only
/// hostile markup (thousands of rows under large spans) reaches it, and its later rows are
/// ignored rather than allowed to exhaust memory.
const MAX_TABLE_CELLS: usize = 200_000;

#[derive(Debug, Clone)]
struct RawCell {
    text: String,
    is_header: bool,
    column_span: usize,
    row_span: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Head,
    Body,
    Foot,
}

/// Parses the first `<table>` in `html` into rows of text; `None` when there is no table.
pub fn html_table_to_rows(html: &str) -> Option<HtmlTable> {
    let tokens = tokenize(html);
    let start = tokens.iter().position(|token| token.is_start("table"))?;
    let (table, _) = parse_table(&tokens[start..]);
    Some(table)
}

/// Parses a table starting at `tokens[0]` (a `<table>` start tag). Returns the table and the
/// number of tokens it covered.
fn parse_table(tokens: &[Token<'_>]) -> (HtmlTable, usize) {
    let mut rows: Vec<(Section, Vec<RawCell>)> = Vec::new();
    let mut section = Section::Body;
    let mut row: Option<Vec<RawCell>> = None;
    let mut cell: Option<RawCell> = None;
    let mut caption: Option<String> = None;
    let mut in_caption = false;
    let mut depth = 0usize;
    let mut consumed = tokens.len();

    fn finish_cell(cell: &mut Option<RawCell>, row: &mut Option<Vec<RawCell>>) {
        if let Some(mut finished) = cell.take() {
            finished.text = collapse_whitespace(&finished.text);
            row.get_or_insert_with(Vec::new).push(finished);
        }
    }
    fn finish_row(
        cell: &mut Option<RawCell>,
        row: &mut Option<Vec<RawCell>>,
        rows: &mut Vec<(Section, Vec<RawCell>)>,
        section: Section,
    ) {
        finish_cell(cell, row);
        if let Some(finished) = row.take() {
            rows.push((section, finished));
        }
    }

    for (index, token) in tokens.iter().enumerate() {
        // Nested tables are flattened into the text of the cell that holds them.
        match token {
            Token::Start(tag) if tag.name == "table" => {
                depth += 1;
                if depth > 1
                    && let Some(cell) = cell.as_mut()
                {
                    cell.text.push(' ');
                }
                continue;
            }
            Token::End { name } if name == "table" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    consumed = index + 1;
                    break;
                }
                continue;
            }
            _ => {}
        }
        if depth > 1 {
            if let (Some(cell), Token::Text(text)) = (cell.as_mut(), token) {
                cell.text.push_str(&decode_entities(text));
            } else if let (Some(cell), Token::Start(StartTag { name, .. }) | Token::End { name }) =
                (cell.as_mut(), token)
                && matches!(name.as_str(), "td" | "th" | "tr" | "br")
            {
                cell.text.push(' ');
            }
            continue;
        }
        match token {
            Token::Start(StartTag {
                name, attributes, ..
            }) => match name.as_str() {
                "thead" => {
                    finish_row(&mut cell, &mut row, &mut rows, section);
                    section = Section::Head;
                }
                "tbody" => {
                    finish_row(&mut cell, &mut row, &mut rows, section);
                    section = Section::Body;
                }
                "tfoot" => {
                    finish_row(&mut cell, &mut row, &mut rows, section);
                    section = Section::Foot;
                }
                "tr" => {
                    finish_row(&mut cell, &mut row, &mut rows, section);
                    row = Some(Vec::new());
                }
                "td" | "th" => {
                    finish_cell(&mut cell, &mut row);
                    let span = |key| {
                        attribute(attributes, key)
                            .and_then(|value| value.trim().parse::<usize>().ok())
                            .unwrap_or(1)
                            .clamp(1, MAX_SPAN)
                    };
                    cell = Some(RawCell {
                        text: String::new(),
                        is_header: name == "th",
                        column_span: span("colspan"),
                        row_span: span("rowspan"),
                    });
                }
                "caption" => in_caption = true,
                "br" => {
                    if let Some(cell) = cell.as_mut() {
                        cell.text.push(' ');
                    }
                }
                _ => {}
            },
            Token::End { name } => match name.as_str() {
                "td" | "th" => finish_cell(&mut cell, &mut row),
                "tr" => finish_row(&mut cell, &mut row, &mut rows, section),
                "thead" | "tbody" | "tfoot" => {
                    finish_row(&mut cell, &mut row, &mut rows, section);
                    section = Section::Body;
                }
                "caption" => in_caption = false,
                _ => {}
            },
            Token::Text(text) => {
                if in_caption {
                    caption
                        .get_or_insert_with(String::new)
                        .push_str(&decode_entities(text));
                } else if let Some(cell) = cell.as_mut() {
                    cell.text.push_str(&decode_entities(text));
                }
            }
            Token::Comment(_) => {}
        }
    }
    finish_row(&mut cell, &mut row, &mut rows, section);

    let expanded = expand_spans(&rows);
    let mut table = HtmlTable {
        caption: caption
            .map(|text| collapse_whitespace(&text))
            .filter(|text| !text.is_empty()),
        ..HtmlTable::default()
    };
    let has_thead = rows.iter().any(|(section, _)| *section == Section::Head);
    let mut body: Vec<Vec<(String, bool)>> = Vec::new();
    let mut foot: Vec<Vec<(String, bool)>> = Vec::new();
    // Without <thead>, the leading rows made only of <th> cells are the header; when every row
    // is like that, only the first one is.
    let leading_header_rows = if has_thead {
        0
    } else {
        let count = rows
            .iter()
            .take_while(|(_, cells)| !cells.is_empty() && cells.iter().all(|cell| cell.is_header))
            .count();
        if count == rows.len() && count > 1 {
            1
        } else {
            count
        }
    };
    for (index, ((section, raw), cells)) in rows.iter().zip(expanded).enumerate() {
        let all_data = raw.iter().all(|cell| !cell.is_header);
        let in_head = if has_thead {
            *section == Section::Head
        } else {
            index < leading_header_rows
        };
        let texts: Vec<String> = cells.iter().map(|(text, _)| text.clone()).collect();
        if in_head {
            if all_data && !table.header_rows.is_empty() {
                table.type_rows.push(texts);
            } else {
                table.header_rows.push(texts);
            }
        } else if *section == Section::Foot {
            foot.push(cells);
        } else {
            body.push(cells);
        }
    }
    body.extend(foot);
    table.index_columns = body
        .iter()
        .filter(|row| !is_elision_row(row.iter().map(|(text, _)| text.as_str())))
        .map(|row| row.iter().take_while(|(_, is_header)| *is_header).count())
        .min()
        .unwrap_or(0);
    table.body_rows = body
        .into_iter()
        .map(|row| row.into_iter().map(|(text, _)| text).collect())
        .collect();
    (table, consumed)
}

/// Expands `colspan` and `rowspan` into repeated cells. Returns `(text, is_header)` per cell.
fn expand_spans(rows: &[(Section, Vec<RawCell>)]) -> Vec<Vec<(String, bool)>> {
    // For each column, the cell still spanning down into later rows and how many rows remain.
    let mut pending: Vec<Option<(String, bool, usize)>> = Vec::new();
    let mut out = Vec::with_capacity(rows.len());
    let mut total_cells = 0usize;
    for (_, cells) in rows {
        let mut row: Vec<(String, bool)> = Vec::new();
        let mut column = 0usize;
        for cell in cells {
            take_pending(&mut pending, &mut row, &mut column);
            for _ in 0..cell.column_span {
                if row.len() >= MAX_ROW_CELLS {
                    break;
                }
                row.push((cell.text.clone(), cell.is_header));
                if cell.row_span > 1 {
                    if pending.len() <= column {
                        pending.resize(column + 1, None);
                    }
                    pending[column] = Some((cell.text.clone(), cell.is_header, cell.row_span - 1));
                }
                column += 1;
            }
        }
        take_pending(&mut pending, &mut row, &mut column);
        total_cells += row.len();
        if total_cells > MAX_TABLE_CELLS {
            break;
        }
        out.push(row);
    }
    out
}

/// Places the cells of earlier rows that span down into this row, from `column` on.
fn take_pending(
    pending: &mut [Option<(String, bool, usize)>],
    row: &mut Vec<(String, bool)>,
    column: &mut usize,
) {
    while let Some(Some((text, is_header, remaining))) = pending.get_mut(*column) {
        row.push((text.clone(), *is_header));
        *remaining -= 1;
        if *remaining == 0 {
            pending[*column] = None;
        }
        *column += 1;
    }
}

/// Whether every cell of a row is an elision mark (`...` or `…`), as pandas and polars print
/// in place of the rows they do not show.
pub(crate) fn is_elision_row<'a>(mut cells: impl Iterator<Item = &'a str>) -> bool {
    let mut any = false;
    let all = cells.all(|text| {
        any = true;
        is_elision(text)
    });
    any && all
}

pub(crate) fn is_elision(text: &str) -> bool {
    matches!(text.trim(), "..." | "…" | "⋮" | "⋯")
}

/// What [`analyze_html`] finds.
#[derive(Debug, Clone)]
pub(crate) struct HtmlAnalysis {
    /// Every top-level table, in order.
    pub tables: Vec<HtmlTable>,
    /// The readable text outside those tables (for footers such as `5 rows × 3 columns`).
    pub text_outside_tables: String,
}

pub(crate) fn analyze_html(html: &str) -> HtmlAnalysis {
    let tokens = tokenize(html);
    let mut tables = Vec::new();
    let mut outside: Vec<Token<'_>> = Vec::new();
    let mut index = 0;
    while index < tokens.len() {
        if tokens[index].is_start("table") {
            let (table, consumed) = parse_table(&tokens[index..]);
            tables.push(table);
            // Keep a line break where the table was, so footers stay separate.
            outside.push(Token::Start(StartTag {
                name: "br".into(),
                attributes: Vec::new(),
                self_closing: true,
            }));
            index += consumed.max(1);
        } else {
            outside.push(tokens[index].clone());
            index += 1;
        }
    }
    HtmlAnalysis {
        tables,
        text_outside_tables: tokens_to_text(&outside),
    }
}

/// Converts HTML to readable text: tags dropped, scripts and styles skipped, block elements on
/// their own lines, list items bulleted, headings marked with `#`, link targets kept in
/// parentheses, whitespace collapsed outside `<pre>`, and tables rendered as CSV lines.
pub fn html_to_text(html: &str) -> String {
    tokens_to_text(&tokenize(html))
}

fn is_block(name: &str) -> bool {
    matches!(
        name,
        "p" | "div"
            | "br"
            | "hr"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "ul"
            | "ol"
            | "li"
            | "pre"
            | "blockquote"
            | "section"
            | "article"
            | "header"
            | "footer"
            | "nav"
            | "aside"
            | "main"
            | "figure"
            | "figcaption"
            | "dl"
            | "dt"
            | "dd"
            | "details"
            | "summary"
            | "form"
            | "fieldset"
            | "address"
            | "center"
            | "body"
            | "html"
            | "caption"
    )
}

/// A block element starts or ends on a line of its own; paragraphs, headings, preformatted text
/// and quotes also keep a blank line from their neighbours.
fn separate_block(writer: &mut TextWriter, name: &str) {
    if !is_block(name) {
        return;
    }
    if matches!(
        name,
        "p" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "pre" | "blockquote"
    ) {
        writer.blank_line();
    } else {
        writer.line_break();
    }
}

struct TextWriter {
    out: String,
    /// Set when a space is owed before the next word.
    pending_space: bool,
}

impl TextWriter {
    fn line_break(&mut self) {
        self.pending_space = false;
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
        }
    }

    fn blank_line(&mut self) {
        self.line_break();
        if !self.out.is_empty() && !self.out.ends_with("\n\n") {
            self.out.push('\n');
        }
    }

    fn words(&mut self, text: &str) {
        if text.starts_with(char::is_whitespace) {
            self.pending_space = true;
        }
        for (index, word) in text.split_whitespace().enumerate() {
            if (index > 0 || self.pending_space)
                && !self.out.is_empty()
                && !self.out.ends_with(['\n', ' '])
            {
                self.out.push(' ');
            }
            self.out.push_str(word);
            self.pending_space = false;
        }
        if text.ends_with(char::is_whitespace) {
            self.pending_space = true;
        }
    }

    fn raw(&mut self, text: &str) {
        if self.pending_space && !self.out.is_empty() && !self.out.ends_with(['\n', ' ']) {
            self.out.push(' ');
        }
        self.pending_space = false;
        self.out.push_str(text);
    }
}

fn tokens_to_text(tokens: &[Token<'_>]) -> String {
    let mut writer = TextWriter {
        out: String::new(),
        pending_space: false,
    };
    let mut preformatted = 0usize;
    let mut hidden = 0usize;
    let mut links: Vec<(Option<String>, usize)> = Vec::new();
    let mut index = 0;
    while index < tokens.len() {
        let token = &tokens[index];
        index += 1;
        match token {
            Token::Start(tag) => {
                if tag.opens(&["head", "script", "style", "template", "noscript", "svg"]) {
                    hidden += 1;
                    continue;
                }
                let name = tag.name.as_str();
                if hidden > 0 {
                    continue;
                }
                if name == "table" {
                    let (table, consumed) = parse_table(&tokens[index - 1..]);
                    index += consumed.saturating_sub(1);
                    writer.line_break();
                    for line in crate::table::plain_rows_as_csv(&table) {
                        writer.raw(&line);
                        writer.out.push('\n');
                    }
                    continue;
                }
                separate_block(&mut writer, name);
                match name {
                    "li" => writer.raw("- "),
                    "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                        let level = usize::from(name.as_bytes()[1] - b'0');
                        writer.raw(&format!("{} ", "#".repeat(level)));
                    }
                    "hr" => {
                        writer.raw("---");
                        writer.line_break();
                    }
                    "pre" => preformatted += 1,
                    "img" => {
                        let alt = attribute(&tag.attributes, "alt")
                            .map(collapse_whitespace)
                            .unwrap_or_default();
                        if alt.is_empty() {
                            writer.raw("[image]");
                        } else {
                            writer.raw(&format!("[image: {alt}]"));
                        }
                    }
                    "a" if !tag.self_closing => {
                        let href = attribute(&tag.attributes, "href")
                            .map(str::trim)
                            .filter(|href| {
                                !href.is_empty()
                                    && !href.starts_with('#')
                                    && !href.starts_with("javascript:")
                            })
                            .map(str::to_owned);
                        links.push((href, writer.out.len()));
                    }
                    "td" | "th" => writer.pending_space = true,
                    _ => {}
                }
            }
            Token::End { name } => {
                let name = name.as_str();
                if matches!(
                    name,
                    "head" | "script" | "style" | "template" | "noscript" | "svg"
                ) {
                    hidden = hidden.saturating_sub(1);
                    continue;
                }
                if hidden > 0 {
                    continue;
                }
                if name == "a" {
                    if let Some((Some(href), start)) = links.pop() {
                        let label = writer.out.get(start..).unwrap_or("").trim().to_owned();
                        if label != href {
                            writer.raw(&format!(" ({href})"));
                        }
                    }
                    continue;
                }
                if name == "pre" {
                    preformatted = preformatted.saturating_sub(1);
                }
                separate_block(&mut writer, name);
            }
            Token::Text(text) => {
                if hidden > 0 {
                    continue;
                }
                let decoded = decode_entities(text);
                if preformatted > 0 {
                    writer.raw(&decoded);
                } else {
                    writer.words(&decoded);
                }
            }
            Token::Comment(_) => {}
        }
    }
    let mut out = String::with_capacity(writer.out.len());
    let mut blank_run = 0;
    for line in writer.out.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank_run += 1;
            if blank_run > 1 || out.is_empty() {
                continue;
            }
        } else {
            blank_run = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_survives_broken_markup() {
        for html in [
            "<",
            "<a",
            "<a href=\"x",
            "</",
            "<!--",
            "<![CDATA[x",
            "<script>x",
            "a < b > c",
            "<t a=>",
        ] {
            let _ = tokenize(html);
            let _ = html_to_text(html);
            let _ = html_table_to_rows(html);
        }
    }

    #[test]
    fn entities_decode() {
        assert_eq!(
            decode_entities("a &amp; b &lt;c&gt; &#955; &#x3bb; &hellip; &bogus; &"),
            "a & b <c> λ λ … &bogus; &"
        );
        // Multi-byte characters right after an ampersand must not be cut.
        assert_eq!(
            decode_entities(&format!("&{}", "é".repeat(40))),
            format!("&{}", "é".repeat(40))
        );
    }

    #[test]
    fn html_to_text_reads_like_a_page() {
        let html = "<style>h1{}</style><h2>Report</h2><p>Accuracy <b>92%</b> &amp; more.</p>\
                    <ul><li>one</li><li>two</li></ul><p>See <a href=\"https://e.org\">docs</a>.</p>\
                    <script>alert(1)</script><pre>  a\n  b</pre>";
        assert_eq!(
            html_to_text(html),
            "## Report\n\nAccuracy 92% & more.\n\n- one\n- two\n\nSee docs (https://e.org).\n\n  a\n  b"
        );
    }

    #[test]
    fn table_with_spans_expands_and_finds_the_index() {
        let html = "<table><thead><tr><th></th><th colspan=\"2\">A</th></tr><tr><th>k</th><th>x</th><th>y</th></tr></thead>\
                    <tbody><tr><th rowspan=\"2\">a</th><td>1</td><td>2</td></tr><tr><td>3</td><td>4</td></tr></tbody></table>";
        let table = html_table_to_rows(html).unwrap();
        assert_eq!(
            table.header_rows,
            vec![vec!["", "A", "A"], vec!["k", "x", "y"]]
        );
        assert_eq!(
            table.body_rows,
            vec![vec!["a", "1", "2"], vec!["a", "3", "4"]]
        );
        assert_eq!(table.index_columns, 1);
    }

    #[test]
    fn table_without_thead_uses_leading_th_rows_and_polars_type_rows_are_separate() {
        let plain =
            html_table_to_rows("<table><tr><th>a</th></tr><tr><td>1</td></tr></table>").unwrap();
        assert_eq!(plain.header_rows, vec![vec!["a"]]);
        assert_eq!(plain.body_rows, vec![vec!["1"]]);
        let polars = html_table_to_rows(
            "<table><thead><tr><th>id</th></tr><tr><td>i64</td></tr></thead><tbody><tr><td>1</td></tr></tbody></table>",
        )
        .unwrap();
        assert_eq!(polars.type_rows, vec![vec!["i64"]]);
        assert_eq!(polars.body_rows, vec![vec!["1"]]);
    }

    #[test]
    fn hostile_tables_are_bounded() {
        let wide_row = "<td colspan=1000>x</td>".repeat(10);
        let html = format!(
            "<table>{}</table>",
            format!("<tr>{wide_row}</tr>").repeat(1_000)
        );
        let table = html_table_to_rows(&html).unwrap();
        let cells: usize = table.body_rows.iter().map(Vec::len).sum();
        assert!(cells <= MAX_TABLE_CELLS, "{cells}");
    }

    #[test]
    fn hostile_spans_are_bounded() {
        let html = "<table><tr><td colspan=99999999 rowspan=99999999>x</td></tr><tr><td>y</td></tr></table>";
        let table = html_table_to_rows(html).unwrap();
        assert!(table.body_rows.iter().all(|row| row.len() <= MAX_ROW_CELLS));
    }
}
