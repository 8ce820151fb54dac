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
    out.push('\n');
    for _ in 0..depth {
        out.push(' ');
    }
}

/// Writes a JSON string literal with Python's `ensure_ascii=False` escaping.
pub fn write_string(out: &mut String, text: &str) {
    out.push('"');
    let bytes = text.as_bytes();
    let mut start = 0;
    for (position, &byte) in bytes.iter().enumerate() {
        let escape: Option<&str> = match byte {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            0x08 => Some("\\b"),
            0x0c => Some("\\f"),
            0x00..=0x1f => None,
            _ => continue,
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
        start = position + 1;
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
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((position, character)) = chars.next() {
        let end = match character {
            '\r' => {
                if let Some(&(_, '\n')) = chars.peek() {
                    chars.next();
                    position + 2
                } else {
                    position + 1
                }
            }
            '\n' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => position + character.len_utf8(),
            _ => continue,
        };
        lines.push(&text[start..end]);
        start = end;
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
}
