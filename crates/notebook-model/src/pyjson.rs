//! JSON text exactly as Python's `json.dumps(obj, indent=1, sort_keys=True, separators=(",", ": "),
//! ensure_ascii=False)` writes it, which is what nbformat uses for `.ipynb` files.
//!
//! The points where this differs from `serde_json`'s pretty printer: one-space indentation, keys in
//! code-point order, non-ASCII characters kept as they are, control characters escaped as lower-case
//! `\u00xx`, and floats written the way Python's `float.__repr__` writes them (`1e-05`, `1e+16`,
//! `100.0`).

use serde_json::{Map, Value};

/// Appends `value` to `out` in nbformat's JSON layout, starting at nesting depth `depth`.
pub fn write_value(out: &mut String, value: &Value, depth: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => write_number(out, number),
        Value::String(text) => write_string(out, text),
        Value::Array(items) => write_list(out, items, depth, write_value),
        Value::Object(map) => write_value_map(out, map, depth),
    }
}

/// Writes a list in nbformat's layout, each item by `write_item` (so callers can give items a
/// layout of their own, as split multi-line strings have).
pub fn write_list<T>(
    out: &mut String,
    items: &[T],
    depth: usize,
    mut write_item: impl FnMut(&mut String, &T, usize),
) {
    if items.is_empty() {
        out.push_str("[]");
        return;
    }
    out.push('[');
    for (position, item) in items.iter().enumerate() {
        if position > 0 {
            out.push(',');
        }
        newline_and_indent(out, depth + 1);
        write_item(out, item, depth + 1);
    }
    newline_and_indent(out, depth);
    out.push(']');
}

/// Writes an object with its keys in code-point order, each value by `write_entry` (which gets
/// the key, so callers can lay out some keys specially).
pub fn write_object<'a, V>(
    out: &mut String,
    entries: impl Iterator<Item = (&'a str, V)>,
    depth: usize,
    mut write_entry: impl FnMut(&mut String, &str, V, usize),
) {
    let mut entries: Vec<(&str, V)> = entries.collect();
    if entries.is_empty() {
        out.push_str("{}");
        return;
    }
    entries.sort_unstable_by(|left, right| left.0.cmp(right.0));
    out.push('{');
    for (position, (key, value)) in entries.into_iter().enumerate() {
        if position > 0 {
            out.push(',');
        }
        newline_and_indent(out, depth + 1);
        write_string(out, key);
        out.push_str(": ");
        write_entry(out, key, value, depth + 1);
    }
    newline_and_indent(out, depth);
    out.push('}');
}

/// Writes a JSON object map (keys sorted).
pub fn write_value_map(out: &mut String, map: &Map<String, Value>, depth: usize) {
    write_object(
        out,
        map.iter().map(|(key, value)| (key.as_str(), value)),
        depth,
        |out, _, value, depth| write_value(out, value, depth),
    );
}

fn newline_and_indent(out: &mut String, depth: usize) {
    const SPACES: &str = "\n                                ";
    match SPACES.get(..=depth) {
        Some(indent) => out.push_str(indent),
        None => {
            out.push('\n');
            for _ in 0..depth {
                out.push(' ');
            }
        }
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// The eight bytes at `position`, if there are eight left.
fn word_at(bytes: &[u8], position: usize) -> Option<u64> {
    let eight: [u8; 8] = bytes.get(position..position + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(eight))
}

/// Whether a byte of `word` is below `limit` (at most 0x80), checked on all eight at once.
fn has_byte_below(word: u64, limit: u8) -> bool {
    word.wrapping_sub(ONES * u64::from(limit)) & !word & HIGH_BITS != 0
}

/// Whether a byte of `word` is `byte`.
fn has_byte(word: u64, byte: u8) -> bool {
    has_byte_below(word ^ (ONES * u64::from(byte)), 1)
}

/// Writes a JSON string literal with Python's `ensure_ascii=False` escaping.
pub fn write_string(out: &mut String, text: &str) {
    out.push('"');
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut position = 0;
    while position < bytes.len() {
        // Runs of eight bytes that need no escape are skipped whole (most text is such runs).
        if let Some(word) = word_at(bytes, position)
            && !(has_byte_below(word, 0x20) || has_byte(word, b'"') || has_byte(word, b'\\'))
        {
            position += 8;
            continue;
        }
        let byte = bytes[position];
        let escape: Option<&str> = match byte {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            0x08 => Some("\\b"),
            0x0c => Some("\\f"),
            0x00..=0x1f => None,
            _ => {
                position += 1;
                continue;
            }
        };
        out.push_str(&text[start..position]);
        match escape {
            Some(sequence) => out.push_str(sequence),
            None => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(HEX[usize::from(byte >> 4)] as char);
                out.push(HEX[usize::from(byte & 0xf)] as char);
            }
        }
        position += 1;
        start = position;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

fn write_number(out: &mut String, number: &serde_json::Number) {
    if let Some(integer) = number.as_i64() {
        out.push_str(&integer.to_string());
    } else if let Some(integer) = number.as_u64() {
        out.push_str(&integer.to_string());
    } else if let Some(float) = number.as_f64() {
        out.push_str(&python_float_repr(float));
    } else {
        out.push_str(&number.to_string());
    }
}

/// Formats a float the way Python's `repr(float)` does (shortest round-trip digits; exponent form
/// when the decimal exponent is below -4 or at least 16; `.0` on integral values).
pub fn python_float_repr(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if value == 0.0 {
        return if value.is_sign_negative() {
            "-0.0"
        } else {
            "0.0"
        }
        .to_owned();
    }
    // Rust's `{:e}` gives the shortest digits that round-trip, e.g. `1.2345e-7`.
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("`{:e}` always writes an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` writes a decimal exponent");
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut result = String::new();
    if negative {
        result.push('-');
    }
    if !(-4..16).contains(&exponent) {
        result.push_str(&digits[..1]);
        if digits.len() > 1 {
            result.push('.');
            result.push_str(&digits[1..]);
        }
        result.push('e');
        result.push(if exponent < 0 { '-' } else { '+' });
        let magnitude = exponent.unsigned_abs();
        if magnitude < 10 {
            result.push('0');
        }
        result.push_str(&magnitude.to_string());
    } else if exponent < 0 {
        result.push_str("0.");
        for _ in 0..(-exponent - 1) {
            result.push('0');
        }
        result.push_str(&digits);
    } else {
        let integer_digits = usize::try_from(exponent).expect("exponent is non-negative") + 1;
        if digits.len() <= integer_digits {
            result.push_str(&digits);
            for _ in digits.len()..integer_digits {
                result.push('0');
            }
            result.push_str(".0");
        } else {
            result.push_str(&digits[..integer_digits]);
            result.push('.');
            result.push_str(&digits[integer_digits..]);
        }
    }
    result
}

/// Splits text the way Python's `str.splitlines(keepends=True)` does: on `\n`, `\r\n`, `\r`, `\v`,
/// `\f`, `\x1c`, `\x1d`, `\x1e`, `\x85`, U+2028 and U+2029, keeping the line endings.
pub fn python_splitlines_keepends(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut lines = Vec::new();
    let mut start = 0;
    let mut position = 0;
    while position < bytes.len() {
        // Every line break starts with a control character or, for U+0085, U+2028 and U+2029,
        // a byte of 0x80 or more: runs of eight bytes with neither are skipped whole.
        if let Some(word) = word_at(bytes, position)
            && !has_byte_below(word, 0x20)
            && word & HIGH_BITS == 0
        {
            position += 8;
            continue;
        }
        let end = match bytes[position] {
            b'\r' if bytes.get(position + 1) == Some(&b'\n') => position + 2,
            b'\r' | b'\n' | 0x0b | 0x0c | 0x1c | 0x1d | 0x1e => position + 1,
            // U+0085 in UTF-8; text is valid UTF-8, so 0xc2 here always starts a character.
            0xc2 if bytes.get(position + 1) == Some(&0x85) => position + 2,
            // U+2028 and U+2029.
            0xe2 if bytes.get(position + 1) == Some(&0x80)
                && matches!(bytes.get(position + 2), Some(0xa8 | 0xa9)) =>
            {
                position + 3
            }
            _ => {
                position += 1;
                continue;
            }
        };
        lines.push(&text[start..end]);
        start = end;
        position = end;
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_follow_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123.456, "123.456"),
            (-2.5, "-2.5"),
            (1.5e-7, "1.5e-07"),
            (1e100, "1e+100"),
            (123_456_789_012_345_680.0, "1.2345678901234568e+17"),
            (-0.0, "-0.0"),
            (0.000123, "0.000123"),
        ];
        for (value, expected) in cases {
            assert_eq!(python_float_repr(value), expected, "{value:e}");
        }
    }

    #[test]
    fn strings_escape_like_python() {
        let mut out = String::new();
        write_string(&mut out, "a\"b\\c\n\t\u{1}é\u{7f}\u{2028}");
        assert_eq!(out, "\"a\\\"b\\\\c\\n\\t\\u0001é\u{7f}\u{2028}\"");
    }

    #[test]
    fn layout_matches_python_indent_one() {
        let value: Value = serde_json::json!({"b": [1, {}], "a": {"x": []}});
        let mut out = String::new();
        write_value(&mut out, &value, 0);
        assert_eq!(
            out,
            "{\n \"a\": {\n  \"x\": []\n },\n \"b\": [\n  1,\n  {}\n ]\n}"
        );
    }

    #[test]
    fn splitlines_matches_python() {
        assert_eq!(python_splitlines_keepends(""), Vec::<&str>::new());
        assert_eq!(python_splitlines_keepends("a\nb"), vec!["a\n", "b"]);
        assert_eq!(python_splitlines_keepends("a\r\nb\r"), vec!["a\r\n", "b\r"]);
        assert_eq!(
            python_splitlines_keepends("x\u{2028}y\u{0c}z\n"),
            vec!["x\u{2028}", "y\u{0c}", "z\n"]
        );
        assert_eq!(python_splitlines_keepends("\n\n"), vec!["\n", "\n"]);
    }

    /// The eight-bytes-at-once paths against a character-by-character reading, with every
    /// special character at every offset of a longer text.
    #[test]
    fn long_texts_split_and_escape_as_short_ones_do() {
        let specials = [
            "\n", "\r", "\r\n", "\u{b}", "\u{c}", "\u{1c}", "\u{1d}", "\u{1e}", "\u{85}",
            "\u{2028}", "\u{2029}", "\"", "\\", "\t", "\u{1}", "\u{1f}", "é", "\u{2027}", "\u{a0}",
            "x",
        ];
        for special in specials {
            for offset in 0..20 {
                let text = format!("{}{special}{}", "a".repeat(offset), "b".repeat(19 - offset));
                let naive_lines: Vec<&str> = {
                    let mut lines = Vec::new();
                    let mut start = 0;
                    let mut chars = text.char_indices().peekable();
                    while let Some((position, character)) = chars.next() {
                        let end = match character {
                            '\r' if chars.peek().map(|&(_, next)| next) == Some('\n') => {
                                chars.next();
                                position + 2
                            }
                            '\r' | '\n' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}'
                            | '\u{85}' | '\u{2028}' | '\u{2029}' => position + character.len_utf8(),
                            _ => continue,
                        };
                        lines.push(&text[start..end]);
                        start = end;
                    }
                    if start < text.len() {
                        lines.push(&text[start..]);
                    }
                    lines
                };
                assert_eq!(python_splitlines_keepends(&text), naive_lines, "{text:?}");
                let mut out = String::new();
                write_string(&mut out, &text);
                let mut naive = String::from("\"");
                for character in text.chars() {
                    match character {
                        '"' => naive.push_str("\\\""),
                        '\\' => naive.push_str("\\\\"),
                        '\n' => naive.push_str("\\n"),
                        '\r' => naive.push_str("\\r"),
                        '\t' => naive.push_str("\\t"),
                        '\u{8}' => naive.push_str("\\b"),
                        '\u{c}' => naive.push_str("\\f"),
                        control if u32::from(control) < 0x20 => {
                            naive.push_str(&format!("\\u{:04x}", u32::from(control)));
                        }
                        other => naive.push(other),
                    }
                }
                naive.push('"');
                assert_eq!(out, naive, "{text:?}");
            }
        }
    }

    #[test]
    fn word_checks_agree_with_byte_checks() {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..100_000 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            // Bytes drawn mostly near the limits that matter.
            let bytes: [u8; 8] = std::array::from_fn(|index| {
                let byte = (state >> (index * 8)) as u8;
                [
                    byte,
                    byte & 0x3f,
                    0x1f + (byte & 3),
                    0x21 + (byte & 3),
                    0x5b + (byte & 3),
                ][usize::from(byte % 5)]
            });
            let word = u64::from_le_bytes(bytes);
            for limit in [1, 0x20, 0x80] {
                assert_eq!(
                    has_byte_below(word, limit),
                    bytes.iter().any(|&byte| byte < limit),
                    "{bytes:?} below {limit}"
                );
            }
            for needle in [b'"', b'\\'] {
                assert_eq!(has_byte(word, needle), bytes.contains(&needle), "{bytes:?}");
            }
        }
    }
}
