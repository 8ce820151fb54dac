//! IPython syntax that the Python parser does not see through on its own.
//!
//! The parser runs in its IPython mode, which already turns line magics (`%matplotlib inline`),
//! shell escapes (`!pip install x`, `files = !ls`), `x = %env` and help (`obj?`) into
//! escape-command nodes. What is left for this module: cell magics (a `%%name` first line changes
//! how the whole body is run), the argument text of the few line magics whose argument is Python
//! code, wildcard searches (`np.*load*?`), which the parser rejects, and the variable expansion
//! IPython applies to shell commands and magic arguments (`!echo {x} $y`).

/// How a cell magic on a cell's first line affects the analysis of the rest of the cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CellMagicMode {
    /// The body is Python run in the user namespace (`%%time`, `%%capture`, `%%prun`).
    Python,
    /// The body is Python run inside a function IPython builds (`%%timeit`): it reads the user
    /// namespace but its assignments stay local.
    Isolated,
    /// The body is not Python, or runs elsewhere (`%%bash`, `%%writefile`, `%%html`, ...).
    Opaque,
}

/// A `%%name args` first line, found by [`find_cell_magic`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CellMagicLine<'a> {
    pub name: &'a str,
    pub args: &'a str,
    /// Byte range of the magic line, without its line terminator.
    pub start: usize,
    pub end: usize,
    pub mode: CellMagicMode,
}

/// Finds a cell magic. IPython drops leading blank lines and then treats a first line starting
/// with `%%` (at column 0) as a cell magic; a `%%` line anywhere else is an error at run time.
pub(crate) fn find_cell_magic(source: &str) -> Option<CellMagicLine<'_>> {
    let mut start = 0;
    for line in source.split_inclusive('\n') {
        let content = line.trim_end_matches(['\n', '\r']);
        if content.trim().is_empty() {
            start += line.len();
            continue;
        }
        let rest = content.strip_prefix("%%")?;
        let name_len = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (name, args) = rest.split_at(name_len);
        let mode = match name {
            "time" | "capture" | "prun" => CellMagicMode::Python,
            "timeit" => CellMagicMode::Isolated,
            _ => CellMagicMode::Opaque,
        };
        return Some(CellMagicLine {
            name,
            args: args.trim(),
            start,
            end: start + content.len(),
            mode,
        });
    }
    None
}

/// The output variable of `%%capture [--no-stderr] [--no-stdout] [--no-display] [output]`.
pub(crate) fn capture_output_name(args: &str) -> Option<&str> {
    args.split_whitespace()
        .find(|word| !word.starts_with('-'))
        .filter(|word| is_identifier(word))
}

/// Splits a line magic's text (`time x = f()`) into its name and argument text.
pub(crate) fn split_magic(value: &str) -> (&str, &str) {
    let value = value.trim_start();
    let name_len = value.find(char::is_whitespace).unwrap_or(value.len());
    let (name, args) = value.split_at(name_len);
    (name, args.trim_start())
}

/// The statement part of `%timeit [-n<N> -r<R> [-t|-c] -q -p<P> -o] statement`.
pub(crate) fn strip_timeit_options(mut args: &str) -> &str {
    loop {
        let trimmed = args.trim_start();
        let Some(option) = trimmed.strip_prefix('-') else {
            return trimmed;
        };
        let mut chars = option.chars();
        let Some(flag) = chars.next() else {
            return trimmed;
        };
        let after_flag = chars.as_str();
        args = match flag {
            // Options with a value, written `-n10` or `-n 10`.
            'n' | 'r' | 'p' => {
                let value = if after_flag.starts_with(char::is_whitespace) {
                    after_flag.trim_start()
                } else {
                    after_flag
                };
                let value_len = value.find(char::is_whitespace).unwrap_or(value.len());
                &value[value_len..]
            }
            't' | 'c' | 'q' | 'o' => after_flag,
            _ => return trimmed,
        };
    }
}

/// The script a `%run [options] script.py [args]` runs, for messages.
pub(crate) fn run_magic_target(args: &str) -> &str {
    args.split_whitespace()
        .find(|word| !word.starts_with('-'))
        .unwrap_or("")
}

/// One piece of Python that IPython's variable expansion would evaluate in a shell command or a
/// magic's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expansion<'a> {
    /// `$name` or `$name.attr`: the root name.
    Name(&'a str),
    /// `{expression}` or `${expression}`: the expression text.
    Expression(&'a str),
}

/// The expansions IPython would try in `text`: `$name`, `${expr}` and `{expr}`, skipping the
/// escapes `$$` and `{{`/`}}`. IPython leaves the text unchanged when an expansion fails, so
/// everything found here is a *possible* read, never a required one.
pub(crate) fn expansions(text: &str) -> Vec<Expansion<'_>> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'$' if bytes.get(index + 1) == Some(&b'$') => index += 2,
            b'$' if bytes.get(index + 1) == Some(&b'{') => match braced(text, index + 1) {
                Some((inner, next)) => {
                    found.push(Expansion::Expression(inner));
                    index = next;
                }
                // Nothing after an unclosed brace can be an expansion IPython evaluates.
                None => break,
            },
            b'$' => {
                let rest = &text[index + 1..];
                let name_len = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                let name = &rest[..name_len];
                if is_identifier(name) {
                    found.push(Expansion::Name(name));
                }
                index += 1 + name_len;
            }
            b'{' if bytes.get(index + 1) == Some(&b'{') => index += 2,
            b'{' => match braced(text, index) {
                Some((inner, next)) => {
                    found.push(Expansion::Expression(inner));
                    index = next;
                }
                None => break,
            },
            _ => index += 1,
        }
    }
    found
}

/// The text between the `{` at `open` and its matching `}`, and the index after the `}`.
fn braced(text: &str, open: usize) -> Option<(&str, usize)> {
    let mut depth = 0usize;
    for (offset, byte) in text.as_bytes()[open..].iter().enumerate() {
        match byte {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    let close = open + offset;
                    return Some((&text[open + 1..close], close + 1));
                }
            }
            _ => {}
        }
    }
    None
}

/// The root name of a help target such as `obj`, `obj.method` or `np.linalg.norm`, if the target
/// is a plain dotted path (not a wildcard search like `np.*load*?`).
pub(crate) fn help_target_root(value: &str) -> Option<&str> {
    let target = value.trim();
    if !target
        .split('.')
        .all(|part| is_identifier(part) || part.ends_with("()"))
    {
        return None;
    }
    target.split('.').next().filter(|root| is_identifier(root))
}

/// `source` with every line that is an IPython wildcard search (`np.*load*?`, `?*Error`,
/// `%psearch` is a magic and parses already) replaced by spaces, or `None` if there is none.
/// Offsets, lines and columns are unchanged.
pub(crate) fn blank_wildcard_help(source: &str) -> Option<String> {
    let mut changed = false;
    let mut output = String::with_capacity(source.len());
    for line in source.split_inclusive('\n') {
        let content = line.trim_end_matches(['\n', '\r']);
        if is_wildcard_help(content.trim()) {
            changed = true;
            output.extend(std::iter::repeat_n(' ', content.len()));
            output.push_str(&line[content.len()..]);
        } else {
            output.push_str(line);
        }
    }
    changed.then_some(output)
}

fn is_wildcard_help(line: &str) -> bool {
    let target = line
        .strip_suffix("??")
        .or_else(|| line.strip_suffix('?'))
        .or_else(|| line.strip_prefix("??"))
        .or_else(|| line.strip_prefix('?'));
    target.is_some_and(|target| {
        target.contains('*')
            && target
                .chars()
                .all(|c| c == '*' || c == '.' || c == '_' || c.is_alphanumeric())
    })
}

/// A Python identifier (ASCII letters, digits and `_`, or any non-ASCII letter; not starting
/// with a digit). Keywords are not excluded: callers only use this on text that is not Python.
pub(crate) fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|first| first == '_' || first.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_magic_is_the_first_non_blank_line() {
        let magic = find_cell_magic("\n  \n%%time -v\nx = 1\n").unwrap();
        assert_eq!((magic.name, magic.args), ("time", "-v"));
        assert_eq!((magic.start, magic.end), (4, 13));
        assert_eq!(magic.mode, CellMagicMode::Python);
        assert_eq!(
            find_cell_magic("%%bash\nls").unwrap().mode,
            CellMagicMode::Opaque
        );
        assert_eq!(
            find_cell_magic("%%timeit\nf()").unwrap().mode,
            CellMagicMode::Isolated
        );
        assert_eq!(find_cell_magic("x = 1\n%%time\n"), None);
        assert_eq!(find_cell_magic(" %%time\n"), None);
        assert_eq!(find_cell_magic(""), None);
    }

    #[test]
    fn capture_output_is_the_first_non_option_word() {
        for (args, name) in [
            ("--no-stderr out", Some("out")),
            ("--no-display", None),
            ("", None),
        ] {
            assert_eq!(capture_output_name(args), name, "{args:?}");
        }
    }

    #[test]
    fn timeit_options_are_stripped() {
        for (args, statement) in [
            ("-n 10 -r3 -q f(x)", "f(x)"),
            ("-n10 -o x + 1", "x + 1"),
            ("-x", "-x"),
            ("f()", "f()"),
            ("-", "-"),
        ] {
            assert_eq!(strip_timeit_options(args), statement, "{args:?}");
        }
    }

    #[test]
    fn expansions_follow_ipython_rules() {
        assert_eq!(
            expansions("echo {x + 1} $y $$z {{literal}} ${w} $HOME/$1"),
            vec![
                Expansion::Expression("x + 1"),
                Expansion::Name("y"),
                Expansion::Expression("w"),
                Expansion::Name("HOME"),
            ]
        );
        assert_eq!(
            expansions("awk '{print $1}' {unclosed {x}"),
            vec![Expansion::Expression("print $1")]
        );
        assert_eq!(expansions("$ { }"), vec![Expansion::Expression(" ")]);
    }

    #[test]
    fn wildcard_searches_are_blanked_in_place() {
        assert_eq!(
            blank_wildcard_help("x = 1\nnp.*load*?\r\n?*Error\ny = 2").as_deref(),
            Some("x = 1\n          \r\n       \ny = 2")
        );
        assert_eq!(blank_wildcard_help("obj?\nx = a * b ?"), None);
    }

    #[test]
    fn help_targets_are_dotted_paths() {
        for (target, root) in [
            ("df.head", Some("df")),
            (" obj ", Some("obj")),
            ("np.*load*", None),
            ("%timeit", None),
        ] {
            assert_eq!(help_target_root(target), root, "{target:?}");
        }
    }
}
