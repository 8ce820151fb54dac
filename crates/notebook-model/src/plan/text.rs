//! The smallest text edits that turn one source into another, in byte ranges of the old text.
//!
//! Offsets here are UTF-8 byte offsets, always on character boundaries. Hosts whose documents
//! count another unit convert once, at their boundary: the JupyterLab host turns them into
//! UTF-16 offsets for yrs (`host-jupyter`'s `ydoc::text`), the VS Code host into UTF-16 line
//! and character positions in `host-napi`.
//!
//! Two cuts are offered. [`replacement`] is one edit that keeps the common prefix and suffix.
//! [`by_lines`] compares lines first (a longest common subsequence), so that an edit of two
//! lines of a cell leaves the lines between them alone, then trims each changed run of lines
//! like [`replacement`]: in a shared document a person typing in one of those lines keeps every
//! character, because an insertion that races a deletion of other characters survives it.

use std::ops::Range;

/// Replace the bytes `range` of the old text with `inserted`. The edits of one list are in
/// ascending order, do not overlap and all refer to the old text, as one workspace edit does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextEdit {
    /// The replaced bytes of the old text.
    pub range: Range<usize>,
    /// What stands there instead.
    pub inserted: String,
}

/// Above this many line pairs [`by_lines`] skips the line comparison and gives one
/// [`replacement`] (a bound on time and memory for huge cells).
const MAX_LINE_PAIRS: usize = 4_000_000;

/// The one edit that turns `old` into `new`, keeping their common prefix and suffix (counted in
/// characters); `None` when they are equal.
pub fn replacement(old: &str, new: &str) -> Option<TextEdit> {
    let prefix: usize = old
        .chars()
        .zip(new.chars())
        .take_while(|(left, right)| left == right)
        .map(|(character, _)| character.len_utf8())
        .sum();
    let old_rest = &old[prefix..];
    let new_rest = &new[prefix..];
    let suffix: usize = old_rest
        .chars()
        .rev()
        .zip(new_rest.chars().rev())
        .take_while(|(left, right)| left == right)
        .map(|(character, _)| character.len_utf8())
        .sum();
    let end = old.len() - suffix;
    let inserted = &new_rest[..new_rest.len() - suffix];
    if prefix == end && inserted.is_empty() {
        return None;
    }
    Some(TextEdit {
        range: prefix..end,
        inserted: inserted.to_owned(),
    })
}

/// The edits that turn `old` into `new` line by line, each trimmed to the characters that
/// change, in ascending order; empty when they are equal.
pub fn by_lines(old: &str, new: &str) -> Vec<TextEdit> {
    if old == new {
        return Vec::new();
    }
    let old_lines = lines(old);
    let new_lines = lines(new);
    let hunks = if old_lines.len().saturating_mul(new_lines.len()) <= MAX_LINE_PAIRS {
        line_hunks(&old_lines, &new_lines)
    } else {
        vec![Hunk {
            old: 0..old_lines.len(),
            new: 0..new_lines.len(),
        }]
    };
    // The byte offset of each old line's start.
    let mut starts = Vec::with_capacity(old_lines.len() + 1);
    let mut offset = 0;
    for line in &old_lines {
        starts.push(offset);
        offset += line.len();
    }
    starts.push(offset);
    hunks
        .into_iter()
        .filter_map(|hunk| {
            let old_text: String = old_lines[hunk.old.clone()].concat();
            let new_text: String = new_lines[hunk.new.clone()].concat();
            let base = starts[hunk.old.start];
            replacement(&old_text, &new_text).map(|edit| TextEdit {
                range: base + edit.range.start..base + edit.range.end,
                inserted: edit.inserted,
            })
        })
        .collect()
}

/// Applies `edits` (ascending, as this module returns them) to `text`.
pub fn apply(text: &str, edits: &[TextEdit]) -> String {
    let mut result = String::with_capacity(text.len());
    let mut copied = 0;
    for edit in edits {
        result.push_str(&text[copied..edit.range.start]);
        result.push_str(&edit.inserted);
        copied = edit.range.end;
    }
    result.push_str(&text[copied..]);
    result
}

/// Lines with their line breaks.
fn lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// Old lines `old` replaced by new lines `new`.
struct Hunk {
    old: Range<usize>,
    new: Range<usize>,
}

/// The runs of lines that differ, in order, from a longest common subsequence of lines.
fn line_hunks(old: &[&str], new: &[&str]) -> Vec<Hunk> {
    // Common prefix and suffix first: most edits touch a few lines of a long cell.
    let prefix = old
        .iter()
        .zip(new)
        .take_while(|(left, right)| left == right)
        .count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(left, right)| left == right)
        .count();
    let old_middle = &old[prefix..old.len() - suffix];
    let new_middle = &new[prefix..new.len() - suffix];
    let rows = old_middle.len();
    let columns = new_middle.len();
    // lengths[i][j]: the LCS length of old_middle[i..] and new_middle[j..].
    let mut lengths = vec![0u32; (rows + 1) * (columns + 1)];
    let at = |i: usize, j: usize| i * (columns + 1) + j;
    for i in (0..rows).rev() {
        for j in (0..columns).rev() {
            lengths[at(i, j)] = if old_middle[i] == new_middle[j] {
                lengths[at(i + 1, j + 1)] + 1
            } else {
                lengths[at(i + 1, j)].max(lengths[at(i, j + 1)])
            };
        }
    }
    let mut hunks = Vec::new();
    let (mut i, mut j) = (0, 0);
    let mut open: Option<(usize, usize)> = None;
    let mut close = |open: &mut Option<(usize, usize)>, i: usize, j: usize| {
        if let Some((old_start, new_start)) = open.take() {
            hunks.push(Hunk {
                old: prefix + old_start..prefix + i,
                new: prefix + new_start..prefix + j,
            });
        }
    };
    while i < rows || j < columns {
        if i < rows && j < columns && old_middle[i] == new_middle[j] {
            close(&mut open, i, j);
            i += 1;
            j += 1;
        } else {
            open.get_or_insert((i, j));
            if j < columns && (i == rows || lengths[at(i, j + 1)] >= lengths[at(i + 1, j)]) {
                j += 1;
            } else {
                i += 1;
            }
        }
    }
    close(&mut open, i, j);
    hunks
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn edit(range: Range<usize>, inserted: &str) -> TextEdit {
        TextEdit {
            range,
            inserted: inserted.to_owned(),
        }
    }

    #[test]
    fn a_replacement_keeps_the_common_prefix_and_suffix_on_character_boundaries() {
        let old = "naïve 🐍 x";
        let found = replacement(old, "naïve 🐢 x").unwrap();
        assert_eq!(&old[found.range.clone()], "🐍");
        assert_eq!(found.inserted, "🐢");
        assert_eq!(
            replacement("a = 1\nprint(a)", "a = 1\nprint(a + 1)"),
            Some(edit(13..13, " + 1"))
        );
        assert_eq!(replacement("same", "same"), None);
    }

    #[test]
    fn an_edit_of_one_line_touches_only_its_changed_characters() {
        assert_eq!(
            by_lines("a = 1\nb = 2\nc = 3\n", "a = 1\nb = 20\nc = 3\n"),
            [edit(11..11, "0")]
        );
    }

    #[test]
    fn edits_of_two_lines_leave_the_line_between_them() {
        let old = "x = 1\nkeep me\ny = 2\n";
        let new = "x = 10\nkeep me\ny = 20\n";
        let edits = by_lines(old, new);
        assert_eq!(edits, [edit(5..5, "0"), edit(19..19, "0")]);
        assert_eq!(apply(old, &edits), new);
        // One replacement would span the line between them.
        assert_eq!(
            replacement(old, new),
            Some(edit(5..19, "0\nkeep me\ny = 20"))
        );
    }

    /// Texts of pieces where a character boundary is not a byte boundary and lines repeat.
    fn source() -> impl Strategy<Value = String> {
        let pieces: &[&str] = &["a", "b", "é", "𝄞", "\n", "line\n"];
        prop::collection::vec(prop::sample::select(pieces), 0..24).prop_map(|parts| parts.concat())
    }

    /// The edit touches nothing outside what differs: no removed or inserted text starts or ends
    /// with the same character on both sides.
    fn trimmed(old: &str, edit: &TextEdit) -> bool {
        let removed = &old[edit.range.clone()];
        let first_same = removed.chars().next().is_some()
            && removed.chars().next() == edit.inserted.chars().next();
        let last_same = removed.chars().next_back().is_some()
            && removed.chars().next_back() == edit.inserted.chars().next_back();
        !first_same && !last_same
    }

    proptest! {
        #[test]
        fn applying_the_edits_gives_the_new_text(old in source(), new in source()) {
            let lines = by_lines(&old, &new);
            prop_assert_eq!(apply(&old, &lines), new.clone());
            prop_assert_eq!(lines.is_empty(), old == new);
            for pair in lines.windows(2) {
                prop_assert!(pair[0].range.end <= pair[1].range.start);
            }
            for edit in &lines {
                prop_assert!(trimmed(&old, edit), "{:?}", edit);
            }
            let whole = replacement(&old, &new);
            prop_assert_eq!(apply(&old, whole.as_slice()), new.clone());
            if let Some(whole) = &whole {
                // The common prefix and suffix are kept, whole.
                let common_prefix = old.chars().zip(new.chars()).take_while(|(a, b)| a == b)
                    .map(|(a, _)| a.len_utf8()).sum::<usize>();
                prop_assert_eq!(whole.range.start, common_prefix);
                prop_assert!(trimmed(&old, whole));
            }
        }
    }
}
