//! The output viewer (an MCP App) in headless Chromium: a real run of a pandas table and a
//! matplotlib plot, its receipt handed to the viewer by the test's own minimal MCP Apps host page
//! (`tests/pages/apps-host.html`), the viewer's `resources/read` requests answered by the real
//! server, and the rendered page checked pixel by pixel and saved under `.work/screenshots/`.

use std::collections::BTreeMap;

use jupyter_mcp_tests::browser::{Browser, save_screenshot};
use jupyter_mcp_tests::{Client, HttpServer};
use rmcp::model::ReadResourceRequestParams;
use serde_json::{Value, json};

const TABLE: &str = "import pandas as pd\n\
pd.DataFrame({'city': ['Oslo', 'Lima', 'Pune'], 'rain_mm': [763, 6, 722]})";
const PLOT: &str = "%matplotlib inline\n\
import matplotlib.pyplot as plt\n\
fig, ax = plt.subplots(figsize=(4, 3))\n\
ax.bar(['Oslo', 'Lima', 'Pune'], [763, 6, 722])\n\
plt.show()";

/// Pixels of `png` within `tolerance` of `rgb` on every channel.
fn pixels_near(png: &[u8], rgb: [u8; 3], tolerance: u8) -> usize {
    let image = image::load_from_memory(png).unwrap().to_rgb8();
    image
        .pixels()
        .filter(|pixel| {
            pixel
                .0
                .iter()
                .zip(rgb)
                .all(|(have, want)| have.abs_diff(want) <= tolerance)
        })
        .count()
}

#[tokio::test]
async fn the_output_viewer_shows_a_table_and_a_plot_from_a_real_run_in_chromium() {
    let root = jupyter_mcp_tests::example_root();
    jupyter_mcp_tests::write_code_notebook(root.path(), "report.ipynb", &[TABLE, PLOT]);
    let server = HttpServer::start(root.path(), &[]).unwrap();
    let client = Client::http(&server.url).await.unwrap();
    let cells = client.outline_cells("report.ipynb").await;
    let ids: Vec<Value> = cells.iter().map(|cell| cell["cell_id"].clone()).collect();
    let run = client
        .call(
            "run_cells",
            json!({"notebookRef": "report.ipynb", "cellIds": ids, "waitMs": 120000}),
        )
        .await;
    let receipt = run.ok();
    assert_eq!(receipt["status"], "completed", "{receipt}");
    let tool_result = serde_json::to_value(&run.result).unwrap();

    // The viewer as the server publishes it, and the tools that point at it.
    let viewer = client
        .peer()
        .read_resource(ReadResourceRequestParams::new(
            "ui://jupyter-mcp/output-viewer",
        ))
        .await
        .unwrap();
    let viewer = serde_json::to_value(&viewer.contents[0]).unwrap();
    assert_eq!(viewer["mimeType"], "text/html;profile=mcp-app");
    assert_eq!(
        viewer["_meta"]["ui"]["csp"],
        json!({"connectDomains": [], "resourceDomains": []})
    );
    let html = viewer["text"].as_str().unwrap().to_owned();

    let browser = Browser::launch().await.unwrap();
    let page = browser.new_page(&["hostRead"]).await.unwrap();
    let host = jupyter_mcp_tests::workspace_root().join("tests/pages/apps-host.html");
    page.navigate(&host_files::file_uri(&host)).await.unwrap();

    // The host runs the viewer; meanwhile every resources/read it forwards is answered here
    // from the server, and the answers are kept to check what the viewer was given.
    let start = format!(
        "startHost({}, {})",
        serde_json::to_string(&html).unwrap(),
        tool_result
    );
    let shown = page.evaluate(&start);
    tokio::pin!(shown);
    let mut answers: BTreeMap<String, Value> = BTreeMap::new();
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(120), async {
        loop {
            tokio::select! {
                outcome = &mut shown => break outcome.unwrap(),
                event = page.next_event() => {
                    let event = event.expect("the browser is still there");
                    if event["method"] != "Runtime.bindingCalled" {
                        continue;
                    }
                    let request: Value =
                        serde_json::from_str(event["params"]["payload"].as_str().unwrap()).unwrap();
                    let uri = request["uri"].as_str().unwrap().to_owned();
                    let answer = match client
                        .peer()
                        .read_resource(ReadResourceRequestParams::new(uri.clone()))
                        .await
                    {
                        Ok(read) => json!({"result": read}),
                        Err(error) => json!({"error": {"code": -32002, "message": error.to_string()}}),
                    };
                    answers.insert(uri, answer.clone());
                    page.evaluate(&format!("hostAnswer({}, {answer})", request["token"]))
                        .await
                        .unwrap();
                }
            }
        }
    })
    .await
    .expect("the viewer rendered within two minutes");

    // The viewer initialised, was given the result, and read the two cells' outputs.
    let seen: Vec<&str> = outcome["seen"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(seen[..2], ["ui/initialize", "ui/notifications/initialized"]);
    let served: Vec<&Value> = answers
        .values()
        .filter_map(|answer| answer["result"]["contents"].as_array())
        .flatten()
        .collect();
    assert!(
        served
            .iter()
            .any(|content| content["mimeType"] == "text/html"
                && content["text"].as_str().unwrap().contains("<table")),
        "the table's HTML was read: {answers:?}"
    );
    assert!(
        served
            .iter()
            .any(|content| content["mimeType"] == "image/png" && content["blob"].is_string()),
        "the plot's PNG was read"
    );
    for id in &ids {
        let id = id.as_str().unwrap();
        assert!(
            outcome["reads"].as_array().unwrap().iter().any(|uri| uri
                .as_str()
                .unwrap()
                .contains(&format!("#cells/{id}/outputs/0"))),
            "the viewer read cell {id}'s first output: {outcome}"
        );
    }

    // What the person sees: the table as a table, the plot as a decoded image, and its bars in
    // matplotlib's first colour on screen.
    let dom = page
        .evaluate_in_child_frame(
            "({rows: Array.from(document.querySelectorAll('.output.html table tbody tr'))
                 .map((row) => row.innerText.trim().split(/\\s+/)),
               images: Array.from(document.querySelectorAll('img.output'))
                 .map((img) => [img.naturalWidth, img.naturalHeight]),
               state: document.getElementById('state').textContent})",
        )
        .await
        .unwrap();
    assert_eq!(
        dom["rows"],
        json!([
            ["0", "Oslo", "763"],
            ["1", "Lima", "6"],
            ["2", "Pune", "722"]
        ]),
        "{dom}"
    );
    let images = dom["images"].as_array().unwrap();
    assert_eq!(images.len(), 1, "{dom}");
    assert!(images[0][0].as_u64().unwrap() >= 300, "{dom}");
    let png = page.screenshot().await.unwrap();
    let path = save_screenshot("output-viewer", &png).unwrap();
    let bars = pixels_near(&png, [0x1f, 0x77, 0xb4], 12);
    eprintln!(
        "viewer height {} px, {}; {bars} bar pixels; screenshot at {}",
        outcome["height"],
        dom["state"],
        path.display()
    );
    assert!(
        bars > 5_000,
        "the plot's bars are on screen ({bars} pixels)"
    );
    client.close().await.unwrap();
    server.stop().unwrap();
}
