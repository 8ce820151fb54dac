//! What `deps` reads in the sources: forbidden patterns outside tests, the length of files
//! before their tests, and the import graph of a crate's modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::root;

/// Reports each line of `path` (a file, or every `.rs` file under a folder, tests left out)
/// outside `#[cfg(test)]` items that uses a `forbidden` pattern, as `owner: file:line uses …`.
pub(super) fn scan(
    path: &Path,
    owner: &str,
    forbidden: &[&str],
    problems: &mut Vec<String>,
) -> Result<()> {
    for file in rust_files(path) {
        let text = std::fs::read_to_string(&file)?;
        for (number, line) in production_lines(&text) {
            let code = line.split("//").next().unwrap_or_default();
            for pattern in forbidden {
                if code.contains(pattern) {
                    problems.push(format!(
                        "{owner}: {}:{} uses `{pattern}`",
                        file.strip_prefix(root()).unwrap_or(&file).display(),
                        number + 1
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The `.rs` files at `path` (itself when it is one), leaving out tests: folders named
/// `tests` and files named `tests.rs`.
fn rust_files(path: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if path.is_file() {
        if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path.to_path_buf());
        }
        return files;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return files;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
    entries.sort();
    for entry in entries {
        let name = entry.file_name().unwrap_or_default();
        if entry.is_dir() {
            if name != "tests" && name != "target" && name != "node_modules" {
                files.extend(rust_files(&entry));
            }
        } else if name != "tests.rs" && entry.extension().is_some_and(|extension| extension == "rs")
        {
            files.push(entry);
        }
    }
    files
}

/// The lines of a source file outside `#[cfg(test)]` items (unit tests may use the
/// filesystem; production code may not), with their 0-based numbers.
pub(super) fn production_lines(text: &str) -> Vec<(usize, &str)> {
    let mut lines = Vec::new();
    let mut skipping = false;
    let mut depth: i64 = 0;
    let mut entered = false;
    for (number, line) in text.lines().enumerate() {
        if !skipping && line.trim_start().starts_with("#[cfg(test)]") {
            skipping = true;
            depth = 0;
            entered = false;
            continue;
        }
        if skipping {
            for character in line.chars() {
                match character {
                    '{' => {
                        depth += 1;
                        entered = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            // An item without a body (`mod tests;`) ends at its semicolon.
            if (entered && depth <= 0) || (!entered && line.trim_end().ends_with(';')) {
                skipping = false;
            }
            continue;
        }
        lines.push((number, line));
    }
    lines
}

/// Every source file of the member folders (relative to `root`) with more than `max` lines
/// outside its tests.
pub(super) fn long_files(root: &Path, folders: &[String], max: usize) -> Result<Vec<String>> {
    let mut long = Vec::new();
    for folder in folders {
        let folder = root.join(folder);
        // The member's own folder may be called `tests` (the e2e crate); its sub-folders
        // named so are integration tests.
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() && path.file_name().is_some_and(|name| name == "src") {
                files.extend(rust_files(&path));
            }
        }
        for file in files {
            let text = std::fs::read_to_string(&file)?;
            let lines = production_lines(&text).len();
            if lines > max {
                long.push(format!(
                    "{}: {lines} lines outside its tests (at most {max}): split it by job",
                    file.strip_prefix(root).unwrap_or(&file).display()
                ));
            }
        }
    }
    Ok(long)
}

/// Every line of the crates' code outside `mcp-contract` and tests (member folders under
/// `crates/`) that writes one of `names` as a string literal.
pub(super) fn tool_name_strings(
    root: &Path,
    folders: &[String],
    names: &[&str],
) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for folder in folders {
        if !folder.starts_with("crates/") || folder == "crates/mcp-contract" {
            continue;
        }
        for file in rust_files(&root.join(folder).join("src")) {
            let text = std::fs::read_to_string(&file)?;
            for (number, name) in tool_name_literals(&text, names) {
                found.push(format!(
                    "{}:{} writes the tool name \"{name}\" as a string: name a mcp_contract::ToolName",
                    file.strip_prefix(root).unwrap_or(&file).display(),
                    number + 1
                ));
            }
        }
    }
    Ok(found)
}

/// The 0-based line numbers of the code outside tests and comments that writes one of `names`
/// as a string literal, with the name.
pub(super) fn tool_name_literals<'a>(text: &str, names: &[&'a str]) -> Vec<(usize, &'a str)> {
    let mut found = Vec::new();
    // A doc attribute's raw string (`doc = r#"…"#`) is documentation: its examples call tools
    // as a client does.
    let mut in_doc = false;
    for (number, line) in production_lines(text) {
        if in_doc {
            in_doc = !line.trim_start().starts_with("\"#");
            continue;
        }
        if line.contains("doc = r#\"") {
            in_doc = !line.contains("\"#,") && !line.trim_end().ends_with("\"#");
            continue;
        }
        let code = line.split("//").next().unwrap_or_default();
        for name in names {
            if code.contains(&format!("\"{name}\"")) {
                found.push((number, *name));
            }
        }
    }
    found
}

/// The import cycles of more than `max_files` files among the modules under `source` (a
/// crate's `src`), as sentences.
pub(super) fn module_cycles(source: &Path, max_files: usize) -> Result<Vec<String>> {
    let mut files = Vec::new();
    for file in rust_files(source) {
        let text = std::fs::read_to_string(&file)?;
        let relative = file
            .strip_prefix(source)
            .unwrap_or(&file)
            .to_string_lossy()
            .replace('\\', "/");
        files.push((relative, text));
    }
    let graph = ModuleGraph::new(&files);
    Ok(graph
        .cycles()
        .into_iter()
        .filter(|cycle| cycle.len() > max_files)
        .map(|cycle| {
            format!(
                "{}: an import cycle of {} files (at most {max_files}): {}",
                source.strip_prefix(root()).unwrap_or(source).display(),
                cycle.len(),
                cycle.join(", ")
            )
        })
        .collect())
}

/// The modules of one crate (one per file) and which modules each one's code refers to through
/// `crate::`, `super::`, `self::` or a child module's name, re-exports followed to the module
/// that defines the item.
pub(super) struct ModuleGraph {
    /// A file per module path (`[]` is the crate root).
    files: BTreeMap<Vec<String>, String>,
    edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
}

/// Where a `use` binding points: a path in the crate, or another crate.
#[derive(Clone)]
enum Target {
    Crate(Vec<String>),
    Elsewhere,
}

impl ModuleGraph {
    /// `files`: each file's path relative to `src` and its text.
    pub(super) fn new(files: &[(String, String)]) -> ModuleGraph {
        let mut modules = BTreeMap::new();
        for (path, _) in files {
            modules.insert(module_path(path), path.clone());
        }
        let mut references: BTreeMap<Vec<String>, Vec<Target>> = BTreeMap::new();
        let mut bindings: BTreeMap<Vec<String>, BTreeMap<String, Target>> = BTreeMap::new();
        for (path, text) in files {
            let module = module_path(path);
            let code = code_of(text);
            let tokens = tokenize(&code);
            let mut found = Vec::new();
            let mut names = BTreeMap::new();
            for (segments, binding) in use_trees(&tokens) {
                let target = absolute(&module, &segments, &modules);
                if let (Some(binding), Some(target)) = (binding, &target) {
                    names.insert(binding, target.clone());
                }
                found.extend(target);
            }
            for segments in inline_paths(&tokens) {
                found.extend(absolute(&module, &segments, &modules));
            }
            references.insert(module.clone(), found);
            bindings.insert(module, names);
        }
        let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (module, targets) in &references {
            let entry = edges.entry(module.clone()).or_default();
            for target in targets {
                if let Target::Crate(path) = target
                    && let Some(resolved) = resolve(path, &modules, &bindings, 0)
                    && &resolved != module
                {
                    entry.insert(resolved);
                }
            }
        }
        ModuleGraph {
            files: modules,
            edges,
        }
    }

    /// The strongly connected components of more than one file, each as its files sorted.
    pub(super) fn cycles(&self) -> Vec<Vec<String>> {
        let nodes: Vec<&Vec<String>> = self.files.keys().collect();
        let index_of: BTreeMap<&Vec<String>, usize> = nodes
            .iter()
            .enumerate()
            .map(|(index, node)| (*node, index))
            .collect();
        let successors: Vec<Vec<usize>> = nodes
            .iter()
            .map(|node| {
                self.edges
                    .get(*node)
                    .into_iter()
                    .flatten()
                    .filter_map(|target| index_of.get(target).copied())
                    .collect()
            })
            .collect();
        strongly_connected(&successors)
            .into_iter()
            .filter(|component| component.len() > 1)
            .map(|component| {
                let mut files: Vec<String> = component
                    .iter()
                    .map(|&index| self.files[nodes[index]].clone())
                    .collect();
                files.sort();
                files
            })
            .collect()
    }
}

/// `lib.rs` → `[]`, `a.rs` and `a/mod.rs` → `[a]`, `a/b.rs` → `[a, b]`.
fn module_path(file: &str) -> Vec<String> {
    let without = file.strip_suffix(".rs").unwrap_or(file);
    let mut segments: Vec<String> = without.split('/').map(str::to_owned).collect();
    if segments.last().is_some_and(|last| last == "mod") {
        segments.pop();
    }
    if segments == ["lib"] || segments == ["main"] {
        segments.clear();
    }
    segments
}

/// The production code of a file, comments left out.
fn code_of(text: &str) -> String {
    production_lines(text)
        .into_iter()
        .map(|(_, line)| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Star,
    Semicolon,
    Other,
}

fn tokenize(code: &str) -> Vec<Token> {
    let characters: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut index = 0;
    while index < characters.len() {
        let character = characters[index];
        if character.is_alphanumeric() || character == '_' {
            let start = index;
            while index < characters.len()
                && (characters[index].is_alphanumeric() || characters[index] == '_')
            {
                index += 1;
            }
            tokens.push(Token::Ident(characters[start..index].iter().collect()));
            continue;
        }
        if character == '"' {
            // Strings say nothing about modules; skip to the closing quote.
            index += 1;
            while index < characters.len() && characters[index] != '"' {
                if characters[index] == '\\' {
                    index += 1;
                }
                index += 1;
            }
            index += 1;
            tokens.push(Token::Other);
            continue;
        }
        if character == ':' && characters.get(index + 1) == Some(&':') {
            tokens.push(Token::PathSep);
            index += 2;
            continue;
        }
        match character {
            '{' => tokens.push(Token::Open),
            '}' => tokens.push(Token::Close),
            ',' => tokens.push(Token::Comma),
            '*' => tokens.push(Token::Star),
            ';' => tokens.push(Token::Semicolon),
            character if character.is_whitespace() => {}
            _ => tokens.push(Token::Other),
        }
        index += 1;
    }
    tokens
}

/// Every path a `use` item names, with the name it binds (none for a glob).
fn use_trees(tokens: &[Token]) -> Vec<(Vec<String>, Option<String>)> {
    let mut trees = Vec::new();
    let mut index = 0;
    while index < tokens.len() {
        if tokens[index] == Token::Ident("use".to_owned()) {
            let mut position = index + 1;
            if tokens.get(position) == Some(&Token::PathSep) {
                position += 1;
            }
            parse_tree(tokens, &mut position, &[], &mut trees);
            index = position;
        } else {
            index += 1;
        }
    }
    trees
}

fn parse_tree(
    tokens: &[Token],
    position: &mut usize,
    prefix: &[String],
    trees: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut path = prefix.to_vec();
    loop {
        match tokens.get(*position) {
            Some(Token::Ident(name)) => {
                path.push(name.clone());
                *position += 1;
                if tokens.get(*position) == Some(&Token::PathSep) {
                    *position += 1;
                    continue;
                }
                let mut binding = name.clone();
                if tokens.get(*position) == Some(&Token::Ident("as".to_owned()))
                    && let Some(Token::Ident(alias)) = tokens.get(*position + 1)
                {
                    binding = alias.clone();
                    *position += 2;
                }
                if binding == "self" {
                    path.pop();
                    binding = path.last().cloned().unwrap_or_default();
                }
                trees.push((path, Some(binding)));
                return;
            }
            Some(Token::Open) => {
                *position += 1;
                loop {
                    match tokens.get(*position) {
                        Some(Token::Close) => {
                            *position += 1;
                            return;
                        }
                        Some(Token::Comma) => *position += 1,
                        None | Some(Token::Semicolon) => return,
                        Some(_) => {
                            let before = *position;
                            parse_tree(tokens, position, &path, trees);
                            if *position == before {
                                *position += 1;
                            }
                        }
                    }
                }
            }
            Some(Token::Star) => {
                *position += 1;
                trees.push((path, None));
                return;
            }
            _ => return,
        }
    }
}

/// Paths outside `use` items that start at `crate` or `super`.
fn inline_paths(tokens: &[Token]) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for (index, token) in tokens.iter().enumerate() {
        let Token::Ident(first) = token else {
            continue;
        };
        let starts_path = index == 0 || tokens[index - 1] != Token::PathSep;
        if !(starts_path
            && (first == "crate" || first == "super")
            && tokens.get(index + 1) == Some(&Token::PathSep))
        {
            continue;
        }
        let mut path = vec![first.clone()];
        let mut position = index + 1;
        while tokens.get(position) == Some(&Token::PathSep) {
            let Some(Token::Ident(next)) = tokens.get(position + 1) else {
                break;
            };
            path.push(next.clone());
            position += 2;
        }
        // `crate::{…}` and `super::*` are `use` items, read whole by `use_trees`.
        if path.len() > 1 {
            paths.push(path);
        }
    }
    paths
}

/// `segments` as a path from the crate root when it is one of this crate's (from `module`).
fn absolute(
    module: &[String],
    segments: &[String],
    modules: &BTreeMap<Vec<String>, String>,
) -> Option<Target> {
    let first = segments.first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => {
            let mut parent = module.to_vec();
            parent.pop();
            parent
        }
        child => {
            let mut candidate = module.to_vec();
            candidate.push(child.to_owned());
            if !modules.contains_key(&candidate) {
                return Some(Target::Elsewhere);
            }
            module.to_vec()
        }
    };
    let mut rest = if matches!(first.as_str(), "crate" | "self" | "super") {
        &segments[1..]
    } else {
        segments
    };
    while rest.first().is_some_and(|segment| segment == "super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(Target::Crate(base))
}

/// The module (file) that defines what `path` names: its longest prefix that is a module, then
/// through that module's `use` bindings while they lead elsewhere in the crate.
fn resolve(
    path: &[String],
    modules: &BTreeMap<Vec<String>, String>,
    bindings: &BTreeMap<Vec<String>, BTreeMap<String, Target>>,
    depth: usize,
) -> Option<Vec<String>> {
    let length = (0..=path.len())
        .rev()
        .find(|&length| modules.contains_key(&path[..length]))?;
    let module = path[..length].to_vec();
    let Some(next) = path.get(length) else {
        return Some(module);
    };
    match bindings.get(&module).and_then(|names| names.get(next)) {
        Some(Target::Crate(target)) if depth < 8 && target.as_slice() != path => {
            let mut followed = target.clone();
            followed.extend(path[length + 1..].iter().cloned());
            resolve(&followed, modules, bindings, depth + 1).or(Some(module))
        }
        Some(Target::Elsewhere) => None,
        _ => Some(module),
    }
}

/// Tarjan's strongly connected components of a graph given as successor lists.
fn strongly_connected(successors: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        successors: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        components: Vec<Vec<usize>>,
    }
    fn visit(state: &mut State<'_>, node: usize) {
        state.index[node] = Some(state.next);
        state.low[node] = state.next;
        state.next += 1;
        state.stack.push(node);
        state.on_stack[node] = true;
        for &successor in &state.successors[node] {
            match state.index[successor] {
                None => {
                    visit(state, successor);
                    state.low[node] = state.low[node].min(state.low[successor]);
                }
                Some(index) if state.on_stack[successor] => {
                    state.low[node] = state.low[node].min(index);
                }
                Some(_) => {}
            }
        }
        if Some(state.low[node]) == state.index[node] {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack[member] = false;
                component.push(member);
                if member == node {
                    break;
                }
            }
            state.components.push(component);
        }
    }
    let count = successors.len();
    let mut state = State {
        successors,
        index: vec![None; count],
        low: vec![0; count],
        on_stack: vec![false; count],
        stack: Vec::new(),
        next: 0,
        components: Vec::new(),
    };
    for node in 0..count {
        if state.index[node].is_none() {
            visit(&mut state, node);
        }
    }
    state.components
}
