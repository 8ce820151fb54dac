//! Terminal text: ANSI escape sequences, carriage returns and cursor movement.
//!
//! Kernels write to streams as if to a terminal. Progress bars repaint one line with `\r`
//! (tqdm), repaint earlier lines with cursor-up and erase-line sequences (pip, nested tqdm
//! bars), and colour everything. An agent wants the final picture, not the paint strokes.

use std::borrow::Cow;
use std::iter::Peekable;
use std::str::Chars;

const ESC: char = '\u{1b}';
/// The 8-bit Control Sequence Introducer, equivalent to `ESC [`.
const C1_CSI: char = '\u{9b}';
/// The 8-bit String Terminator, equivalent to `ESC \`.
const C1_ST: char = '\u{9c}';

/// One escape sequence, as far as the renderer cares.
enum Escape {
    /// A Control Sequence (`ESC [ params intermediates final`); `final_byte` is `None` when the
    /// sequence was cut short by a character that cannot belong to it.
    Control {
        params: String,
        final_byte: Option<char>,
    },
    /// Any other sequence (OSC, DCS, charset selection, ...): no visible effect.
    Other,
}

/// Whether `c` is dropped from displayed text: C0 controls except tab, line feed and carriage
/// return, DEL, and every C1 control.
fn is_invisible_control(c: char) -> bool {
    (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || ('\u{7f}'..='\u{9f}').contains(&c)
}

/// Reads the rest of an escape sequence whose introducer (`ESC` or an 8-bit C1 control) was
/// just consumed.
fn read_escape(introducer: char, chars: &mut Peekable<Chars<'_>>) -> Escape {
    match introducer {
        C1_CSI => return read_control_sequence(chars),
        // OSC, DCS, SOS, PM and APC as 8-bit controls all carry a string up to ST.
        '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => {
            skip_control_string(chars);
            return Escape::Other;
        }
        _ => {}
    }
    match chars.peek().copied() {
        Some('[') => {
            chars.next();
            read_control_sequence(chars)
        }
        Some(']' | 'P' | 'X' | '^' | '_') => {
            chars.next();
            skip_control_string(chars);
            Escape::Other
        }
        Some(' '..='/') => {
            // nF sequences such as `ESC ( B`: intermediates, then one final byte.
            while matches!(chars.peek(), Some(' '..='/')) {
                chars.next();
            }
            if matches!(chars.peek(), Some('0'..='~')) {
                chars.next();
            }
            Escape::Other
        }
        Some('0'..='~') => {
            chars.next();
            Escape::Other
        }
        // A lone ESC (or ESC before a character no sequence starts with) is dropped alone.
        _ => Escape::Other,
    }
}

fn read_control_sequence(chars: &mut Peekable<Chars<'_>>) -> Escape {
    let mut params = String::new();
    while let Some(&c) = chars.peek() {
        if !('0'..='?').contains(&c) {
            break;
        }
        params.push(c);
        chars.next();
    }
    while matches!(chars.peek(), Some(' '..='/')) {
        chars.next();
    }
    let final_byte = match chars.peek().copied() {
        Some(c @ '@'..='~') => {
            chars.next();
            Some(c)
        }
        _ => None,
    };
    Escape::Control { params, final_byte }
}

/// Skips the payload of an OSC/DCS-style string. It ends at BEL, ST (`ESC \` or the 8-bit ST),
/// or, when the terminator is missing, at the end of the line: a broken sequence must not
/// swallow the rest of the output.
fn skip_control_string(chars: &mut Peekable<Chars<'_>>) {
    while let Some(&c) = chars.peek() {
        match c {
            '\u{7}' | C1_ST => {
                chars.next();
                return;
            }
            ESC => {
                chars.next();
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                return;
            }
            '\n' => return,
            _ => {
                chars.next();
            }
        }
    }
}

fn needs_terminal_work(text: &str) -> bool {
    text.chars().any(|c| c == '\r' || is_invisible_control(c))
}

/// Removes ANSI escape sequences (CSI, OSC, DCS, charset selections and the rest, in 7-bit and
/// 8-bit form) and every other invisible control character except tab, line feed and carriage
/// return.
///
/// The result contains no ESC and no C1 control, so applying it twice changes nothing.
pub fn strip_ansi(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_invisible_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ESC || ('\u{80}'..='\u{9f}').contains(&c) {
            read_escape(c, &mut chars);
        } else if !is_invisible_control(c) {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Collapses carriage-return repaints to what a terminal would finally show: on each line,
/// text after a `\r` overwrites the line from its first column (`\r\n` is a plain line end).
///
/// A tqdm bar written as `\r 10%|...`, `\r 20%|...` becomes its last state; a `\r` at a chunk
/// boundary is handled because merged stream chunks are collapsed together. Text without `\r`
/// comes back unchanged. Expects text without escape sequences (see [`strip_ansi`]; the full
/// pipeline is [`render_terminal`]).
pub fn collapse_carriage_returns(text: &str) -> Cow<'_, str> {
    if !text.contains('\r') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for (line_number, line) in text.split('\n').enumerate() {
        if line_number > 0 {
            out.push('\n');
        }
        if !line.contains('\r') {
            out.push_str(line);
            continue;
        }
        let mut cells: Vec<char> = Vec::new();
        for segment in line.split('\r') {
            // Overwrite from column 0; a shorter repaint leaves the tail of the longer one, as
            // on a terminal (tqdm pads its bars so that nothing stale remains).
            for (column, c) in segment.chars().enumerate() {
                match cells.get_mut(column) {
                    Some(cell) => *cell = c,
                    None => cells.push(c),
                }
            }
        }
        out.extend(cells);
    }
    Cow::Owned(out)
}

/// A line being painted by [`render_terminal`].
#[derive(Default)]
struct ScreenLine {
    cells: Vec<char>,
    /// Set when the line was repainted or erased, so that padding spaces left by the painting can
    /// be trimmed without touching trailing spaces the program printed on purpose.
    repainted: bool,
}

/// Renders terminal output to the text a terminal would finally show: escape sequences removed,
/// `\r` repaints collapsed, backspaces applied, and the cursor movements progress bars use
/// (cursor up/down/forward/back/column, erase in line) carried out.
///
/// Text with no control character at all comes back unchanged. Only line-oriented movements are
/// honoured; screen clears and absolute positioning are ignored (dropped), because notebook
/// frontends do not honour them either.
pub fn render_terminal(text: &str) -> Cow<'_, str> {
    if !needs_terminal_work(text) {
        return Cow::Borrowed(text);
    }
    let mut lines: Vec<ScreenLine> = vec![ScreenLine::default()];
    let mut row = 0usize;
    let mut column = 0usize;
    // Erasing the start of a line costs its length; a hostile stream of such erasures could
    // make rendering quadratic, so past this much erasing the plain pipeline takes over.
    let mut erase_budget = text.len().saturating_mul(8).max(1 << 20);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                row += 1;
                column = 0;
                if row == lines.len() {
                    lines.push(ScreenLine::default());
                }
            }
            '\r' => {
                if chars.peek() != Some(&'\n') {
                    lines[row].repainted = true;
                }
                column = 0;
            }
            '\u{8}' => column = column.saturating_sub(1),
            c if c == ESC || c == C1_CSI || ('\u{80}'..='\u{9f}').contains(&c) => {
                if let Escape::Control {
                    params,
                    final_byte: Some(final_byte),
                } = read_escape(c, &mut chars)
                {
                    let cost =
                        apply_control(&mut lines, &mut row, &mut column, &params, final_byte);
                    match erase_budget.checked_sub(cost) {
                        Some(left) => erase_budget = left,
                        None => {
                            let plain = collapse_carriage_returns(&strip_ansi(text)).into_owned();
                            return Cow::Owned(plain);
                        }
                    }
                }
            }
            c if is_invisible_control(c) => {}
            c => {
                let line = &mut lines[row];
                if column > line.cells.len() {
                    line.cells.resize(column, ' ');
                    line.repainted = true;
                }
                match line.cells.get_mut(column) {
                    Some(cell) => *cell = c,
                    None => line.cells.push(c),
                }
                column += 1;
            }
        }
    }
    let mut out = String::with_capacity(text.len());
    for (index, line) in lines.iter().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        let mut end = line.cells.len();
        if line.repainted {
            while end > 0 && line.cells[end - 1] == ' ' {
                end -= 1;
            }
        }
        out.extend(&line.cells[..end]);
    }
    Cow::Owned(out)
}

/// Carries out one control sequence; returns the number of cells it had to rewrite.
fn apply_control(
    lines: &mut [ScreenLine],
    row: &mut usize,
    column: &mut usize,
    params: &str,
    final_byte: char,
) -> usize {
    // Private sequences (`ESC [ ? 25 l`, hide the cursor) have no effect on the text.
    if params.starts_with(['?', '<', '=', '>']) {
        return 0;
    }
    // Saturating, so that an absurd count means "as far as possible" rather than "once".
    let first = params
        .split(';')
        .next()
        .unwrap_or("")
        .bytes()
        .take_while(u8::is_ascii_digit)
        .fold(0usize, |value, digit| {
            value
                .saturating_mul(10)
                .saturating_add(usize::from(digit - b'0'))
        });
    let count = first.max(1);
    match final_byte {
        'A' | 'F' => {
            *row = row.saturating_sub(count);
            if final_byte == 'F' {
                *column = 0;
            }
            lines[*row].repainted = true;
        }
        'B' | 'E' => {
            // Like a terminal at its bottom margin, the cursor does not move below the last line.
            *row = row.saturating_add(count).min(lines.len() - 1);
            if final_byte == 'E' {
                *column = 0;
            }
        }
        'C' => {
            *column = column
                .saturating_add(count)
                .min(padding_limit(&lines[*row]))
        }
        'D' => *column = column.saturating_sub(count),
        'G' => *column = (count - 1).min(padding_limit(&lines[*row])),
        'K' => {
            let line = &mut lines[*row];
            line.repainted = true;
            match first {
                0 => line.cells.truncate(*column),
                1 => {
                    let end = (*column + 1).min(line.cells.len());
                    line.cells[..end].fill(' ');
                    return end;
                }
                _ => line.cells.clear(),
            }
        }
        _ => {}
    }
    0
}

/// How far right the cursor may move on a line: like a terminal's right margin, this bounds the
/// padding that movements can create, so that a few escape bytes cannot become megabytes.
fn padding_limit(line: &ScreenLine) -> usize {
    line.cells.len().max(256)
}

/// Formats a count with thousands separators: `12345` → `12,345`.
pub(crate) fn group_thousands(value: usize) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

pub(crate) fn plural(count: usize, singular: &str, plural: &str) -> String {
    format!(
        "{} {}",
        group_thousands(count),
        if count == 1 { singular } else { plural }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn strip_ansi_removes_colours_and_osc_links() {
        let text = "\u{1b}[0;31mKeyError\u{1b}[0m: 'x' \u{1b}]8;;https://e.org\u{7}link\u{1b}]8;;\u{1b}\\ done";
        assert_eq!(strip_ansi(text), "KeyError: 'x' link done");
    }

    #[test]
    fn strip_ansi_handles_8bit_csi_charset_and_lone_escape() {
        assert_eq!(strip_ansi("a\u{9b}31mb\u{1b}(Bc\u{1b}"), "abc");
        assert_eq!(
            strip_ansi("keep\ttabs\r\nand\u{7}bells"),
            "keep\ttabs\r\nandbells"
        );
    }

    #[test]
    fn strip_ansi_does_not_swallow_past_the_line_on_a_broken_osc() {
        assert_eq!(strip_ansi("a\u{1b}]0;title\nnext line"), "a\nnext line");
    }

    #[test]
    fn strip_ansi_borrows_clean_text() {
        assert!(matches!(strip_ansi("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn carriage_returns_keep_the_last_repaint() {
        assert_eq!(
            collapse_carriage_returns("\r 10%|#  |\r 20%|## |\r100%|###|\n"),
            "100%|###|\n"
        );
        assert_eq!(collapse_carriage_returns("line\r\nnext"), "line\nnext");
        assert_eq!(collapse_carriage_returns("abcdef\rXY"), "XYcdef");
        assert_eq!(collapse_carriage_returns("done\r"), "done");
    }

    #[test]
    fn render_terminal_applies_pip_style_erase_and_cursor_up() {
        let text = "Installing\r\n\u{1b}[?25l\r\u{1b}[2K   ━━━━ 2/2\r\n\u{1b}[?25h\r\u{1b}[1A\u{1b}[2KSuccessfully installed\r\nNote\n";
        assert_eq!(
            render_terminal(text),
            "Installing\nSuccessfully installed\nNote\n"
        );
    }

    #[test]
    fn render_terminal_handles_keras_backspaces_and_nested_bars() {
        assert_eq!(
            render_terminal("1/3 [==>...]\u{8}\u{8}\u{8}\r3/3 [======]\n"),
            "3/3 [======]\n"
        );
        let nested = "outer 1/2\n\rinner 50%\u{1b}[A\router 2/2\n\rinner 100%";
        assert_eq!(render_terminal(nested), "outer 2/2\ninner 100%");
    }

    #[test]
    fn render_terminal_trims_only_padding_it_created() {
        assert_eq!(
            render_terminal("kept  \nbar 10%   \rbar 100%  "),
            "kept  \nbar 100%"
        );
        assert_eq!(render_terminal("a\u{1b}[5Cb"), "a     b");
    }

    #[test]
    fn render_terminal_bounds_hostile_cursor_moves() {
        let text = "x\u{1b}[999999999B\u{1b}[99999999999999999999Cy\u{1b}[9999Cz";
        let rendered = render_terminal(text);
        assert_eq!(rendered.chars().count(), 258, "{rendered:?}");
        assert!(rendered.starts_with('x') && rendered.ends_with("yz"));
    }

    #[test]
    fn render_terminal_stays_linear_on_repeated_erasures() {
        let mut text = "x".repeat(100_000);
        for _ in 0..20_000 {
            text.push_str("\u{1b}[1K");
        }
        let rendered = render_terminal(&text);
        // The fallback removed the escapes without applying them.
        assert_eq!(rendered.len(), 100_000);
    }

    #[test]
    fn thousands() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1_000), "1,000");
        assert_eq!(group_thousands(1_234_567), "1,234,567");
    }

    proptest! {
        #[test]
        fn strip_ansi_is_idempotent_and_removes_every_escape(text in any::<String>()) {
            let once = strip_ansi(&text).into_owned();
            prop_assert!(!once.contains(ESC));
            let has_c1 = once.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c));
            prop_assert!(!has_c1, "C1 control left in {:?}", once);
            prop_assert_eq!(strip_ansi(&once), once.as_str());
        }

        #[test]
        fn strip_ansi_removes_escapes_from_ansi_heavy_text(
            parts in proptest::collection::vec(
                prop_oneof![
                    "[a-z \n\r]{0,5}",
                    Just("\u{1b}[".to_string()),
                    Just("\u{1b}]".to_string()),
                    Just("\u{1b}".to_string()),
                    Just("\u{9b}".to_string()),
                    "[0-9;?]{0,4}[A-Za-z~\\\\\u{7}]",
                ],
                0..30,
            )
        ) {
            let text = parts.concat();
            let once = strip_ansi(&text).into_owned();
            prop_assert!(!once.contains(ESC));
            prop_assert_eq!(strip_ansi(&once), once.as_str());
        }

        #[test]
        fn collapse_without_carriage_return_is_identity(text in "[^\r]*") {
            prop_assert_eq!(collapse_carriage_returns(&text), text.as_str());
        }

        #[test]
        fn render_terminal_output_has_no_controls(text in any::<String>()) {
            let rendered = render_terminal(&text);
            prop_assert!(!rendered.chars().any(|c| c == '\r' || is_invisible_control(c)));
        }
    }
}
