//! Cell identity: ids, names and revs.
//!
//! - The **id** is the nbformat 4.5 cell id. Cells that have none (older minor versions, or a
//!   missing or duplicate id) get one in memory, derived from their content so that reading the
//!   same file twice gives the same ids. The file changes only when it is written.
//! - The **name** is a unique kebab-case handle stored in `metadata.jupyter_mcp.name`; cells
//!   without one get a derived name from their first comment or heading. Among derived names that
//!   collide, the earliest cell in document order keeps the plain name.
//! - The **rev** is a short hash of the cell's kind and source: it changes exactly when the content
//!   changes, and edits must quote it (`expectedRev`).

use std::collections::HashSet;

use sha2::{Digest, Sha256};

use crate::notebook::{Cell, CellKind, IdOrigin, Notebook};

/// The cell metadata key under which this project stores its per-cell data.
pub const METADATA_KEY: &str = "jupyter_mcp";

/// Longest name we derive or accept.
pub const MAX_NAME_LEN: usize = 48;

fn hex_prefix(bytes: &[u8], hex_chars: usize) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(hex_chars);
    for byte in bytes.iter().take(hex_chars.div_ceil(2)) {
        text.push(HEX[usize::from(byte >> 4)] as char);
        text.push(HEX[usize::from(byte & 0xf)] as char);
    }
    text.truncate(hex_chars);
    text
}

/// Appends `value` in lowercase base 36, left-padded with zeros to at least `min_width` digits:
/// the digits of the opaque ids the crates above build from a time and a random number
/// (`execution-tracker`'s execution ids, `colab-setup`'s setup ids).
pub fn push_base36(out: &mut String, mut value: u64, min_width: usize) {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut reversed = Vec::with_capacity(13);
    while value > 0 {
        reversed.push(DIGITS[(value % 36) as usize]);
        value /= 36;
    }
    while reversed.len() < min_width {
        reversed.push(b'0');
    }
    out.extend(reversed.iter().rev().map(|&digit| char::from(digit)));
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex_prefix(&Sha256::digest(bytes), 64)
}

/// The rev of a cell with this kind and source: 8 hex characters of SHA-256.
pub fn rev(kind: CellKind, source: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(kind.as_str().as_bytes());
    hasher.update([0u8]);
    hasher.update(source.as_bytes());
    hex_prefix(&hasher.finalize(), 8)
}

/// A candidate id for a cell with this content; `attempt` disambiguates collisions.
pub fn derived_id(kind: CellKind, source: &str, attempt: u32) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"jupyter-mcp-cell-id\0");
    hasher.update(kind.as_str().as_bytes());
    hasher.update([0u8]);
    hasher.update(source.as_bytes());
    hasher.update([0u8]);
    hasher.update(attempt.to_le_bytes());
    hex_prefix(&hasher.finalize(), 8)
}

/// Gives every cell without a usable id one, as nbformat does on reading: the first of duplicate
/// ids keeps it, later duplicates get new ids. Assigned ids are derived from content.
pub(crate) fn assign_missing_ids(cells: &mut [Cell]) {
    let mut taken: HashSet<String> = HashSet::with_capacity(cells.len());
    let mut needs_id = Vec::new();
    for (index, cell) in cells.iter().enumerate() {
        if cell.id_origin() == IdOrigin::File && taken.insert(cell.id().to_owned()) {
            continue;
        }
        needs_id.push(index);
    }
    for index in needs_id {
        let cell = &mut cells[index];
        let id = fresh_id(cell.kind(), cell.source(), &taken);
        taken.insert(id.clone());
        cell.set_id(id, IdOrigin::Assigned);
    }
}

/// An id for new content that collides with nothing in `taken`.
pub fn fresh_id(kind: CellKind, source: &str, taken: &HashSet<String>) -> String {
    (0u32..)
        .map(|attempt| derived_id(kind, source, attempt))
        .find(|candidate| !taken.contains(candidate))
        .expect("an unbounded sequence of candidates contains a free id")
}

/// Turns text into a kebab-case name: ASCII letters and digits, words joined by `-`, at most
/// [`MAX_NAME_LEN`] characters and six words. Returns an empty string when nothing is left.
pub fn slugify(text: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    for character in text.chars() {
        if character.is_ascii_alphanumeric() {
            current.push(character.to_ascii_lowercase());
        } else if !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    let mut slug = String::new();
    for word in words.into_iter().take(6) {
        let needed = word.len() + usize::from(!slug.is_empty());
        if slug.len() + needed > MAX_NAME_LEN {
            if slug.is_empty() {
                slug.push_str(&word[..MAX_NAME_LEN]);
            }
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&word);
    }
    slug
}

/// True when `name` is a valid kebab-case cell name.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
        && name
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
}

/// The base name a cell would get from its content: its first comment (code) or heading
/// (markdown), else its first meaningful line, else its kind.
pub fn base_name(cell: &Cell) -> String {
    let source = cell.source();
    let from_marker = match cell.kind() {
        CellKind::Code => source.lines().map(str::trim).find_map(|line| {
            let comment = line.strip_prefix('#')?;
            if comment.starts_with('!') || comment.trim_start().starts_with("%%") {
                return None;
            }
            Some(slugify(comment))
        }),
        CellKind::Markdown => source.lines().map(str::trim).find_map(|line| {
            let heading = line.trim_start_matches('#');
            (heading.len() < line.len()).then(|| slugify(heading))
        }),
        CellKind::Raw => None,
    };
    if let Some(slug) = from_marker.filter(|slug| !slug.is_empty()) {
        return slug;
    }
    let first_line = source
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('%') && !line.starts_with('#'))
        .map(slugify)
        .unwrap_or_default();
    if first_line.is_empty() {
        format!("{}-cell", cell.kind().as_str())
    } else {
        first_line
    }
}

fn with_suffix(base: &str, number: usize) -> String {
    let suffix = format!("-{number}");
    let mut stem = base.to_owned();
    while stem.len() + suffix.len() > MAX_NAME_LEN {
        stem.pop();
    }
    let stem = stem.trim_end_matches('-');
    format!("{stem}{suffix}")
}

/// The first name based on `base` (the base itself, then `base-2`, `base-3`, …) not in `taken`.
pub fn unique_name(base: &str, taken: &HashSet<String>) -> String {
    if !taken.contains(base) {
        return base.to_owned();
    }
    (2..)
        .map(|number| with_suffix(base, number))
        .find(|candidate| !taken.contains(candidate))
        .expect("an unbounded sequence of candidates contains a free name")
}

/// The effective name of every cell, in document order. Stored names come first (a later cell
/// that repeats a stored name gets a suffix); derived names fill the rest.
pub fn effective_names(notebook: &Notebook) -> Vec<String> {
    let cells = notebook.cells();
    let mut names: Vec<Option<String>> = vec![None; cells.len()];
    let mut taken: HashSet<String> = HashSet::with_capacity(cells.len());
    for (index, cell) in cells.iter().enumerate() {
        if let Some(stored) = cell.stored_name() {
            let stored = if is_valid_name(stored) {
                stored.to_owned()
            } else {
                slugify(stored)
            };
            if !stored.is_empty() {
                let name = unique_name(&stored, &taken);
                taken.insert(name.clone());
                names[index] = Some(name);
            }
        }
    }
    for (index, cell) in cells.iter().enumerate() {
        if names[index].is_none() {
            let name = unique_name(&base_name(cell), &taken);
            taken.insert(name.clone());
            names[index] = Some(name);
        }
    }
    names.into_iter().map(Option::unwrap_or_default).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(source: &str, id: &str) -> Cell {
        Cell::new(CellKind::Code, source, id)
    }

    #[test]
    fn rev_changes_with_content_and_kind() {
        assert_eq!(rev(CellKind::Code, "x"), rev(CellKind::Code, "x"));
        assert_ne!(rev(CellKind::Code, "x"), rev(CellKind::Code, "y"));
        assert_ne!(rev(CellKind::Code, "x"), rev(CellKind::Markdown, "x"));
        assert_eq!(rev(CellKind::Code, "").len(), 8);
    }

    #[test]
    fn names_come_from_comments_and_headings() {
        assert_eq!(
            base_name(&code("# Load the data!\nx = 1", "a")),
            "load-the-data"
        );
        assert_eq!(
            base_name(&code("%matplotlib inline\nimport pandas as pd", "a")),
            "import-pandas-as-pd"
        );
        assert_eq!(base_name(&code("", "a")), "code-cell");
        let markdown = Cell::new(CellKind::Markdown, "Intro\n## Results: 2024", "m");
        assert_eq!(base_name(&markdown), "results-2024");
    }

    #[test]
    fn derived_names_are_unique_and_stored_names_win() {
        let mut notebook = Notebook::new();
        notebook.push_cell(code("# plot\n1", "a"));
        notebook.push_cell(code("# plot\n2", "b"));
        let mut stored = code("3", "c");
        stored.set_stored_name("plot");
        notebook.push_cell(stored);
        assert_eq!(effective_names(&notebook), vec!["plot-2", "plot-3", "plot"]);
    }

    #[test]
    fn slugify_is_kebab_case_and_bounded() {
        assert_eq!(slugify("  Hello, World  "), "hello-world");
        assert_eq!(slugify("ÄÖ"), "");
        assert!(slugify(&"word ".repeat(50)).len() <= MAX_NAME_LEN);
        assert!(is_valid_name(&slugify("Some ~ title 42")));
        assert!(!is_valid_name("Bad Name"));
    }
}
