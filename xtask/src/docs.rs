//! `cargo xtask docs`: the book in `docs/` (mdBook; chapters in `docs/src/`, their order in
//! `docs/src/SUMMARY.md`) and the README that points into it.
//!
//! First the links: every relative link and `#anchor` in `README.md` and `docs/src/**/*.md`
//! must lead to a file of the repository and, for a Markdown file, to one of its headings, and
//! `SUMMARY.md` must list every chapter file. Anchors follow GitHub's slug rule, which mdBook's
//! heading ids also follow for the headings we write: the heading's text lower-cased, letters,
//! digits, `-` and `_` kept, spaces turned into `-`, everything else dropped; a repeated slug gets
//! `-1`, `-2`, …. Links to other sites are not fetched. What is parsed: inline links and images
//! (`[text](target)`, `<target>` and a title allowed), reference definitions (`[name]: target`),
//! ATX headings (`## …`); code spans and fenced code blocks are skipped. Raw HTML and setext
//! headings are not read.
//!
//! Then the build: mdBook, pinned to [`MDBOOK_VERSION`] and installed with `cargo install` into
//! `<target>/tools` the first time (without its `serve`, `watch` and `search` features, which a
//! build does not need), writes the book to `<target>/book`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{cargo, root, run, target_dir};

/// The mdBook release the book is built with.
const MDBOOK_VERSION: &str = "0.5.4";

pub(crate) fn docs() -> Result<()> {
    let installing = install_in_background()?;
    docs_after(installing)
}

/// Starts installing mdBook when it is missing or another version, in the background, its
/// output in `<target>/tools/mdbook-install.log`: CI starts it first, while its first minutes
/// download the Python environment and the corpus and leave the processors idle.
pub(crate) fn install_in_background() -> Result<Option<std::process::Child>> {
    let tools = target_dir().join("tools");
    if installed_version(&mdbook_path()).as_deref() == Some(&format!("mdbook v{MDBOOK_VERSION}")) {
        return Ok(None);
    }
    eprintln!(
        "docs: installing mdBook {MDBOOK_VERSION} into {} in the background (a few minutes of compiling)",
        tools.display()
    );
    std::fs::create_dir_all(&tools)?;
    let log = std::fs::File::create(tools.join("mdbook-install.log"))?;
    let child = cargo()
        .args([
            "install",
            "mdbook",
            "--locked",
            "--version",
            MDBOOK_VERSION,
            "--no-default-features",
            "--root",
        ])
        .arg(&tools)
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("starting `cargo install mdbook`")?;
    Ok(Some(child))
}

/// The link check, then the book, built by the mdBook that `installing` (from
/// [`install_in_background`]) installs once it has finished.
pub(crate) fn docs_after(installing: Option<std::process::Child>) -> Result<()> {
    let root = root();
    let report = check_links(&root, &root.join("docs/src"))?;
    if !report.problems.is_empty() {
        bail!(
            "docs: {} broken link(s) or unlisted chapter(s):\n  {}",
            report.problems.len(),
            report.problems.join("\n  ")
        );
    }
    eprintln!(
        "docs: {} links in {} files lead somewhere; SUMMARY.md lists every chapter",
        report.links, report.files
    );
    if let Some(mut child) = installing {
        let status = child.wait()?;
        if !status.success() {
            let log = target_dir().join("tools/mdbook-install.log");
            bail!(
                "installing mdBook failed ({status}; it needs crates.io or a mirror):\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
    }
    let mdbook = mdbook_path();
    if installed_version(&mdbook).is_none() {
        bail!("no working mdBook at {}", mdbook.display());
    }
    let destination = target_dir().join("book");
    run(Command::new(&mdbook)
        .arg("build")
        .arg(root.join("docs"))
        .arg("--dest-dir")
        .arg(&destination))?;
    eprintln!(
        "docs: the book is in {}",
        destination.join("index.html").display()
    );
    Ok(())
}

/// Where the pinned mdBook is installed: `<target>/tools/bin`.
fn mdbook_path() -> PathBuf {
    target_dir()
        .join("tools")
        .join("bin")
        .join(format!("mdbook{}", std::env::consts::EXE_SUFFIX))
}

/// What `mdbook --version` prints (`None`: no working mdBook there).
fn installed_version(binary: &Path) -> Option<String> {
    Command::new(binary)
        .arg("--version")
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// What [`check_links`] found.
#[derive(Debug, Default)]
struct Report {
    files: usize,
    links: usize,
    /// One line per broken link or unlisted chapter: `file:line: target: why`.
    problems: Vec<String>,
}

/// Checks the links of `README.md` and of every Markdown file under `book_source`, and that
/// the book's `SUMMARY.md` lists every other Markdown file there.
fn check_links(repository: &Path, book_source: &Path) -> Result<Report> {
    let mut files = vec![repository.join("README.md")];
    let mut chapters = Vec::new();
    markdown_files(book_source, &mut chapters)?;
    chapters.sort();
    files.extend(chapters.iter().cloned());
    let summary = book_source.join("SUMMARY.md");
    let mut anchors = AnchorCache::default();
    let mut report = Report {
        files: files.len(),
        ..Report::default()
    };
    let mut listed = BTreeSet::new();
    for file in &files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let shown = display(repository, file);
        for link in links(&text) {
            report.links += 1;
            let is_summary = *file == summary;
            if is_summary && link.target.is_empty() {
                // mdBook's draft chapter: `- [Title]()`.
                continue;
            }
            match resolve(repository, file, &link.target, &mut anchors) {
                Ok(Some(path)) if is_summary => {
                    listed.insert(path);
                }
                Ok(_) => {}
                Err(why) => report
                    .problems
                    .push(format!("{shown}:{}: {}: {why}", link.line, link.target)),
            }
        }
    }
    if !summary.exists() {
        report
            .problems
            .push(format!("{} is missing", display(repository, &summary)));
    }
    for chapter in chapters.iter().filter(|chapter| **chapter != summary) {
        if !listed.contains(chapter) {
            report.problems.push(format!(
                "{} is not listed in {}",
                display(repository, chapter),
                display(repository, &summary)
            ));
        }
    }
    Ok(report)
}

fn display(repository: &Path, path: &Path) -> String {
    path.strip_prefix(repository)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Every `.md` file under `folder`, recursively.
fn markdown_files(folder: &Path, found: &mut Vec<PathBuf>) -> Result<()> {
    let entries =
        std::fs::read_dir(folder).with_context(|| format!("reading {}", folder.display()))?;
    for entry in entries {
        let path = entry?.path();
        if path.is_dir() {
            markdown_files(&path, found)?;
        } else if path.extension().is_some_and(|extension| extension == "md") {
            found.push(path);
        }
    }
    Ok(())
}

/// The anchors of each Markdown file read so far.
#[derive(Default)]
struct AnchorCache(BTreeMap<PathBuf, BTreeSet<String>>);

impl AnchorCache {
    fn of(&mut self, file: &Path) -> Result<&BTreeSet<String>, String> {
        if !self.0.contains_key(file) {
            let text = std::fs::read_to_string(file).map_err(|error| format!("{error}"))?;
            self.0
                .insert(file.to_path_buf(), anchors(&text).into_iter().collect());
        }
        Ok(&self.0[file])
    }
}

/// Where a link from `from` to `target` leads: `Ok(None)` for another site, `Ok(Some(file))`
/// for a file or folder of the repository, `Err(why)` when it leads nowhere.
fn resolve(
    repository: &Path,
    from: &Path,
    target: &str,
    anchors: &mut AnchorCache,
) -> Result<Option<PathBuf>, String> {
    if target.is_empty() {
        return Err("an empty link".to_owned());
    }
    if has_scheme(target) {
        return Ok(None);
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    if path.starts_with('/') {
        return Err("an absolute path: write it relative to the file".to_owned());
    }
    let file = if path.is_empty() {
        from.to_path_buf()
    } else {
        let joined = from.parent().unwrap_or(repository).join(path);
        let normal = normalize(&joined);
        if !normal.starts_with(repository) {
            return Err("leads out of the repository".to_owned());
        }
        if !normal.exists() {
            return Err(format!("no such file: {}", display(repository, &normal)));
        }
        normal
    };
    if let Some(anchor) = anchor {
        let is_markdown = file.extension().is_some_and(|extension| extension == "md");
        if is_markdown && !anchors.of(&file)?.contains(anchor) {
            return Err(format!(
                "no heading of {} has the anchor #{anchor}",
                display(repository, &file)
            ));
        }
    }
    Ok(Some(file))
}

/// `scheme:` as in `https:`, `mailto:` (a link to another site).
fn has_scheme(target: &str) -> bool {
    let Some((scheme, _)) = target.split_once(':') else {
        return false;
    };
    let mut characters = scheme.chars();
    characters
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic())
        && characters.all(|character| {
            character.is_ascii_alphanumeric() || matches!(character, '+' | '.' | '-')
        })
}

/// `path` with `.` and `..` resolved by name, without asking the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
}

/// A heading's anchor: GitHub's (and mdBook's) slug of its text.
fn slug(heading: &str) -> String {
    let mut slug = String::new();
    for character in heading.trim().chars() {
        if character.is_alphanumeric() || character == '-' || character == '_' {
            slug.extend(character.to_lowercase());
        } else if character == ' ' {
            slug.push('-');
        }
    }
    slug
}

/// A heading's text without the destinations of its links (`[text](target)` shows `text`);
/// the rest of its markup is punctuation, which [`slug`] drops.
fn heading_text(raw: &str) -> String {
    let mut text = String::new();
    let mut rest = raw;
    while let Some(start) = rest.find("](") {
        text.push_str(&rest[..start]);
        let mut depth = 0_usize;
        let mut end = rest.len();
        for (offset, character) in rest[start + 1..].char_indices() {
            match character {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = start + 1 + offset + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &rest[end..];
    }
    text.push_str(rest);
    text
}

/// The anchors of a Markdown file's headings, in order, repeats numbered as GitHub and mdBook
/// number them.
fn anchors(markdown: &str) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = Vec::new();
    for line in prose_lines(markdown) {
        let Some(heading) = atx_heading(line) else {
            continue;
        };
        let base = slug(&heading_text(heading));
        let count = seen.entry(base.clone()).or_insert(0);
        anchors.push(if *count == 0 {
            base
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    anchors
}

/// The content of an ATX heading line (`## Title ##` → `Title`), if it is one.
fn atx_heading(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let level = rest.len() - rest.trim_start_matches('#').len();
    if !(1..=6).contains(&level) {
        return None;
    }
    let content = &rest[level..];
    if !content.is_empty() && !content.starts_with([' ', '\t']) {
        return None;
    }
    let content = content.trim();
    // A closing run of `#` counts only after a space (or as the whole content).
    let without_closing = content.trim_end_matches('#');
    Some(
        if without_closing.is_empty() || without_closing.ends_with([' ', '\t']) {
            without_closing.trim_end()
        } else {
            content
        },
    )
}

/// The file's lines, each line of a fenced code block (fences included) replaced by an empty
/// one, so line numbers stay.
fn prose_lines(markdown: &str) -> Vec<&str> {
    let mut fence: Option<(char, usize)> = None;
    markdown
        .lines()
        .map(|line| {
            let trimmed = line.trim_start();
            let marker = trimmed
                .chars()
                .next()
                .filter(|first| matches!(first, '`' | '~'));
            let run = marker.map_or(0, |marker| {
                trimmed.len() - trimmed.trim_start_matches(marker).len()
            });
            match (fence, marker) {
                (None, Some(marker)) if run >= 3 => {
                    fence = Some((marker, run));
                    ""
                }
                (Some((open, length)), Some(marker))
                    if marker == open
                        && run >= length
                        && trimmed.trim_start_matches(marker).trim().is_empty() =>
                {
                    fence = None;
                    ""
                }
                (Some(_), _) => "",
                (None, _) => line,
            }
        })
        .collect()
}

/// A link's destination and the 1-based line it is on.
#[derive(Debug, PartialEq, Eq)]
struct Link {
    line: usize,
    target: String,
}

/// The destinations of a Markdown file's inline links and images and of its reference
/// definitions, outside code.
fn links(markdown: &str) -> Vec<Link> {
    let lines = prose_lines(markdown);
    let mut found = Vec::new();
    for (number, line) in lines.iter().enumerate() {
        if let Some(target) = reference_definition(line) {
            found.push(Link {
                line: number + 1,
                target: target.to_owned(),
            });
        }
    }
    // Inline links may wrap across the lines of a paragraph.
    let text = lines.join("\n");
    let characters: Vec<char> = text.chars().collect();
    let mut line = 1;
    let mut open_brackets = 0_usize;
    let mut index = 0;
    while index < characters.len() {
        match characters[index] {
            '\\' => {
                if characters.get(index + 1) == Some(&'\n') {
                    line += 1;
                }
                index += 2;
                continue;
            }
            '\n' => {
                line += 1;
                // A blank line ends the paragraph, and any bracket left open in it.
                if characters.get(index + 1) == Some(&'\n') {
                    open_brackets = 0;
                }
            }
            '`' => {
                let run = characters[index..]
                    .iter()
                    .take_while(|character| **character == '`')
                    .count();
                if let Some(end) = code_span_end(&characters, index + run, run) {
                    line += newlines(&characters[index..end]);
                    index = end;
                    continue;
                }
                index += run;
                continue;
            }
            '[' => open_brackets += 1,
            ']' if open_brackets > 0 => {
                open_brackets -= 1;
                if characters.get(index + 1) == Some(&'(') {
                    let (target, end) = destination(&characters, index + 2);
                    found.push(Link {
                        line,
                        target: target.trim().to_owned(),
                    });
                    line += newlines(&characters[index..end]);
                    index = end;
                    continue;
                }
            }
            _ => {}
        }
        index += 1;
    }
    found.sort_by_key(|link| link.line);
    found
}

/// How many line breaks `characters` holds.
fn newlines(characters: &[char]) -> usize {
    characters
        .iter()
        .filter(|character| **character == '\n')
        .count()
}

/// Where a code span opened by `run` backticks ends (just past its closing run), if it closes
/// within the paragraph.
fn code_span_end(characters: &[char], from: usize, run: usize) -> Option<usize> {
    let mut index = from;
    while index < characters.len() {
        if characters[index] == '\n' && characters.get(index + 1) == Some(&'\n') {
            return None;
        }
        if characters[index] == '`' {
            let length = characters[index..]
                .iter()
                .take_while(|character| **character == '`')
                .count();
            if length == run {
                return Some(index + length);
            }
            index += length;
            continue;
        }
        index += 1;
    }
    None
}

/// The destination of an inline link whose `(` is just before `from`, and the index just past
/// its closing `)`.
fn destination(characters: &[char], from: usize) -> (String, usize) {
    let mut index = from;
    while characters
        .get(index)
        .is_some_and(|character| *character == ' ')
    {
        index += 1;
    }
    let mut target = String::new();
    if characters.get(index) == Some(&'<') {
        index += 1;
        while let Some(character) = characters.get(index) {
            index += 1;
            if *character == '>' {
                break;
            }
            target.push(*character);
        }
    } else {
        let mut depth = 0_usize;
        while let Some(character) = characters.get(index) {
            match character {
                '(' => depth += 1,
                ')' if depth == 0 => break,
                ')' => depth -= 1,
                character if character.is_whitespace() => break,
                _ => {}
            }
            target.push(*character);
            index += 1;
        }
    }
    // An optional title, then the closing parenthesis.
    while let Some(character) = characters.get(index) {
        index += 1;
        if *character == ')' {
            break;
        }
    }
    (target, index)
}

/// The destination of a reference definition line (`[name]: target "title"`), if it is one.
fn reference_definition(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = line[indent..].strip_prefix('[').filter(|_| indent <= 3)?;
    let (label, after) = rest.split_once("]:")?;
    if label.is_empty() || label.starts_with('^') {
        return None;
    }
    let target = after.split_whitespace().next()?;
    Some(
        target
            .strip_prefix('<')
            .and_then(|inner| inner.strip_suffix('>'))
            .unwrap_or(target),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_github() {
        for (heading, anchor) in [
            ("Several servers, one URL", "several-servers-one-url"),
            (
                "Kernels on a Jupyter Server or Gateway",
                "kernels-on-a-jupyter-server-or-gateway",
            ),
            ("Colab in a VS Code window", "colab-in-a-vs-code-window"),
            ("C++ & Rust!", "c--rust"),
            ("check_colab: the proof", "check_colab-the-proof"),
            ("  Über café 2  ", "über-café-2"),
            ("a - b", "a---b"),
        ] {
            assert_eq!(slug(heading), anchor, "{heading:?}");
        }
    }

    #[test]
    fn headings_become_anchors_and_repeats_are_numbered() {
        let markdown = "# Title\n\n## `run_cells` and **friends**\n\n## Undo\n\ntext\n\n\
                        ```sh\n# not a heading\n```\n\n### Undo ###\n\n#nope\n    # code\n\
                        ## [Linked](other.md#x) heading\n## Undo\n";
        assert_eq!(
            anchors(markdown),
            [
                "title",
                "run_cells-and-friends",
                "undo",
                "undo-1",
                "linked-heading",
                "undo-2"
            ]
        );
    }

    #[test]
    fn closing_hashes_go_only_after_a_space() {
        assert_eq!(atx_heading("## C# ##"), Some("C#"));
        assert_eq!(atx_heading("## C#"), Some("C#"));
        assert_eq!(atx_heading("#"), Some(""));
        assert_eq!(atx_heading("####### seven"), None);
    }

    fn targets(markdown: &str) -> Vec<(usize, String)> {
        links(markdown)
            .into_iter()
            .map(|link| (link.line, link.target))
            .collect()
    }

    fn expected(pairs: &[(usize, &str)]) -> Vec<(usize, String)> {
        pairs
            .iter()
            .map(|(line, target)| (*line, (*target).to_owned()))
            .collect()
    }

    #[test]
    fn links_are_found_outside_code() {
        let markdown = "See [Security](security.md) and [`a.json`](../a.json \"title\").\n\
                        Code `[no](link.md)` and ``[no](`x`)``; \\[not](escaped.md).\n\
                        ![img](img.png) [![badge](b.svg)](https://x.org/)\n\
                        [wrapped\ntext](wrap.md#part) [angle](<with space.md>) [p](a_(b).md)\n\
                        \n```md\n[fenced](no.md)\n```\n\n[ref]: defined.md\n| [cell](t.md#c) |\n";
        assert_eq!(
            targets(markdown),
            expected(&[
                (1, "security.md"),
                (1, "../a.json"),
                (3, "img.png"),
                (3, "b.svg"),
                (3, "https://x.org/"),
                (5, "wrap.md#part"),
                (5, "with space.md"),
                (5, "a_(b).md"),
                (11, "defined.md"),
                (12, "t.md#c"),
            ])
        );
    }

    #[test]
    fn an_unclosed_bracket_or_code_span_ends_with_its_paragraph() {
        let markdown = "a [b\n\nc](not-a-link.md) `open\n\n[real](real.md)\n";
        assert_eq!(targets(markdown), expected(&[(5, "real.md")]));
    }

    #[test]
    fn schemes_are_other_sites() {
        let other_sites = ["https://example.org", "mailto:a@b.c"];
        let this_site = ["docs/src/tools.md", "#anchor", "a/b:c.md"];
        assert!(other_sites.iter().all(|target| has_scheme(target)));
        assert!(!this_site.iter().any(|target| has_scheme(target)));
    }

    #[test]
    fn broken_links_and_unlisted_chapters_are_reported() {
        let repository = std::env::temp_dir().join(format!("xtask-docs-{}", std::process::id()));
        let book = repository.join("docs/src");
        std::fs::create_dir_all(&book).unwrap();
        let write = |path: &str, text: &str| std::fs::write(repository.join(path), text).unwrap();
        write(
            "README.md",
            "# Readme\n[ok](docs/src/a.md#part-one) [bad](docs/src/a.md#part-two)\n\
             [gone](docs/src/gone.md) [site](https://example.org/x.md) [top](#readme)\n",
        );
        write(
            "docs/src/SUMMARY.md",
            "# Summary\n- [A](a.md)\n- [Draft]()\n",
        );
        write(
            "docs/src/a.md",
            "# A\n## Part one\n[up](../../README.md#readme) [out](../../../x.md) [abs](/a.md)\n",
        );
        write("docs/src/b.md", "# B\n[self](#b) [empty]()\n");
        let report = check_links(&repository, &book).unwrap();
        std::fs::remove_dir_all(&repository).unwrap();
        assert_eq!(report.files, 4);
        assert_eq!(
            report.problems,
            [
                "README.md:2: docs/src/a.md#part-two: no heading of docs/src/a.md has the anchor #part-two",
                "README.md:3: docs/src/gone.md: no such file: docs/src/gone.md",
                "docs/src/a.md:3: ../../../x.md: leads out of the repository",
                "docs/src/a.md:3: /a.md: an absolute path: write it relative to the file",
                "docs/src/b.md:2: : an empty link",
                "docs/src/b.md is not listed in docs/src/SUMMARY.md",
            ]
        );
    }
}
