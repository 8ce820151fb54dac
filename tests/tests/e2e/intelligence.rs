//! Dataflow, staleness, minimal re-runs, lint, images and inspection on a real kernel.

use jupyter_mcp_tests::{Client, HttpServer, serve_code_notebook, strings_of};
use serde_json::{Value, json};

const NB: &str = "flow.ipynb";

async fn serve(sources: &[&str]) -> (tempfile::TempDir, HttpServer, Client) {
    serve_code_notebook(NB, sources).await
}

async fn states(client: &Client) -> Vec<String> {
    let cells = client.outline_cells(NB).await;
    cells
        .iter()
        .map(|cell| cell["state"].as_str().unwrap_or("-").to_owned())
        .collect()
}

fn ran(receipt: &Value) -> Vec<String> {
    strings_of(&receipt["cells"], "cellId")
        .into_iter()
        .map(str::to_owned)
        .collect()
}

async fn run(client: &Client, arguments: Value) -> Value {
    let mut arguments = arguments;
    arguments["notebookRef"] = json!(NB);
    arguments["waitMs"] = json!(60000);
    let receipt = client.call("run_cells", arguments).await.ok();
    assert_eq!(receipt["status"], "completed", "{receipt}");
    receipt
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_reruns_exactly_the_cell_and_its_dependents() {
    let (_root, _server, client) =
        serve(&["a = 1", "b = a + 1", "c = 10", "d = b + c", "print(d)"]).await;
    assert_eq!(states(&client).await, ["never-run"; 5]);
    let cells = client.outline_cells(NB).await;
    assert_eq!(
        cells[3]["inputs"],
        json!([cells[1]["name"], cells[2]["name"]])
    );
    assert_eq!(cells[1]["dependents"], json!([cells[3]["name"]]));

    // Nothing ran yet: the stale set is everything, in document order.
    let first = run(&client, json!({})).await;
    assert_eq!(ran(&first), ["c0", "c1", "c2", "c3", "c4"]);
    assert_eq!(states(&client).await, ["fresh"; 5]);
    let nothing = client
        .call("run_cells", json!({"notebookRef": NB}))
        .await
        .ok();
    assert_eq!(nothing["cells"], json!([]), "nothing is stale: {nothing}");

    // Edit one cell: it and its dependents go stale, nothing else.
    let rev = cells[1]["rev"].clone();
    client
        .call(
            "edit_cells",
            json!({"notebookRef": NB, "edits": [
                {"editType": "replace", "cellId": "c1", "expectedRev": rev, "oldText": "+ 1", "newCode": "+ 2"}
            ]}),
        )
        .await
        .ok();
    assert_eq!(
        states(&client).await,
        ["fresh", "stale", "fresh", "stale", "stale"]
    );
    let second = run(&client, json!({})).await;
    assert_eq!(ran(&second), ["c1", "c3", "c4"]);
    assert!(
        second["cells"][2]["output"]
            .as_str()
            .unwrap()
            .contains("13")
    );
    assert_eq!(states(&client).await, ["fresh"; 5]);

    // A restart makes everything stale; a target runs after its stale ancestors.
    client.kernel_action("restart_kernels", NB).await;
    assert!(states(&client).await.iter().all(|state| state == "stale"));
    let third = run(&client, json!({"cellIds": ["c4"]})).await;
    assert_eq!(ran(&third), ["c0", "c1", "c2", "c3", "c4"]);
    // freshDeps: false runs only the target (and says what it printed).
    let only = run(&client, json!({"cellIds": ["c4"], "freshDeps": false})).await;
    assert_eq!(ran(&only), ["c4"]);

    // edit_cells with run "stale" folds edit and minimal re-run into one call.
    let c2_rev = client.outline_cells(NB).await[2]["rev"].clone();
    let folded = client
        .call(
            "edit_cells",
            json!({"notebookRef": NB, "run": "stale", "waitMs": 60000, "edits": [
                {"editType": "edit", "cellId": "c2", "expectedRev": c2_rev, "newCode": "c = 100"}
            ]}),
        )
        .await
        .ok();
    assert_eq!(ran(&folded["execution"]), ["c2", "c3", "c4"]);
    assert!(
        folded["execution"]["cells"][2]["output"]
            .as_str()
            .unwrap()
            .contains("103")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lint_finds_cross_cell_problems_before_anything_runs() {
    let (_root, _server, client) = serve(&[
        "import os\nresult = total * 2",
        "total = 5",
        "def broken(:\n    pass",
        "%matplotlib inline\n!echo hi\nvalue = 1",
    ])
    .await;
    let lint = client
        .call("read_notebook", json!({"notebookRef": NB, "view": "lint"}))
        .await
        .ok();
    let findings = lint["lint"].as_array().unwrap();
    let codes: Vec<(&str, u64)> = findings
        .iter()
        .map(|finding| {
            (
                finding["code"].as_str().unwrap(),
                finding["cellIndex"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(codes.contains(&("defined_below", 0)), "{codes:?}");
    assert!(codes.contains(&("syntax_error", 2)), "{codes:?}");
    assert!(codes.contains(&("unused_import", 0)), "{codes:?}");
    assert!(
        !codes
            .iter()
            .any(|(code, cell)| *cell == 3 && matches!(*code, "syntax_error" | "analysis_failed")),
        "magics and shell lines parse: {codes:?}"
    );
    // The outline carries the same findings.
    let outline = client
        .call("read_notebook", json!({"notebookRef": NB}))
        .await
        .ok();
    assert_eq!(outline["lint"], lint["lint"]);
    assert!(
        outline["cells"][0]["tldr"]
            .as_str()
            .unwrap()
            .starts_with('*')
    );
}

fn png_size(base64_data: &str) -> (u32, u32) {
    use std::io::Write;
    let output = std::process::Command::new("base64")
        .arg("-d")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(base64_data.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    let bytes = output.stdout;
    assert_eq!(&bytes[1..4], b"PNG");
    let width = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    (width, height)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_figure_comes_back_as_an_image_and_a_frame_inspects_as_csv() {
    let (_root, _server, client) = serve(&[
        "%matplotlib inline\nimport matplotlib.pyplot as plt\n\
         fig, ax = plt.subplots(figsize=(20, 10), dpi=100)\nax.plot([1, 3, 2])\nplt.show()",
        "import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Lima', 'Pune'], 'temp': [3.5, 19.0, 27.25]})",
    ])
    .await;
    let receipt = client
        .call("run_cells", json!({"notebookRef": NB, "waitMs": 60000}))
        .await;
    let body = receipt.ok();
    assert_eq!(body["status"], "completed", "{body}");
    let images = receipt.images();
    assert_eq!(images.len(), 1, "{body}");
    assert_eq!(images[0].0, "image/png");
    let (width, height) = png_size(&images[0].1);
    assert!(width <= 1200 && height <= 1200, "{width}×{height}");
    // About 2000×1000 before (the inline backend trims the margins), so the long side is cut
    // to 1,200 and the aspect kept.
    assert_eq!(width, 1200, "{width}×{height}");
    assert!((500..=650).contains(&height), "{width}×{height}");

    let read = client
        .call(
            "read_notebook",
            json!({"notebookRef": NB, "cellIds": [0], "view": "outputs"}),
        )
        .await;
    // A read that did not ask for images gets a thumbnail, linked to the full image.
    let thumbnails = read.images();
    assert_eq!(thumbnails.len(), 1);
    let (width, height) = png_size(&thumbnails[0].1);
    assert_eq!(width, 320, "{width}×{height}");
    let body = read.ok();
    assert_eq!(body["images"][0]["thumbnail"], true, "{body}");
    assert!(
        body["notice"]
            .as_str()
            .unwrap_or_default()
            .contains("thumbnails"),
        "{body}"
    );
    let links = read.links();
    assert_eq!(links.len(), 1, "{links:?}");
    assert!(links[0].0.ends_with("/outputs/0"), "{links:?}");
    assert!(links[0].1.contains("full-size"), "{links:?}");
    let text = body["cells"][0]["outputs"].as_str().unwrap().to_owned();
    assert!(text.contains("returned as image content"), "{text}");
    // Asked for, the image comes full size, and nothing is linked.
    let full = client
        .call(
            "read_notebook",
            json!({"notebookRef": NB, "cellIds": [0], "view": "outputs", "includeImages": true}),
        )
        .await;
    let (width, _) = png_size(&full.images()[0].1);
    assert_eq!(width, 1200);
    assert!(full.ok()["images"][0].get("thumbnail").is_none());
    assert!(full.links().is_empty(), "{:?}", full.links());
    let without = client
        .call(
            "read_notebook",
            json!({"notebookRef": NB, "cellIds": [0], "view": "outputs", "includeImages": false}),
        )
        .await;
    assert!(without.images().is_empty());

    // Inspection leaves no trace in the namespace or the history.
    let before = client
        .call(
            "run_cells",
            json!({"notebookRef": NB, "cellIds": [1], "freshDeps": false, "waitMs": 60000}),
        )
        .await
        .ok();
    assert_eq!(before["status"], "completed");
    let inspected = client
        .call("inspect_variable", json!({"notebookRef": NB, "name": "df"}))
        .await
        .ok();
    assert_eq!(inspected["type"], "pandas.DataFrame");
    assert_eq!(inspected["format"], "csv");
    assert_eq!(inspected["shape"], json!([3, 2]));
    assert_eq!(
        inspected["columns"][0],
        json!({"name": "city", "dtype": inspected["columns"][0]["dtype"]})
    );
    assert_eq!(inspected["columns"][1]["dtype"], "float64");
    let csv = inspected["repr"].as_str().unwrap();
    assert!(csv.starts_with(",city,temp\n0,Oslo,3.5\n"), "{csv}");
    let figure = client
        .call(
            "inspect_variable",
            json!({"notebookRef": NB, "name": "fig"}),
        )
        .await;
    assert_eq!(figure.images().len(), 1);
    assert_eq!(figure.ok()["format"], "image");
    // A missing name, and an expression rather than a name.
    for (name, code) in [
        ("nope", "variable_not_found"),
        ("__import__('os').getcwd()", "invalid_argument"),
    ] {
        let inspected = client
            .call("inspect_variable", json!({"notebookRef": NB, "name": name}))
            .await;
        assert_eq!(inspected.error_code(), code, "{name}");
    }

    // The kernel's namespace and history did not change.
    let probe = "print(len(In), sorted(name for name in globals() if not name.startswith('_')))";
    let edit = client
        .call(
            "edit_cells",
            json!({"notebookRef": NB, "run": true, "waitMs": 60000, "edits": [
                {"editType": "insert", "cellId": "BOTTOM", "newCode": probe}
            ]}),
        )
        .await
        .ok();
    let first_probe = edit["execution"]["cells"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["output"]
        .as_str()
        .unwrap()
        .to_owned();
    client
        .call("inspect_variable", json!({"notebookRef": NB, "name": "df"}))
        .await
        .ok();
    let probe_id = edit["applied"][0]["cells"][0]["cell_id"].clone();
    let second = client
        .call(
            "run_cells",
            json!({"notebookRef": NB, "cellIds": [probe_id], "freshDeps": false, "waitMs": 60000}),
        )
        .await
        .ok();
    let second_probe = second["cells"][0]["output"].as_str().unwrap().to_owned();
    let probe_line = |text: &str| -> String {
        text.lines()
            .find(|line| line.starts_with(|first: char| first.is_ascii_digit()))
            .unwrap()
            .to_owned()
    };
    let names = |text: &str| {
        probe_line(text)
            .split_once(' ')
            .map(|(_, names)| names.to_owned())
    };
    let count = |text: &str| -> u64 {
        text.lines()
            .find_map(|line| line.split_whitespace().next()?.parse().ok())
            .unwrap()
    };
    assert_eq!(names(&first_probe), names(&second_probe), "no new names");
    assert_eq!(
        count(&second_probe),
        count(&first_probe) + 1,
        "only the probe itself entered the history"
    );
}
