//! Source edits in UTF-16 offsets, as yrs counts them in documents shared with JavaScript.
//!
//! `notebook_model::plan::text` decides the edits (lines first, so that an edit of two lines
//! of a cell leaves the lines between them alone: a person typing in one of those lines keeps
//! every character, because a Yjs insertion that races a deletion of other characters survives
//! it) in byte ranges; this module converts them to UTF-16 units, once, at the host's boundary.

use notebook_model::plan::text as byte_text;

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

fn utf16_len(text: &str) -> u32 {
    text.encode_utf16().count() as u32
}

/// The edits that turn `old` into `new` line by line, last first; empty when they are equal.
pub fn diff(old: &str, new: &str) -> Vec<TextEdit> {
    utf16_edits(old, &byte_text::by_lines(old, new))
}

/// `edits` of `old` (byte ranges, ascending, as notebook-model plans them) in UTF-16 units,
/// last first.
pub fn utf16_edits(old: &str, edits: &[byte_text::TextEdit]) -> Vec<TextEdit> {
    let mut converted = Vec::with_capacity(edits.len());
    let mut units = 0;
    let mut counted = 0;
    for edit in edits {
        units += utf16_len(&old[counted..edit.range.start]);
        let removed = utf16_len(&old[edit.range.clone()]);
        converted.push(TextEdit {
            start: units,
            removed,
            inserted: edit.inserted.clone(),
        });
        units += removed;
        counted = edit.range.end;
    }
    converted.reverse();
    converted
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
        let parts = prop::sample::select(&["a", "b", "é", "𝄞", "\n", "line\n"][..]);
        prop::collection::vec(parts, 0..24).prop_map(|parts| parts.concat())
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
