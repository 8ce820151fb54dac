//! Head + tail truncation with explicit markers, for finished text and for live streams.

use std::borrow::Cow;
use std::collections::VecDeque;

use crate::terminal::plural;

/// A marker line: `what` was left out here (`… [<what>] …`), the one form every cut in this
/// crate writes.
pub(crate) fn marker(what: &str) -> String {
    format!("… [{what}] …")
}

/// The marker line that replaces dropped characters.
pub(crate) fn dropped_marker(dropped_chars: usize, dropped_lines: usize) -> String {
    dropped_amount_marker(
        &plural(dropped_chars, "character", "characters"),
        dropped_lines,
    )
}

/// The marker line for a cut of `amount` (such as "3 bytes") and, when any, `dropped_lines`
/// line breaks.
fn dropped_amount_marker(amount: &str, dropped_lines: usize) -> String {
    if dropped_lines == 0 {
        marker(&format!("{amount} dropped"))
    } else {
        let lines = plural(dropped_lines, "line", "lines");
        marker(&format!("{amount} / {lines} dropped"))
    }
}

/// The most characters [`head_tail`] adds around what it keeps when it cuts `text_chars`
/// characters of text with `text_lines` line breaks: the marker and up to two line breaks.
pub(crate) fn marker_overhead(text_chars: usize, text_lines: usize) -> usize {
    dropped_marker(text_chars, text_lines).chars().count() + 2
}

/// The result of [`head_tail`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadTail<'a> {
    /// The kept head, a marker line, and the kept tail; or the input, when it fit.
    pub text: Cow<'a, str>,
    /// Characters (Unicode scalar values) left out.
    pub dropped_chars: usize,
    /// Line breaks among the characters left out.
    pub dropped_lines: usize,
}

/// Keeps at most `max_chars` characters of `text`: the first half and the last half, cut at line
/// breaks where that loses little, joined by a marker line such as
/// `… [12,345 characters / 210 lines dropped] …`.
///
/// The kept head is an exact prefix of `text` and the kept tail an exact suffix; only the marker
/// and the line breaks around it are added. Text that fits comes back borrowed and unchanged.
pub fn head_tail(text: &str, max_chars: usize) -> HeadTail<'_> {
    let Some((head_end, tail_start)) = cut_points(text, max_chars) else {
        return HeadTail {
            text: Cow::Borrowed(text),
            dropped_chars: 0,
            dropped_lines: 0,
        };
    };
    let head = &text[..head_end];
    let dropped = &text[head_end..tail_start];
    let tail = &text[tail_start..];
    let dropped_chars = dropped.chars().count();
    let dropped_lines = dropped.matches('\n').count();

    let mut out = String::with_capacity(head.len() + tail.len() + 64);
    out.push_str(head);
    if !head.is_empty() && !head.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&dropped_marker(dropped_chars, dropped_lines));
    if !tail.is_empty() {
        out.push('\n');
    }
    out.push_str(tail);
    HeadTail {
        text: Cow::Owned(out),
        dropped_chars,
        dropped_lines,
    }
}

/// Where [`head_tail`] cuts: the byte offset where the kept head ends and where the kept tail
/// starts, or `None` when the text fits.
fn cut_points(text: &str, max_chars: usize) -> Option<(usize, usize)> {
    let total_chars = text.chars().count();
    if total_chars <= max_chars {
        return None;
    }
    let head_budget = max_chars / 2;
    let tail_budget = max_chars - head_budget;
    let head_end = byte_offset_of_char(text, head_budget);
    let tail_start = byte_offset_of_char(text, total_chars - tail_budget);

    // Prefer to end the head just after a line break, and to start the tail at a line start,
    // when that keeps at least half of the budget.
    let head_end = match text[..head_end].rfind('\n') {
        Some(newline) if text[..=newline].chars().count() * 2 >= head_budget => newline + 1,
        _ => head_end,
    };
    let tail_start = match text[tail_start..].find('\n') {
        Some(offset) if text[tail_start + offset + 1..].chars().count() * 2 >= tail_budget => {
            tail_start + offset + 1
        }
        _ => tail_start,
    };
    Some((head_end, tail_start))
}

fn byte_offset_of_char(text: &str, char_index: usize) -> usize {
    text.char_indices()
        .nth(char_index)
        .map_or(text.len(), |(offset, _)| offset)
}

/// Keeps the first `head_bytes` and the last `tail_bytes` of a text that keeps growing (the live
/// output of a running cell), in memory that does not grow with the input.
///
/// Everything in between is counted, not stored; [`HeadTailBuffer::render`] shows it as a
/// marker such as `… [1,234,567 bytes / 8,901 lines dropped] …`. Cuts fall on UTF-8 character
/// boundaries, so the kept parts may be a few bytes shorter than the limits.
#[derive(Debug, Clone)]
pub struct HeadTailBuffer {
    head: String,
    head_limit: usize,
    /// Once something did not fit in the head, everything else goes to the tail.
    head_closed: bool,
    head_newlines: u64,
    tail: VecDeque<u8>,
    tail_limit: usize,
    total_bytes: u64,
    total_newlines: u64,
}

impl HeadTailBuffer {
    /// A buffer keeping up to `head_bytes` from the start and `tail_bytes` from the end.
    pub fn new(head_bytes: usize, tail_bytes: usize) -> Self {
        Self {
            head: String::new(),
            head_limit: head_bytes,
            head_closed: false,
            head_newlines: 0,
            tail: VecDeque::new(),
            tail_limit: tail_bytes,
            total_bytes: 0,
            total_newlines: 0,
        }
    }

    /// Appends a chunk of output.
    pub fn push(&mut self, chunk: &str) {
        self.total_bytes += chunk.len() as u64;
        self.total_newlines += count_newlines(chunk.as_bytes());
        let mut rest = chunk;
        if !self.head_closed {
            let room = self.head_limit - self.head.len();
            if rest.len() <= room {
                self.head_newlines += count_newlines(rest.as_bytes());
                self.head.push_str(rest);
                return;
            }
            let mut cut = room;
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            self.head_newlines += count_newlines(&rest.as_bytes()[..cut]);
            self.head.push_str(&rest[..cut]);
            self.head_closed = true;
            rest = &rest[cut..];
        }
        let bytes = rest.as_bytes();
        if bytes.len() >= self.tail_limit {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_limit..]);
        } else {
            let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_limit);
            self.tail.drain(..overflow);
            self.tail.extend(bytes);
        }
    }

    /// Bytes pushed so far.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Bytes pushed but no longer kept (including a partial line at the tail's start).
    pub fn dropped_bytes(&self) -> u64 {
        let tail = self.tail_bytes();
        self.total_bytes - self.head.len() as u64 - (tail.len() - self.tail_skip(&tail)) as u64
    }

    /// Whether anything was dropped.
    pub fn is_truncated(&self) -> bool {
        self.dropped_bytes() > 0
    }

    /// The kept text: the head, a marker line if anything was dropped, and the tail.
    pub fn render(&self) -> String {
        let tail_bytes = self.tail_bytes();
        let skip = self.tail_skip(&tail_bytes);
        let tail = String::from_utf8_lossy(&tail_bytes[skip..]);
        let dropped_bytes = self.dropped_bytes();
        let mut out = String::with_capacity(self.head.len() + tail.len() + 64);
        out.push_str(&self.head);
        if dropped_bytes > 0 {
            let dropped_lines =
                self.total_newlines - self.head_newlines - count_newlines(&tail_bytes[skip..]);
            if !self.head.is_empty() && !self.head.ends_with('\n') {
                out.push('\n');
            }
            let bytes = plural(
                usize::try_from(dropped_bytes).unwrap_or(usize::MAX),
                "byte",
                "bytes",
            );
            out.push_str(&dropped_amount_marker(
                &bytes,
                usize::try_from(dropped_lines).unwrap_or(usize::MAX),
            ));
            if !tail.is_empty() {
                out.push('\n');
            }
        }
        out.push_str(&tail);
        out
    }

    fn tail_bytes(&self) -> Vec<u8> {
        let (front, back) = self.tail.as_slices();
        let mut bytes = Vec::with_capacity(self.tail.len());
        bytes.extend_from_slice(front);
        bytes.extend_from_slice(back);
        bytes
    }

    /// Bytes at the start of the stored tail that are not shown: a partial UTF-8 character and,
    /// when that loses at most half of the tail, a partial line. Zero when nothing was dropped,
    /// since the tail then continues the head exactly.
    fn tail_skip(&self, tail: &[u8]) -> usize {
        if self.total_bytes == (self.head.len() + tail.len()) as u64 {
            return 0;
        }
        let skip = leading_continuation_bytes(tail);
        match tail[skip..].iter().position(|&byte| byte == b'\n') {
            Some(newline) if (tail.len() - (skip + newline + 1)) * 2 >= tail.len() - skip => {
                skip + newline + 1
            }
            _ => skip,
        }
    }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

fn leading_continuation_bytes(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take_while(|&&byte| is_continuation(byte))
        .count()
}

fn count_newlines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&byte| byte == b'\n').count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn head_tail_keeps_short_text() {
        let cut = head_tail("short", 10);
        assert_eq!(cut.text, "short");
        assert_eq!(cut.dropped_chars, 0);
    }

    #[test]
    fn head_tail_cuts_at_line_breaks_and_says_how_much() {
        let text: String = (0..100).map(|i| format!("line {i:03}\n")).collect();
        let cut = head_tail(&text, 40);
        assert_eq!(
            cut.text,
            "line 000\nline 001\n… [864 characters / 96 lines dropped] …\nline 098\nline 099\n"
        );
        assert_eq!(cut.dropped_lines, 96);
    }

    #[test]
    fn head_tail_cuts_inside_one_long_line() {
        let text = "x".repeat(100);
        let cut = head_tail(&text, 10);
        assert_eq!(cut.text, "xxxxx\n… [90 characters dropped] …\nxxxxx");
    }

    #[test]
    fn buffer_keeps_head_and_tail_of_a_stream() {
        let mut buffer = HeadTailBuffer::new(10, 10);
        for i in 0..1000 {
            buffer.push(&format!("{i}\n"));
        }
        assert_eq!(buffer.total_bytes(), 3890);
        // The tail starts at a line start ("7\n" of "997\n" is dropped too).
        assert_eq!(buffer.dropped_bytes(), 3872);
        assert_eq!(
            buffer.render(),
            "0\n1\n2\n3\n4\n… [3,872 bytes / 993 lines dropped] …\n998\n999\n"
        );
    }

    #[test]
    fn buffer_without_overflow_is_the_whole_text() {
        let mut buffer = HeadTailBuffer::new(4, 4);
        buffer.push("abc");
        buffer.push("defg");
        assert_eq!(buffer.render(), "abcdefg");
        assert!(!buffer.is_truncated());
    }

    #[test]
    fn buffer_respects_char_boundaries() {
        let mut buffer = HeadTailBuffer::new(5, 5);
        buffer.push("ééééé");
        buffer.push("ààààà");
        let rendered = buffer.render();
        assert!(rendered.starts_with("éé\n"), "{rendered}");
        assert!(rendered.ends_with("àà"), "{rendered}");
        assert_eq!(buffer.dropped_bytes(), 20 - 4 - 4);
    }

    proptest! {
        #[test]
        fn head_tail_bounds_and_keeps_exact_head_and_tail(text in "(\\PC|\n){0,300}", max in 0usize..200) {
            let cut = head_tail(&text, max);
            let total = text.chars().count();
            if total <= max {
                prop_assert_eq!(cut.text.as_ref(), text.as_str());
            } else {
                let (head_end, tail_start) = cut_points(&text, max).expect("text is cut");
                let (head, tail) = (&text[..head_end], &text[tail_start..]);
                prop_assert!(head_end <= tail_start);
                let kept = head.chars().count() + tail.chars().count();
                prop_assert!(kept <= max);
                prop_assert_eq!(kept + cut.dropped_chars, total);
                prop_assert!(cut.text.starts_with(head));
                prop_assert!(cut.text.ends_with(tail));
                prop_assert!(cut.text.contains(&dropped_marker(cut.dropped_chars, cut.dropped_lines)));
                prop_assert!(cut.text.chars().count() <= max + marker_overhead(total, text.matches('\n').count()));
            }
        }

        #[test]
        fn buffer_memory_is_bounded_and_parts_are_exact(chunks in proptest::collection::vec("\\PC{0,40}", 0..50), head in 0usize..30, tail in 0usize..30) {
            let mut buffer = HeadTailBuffer::new(head, tail);
            let mut all = String::new();
            for chunk in &chunks {
                buffer.push(chunk);
                all.push_str(chunk);
                prop_assert!(buffer.head.len() <= head);
                prop_assert!(buffer.tail.len() <= tail);
            }
            prop_assert_eq!(buffer.total_bytes(), all.len() as u64);
            let rendered = buffer.render();
            if buffer.is_truncated() {
                prop_assert!(all.starts_with(&buffer.head));
                let kept_tail = all.len() as u64 - buffer.head.len() as u64 - buffer.dropped_bytes();
                prop_assert!(rendered.ends_with(&all[all.len() - kept_tail as usize..]));
            } else {
                prop_assert_eq!(rendered, all);
            }
        }
    }
}
