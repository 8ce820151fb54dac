//! Load, end to end: 32 MCP clients over HTTP against one server for 60 s
//! (`JUPYTER_MCP_LOAD_SECONDS` shortens it while developing), eight per notebook on four
//! notebooks, each mixing reads (outline, source, search, listing, receipts), edits of its own
//! cell, appends to a cell every client of the notebook shares (with `expectedRev`: a revision
//! conflict is an expected outcome, retried with the current rev the error carries), inserted
//! markdown cells, and runs on the notebook's real kernel (another run in progress is expected
//! too).
//!
//! Afterwards every notebook is saved and read back from disk, cell by cell: each client's own
//! cell holds its last acknowledged edit, the shared cell holds every acknowledged append in each
//! client's order, and every acknowledged insert is there exactly once. Any other failure is an
//! unexpected error and fails the test. Latency percentiles per kind of call and the server's
//! peak RSS are printed (and written to `JUPYTER_MCP_LOAD_REPORT` when set); they are figures, not
//! assertions.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jupyter_mcp_tests::{Client, HttpServer, link_venv, nbformat_problems, peak_rss_bytes};
use serde_json::{Value, json};

const NOTEBOOKS: usize = 4;
const CLIENTS_PER_NOTEBOOK: usize = 8;

/// Codes that are a normal outcome of concurrency and are retried.
const EXPECTED_CODES: &[&str] = &["rev_mismatch", "run_active", "command_pending"];

fn notebook_name(index: usize) -> String {
    format!("load-{index}.ipynb")
}

fn own_cell(client: usize) -> String {
    format!("own-{client}")
}

/// A notebook with one own cell per client, a shared cell and a cell to run.
fn write_notebook(folder: &Path, index: usize) {
    let mut cells = vec![
        json!({"cell_type": "code", "id": "shared", "metadata": {}, "execution_count": null,
               "outputs": [], "source": "# shared log"}),
        json!({"cell_type": "code", "id": "work", "metadata": {}, "execution_count": null,
               "outputs": [], "source": "total = sum(range(20000))\nprint(total)"}),
    ];
    for client in 0..CLIENTS_PER_NOTEBOOK {
        cells.push(
            json!({"cell_type": "code", "id": own_cell(client), "metadata": {},
                          "execution_count": null, "outputs": [],
                          "source": format!("# client {client}: v0")}),
        );
    }
    let notebook = json!({
        "nbformat": 4, "nbformat_minor": 5, "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    });
    std::fs::write(
        folder.join(notebook_name(index)),
        serde_json::to_string_pretty(&notebook).unwrap(),
    )
    .unwrap();
}

/// xorshift64*, seeded per client.
struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % bound
    }
}

/// What one client had acknowledged, to check against the files at the end.
#[derive(Default)]
struct Acknowledged {
    own_source: Option<String>,
    appended: Vec<String>,
    inserted: Vec<String>,
}

#[derive(Default)]
struct Tally {
    latencies: BTreeMap<&'static str, Vec<Duration>>,
    expected: BTreeMap<&'static str, usize>,
    unexpected: Vec<String>,
}

impl Tally {
    fn record(&mut self, kind: &'static str, took: Duration) {
        self.latencies.entry(kind).or_default().push(took);
    }
}

fn rev_of_cell(outline: &Value, cell_id: &str) -> Option<(String, String)> {
    outline["cells"].as_array()?.iter().find_map(|cell| {
        (cell["cell_id"] == cell_id).then(|| {
            (
                cell["rev"].as_str().unwrap_or_default().to_owned(),
                cell["source"].as_str().unwrap_or_default().to_owned(),
            )
        })
    })
}

/// The rev and source of one cell, read through the server.
async fn read_cell(client: &Client, notebook: &str, cell_id: &str) -> (String, String) {
    let read = client
        .call(
            "read_notebook",
            json!({"notebookRef": notebook, "view": "source", "cellIds": [cell_id], "maxSourceChars": 0}),
        )
        .await
        .ok();
    rev_of_cell(&read, cell_id).unwrap_or_else(|| panic!("no cell {cell_id} in {read}"))
}

fn first_rev(result: &Value) -> Option<String> {
    Some(result["applied"][0]["cells"][0]["rev"].as_str()?.to_owned())
}

async fn client_loop(
    url: String,
    client_number: usize,
    deadline: Instant,
    tally: Arc<Mutex<Tally>>,
) -> Acknowledged {
    let client = Client::http(&url).await.unwrap();
    let notebook_index = client_number % NOTEBOOKS;
    let own_index = client_number / NOTEBOOKS;
    let notebook = notebook_name(notebook_index);
    let own = own_cell(own_index);
    let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ ((client_number as u64 + 1) * 7919));
    let mut acknowledged = Acknowledged::default();
    let (mut own_rev, _) = read_cell(&client, &notebook, &own).await;
    let (mut shared_rev, mut shared_source) = read_cell(&client, &notebook, "shared").await;
    let mut sequence = 0usize;
    while Instant::now() < deadline {
        sequence += 1;
        let roll = random.below(100);
        let (kind, arguments): (&'static str, Value) = match roll {
            0..=14 => ("read outline", json!({"notebookRef": notebook})),
            15..=24 => (
                "read source",
                json!({"notebookRef": notebook, "view": "source", "cellIds": ["shared", own]}),
            ),
            25..=31 => (
                "search",
                json!({"notebookRef": notebook, "query": format!("client {own_index}")}),
            ),
            32..=34 => ("list", json!({})),
            35..=39 => ("receipt", json!({"notebookRef": notebook})),
            40..=64 => {
                let source = format!("# client {own_index}: v{sequence}");
                (
                    "edit own",
                    json!({"notebookRef": notebook, "edits": [{"editType": "edit",
                        "cellId": own, "expectedRev": own_rev, "newCode": source}]}),
                )
            }
            65..=79 => ("append shared", Value::Null),
            80..=87 => {
                let marker = format!("note c{client_number} #{sequence}");
                (
                    "insert",
                    json!({"notebookRef": notebook, "edits": [{"editType": "insert",
                        "cellId": "BOTTOM", "language": "markdown", "newCode": marker}]}),
                )
            }
            _ => (
                "run",
                json!({"notebookRef": notebook, "cellIds": ["work"], "waitMs": 2000}),
            ),
        };
        let tool = match kind {
            "read outline" | "read source" => "read_notebook",
            "search" => "search_cells",
            "list" => "list_notebooks",
            "receipt" => "get_execution",
            "edit own" | "insert" => "edit_cells",
            "run" => "run_cells",
            _ => "edit_cells",
        };
        if kind == "append shared" {
            // Append a line, retrying on conflicts with the current rev and source the error
            // carries (nothing else is read between attempts).
            let line = format!("# c{client_number} #{sequence}");
            loop {
                let arguments = json!({"notebookRef": notebook, "edits": [{"editType": "edit",
                    "cellId": "shared", "expectedRev": shared_rev,
                    "newCode": format!("{shared_source}\n{line}")}]});
                let started = Instant::now();
                let call = client.call("edit_cells", arguments).await;
                tally
                    .lock()
                    .unwrap()
                    .record("edit shared (with conflicts)", started.elapsed());
                if call.is_error() {
                    let error = call.error();
                    if error["code"] == "rev_mismatch" {
                        *tally
                            .lock()
                            .unwrap()
                            .expected
                            .entry("rev_mismatch")
                            .or_default() += 1;
                        shared_rev = error["details"]["current"]["rev"]
                            .as_str()
                            .unwrap()
                            .to_owned();
                        shared_source = error["details"]["current"]["source"]
                            .as_str()
                            .unwrap()
                            .to_owned();
                        continue;
                    }
                    tally
                        .lock()
                        .unwrap()
                        .unexpected
                        .push(format!("client {client_number} append: {error}"));
                    break;
                }
                let result = call.ok();
                shared_source = format!("{shared_source}\n{line}");
                shared_rev = first_rev(&result).unwrap();
                acknowledged.appended.push(line);
                break;
            }
            continue;
        }
        let started = Instant::now();
        let call = client.call(tool, arguments).await;
        let took = started.elapsed();
        tally.lock().unwrap().record(kind, took);
        if call.is_error() {
            let code = call.error_code();
            // Nobody else edits a client's own cell, so a conflict there is a lost update.
            let expected = (EXPECTED_CODES.contains(&code.as_str())
                && !(kind == "edit own" && code == "rev_mismatch"))
                || (kind == "receipt" && code == "no_execution");
            let mut tally = tally.lock().unwrap();
            if expected {
                let code = EXPECTED_CODES
                    .iter()
                    .chain(["no_execution"].iter())
                    .find(|known| **known == code)
                    .unwrap();
                *tally.expected.entry(code).or_default() += 1;
            } else {
                tally
                    .unexpected
                    .push(format!("client {client_number} {kind}: {}", call.text()));
            }
            continue;
        }
        let result = call.ok();
        match kind {
            "edit own" => {
                own_rev = first_rev(&result).unwrap();
                acknowledged.own_source = Some(format!("# client {own_index}: v{sequence}"));
            }
            "insert" => {
                acknowledged
                    .inserted
                    .push(format!("note c{client_number} #{sequence}"));
            }
            "run" => {
                let status = result["status"].as_str().unwrap_or_default();
                if !matches!(status, "completed" | "running" | "requested") {
                    tally.lock().unwrap().unexpected.push(format!(
                        "client {client_number} run ended {status}: {result}"
                    ));
                }
            }
            _ => {}
        }
    }
    client.close().await.unwrap();
    acknowledged
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_clients_for_a_minute_lose_no_edit() {
    let seconds: u64 = jupyter_mcp_tests::env_count("JUPYTER_MCP_LOAD_SECONDS", 60);
    let root = tempfile::tempdir().unwrap();
    link_venv(root.path());
    for index in 0..NOTEBOOKS {
        write_notebook(root.path(), index);
    }
    let server = HttpServer::start(root.path(), &[]).unwrap();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let clients = NOTEBOOKS * CLIENTS_PER_NOTEBOOK;
    let mut tasks = Vec::new();
    for client_number in 0..clients {
        tasks.push(tokio::spawn(client_loop(
            server.url.clone(),
            client_number,
            deadline,
            tally.clone(),
        )));
    }
    let mut acknowledged = Vec::new();
    for task in tasks {
        acknowledged.push(task.await.expect("a client task panicked"));
    }
    let elapsed = started.elapsed();
    let peak_rss = peak_rss_bytes(server.pid());

    // Save everything, then check the files cell by cell.
    let checker = Client::http(&server.url).await.unwrap();
    let refs: Vec<String> = (0..NOTEBOOKS).map(notebook_name).collect();
    checker
        .call("save_notebooks", json!({"notebookRefs": refs}))
        .await
        .ok();
    let mut lost = Vec::new();
    let mut paths = Vec::new();
    for index in 0..NOTEBOOKS {
        let path = root.path().join(notebook_name(index));
        let notebook =
            notebook_model::Notebook::parse(&std::fs::read(&path).unwrap()).expect("parses");
        paths.push(path);
        let source_of = |cell_id: &str| {
            notebook
                .position_of_id(cell_id)
                .map(|position| notebook.cells()[position].source().to_owned())
        };
        let shared = source_of("shared").unwrap_or_default();
        let shared_lines: Vec<&str> = shared.lines().collect();
        let markdown: Vec<String> = notebook
            .cells()
            .iter()
            .filter(|cell| cell.kind() == notebook_model::CellKind::Markdown)
            .map(|cell| cell.source().to_owned())
            .collect();
        for (client_number, record) in acknowledged.iter().enumerate() {
            if client_number % NOTEBOOKS != index {
                continue;
            }
            let own = own_cell(client_number / NOTEBOOKS);
            if let Some(expected) = &record.own_source
                && source_of(&own).as_deref() != Some(expected.as_str())
            {
                lost.push(format!(
                    "{own} of {}: {:?} on disk, {expected:?} acknowledged",
                    notebook_name(index),
                    source_of(&own)
                ));
            }
            let mut position = 0;
            for line in &record.appended {
                match shared_lines[position..]
                    .iter()
                    .position(|found| found == line)
                {
                    Some(offset) => position += offset + 1,
                    None => lost.push(format!("shared append {line:?} (or out of order)")),
                }
            }
            for marker in &record.inserted {
                let count = markdown.iter().filter(|text| *text == marker).count();
                if count != 1 {
                    lost.push(format!("insert {marker:?} is on disk {count} times"));
                }
            }
        }
    }
    assert!(
        nbformat_problems(&paths).is_empty(),
        "nbformat rejects a notebook"
    );

    let tally = tally.lock().unwrap();
    let mut report = format!(
        "load: {clients} clients on {NOTEBOOKS} notebooks for {:.1} s; server peak RSS {}\n",
        elapsed.as_secs_f64(),
        peak_rss.map_or("unknown".to_owned(), |bytes| format!(
            "{:.1} MiB",
            bytes as f64 / (1024.0 * 1024.0)
        ))
    );
    report.push_str(
        "| Call | Count | p50 ms | p90 ms | p99 ms | max ms |\n|---|---|---|---|---|---|\n",
    );
    let mut total = 0;
    for (kind, latencies) in &tally.latencies {
        let mut sorted = latencies.clone();
        sorted.sort();
        total += sorted.len();
        let ms = |duration: Duration| duration.as_secs_f64() * 1000.0;
        report.push_str(&format!(
            "| {kind} | {} | {:.1} | {:.1} | {:.1} | {:.1} |\n",
            sorted.len(),
            ms(percentile(&sorted, 0.5)),
            ms(percentile(&sorted, 0.9)),
            ms(percentile(&sorted, 0.99)),
            ms(*sorted.last().unwrap()),
        ));
    }
    let acknowledged_edits: usize = acknowledged
        .iter()
        .map(|record| {
            record.appended.len() + record.inserted.len() + usize::from(record.own_source.is_some())
        })
        .sum();
    report.push_str(&format!(
        "{total} calls ({:.0}/s); expected refusals {:?}; {} unexpected errors; {} lost edits \
         (of {acknowledged_edits} checked)\n",
        total as f64 / elapsed.as_secs_f64(),
        tally.expected,
        tally.unexpected.len(),
        lost.len()
    ));
    eprintln!("{report}");
    if let Ok(path) = std::env::var("JUPYTER_MCP_LOAD_REPORT") {
        std::fs::write(path, &report).unwrap();
    }
    assert!(
        tally.unexpected.is_empty(),
        "unexpected errors:\n{}",
        tally.unexpected.join("\n")
    );
    assert!(lost.is_empty(), "lost edits:\n{}", lost.join("\n"));
    assert!(
        tally
            .latencies
            .get("run")
            .is_some_and(|runs| !runs.is_empty()),
        "the load ran cells"
    );
}
