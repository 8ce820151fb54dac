//! Tracebacks of error outputs: ANSI removed, and trimmed to the frames that help.
//!
//! IPython (7, 8 and 9) sends a traceback as a list of ANSI-coloured strings, mostly one per
//! frame; other kernels and `%xmode Plain` send Python's plain format, several frames in one
//! string. Both are split into frames. A pandas `KeyError` typically has a dozen library frames
//! around two lines of user code; the agent needs the user code, the last frames where the error
//! was raised, and the final `Name: message` line.

use crate::terminal::{plural, render_terminal};
use crate::truncate::marker;

/// How much of a traceback to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TracebackOptions {
    /// Frames kept at the end of the last exception of a chain (where the error was raised).
    /// Earlier exceptions of a chain keep their last frame.
    pub tail_frames: usize,
    /// Frames from user code kept per exception; beyond that the first one and the deepest ones.
    pub max_user_frames: usize,
    /// Lines of source context kept around the current line of a frame.
    pub max_frame_lines: usize,
}

impl Default for TracebackOptions {
    fn default() -> Self {
        Self {
            tail_frames: 2,
            max_user_frames: 4,
            max_frame_lines: 8,
        }
    }
}

/// A condensed traceback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CondensedTraceback {
    /// The traceback without ANSI and terminal control, trimmed when asked (each cut marked),
    /// ending with the `Name: message` line.
    pub text: String,
    /// Characters of frames and context lines left out (each cut is marked in `text`).
    pub dropped_chars: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Frame {
        user: bool,
    },
    /// "The above exception was the direct cause of the following exception:" and the like.
    Chain,
    Other,
}

#[derive(Debug, Clone)]
struct Block {
    kind: BlockKind,
    lines: Vec<String>,
}

impl Block {
    fn char_count(&self) -> usize {
        self.lines.iter().map(|line| line.chars().count() + 1).sum()
    }
}

fn is_frame_start(line: &str) -> bool {
    let trimmed = line.trim_start();
    if ["Cell In[", "Cell In [", "Input In [", "<ipython-input-"]
        .iter()
        .any(|prefix| trimmed.starts_with(prefix))
    {
        return true;
    }
    // Python's plain format: `  File "/path/x.py", line 3, in f`.
    if trimmed.starts_with("File \"") && trimmed.contains("\", line ") {
        return true;
    }
    // IPython 8/9: `File ~/lib/python3.11/site-packages/pandas/core/frame.py:4102, in ...`
    // at the start of the line.
    if line.starts_with("File ") {
        return true;
    }
    // IPython 7: `~/lib/python3.8/site-packages/pandas/core/frame.py in __getitem__(self, key)`.
    let mut words = line.split(' ');
    matches!(
        (words.next(), words.next()),
        (Some(path), Some("in")) if [".py", ".pyx", ".pxi"].iter().any(|ext| path.ends_with(ext))
    )
}

fn is_user_frame(first_line: &str) -> bool {
    let trimmed = first_line.trim_start();
    if ["Cell In", "Input In", "<ipython-input-"]
        .iter()
        .any(|prefix| trimmed.starts_with(prefix))
    {
        return true;
    }
    // ipykernel writes cell code to temporary files named like this.
    if trimmed.contains("/ipykernel_") {
        return true;
    }
    let library_markers = [
        "site-packages",
        "dist-packages",
        "/lib/python",
        "\\lib\\",
        "\\Lib\\",
        "<frozen ",
        ".pyx",
        ".pxi",
        "/usr/lib/",
    ];
    !library_markers
        .iter()
        .any(|marker| trimmed.contains(marker))
}

fn is_chain_message(line: &str) -> bool {
    line.contains("The above exception was the direct cause of the following exception")
        || line.contains("During handling of the above exception, another exception occurred")
}

fn is_rule(line: &str) -> bool {
    let trimmed = line.trim();
    trimmed.len() >= 20 && trimmed.bytes().all(|b| b == b'-')
}

fn is_arrow(line: &str) -> bool {
    let trimmed = line.trim_start();
    trimmed.starts_with('-') && trimmed.chars().take(6).any(|c| c == '>')
}

fn parse_blocks(entries: &[String]) -> Vec<Block> {
    let mut blocks: Vec<Block> = Vec::new();
    for entry in entries {
        let text = render_terminal(entry);
        let mut current: Option<Block> = None;
        for line in text.split('\n') {
            let starts_frame = is_frame_start(line);
            let starts_chain = is_chain_message(line);
            if starts_frame || starts_chain || current.is_none() {
                if let Some(block) = current.take() {
                    blocks.push(block);
                }
                let kind = if starts_frame {
                    BlockKind::Frame {
                        user: is_user_frame(line),
                    }
                } else if starts_chain {
                    BlockKind::Chain
                } else {
                    BlockKind::Other
                };
                current = Some(Block {
                    kind,
                    lines: Vec::new(),
                });
            }
            let block = current.as_mut().expect("a block is open");
            // Text after a chain message, and an unindented line after a frame's source lines
            // (the `Name: message` line of the plain format), start a new block.
            let ends_block = match block.kind {
                BlockKind::Chain => !starts_chain && !line.trim().is_empty(),
                BlockKind::Frame { .. } => {
                    !starts_frame
                        && line.starts_with(|c: char| !c.is_whitespace())
                        && !is_arrow(line)
                }
                BlockKind::Other => false,
            };
            if ends_block {
                blocks.push(current.take().expect("a block is open"));
                current = Some(Block {
                    kind: BlockKind::Other,
                    lines: vec![line.to_owned()],
                });
                continue;
            }
            block.lines.push(line.to_owned());
        }
        if let Some(block) = current.take() {
            blocks.push(block);
        }
    }
    for block in &mut blocks {
        block.lines.retain(|line| !is_rule(line));
        while block
            .lines
            .last()
            .is_some_and(|line| line.trim().is_empty())
        {
            block.lines.pop();
        }
        while block
            .lines
            .first()
            .is_some_and(|line| line.trim().is_empty())
        {
            block.lines.remove(0);
        }
        for line in &mut block.lines {
            line.truncate(line.trim_end().len());
            if line.contains("Traceback (most recent call last)") {
                *line = line.split_whitespace().collect::<Vec<_>>().join(" ");
            }
        }
    }
    blocks.retain(|block| !block.lines.is_empty());
    blocks
}

/// Keeps the header line and a window of context around the current line (the `---->` arrow).
fn trim_frame_context(block: &Block, max_lines: usize) -> (Vec<String>, usize) {
    if block.lines.len() <= max_lines + 1 {
        return (block.lines.clone(), 0);
    }
    let arrow = block
        .lines
        .iter()
        .rposition(|line| is_arrow(line))
        .unwrap_or(block.lines.len() - 1)
        .max(1);
    let before = max_lines.saturating_sub(2).max(1);
    let mut start = arrow.saturating_sub(before).max(1);
    let mut end = (arrow + 2).min(block.lines.len()).max(start + 1);
    // A marker in place of a single line would save nothing.
    if start == 2 {
        start = 1;
    }
    if end + 1 == block.lines.len() {
        end = block.lines.len();
    }
    let mut kept = vec![block.lines[0].clone()];
    let mut dropped_chars = omit(&block.lines[1..start], &mut kept);
    kept.extend(block.lines[start..end].iter().cloned());
    dropped_chars += omit(&block.lines[end..], &mut kept);
    (kept, dropped_chars)
}

/// Puts one marker line in `kept` for the `omitted` lines, if there are any, and returns the
/// characters they held (with their newlines).
fn omit(omitted: &[String], kept: &mut Vec<String>) -> usize {
    if omitted.is_empty() {
        return 0;
    }
    kept.push(format!(
        "   … [{} omitted] …",
        plural(omitted.len(), "line", "lines")
    ));
    omitted.iter().map(|line| line.chars().count() + 1).sum()
}

fn frames_to_keep(section: &[Block], tail_frames: usize, options: &TracebackOptions) -> Vec<bool> {
    let frames: Vec<usize> = (0..section.len())
        .filter(|&index| matches!(section[index].kind, BlockKind::Frame { .. }))
        .collect();
    let mut keep = vec![true; section.len()];
    if frames.len() <= tail_frames + 1 {
        return keep;
    }
    for &index in &frames {
        keep[index] = false;
    }
    let user: Vec<usize> = frames
        .iter()
        .copied()
        .filter(|&index| section[index].kind == BlockKind::Frame { user: true })
        .collect();
    if user.is_empty() {
        keep[frames[0]] = true;
    } else if user.len() <= options.max_user_frames {
        for &index in &user {
            keep[index] = true;
        }
    } else {
        keep[user[0]] = true;
        for &index in &user[user.len() - options.max_user_frames.saturating_sub(1)..] {
            keep[index] = true;
        }
    }
    for &index in &frames[frames.len().saturating_sub(tail_frames)..] {
        keep[index] = true;
    }
    keep
}

/// Condenses the traceback of an error output. With `trim` false, only ANSI and terminal
/// control are removed; with `trim` true, frames are trimmed as [`TracebackOptions`] says. The
/// result always ends with the `Name: message` line.
pub fn condense_traceback(
    ename: &str,
    evalue: &str,
    traceback: &[String],
    trim: bool,
    options: &TracebackOptions,
) -> CondensedTraceback {
    let final_line = if evalue.is_empty() {
        ename.to_owned()
    } else {
        format!("{ename}: {evalue}")
    };
    let blocks = parse_blocks(traceback);
    let sections: Vec<&[Block]> = blocks
        .split(|block| block.kind == BlockKind::Chain)
        .collect();
    let chain_messages: Vec<&Block> = blocks
        .iter()
        .filter(|block| block.kind == BlockKind::Chain)
        .collect();
    let mut lines: Vec<String> = Vec::new();
    let mut dropped_chars = 0usize;
    for (section_index, section) in sections.iter().enumerate() {
        if section_index > 0 {
            lines.push(String::new());
            lines.extend(chain_messages[section_index - 1].lines.iter().cloned());
            lines.push(String::new());
        }
        let is_last = section_index + 1 == sections.len();
        let keep = if trim {
            frames_to_keep(
                section,
                if is_last { options.tail_frames } else { 1 },
                options,
            )
        } else {
            vec![true; section.len()]
        };
        let mut omitted = (0usize, 0usize);
        let flush = |omitted: &mut (usize, usize), lines: &mut Vec<String>| {
            let (count, user) = *omitted;
            if count > 0 {
                lines.push(if user == 0 {
                    marker(&format!(
                        "{} omitted",
                        plural(count, "library frame", "library frames")
                    ))
                } else {
                    marker(&format!(
                        "{} omitted, {} in user code",
                        plural(count, "frame", "frames"),
                        group(user)
                    ))
                });
            }
            *omitted = (0, 0);
        };
        for (block, keep) in section.iter().zip(keep) {
            if !keep {
                omitted.0 += 1;
                if block.kind == (BlockKind::Frame { user: true }) {
                    omitted.1 += 1;
                }
                dropped_chars += block.char_count();
                continue;
            }
            flush(&mut omitted, &mut lines);
            if trim && matches!(block.kind, BlockKind::Frame { .. }) {
                let (kept, dropped) = trim_frame_context(block, options.max_frame_lines);
                dropped_chars += dropped;
                lines.extend(kept);
            } else {
                lines.extend(block.lines.iter().cloned());
            }
        }
        flush(&mut omitted, &mut lines);
    }
    let ends_with_error = lines
        .iter()
        .rev()
        .find(|line| !line.trim().is_empty())
        .is_some_and(|line| line.starts_with(ename));
    if !ends_with_error && !ename.is_empty() || lines.is_empty() {
        lines.push(final_line);
    }
    CondensedTraceback {
        text: lines.join("\n"),
        dropped_chars,
    }
}

fn group(count: usize) -> String {
    crate::terminal::group_thousands(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Condenses a traceback given as `&str` entries, trimmed with the default options.
    fn trimmed(ename: &str, evalue: &str, traceback: &[&str]) -> CondensedTraceback {
        let traceback: Vec<String> = traceback.iter().map(|entry| (*entry).to_owned()).collect();
        condense_traceback(
            ename,
            evalue,
            &traceback,
            true,
            &TracebackOptions::default(),
        )
    }

    #[test]
    fn frames_are_recognised() {
        assert!(is_frame_start("Cell In[3], line 5"));
        assert!(is_frame_start(
            "File ~/x/site-packages/pandas/core/frame.py:4102, in DataFrame.__getitem__(self, key)"
        ));
        assert!(is_frame_start(
            "  File \"/usr/lib/python3.11/json/decoder.py\", line 337, in decode"
        ));
        assert!(is_frame_start(
            "~/lib/python3.8/site-packages/pandas/core/frame.py in __getitem__(self, key)"
        ));
        assert!(!is_frame_start("    File = 3"));
        assert!(is_user_frame("Cell In[3], line 5"));
        assert!(is_user_frame("File ~/project/utils.py:12, in load()"));
        assert!(!is_user_frame(
            "File ~/.venv/lib/python3.11/site-packages/pandas/core/frame.py:4102"
        ));
    }

    #[test]
    fn plain_python_traceback_in_one_string_is_split_and_trimmed() {
        let traceback = "Traceback (most recent call last):\n  File \"/home/u/main.py\", line 9, in <module>\n    run()\n\
            \x20 File \"/usr/lib/python3.11/a.py\", line 1, in a\n    b()\n  File \"/usr/lib/python3.11/b.py\", line 2, in b\n    c()\n\
            \x20 File \"/usr/lib/python3.11/c.py\", line 3, in c\n    d()\n  File \"/usr/lib/python3.11/d.py\", line 4, in d\n    raise ValueError(\"bad\")\nValueError: bad";
        let condensed = trimmed("ValueError", "bad", &[traceback]);
        assert_eq!(
            condensed.text,
            "Traceback (most recent call last):\n  File \"/home/u/main.py\", line 9, in <module>\n    run()\n\
             … [2 library frames omitted] …\n  File \"/usr/lib/python3.11/c.py\", line 3, in c\n    d()\n\
             \x20 File \"/usr/lib/python3.11/d.py\", line 4, in d\n    raise ValueError(\"bad\")\nValueError: bad"
        );
        assert!(condensed.dropped_chars > 0);
    }

    #[test]
    fn final_line_is_added_when_missing() {
        let condensed = trimmed("KeyboardInterrupt", "", &[]);
        assert_eq!(condensed.text, "KeyboardInterrupt");
        let condensed = trimmed("E", "m", &["\u{1b}[31msomething\u{1b}[0m"]);
        assert_eq!(condensed.text, "something\nE: m");
    }

    #[test]
    fn long_frame_context_is_cut_around_the_arrow() {
        let mut frame = String::from("File ~/.venv/lib/python3.11/site-packages/x.py:40, in f()");
        for line in 30..45 {
            let arrow = if line == 40 { "-> " } else { "   " };
            frame.push_str(&format!("\n{arrow}{line} code_{line}"));
        }
        let condensed = trimmed("E", "m", &[&frame, "E: m"]);
        assert_eq!(
            condensed.text,
            "File ~/.venv/lib/python3.11/site-packages/x.py:40, in f()\n   … [4 lines omitted] …\n   34 code_34\n   35 code_35\n   36 code_36\n   37 code_37\n   38 code_38\n   39 code_39\n-> 40 code_40\n   41 code_41\n   … [3 lines omitted] …\nE: m"
        );
    }
}
