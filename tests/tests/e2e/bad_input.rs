//! Bad input, end to end: every tool of a real `tools/list` (so a new tool is covered without
//! touching this file) is called against a real server on a copy of the example notebooks with
//! each required argument missing, an unknown argument, each argument wrongly typed, 10 MB
//! strings, and hostile values (path traversal, absolute paths and `file:` URIs outside the root,
//! symlinks that escape it, NUL bytes, a notebook that is not UTF-8, an nbformat 3 file). A
//! separate test serves a 200 MB notebook, another a notebook with duplicate cell ids.
//!
//! Every call must fail with a code from `ERROR_CODES` (never `internal_error`) and a short
//! message, the server must stay up, and no file under the root (or in the folder outside it
//! that the hostile paths point at) may change: every file's bytes and mtime are compared after
//! each call.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jupyter_mcp_tests::{
    Client, HttpServer, example_root, process_alive, strings_of, write_code_notebook,
};
use serde_json::{Map, Value, json};

/// The notebook the valid parts of each call name.
const NB: &str = "getting-started.ipynb";

/// What a file, folder or link under a folder looks like: bytes (hashed) and mtime for files,
/// the target for links.
fn tree_state(folder: &Path) -> BTreeMap<PathBuf, String> {
    let mut state = BTreeMap::new();
    let mut pending = vec![folder.to_path_buf()];
    while let Some(current) = pending.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&current)
            .unwrap()
            .map(|entry| entry.unwrap())
            .collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let path = entry.path();
            let metadata = std::fs::symlink_metadata(&path).unwrap();
            let relative = path.strip_prefix(folder).unwrap().to_path_buf();
            let description = if metadata.file_type().is_symlink() {
                format!("link to {}", std::fs::read_link(&path).unwrap().display())
            } else if metadata.is_dir() {
                pending.push(path);
                "folder".to_owned()
            } else {
                use std::os::unix::fs::MetadataExt;
                let digest = notebook_model::identity::sha256_hex(&std::fs::read(&path).unwrap());
                format!(
                    "file {} bytes, sha256 {digest}, mtime {}.{:09}, mode {:o}",
                    metadata.len(),
                    metadata.mtime(),
                    metadata.mtime_nsec(),
                    metadata.mode()
                )
            };
            state.insert(relative, description);
        }
    }
    state
}

/// The JSON types a property schema allows (`type`, and those of `anyOf`/`oneOf` alternatives).
fn schema_types(schema: &Value) -> Vec<String> {
    let mut types = Vec::new();
    match &schema["type"] {
        Value::String(single) => types.push(single.clone()),
        Value::Array(many) => {
            types.extend(many.iter().filter_map(|t| t.as_str().map(str::to_owned)))
        }
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        for alternative in schema[key].as_array().into_iter().flatten() {
            types.extend(schema_types(alternative));
        }
    }
    if schema.get("const").is_some_and(Value::is_string)
        || schema
            .get("enum")
            .is_some_and(|values| values[0].is_string())
    {
        types.push("string".to_owned());
    }
    types
}

/// A plausible valid value for an argument: known names get a value that works against the
/// example notebook, others a value of the first type their schema allows.
fn valid_value(name: &str, schema: &Value) -> Value {
    match name {
        "notebookRef" => return json!(NB),
        "notebookRefs" | "uris" => return json!([NB]),
        "cellIds" => return json!([0]),
        "hostPath" => return json!("data-upload.csv"),
        "kernelPath" => return json!("/tmp/jupyter-mcp-bad-input-target"),
        "query" => return json!("import"),
        "name" => return json!("x"),
        "kernelId" => return json!("venv:.venv"),
        "edits" => {
            return json!([{"editType": "insert", "cellId": "BOTTOM", "newCode": "added = 1"}]);
        }
        _ => {}
    }
    if let Some(first) = schema["enum"].as_array().and_then(|values| values.first()) {
        return first.clone();
    }
    // A closed set written as described alternatives (`oneOf` of `const`s): take the first.
    if let Some(first) = ["oneOf", "anyOf"]
        .iter()
        .flat_map(|key| schema[*key].as_array().into_iter().flatten())
        .find_map(|alternative| alternative.get("const"))
    {
        return first.clone();
    }
    match schema_types(schema).first().map(String::as_str) {
        Some("string") => json!("x"),
        Some("integer" | "number") => json!(0),
        Some("boolean") => json!(false),
        Some("array") => json!([]),
        Some("object") => json!({}),
        _ => Value::Null,
    }
}

/// A value of a JSON type the schema does not allow (no string that any coercion could read as
/// a number, boolean, array or object).
fn wrongly_typed_value(schema: &Value) -> Value {
    let allowed = schema_types(schema);
    let candidates = [
        ("object", json!({"wrong": "type"})),
        ("array", json!(["wrong", "type"])),
        ("string", json!("a string where none is allowed")),
        ("boolean", json!(true)),
        ("number", json!(12.5)),
    ];
    candidates
        .into_iter()
        .find(|(kind, _)| {
            !allowed
                .iter()
                .any(|allowed| allowed == kind || (*kind == "number" && allowed == "integer"))
        })
        .map(|(_, value)| value)
        .expect("every schema rejects some JSON type")
}

/// One tool as `tools/list` describes it.
struct ToolShape {
    name: String,
    properties: Map<String, Value>,
    required: Vec<String>,
}

impl ToolShape {
    fn valid_required(&self) -> Map<String, Value> {
        self.required
            .iter()
            .map(|name| (name.clone(), valid_value(name, &self.properties[name])))
            .collect()
    }

    /// Arguments that carry strings (directly, as array items, or as cell references).
    fn string_arguments(&self) -> Vec<(String, bool)> {
        self.properties
            .iter()
            .filter_map(|(name, schema)| {
                let types = schema_types(schema);
                if types.iter().any(|kind| kind == "string") && schema.get("enum").is_none() {
                    Some((name.clone(), false))
                } else if types.iter().any(|kind| kind == "array")
                    && schema_types(&schema["items"])
                        .iter()
                        .any(|kind| kind == "string")
                {
                    Some((name.clone(), true))
                } else {
                    None
                }
            })
            .collect()
    }
}

/// A call and what must come of it.
struct Case {
    tool: String,
    label: String,
    arguments: Map<String, Value>,
    /// The codes that count as a right answer.
    codes: Vec<&'static str>,
    /// Text the message must contain (the name of the argument at fault).
    mentions: Option<String>,
    /// A success is a right answer too when its text contains this (a kernel tool that says
    /// truthfully that the notebook has no kernel, whatever its file holds).
    success_saying: Option<&'static str>,
}

struct Fixture {
    root: tempfile::TempDir,
    outside: tempfile::TempDir,
    server: HttpServer,
    client: Client,
}

impl Fixture {
    async fn start(extra_args: &[&str]) -> Fixture {
        let root = example_root();
        let outside = tempfile::tempdir().unwrap();
        write_code_notebook(outside.path(), "outside.ipynb", &["secret = 1"]);
        std::fs::write(outside.path().join("data.csv"), "a,b\n1,2\n").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("outside.ipynb"),
            root.path().join("escape.ipynb"),
        )
        .unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("escape-dir")).unwrap();
        std::fs::write(root.path().join("data-upload.csv"), "x,y\n3,4\n").unwrap();
        // Valid JSON structure, but one string holds bytes that are not UTF-8.
        let mut not_utf8 = br#"{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", "id": "a", "metadata": {}, "execution_count": null, "outputs": [], "source": "x = '"#.to_vec();
        not_utf8.extend_from_slice(&[0xff, 0xfe, 0xc3, 0x28]);
        not_utf8.extend_from_slice(br#"'"}]}"#);
        std::fs::write(root.path().join("invalid-utf8.ipynb"), not_utf8).unwrap();
        std::fs::write(
            root.path().join("nbformat3.ipynb"),
            serde_json::to_string_pretty(&json!({
                "nbformat": 3, "nbformat_minor": 0, "metadata": {"name": "old"},
                "worksheets": [{"cells": [{"cell_type": "code", "input": "x = 1",
                    "language": "python", "outputs": [], "prompt_number": 1}], "metadata": {}}]
            }))
            .unwrap(),
        )
        .unwrap();
        let server = HttpServer::start(root.path(), extra_args).unwrap();
        let client = Client::http(&server.url).await.unwrap();
        Fixture {
            root,
            outside,
            server,
            client,
        }
    }

    fn state(&self) -> (BTreeMap<PathBuf, String>, BTreeMap<PathBuf, String>) {
        (
            tree_state(self.root.path()),
            tree_state(self.outside.path()),
        )
    }

    async fn tools(&self) -> Vec<ToolShape> {
        self.client
            .tools()
            .await
            .unwrap()
            .into_iter()
            .map(|tool| {
                let schema = Value::Object((*tool.input_schema).clone());
                ToolShape {
                    name: tool.name.to_string(),
                    properties: schema["properties"]
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                    required: schema["required"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|name| name.as_str().map(str::to_owned))
                        .collect(),
                }
            })
            .collect()
    }

    /// Makes every call in turn; fails listing every case that went wrong.
    async fn check_all(&self, cases: &[Case]) {
        let mut failures = Vec::new();
        for case in cases {
            failures.extend(self.check(case).await);
        }
        assert!(
            failures.is_empty(),
            "{} problems in {} calls:\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );
    }

    /// Makes the call and checks everything a case promises; returns the failures.
    async fn check(&self, case: &Case) -> Vec<String> {
        let before = self.state();
        let described = format!("{} [{}]", case.tool, case.label);
        let mut failures = Vec::new();
        let call = match self
            .client
            .try_call(&case.tool, Value::Object(case.arguments.clone()))
            .await
        {
            Ok(call) => call,
            Err(error) => {
                failures.push(format!("{described}: protocol failure: {error}"));
                return failures;
            }
        };
        if !call.is_error() {
            let text = call.text();
            if let Some(expected) = case.success_saying
                && text.contains(expected)
            {
                return failures;
            }
            failures.push(format!(
                "{described}: succeeded: {}",
                &text[..text.len().min(300)]
            ));
        } else {
            let text = call.text();
            let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let code = body["error"]["code"].as_str().unwrap_or_default();
            let message = body["error"]["message"].as_str().unwrap_or_default();
            if !mcp_contract_codes().contains(&code) || code == "internal_error" {
                failures.push(format!("{described}: code {code:?} ({message})"));
            } else if !case.codes.contains(&code) {
                failures.push(format!(
                    "{described}: code {code}, expected one of {:?} ({message})",
                    case.codes
                ));
            }
            if message.len() < 20 || message.len() > 1_500 {
                failures.push(format!(
                    "{described}: message of {} bytes: {}",
                    message.len(),
                    &message[..message.len().min(300)]
                ));
            }
            if text.len() > 4_000 {
                failures.push(format!("{described}: error text of {} bytes", text.len()));
            }
            if message.contains("os error") || message.contains("panicked") {
                failures.push(format!("{described}: raw error text: {message}"));
            }
            if let Some(mention) = &case.mentions
                && !message.contains(mention.as_str())
            {
                failures.push(format!(
                    "{described}: the message does not name `{mention}`: {message}"
                ));
            }
        }
        if !process_alive(self.server.pid()) {
            failures.push(format!("{described}: the server died"));
        }
        let after = self.state();
        if before != after {
            failures.push(format!(
                "{described}: files changed:\n  before {before:?}\n  after  {after:?}"
            ));
        }
        failures
    }
}

fn mcp_contract_codes() -> Vec<&'static str> {
    mcp_contract::errors::ERROR_CODES
        .iter()
        .map(|(code, _)| *code)
        .collect()
}

fn with(base: &Map<String, Value>, name: &str, value: Value) -> Map<String, Value> {
    let mut arguments = base.clone();
    arguments.insert(name.to_owned(), value);
    arguments
}

/// Whether an argument names a file or notebook under the root (not a kernel-side path, nor a
/// file on a Colab runtime's file service).
fn names_a_host_path(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    name != "kernelPath"
        && name != "colabFileUri"
        && (lower.contains("ref") || lower.contains("uri") || lower.contains("path"))
}

const TEN_MB: usize = 10 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_refuses_malformed_arguments_and_changes_nothing() {
    let fixture = Fixture::start(&[]).await;
    let tools = fixture.tools().await;
    assert!(tools.len() >= 20, "tools/list lists {} tools", tools.len());
    let huge = "a".repeat(TEN_MB);
    let mut cases = Vec::new();
    for tool in &tools {
        let base = tool.valid_required();
        for name in &tool.required {
            let mut arguments = base.clone();
            arguments.remove(name);
            cases.push(Case {
                tool: tool.name.clone(),
                label: format!("without {name}"),
                arguments,
                codes: vec!["invalid_arguments"],
                mentions: Some(name.clone()),
                success_saying: None,
            });
        }
        cases.push(Case {
            tool: tool.name.clone(),
            label: "unknown argument".to_owned(),
            arguments: with(&base, "unexpectedArgument", json!(true)),
            codes: vec!["invalid_arguments"],
            mentions: Some("unexpectedArgument".to_owned()),
            success_saying: None,
        });
        for (name, schema) in &tool.properties {
            let value = wrongly_typed_value(schema);
            cases.push(Case {
                tool: tool.name.clone(),
                label: format!("{name} = {value}"),
                arguments: with(&base, name, value),
                codes: vec!["invalid_arguments"],
                mentions: Some(name.clone()),
                success_saying: None,
            });
        }
        for (name, in_array) in tool.string_arguments() {
            let value = if in_array { json!([huge]) } else { json!(huge) };
            cases.push(Case {
                tool: tool.name.clone(),
                label: format!("{name}: a 10 MB string"),
                arguments: with(&base, &name, value),
                codes: vec!["invalid_arguments"],
                mentions: Some(name.clone()),
                success_saying: None,
            });
        }
    }
    let tools_seen: std::collections::BTreeSet<&str> =
        cases.iter().map(|case| case.tool.as_str()).collect();
    assert_eq!(tools_seen.len(), tools.len(), "every tool gets cases");
    eprintln!("{} malformed calls over {} tools", cases.len(), tools.len());
    fixture.check_all(&cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_refuses_hostile_paths_and_files_and_changes_nothing() {
    let fixture = Fixture::start(&[]).await;
    let tools = fixture.tools().await;
    let outside = fixture.outside.path();
    let outside_name = outside.file_name().unwrap().to_string_lossy().into_owned();
    let outside_notebook = outside.join("outside.ipynb");
    let outside_uri = format!("file://{}", outside_notebook.display());
    let escaping = vec!["path_outside_root"];
    let hostile: Vec<(String, Vec<&'static str>)> = vec![
        (format!("../{outside_name}/outside.ipynb"), escaping.clone()),
        (
            format!("analysis/../../{outside_name}/outside.ipynb"),
            escaping.clone(),
        ),
        (outside_notebook.display().to_string(), escaping.clone()),
        (outside_uri, escaping.clone()),
        (format!("../{outside_name}/data.csv"), escaping.clone()),
        ("escape.ipynb".to_owned(), escaping.clone()),
        ("escape-dir/outside.ipynb".to_owned(), escaping.clone()),
        ("escape-dir/data.csv".to_owned(), escaping.clone()),
        ("/etc/passwd".to_owned(), escaping.clone()),
        (
            "getting-started.ipynb\0.csv".to_owned(),
            vec!["invalid_argument"],
        ),
        ("nul\0byte.ipynb".to_owned(), vec!["invalid_argument"]),
        (
            "invalid-utf8.ipynb".to_owned(),
            vec!["notebook_unreadable", "already_exists"],
        ),
        (
            "nbformat3.ipynb".to_owned(),
            vec!["notebook_unreadable", "already_exists"],
        ),
    ];
    let mut cases = Vec::new();
    for tool in &tools {
        let base = tool.valid_required();
        for (name, in_array) in tool.string_arguments() {
            if !names_a_host_path(&name) {
                continue;
            }
            for (value, codes) in &hostile {
                let mut codes = codes.clone();
                let unreadable = codes.contains(&"notebook_unreadable");
                if unreadable {
                    // Kernel tools address the notebook's kernel, not its file: without a
                    // running kernel they say so, whatever the file holds.
                    codes.extend(["kernel_unavailable", "no_execution"]);
                }
                if name == "hostPath" && !value.ends_with(".ipynb") && codes == escaping {
                    // A transfer names its file, not a notebook.
                } else if name == "hostPath" {
                    // A readable file under the root that happens to be a broken notebook is a
                    // fine upload source; without a running kernel nothing moves.
                    codes.push("kernel_unavailable");
                }
                let argument = if in_array {
                    json!([value])
                } else {
                    json!(value)
                };
                cases.push(Case {
                    tool: tool.name.clone(),
                    label: format!("{name} = {value:?}"),
                    arguments: with(&base, &name, argument),
                    codes,
                    mentions: None,
                    success_saying: unreadable.then_some("\"not-running\""),
                });
            }
        }
    }
    // NUL bytes in names and ids that are not paths.
    for tool in &tools {
        let base = tool.valid_required();
        for (name, in_array) in tool.string_arguments() {
            // Free text (a search, a heading) may hold any character.
            if names_a_host_path(&name) || ["kernelPath", "query", "title"].contains(&name.as_str())
            {
                continue;
            }
            let value = if in_array {
                json!(["x\0y"])
            } else {
                json!("x\0y")
            };
            cases.push(Case {
                tool: tool.name.clone(),
                label: format!("{name} with a NUL byte"),
                arguments: with(&base, &name, value),
                codes: vec![
                    "invalid_argument",
                    "invalid_arguments",
                    "invalid_name",
                    "cell_not_found",
                    "kernel_not_found",
                    "kernel_unavailable",
                    "window_not_connected",
                    "execution_not_found",
                    "variable_not_found",
                ],
                mentions: None,
                success_saying: None,
            });
        }
    }
    fixture.check_all(&cases).await;
    // The listing shows what is under the root, never what a link points at outside it.
    let listing = fixture.client.call("list_notebooks", json!({})).await.ok();
    let listed = listing.to_string();
    assert!(!listed.contains("outside.ipynb"), "{listed}");
    assert!(listed.contains(NB), "{listed}");
    eprintln!("{} hostile calls", cases.len());
}

/// Writes a notebook of about `megabytes` MB: one code cell whose saved output is that much text.
fn write_huge_notebook(path: &Path, megabytes: usize) {
    use std::io::Write;
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    write!(
        file,
        r#"{{"nbformat": 4, "nbformat_minor": 5, "metadata": {{}}, "cells": [{{"cell_type": "code", "id": "big", "metadata": {{}}, "execution_count": 1, "source": "print('x' * 10**8)", "outputs": [{{"output_type": "stream", "name": "stdout", "text": ["#
    )
    .unwrap();
    let line = format!("\"{}\\n\"", "x".repeat(97));
    let lines = megabytes * 1024 * 1024 / (line.len() + 2);
    for index in 0..lines {
        if index > 0 {
            file.write_all(b", ").unwrap();
        }
        file.write_all(line.as_bytes()).unwrap();
    }
    file.write_all(b"]}]}]}\n").unwrap();
    file.flush().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_mb_notebook_is_refused_without_being_read() {
    let root = tempfile::tempdir().unwrap();
    let huge = root.path().join("huge.ipynb");
    write_huge_notebook(&huge, 200);
    assert!(std::fs::metadata(&huge).unwrap().len() >= 200 * 1024 * 1024);
    write_code_notebook(root.path(), "small.ipynb", &["x = 1"]);
    let server = HttpServer::start(root.path(), &["--no-kernels"]).unwrap();
    let client = Client::http(&server.url).await.unwrap();
    let before = tree_state(root.path());
    let calls = [
        ("read_notebook", json!({"notebookRef": "huge.ipynb"})),
        (
            "search_cells",
            json!({"notebookRef": "huge.ipynb", "query": "x"}),
        ),
        (
            "edit_cells",
            json!({"notebookRef": "huge.ipynb", "edits": [
                {"editType": "insert", "cellId": "TOP", "newCode": "y = 2"}]}),
        ),
        ("save_notebooks", json!({"notebookRefs": ["huge.ipynb"]})),
        (
            "export_notebook",
            json!({"notebookRef": "huge.ipynb", "format": "python"}),
        ),
    ];
    for (tool, arguments) in calls {
        let call = client.call(tool, arguments).await;
        assert_eq!(call.error_code(), "too_large", "{tool}: {}", call.text());
        let message = call.error()["message"].as_str().unwrap().to_owned();
        assert!(
            message.contains("huge.ipynb") && message.contains("--clear-output"),
            "{message}"
        );
    }
    // The listing still shows it, and the other notebook works.
    let listing = client.call("list_notebooks", json!({})).await.ok();
    assert!(listing.to_string().contains("huge.ipynb"), "{listing}");
    client
        .call("read_notebook", json!({"notebookRef": "small.ipynb"}))
        .await
        .ok();
    assert_eq!(
        before,
        tree_state(root.path()),
        "nothing under the root changed"
    );
    // Refused before it is read: the server never held the file in memory.
    let peak = jupyter_mcp_tests::peak_rss_bytes(server.pid()).expect("VmHWM");
    assert!(
        peak < 150 * 1024 * 1024,
        "the server's peak RSS is {} MiB",
        peak / (1024 * 1024)
    );
}

/// Duplicate cell ids are repaired in memory as nbformat repairs them on reading (the first
/// keeps its id, later ones get ids derived from their content); reading changes nothing on
/// disk, and an edit addressed by the duplicated id changes the cell that kept it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_cell_ids_are_repaired_in_memory_without_touching_the_file() {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("dupes.ipynb");
    let cell = |source: &str| {
        json!({"cell_type": "code", "id": "same", "metadata": {}, "execution_count": null,
               "outputs": [], "source": source})
    };
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json!({
            "nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [cell("first = 1"), cell("second = 2"), cell("third = 3")]
        }))
        .unwrap(),
    )
    .unwrap();
    let server = HttpServer::start(root.path(), &["--no-kernels"]).unwrap();
    let client = Client::http(&server.url).await.unwrap();
    let before = tree_state(root.path());
    let cells = client.outline_cells("dupes.ipynb").await;
    let ids: Vec<&str> = cells
        .iter()
        .map(|cell| cell["cell_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids[0], "same");
    let unique: std::collections::HashSet<&&str> = ids.iter().collect();
    assert_eq!(unique.len(), 3, "{ids:?}");
    client.read_view("dupes.ipynb", "all").await;
    assert_eq!(before, tree_state(root.path()), "reading changed the file");
    let rev = cells[0]["rev"].as_str().unwrap();
    let edited = client
        .call(
            "edit_cells",
            json!({"notebookRef": "dupes.ipynb", "edits": [
                {"editType": "edit", "cellId": "same", "expectedRev": rev, "newCode": "first = 10"}]}),
        )
        .await
        .ok();
    assert_eq!(edited["applied"][0]["cells"][0]["index"], 0, "{edited}");
    let written: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let written_ids = strings_of(&written["cells"], "id");
    assert_eq!(written_ids, ids, "the file now carries the repaired ids");
}
