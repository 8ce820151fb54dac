//! The smallest text edits that turn one source into another, in UTF-16 offsets.
//!
//! Lines are compared first (a longest common subsequence), so that an edit of two lines of a
//! cell leaves the lines between them alone: a person typing in one of those lines keeps every
//! character, because a Yjs insertion that races a deletion of other characters survives it.
//! Inside each changed run of lines the common prefix and suffix are trimmed to characters.

/// Replace `removed` UTF-16 units at `start` with `inserted`. Offsets of one edit list refer to
/// the text before any of them; [`diff`] returns them from the end backwards, so applying them
/// in order never shifts the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextEdit {
    /// Where, in UTF-16 units of the old text.
    pub start: u32,
    /// How many UTF-16 units are removed.
    pub removed: u32,
    /// What is inserted there.
    pub inserted: String,
}

/// Above this many line pairs the line comparison is skipped and one edit covers the span
/// between the common prefix and suffix (a bound on time and memory for huge cells).
const MAX_LINE_PAIRS: usize = 4_000_000;

fn utf16_len(text: &str) -> u32 {
    text.encode_utf16().count() as u32
}

/// Lines with their line breaks.
fn lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// The edits that turn `old` into `new`, last first; empty when they are equal.
pub fn diff(old: &str, new: &str) -> Vec<TextEdit> {
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
    // UTF-16 offset of each old line's start.
    let mut starts = Vec::with_capacity(old_lines.len() + 1);
    let mut offset = 0;
    for line in &old_lines {
        starts.push(offset);
        offset += utf16_len(line);
    }
    starts.push(offset);
    let mut edits: Vec<TextEdit> = hunks
        .into_iter()
        .filter_map(|hunk| {
            let old_text: String = old_lines[hunk.old.clone()].concat();
            let new_text: String = new_lines[hunk.new.clone()].concat();
            trimmed(starts[hunk.old.start], &old_text, &new_text)
        })
        .collect();
    edits.reverse();
    edits
}

/// One replacement of `old` by `new` at `base`, with the common prefix and suffix left out.
fn trimmed(base: u32, old: &str, new: &str) -> Option<TextEdit> {
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
    let removed = &old_rest[..old_rest.len() - suffix];
    let inserted = &new_rest[..new_rest.len() - suffix];
    if removed.is_empty() && inserted.is_empty() {
        return None;
    }
    Some(TextEdit {
        start: base + utf16_len(&old[..prefix]),
        removed: utf16_len(removed),
        inserted: inserted.to_owned(),
    })
}

/// Old lines `old` replaced by new lines `new`.
struct Hunk {
    old: std::ops::Range<usize>,
    new: std::ops::Range<usize>,
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

/// Applies edits (as [`diff`] returns them) to `text`, counting offsets in UTF-16 units.
pub fn apply(text: &str, edits: &[TextEdit]) -> String {
    let mut units: Vec<u16> = text.encode_utf16().collect();
    for edit in edits {
        let start = edit.start as usize;
        let end = start + edit.removed as usize;
        units.splice(start..end, edit.inserted.encode_utf16());
    }
    String::from_utf16(&units).expect("edits keep surrogate pairs whole")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_edit_of_one_line_touches_only_its_changed_characters() {
        let edits = diff("a = 1\nb = 2\nc = 3\n", "a = 1\nb = 20\nc = 3\n");
        assert_eq!(
            edits,
            [TextEdit {
                start: 11,
                removed: 0,
                inserted: "0".to_owned()
            }]
        );
    }

    #[test]
    fn edits_of_two_lines_leave_the_line_between_them() {
        let old = "x = 1\nkeep me\ny = 2\n";
        let new = "x = 10\nkeep me\ny = 20\n";
        let edits = diff(old, new);
        assert_eq!(edits.len(), 2);
        assert!(
            edits[0].start > edits[1].start,
            "the last edit comes first: {edits:?}"
        );
        assert_eq!(apply(old, &edits), new);
    }

    #[test]
    fn offsets_count_utf16_units() {
        // 𝄞 is two UTF-16 units, é one.
        let edits = diff("𝄞é!", "𝄞é?");
        assert_eq!(
            edits,
            [TextEdit {
                start: 3,
                removed: 1,
                inserted: "?".to_owned()
            }]
        );
        assert!(diff("same", "same").is_empty());
    }

    fn source() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                Just("a".to_owned()),
                Just("b".to_owned()),
                Just("é".to_owned()),
                Just("𝄞".to_owned()),
                Just("\n".to_owned()),
                Just("line\n".to_owned()),
            ],
            0..24,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn applying_the_diff_gives_the_new_text(old in source(), new in source()) {
            let edits = diff(&old, &new);
            prop_assert_eq!(apply(&old, &edits), new);
            for pair in edits.windows(2) {
                prop_assert!(pair[1].start + pair[1].removed <= pair[0].start);
            }
        }
    }
}
