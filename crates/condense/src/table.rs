//! Rendering parsed tables for an agent: uniform tables as CSV, ragged ones as JSON arrays, with
//! a line that states the real size of the frame and how much of it is shown.

use crate::html::{HtmlTable, is_elision, is_elision_row};
use crate::terminal::{group_thousands, plural};
use crate::truncate::marker;

/// The size a DataFrame display states in its footer (`5 rows × 3 columns`, `shape: (5, 3)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameShape {
    pub rows: usize,
    pub columns: usize,
}

fn parse_count(text: &str) -> Option<usize> {
    let digits: String = text.chars().filter(|c| !matches!(c, ',' | '_')).collect();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Finds `N rows × M columns` (pandas) or `shape: (N, M)` (polars) in the text around a table.
pub(crate) fn parse_frame_shape(text: &str) -> Option<FrameShape> {
    let words: Vec<&str> = text.split_whitespace().collect();
    for window in words.windows(5) {
        if matches!(window[1], "rows" | "row")
            && matches!(window[2], "×" | "x")
            && window[4].trim_end_matches(['.', ']']).starts_with("column")
        {
            let rows = parse_count(window[0].trim_start_matches('['));
            let columns = parse_count(window[3]);
            if let (Some(rows), Some(columns)) = (rows, columns) {
                return Some(FrameShape { rows, columns });
            }
        }
    }
    let after = &text[text.find("shape: (")? + "shape: (".len()..];
    let inside = &after[..after.find(')')?];
    let (rows, columns) = inside.split_once(',')?;
    Some(FrameShape {
        rows: parse_count(rows.trim())?,
        columns: parse_count(columns.trim())?,
    })
}

/// Limits applied while rendering a table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TableLimits {
    pub max_rows: usize,
    pub max_columns: usize,
}

/// A rendered table.
#[derive(Debug, Clone)]
pub(crate) struct RenderedTable {
    /// The description line followed by CSV lines or JSON arrays.
    pub text: String,
    /// Characters of rendered rows and columns left out because of the limits.
    pub dropped_chars: usize,
}

pub(crate) fn csv_field(text: &str) -> String {
    let needs_quotes = text.contains([',', '"', '\n', '\r'])
        || text.starts_with(char::is_whitespace)
        || text.ends_with(char::is_whitespace);
    if needs_quotes {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

fn csv_line(cells: &[String]) -> String {
    cells
        .iter()
        .map(|cell| csv_field(cell))
        .collect::<Vec<_>>()
        .join(",")
}

fn json_line(cells: &[String]) -> String {
    serde_json::to_string(cells).unwrap_or_default()
}

fn is_uniform(table: &HtmlTable) -> bool {
    let mut lengths = table
        .header_rows
        .iter()
        .chain(&table.type_rows)
        .chain(&table.body_rows)
        .map(Vec::len);
    match lengths.next() {
        Some(first) => first > 0 && lengths.all(|length| length == first),
        None => false,
    }
}

/// Every row of a table, without description or limits: CSV when uniform, JSON arrays otherwise.
/// Used for tables embedded in general HTML.
pub(crate) fn plain_rows_as_csv(table: &HtmlTable) -> Vec<String> {
    let rows = table
        .header_rows
        .iter()
        .chain(&table.type_rows)
        .chain(&table.body_rows);
    if is_uniform(table) {
        rows.map(|row| csv_line(row)).collect()
    } else {
        rows.map(|row| json_line(row)).collect()
    }
}

/// Column names from (possibly several) header rows. Pandas puts the index names on a last
/// header row that is empty over the data columns, and the names of column levels in the last
/// index position of the other header rows; both are recognised.
struct ColumnNames {
    names: Vec<String>,
    /// Names of the column index levels (`metric`, `quarter`), when the frame has them.
    column_levels: Vec<String>,
}

fn column_names(table: &HtmlTable, width: usize) -> ColumnNames {
    let index_columns = table.index_columns.min(width);
    let mut header_rows: Vec<&Vec<String>> = table.header_rows.iter().collect();
    let mut index_names: Option<&Vec<String>> = None;
    if index_columns > 0 && header_rows.len() > 1 {
        let last = header_rows[header_rows.len() - 1];
        let data_part_empty = last[index_columns..].iter().all(|cell| cell.is_empty());
        let index_part_named = last[..index_columns].iter().any(|cell| !cell.is_empty());
        if data_part_empty && index_part_named {
            index_names = Some(last);
            header_rows.pop();
        }
    }
    let mut column_levels = Vec::new();
    if index_columns > 0 && header_rows.len() > 1 {
        column_levels = header_rows
            .iter()
            .map(|row| row[index_columns - 1].clone())
            .filter(|name| !name.is_empty())
            .collect();
    }
    let names = (0..width)
        .map(|column| {
            if column < index_columns {
                if let Some(index_names) = index_names {
                    return index_names[column].clone();
                }
                if !column_levels.is_empty() {
                    return String::new();
                }
            }
            let mut parts: Vec<&str> = Vec::new();
            for row in &header_rows {
                let part = row[column].as_str();
                if !part.is_empty() && parts.last() != Some(&part) {
                    parts.push(part);
                }
            }
            parts.join("/")
        })
        .collect();
    ColumnNames {
        names,
        column_levels,
    }
}

/// Renders a table with its description line, applying the limits. `context` is the text around
/// the table, where a DataFrame display states its real size.
pub(crate) fn render_table(table: &HtmlTable, context: &str, limits: TableLimits) -> RenderedTable {
    let shape = parse_frame_shape(context);
    if !is_uniform(table) {
        return render_ragged(table, limits);
    }
    let width = table
        .header_rows
        .first()
        .or(table.body_rows.first())
        .map_or(0, Vec::len);
    let index_columns = table.index_columns.min(width);
    let ColumnNames {
        names,
        column_levels,
    } = column_names(table, width);

    // Columns the display elided: every body cell is an elision mark (pandas' `...` column).
    let data_rows: Vec<&Vec<String>> = table
        .body_rows
        .iter()
        .filter(|row| !is_elision_row(row.iter().map(String::as_str)))
        .collect();
    let elided_column: Vec<bool> = (0..width)
        .map(|column| {
            column >= index_columns
                && (names[column].is_empty() || is_elision(&names[column]))
                && !table.body_rows.is_empty()
                && table.body_rows.iter().all(|row| is_elision(&row[column]))
        })
        .collect();
    let shown_data_columns = (index_columns..width)
        .filter(|&column| !elided_column[column])
        .count();

    // Polars quotes strings in its display; the dtype row already says they are strings.
    let string_columns: Vec<bool> = (0..width)
        .map(|column| table.type_rows.len() == 1 && table.type_rows[0][column] == "str")
        .collect();
    let cell_text = |row: &Vec<String>, column: usize| -> String {
        let text = &row[column];
        if string_columns[column] && text.len() >= 2 && text.starts_with('"') && text.ends_with('"')
        {
            text[1..text.len() - 1].to_owned()
        } else {
            text.clone()
        }
    };

    // Our own column limit: keep the index, the first and the last columns.
    let mut columns: Vec<Option<usize>> = (0..width).map(Some).collect();
    let mut dropped_columns = 0;
    let data_column_count = width - index_columns;
    if data_column_count > limits.max_columns {
        let keep_front = limits.max_columns.div_ceil(2);
        let keep_back = limits.max_columns / 2;
        dropped_columns = data_column_count - keep_front - keep_back;
        columns = (0..index_columns + keep_front)
            .map(Some)
            .chain(std::iter::once(None))
            .chain((width - keep_back..width).map(Some))
            .collect();
    }
    let project = |cells: &dyn Fn(usize) -> String| -> String {
        let fields: Vec<String> = columns
            .iter()
            .map(|column| match column {
                Some(column) => cells(*column),
                None => "…".to_owned(),
            })
            .collect();
        csv_line(&fields)
    };

    let mut lines: Vec<String> = Vec::new();
    lines.push(project(&|column| names[column].clone()));
    let mut dropped_chars = 0usize;
    if dropped_columns > 0 {
        // Characters of the columns we left out, measured on every rendered row.
        for row in table.header_rows.iter().chain(&table.body_rows) {
            let full = csv_line(row).chars().count();
            let projected = project(&|column| row[column].clone()).chars().count();
            dropped_chars += full.saturating_sub(projected);
        }
    }

    // Rows, with the display's elision rows and our own row limit both marked.
    let total_rows = shape.map(|shape| shape.rows);
    let present = data_rows.len();
    let display_elided = total_rows.map(|total| total.saturating_sub(present));
    let (keep_front, keep_back) = if present > limits.max_rows {
        (limits.max_rows.div_ceil(2), limits.max_rows / 2)
    } else {
        (present, 0)
    };
    let mut data_index = 0usize;
    let mut dropped_rows = 0usize;
    let mut limit_marker_written = false;
    for row in &table.body_rows {
        if is_elision_row(row.iter().map(String::as_str)) {
            lines.push(match display_elided {
                Some(count) if count > 0 => marker(&format!(
                    "{} not shown by the display",
                    plural(count, "row", "rows")
                )),
                _ => marker("rows elided by the display"),
            });
            continue;
        }
        let keep = data_index < keep_front || data_index >= present - keep_back;
        data_index += 1;
        let line = project(&|column| cell_text(row, column));
        if keep {
            lines.push(line);
        } else {
            dropped_rows += 1;
            dropped_chars += line.chars().count() + 1;
            if !limit_marker_written {
                limit_marker_written = true;
                lines.push(String::new());
            }
        }
    }
    if dropped_rows > 0 {
        let dropped = marker(&format!("{} dropped", plural(dropped_rows, "row", "rows")));
        if let Some(slot) = lines.iter_mut().find(|line| line.is_empty()) {
            *slot = dropped;
        }
    }

    // The description line.
    let shown_rows = present - dropped_rows;
    let mut description = match (total_rows, shape) {
        (Some(total), Some(shape)) => format!(
            "{} × {}",
            plural(total, "row", "rows"),
            plural(shape.columns, "column", "columns")
        ),
        _ if table.body_rows.len() > present => format!(
            "at least {} × {}",
            plural(present, "row", "rows"),
            plural(shown_data_columns, "column", "columns")
        ),
        _ => format!(
            "{} × {}",
            plural(present, "row", "rows"),
            plural(shown_data_columns, "column", "columns")
        ),
    };
    if index_columns > 0 {
        description.push_str(&format!(
            " + {}",
            plural(index_columns, "index column", "index columns")
        ));
    }
    let real_columns = shape.map_or(shown_data_columns, |shape| shape.columns);
    let listed_columns = shown_data_columns.saturating_sub(dropped_columns);
    let mut showing: Vec<String> = Vec::new();
    let rows_incomplete = match total_rows {
        Some(total) => shown_rows < total,
        None => table.body_rows.len() > present || dropped_rows > 0,
    };
    if rows_incomplete {
        showing.push(plural(shown_rows, "row", "rows"));
    }
    if listed_columns < real_columns {
        showing.push(format!(
            "{} of {} columns",
            group_thousands(listed_columns),
            group_thousands(real_columns)
        ));
    }
    if !showing.is_empty() {
        description.push_str(&format!("; showing {}", showing.join(" and ")));
    }
    if let Some(count) = display_elided.filter(|&count| count > 0) {
        description.push_str(&format!(
            " (the display elided {})",
            plural(count, "row", "rows")
        ));
    }
    if dropped_rows > 0 || dropped_columns > 0 {
        let mut parts = Vec::new();
        if dropped_rows > 0 {
            parts.push(plural(dropped_rows, "row", "rows"));
        }
        if dropped_columns > 0 {
            parts.push(plural(dropped_columns, "column", "columns"));
        }
        description.push_str(&format!(" (cut here: {})", parts.join(" and ")));
    }
    if !column_levels.is_empty() {
        description.push_str(&format!("; column levels: {}", column_levels.join(" / ")));
    }
    if let Some(types) = table.type_rows.first() {
        let pairs: Vec<String> = (0..width)
            .map(|column| format!("{} {}", names[column], types[column]))
            .collect();
        description.push_str(&format!("; dtypes: {}", pairs.join(", ")));
    }
    if let Some(caption) = &table.caption {
        description.push_str(&format!("; caption: {caption}"));
    }
    description.push_str("; CSV:");

    let mut text = description;
    for line in lines {
        text.push('\n');
        text.push_str(&line);
    }
    RenderedTable {
        text,
        dropped_chars,
    }
}

fn render_ragged(table: &HtmlTable, limits: TableLimits) -> RenderedTable {
    let lengths: Vec<usize> = table
        .header_rows
        .iter()
        .chain(&table.type_rows)
        .chain(&table.body_rows)
        .map(Vec::len)
        .collect();
    let shortest = lengths.iter().copied().min().unwrap_or(0);
    let longest = lengths.iter().copied().max().unwrap_or(0);
    let mut description = format!(
        "ragged table: {} of {} to {} cells",
        plural(table.body_rows.len(), "row", "rows"),
        group_thousands(shortest),
        group_thousands(longest)
    );
    if !table.header_rows.is_empty() {
        description.push_str(&format!(
            " after {}",
            plural(
                table.header_rows.len() + table.type_rows.len(),
                "header row",
                "header rows"
            )
        ));
    }
    let present = table.body_rows.len();
    let (keep_front, keep_back) = if present > limits.max_rows {
        (limits.max_rows.div_ceil(2), limits.max_rows / 2)
    } else {
        (present, 0)
    };
    let dropped_rows = present - keep_front - keep_back;
    if dropped_rows > 0 {
        description.push_str(&format!(
            "; showing {} (cut here: {})",
            plural(keep_front + keep_back, "row", "rows"),
            plural(dropped_rows, "row", "rows")
        ));
    }
    if let Some(caption) = &table.caption {
        description.push_str(&format!("; caption: {caption}"));
    }
    description.push_str("; JSON arrays, one row per line:");
    let mut text = description;
    for row in table.header_rows.iter().chain(&table.type_rows) {
        text.push('\n');
        text.push_str(&json_line(row));
    }
    let mut dropped_chars = 0;
    for (index, row) in table.body_rows.iter().enumerate() {
        let line = json_line(row);
        if index < keep_front || index >= present - keep_back {
            text.push('\n');
            text.push_str(&line);
        } else {
            dropped_chars += line.chars().count() + 1;
            if index == keep_front {
                text.push('\n');
                text.push_str(&marker(&format!(
                    "{} dropped",
                    plural(dropped_rows, "row", "rows")
                )));
            }
        }
    }
    RenderedTable {
        text,
        dropped_chars,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::html::html_table_to_rows;

    const LIMITS: TableLimits = TableLimits {
        max_rows: 50,
        max_columns: 40,
    };

    /// Renders the first table of `html` with no caption.
    fn render_html(html: &str, limits: TableLimits) -> RenderedTable {
        render_table(&html_table_to_rows(html).unwrap(), "", limits)
    }

    #[test]
    fn shapes_are_found_in_footers() {
        for (footer, rows, columns) in [
            ("29658 rows × 3 columns", 29_658, 3),
            ("[1000 rows x 30 columns]", 1_000, 30),
            ("shape: (1_000, 3)", 1_000, 3),
        ] {
            assert_eq!(
                parse_frame_shape(footer),
                Some(FrameShape { rows, columns }),
                "{footer}"
            );
        }
        assert_eq!(parse_frame_shape("no shape here"), None);
    }

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        for (field, written) in [
            ("plain", "plain"),
            ("a,b", "\"a,b\""),
            ("say \"hi\"", "\"say \"\"hi\"\"\""),
            (" padded", "\" padded\""),
        ] {
            assert_eq!(csv_field(field), written, "{field:?}");
        }
    }

    #[test]
    fn small_table_renders_as_csv_with_its_size() {
        let rendered = render_html(
            "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>x,y</td></tr></table>",
            LIMITS,
        );
        assert_eq!(rendered.text, "1 row × 2 columns; CSV:\na,b\n1,\"x,y\"");
        assert_eq!(rendered.dropped_chars, 0);
    }

    #[test]
    fn row_limit_keeps_head_and_tail_and_says_so() {
        let rows: String = (0..10).map(|i| format!("<tr><td>{i}</td></tr>")).collect();
        let rendered = render_html(
            &format!("<table><tr><th>n</th></tr>{rows}</table>"),
            TableLimits {
                max_rows: 4,
                max_columns: 40,
            },
        );
        assert_eq!(
            rendered.text,
            "10 rows × 1 column; showing 4 rows (cut here: 6 rows); CSV:\nn\n0\n1\n… [6 rows dropped] …\n8\n9"
        );
        assert_eq!(rendered.dropped_chars, 12);
    }

    #[test]
    fn ragged_table_renders_as_json_arrays() {
        let rendered = render_html(
            "<table><tr><th>k</th></tr><tr><td>a</td><td>1</td></tr><tr><td>b</td></tr></table>",
            LIMITS,
        );
        assert_eq!(
            rendered.text,
            "ragged table: 2 rows of 1 to 2 cells after 1 header row; JSON arrays, one row per line:\n[\"k\"]\n[\"a\",\"1\"]\n[\"b\"]"
        );
    }
}
