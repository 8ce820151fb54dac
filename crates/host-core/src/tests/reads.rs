//! The read budget: `read_notebook` returns whole cells in order within `maxResponseChars` and
//! names the next offset.

use mcp_contract::ToolOutput;
use serde_json::json;

use super::{World, code_edit};

#[tokio::test]
async fn a_long_notebook_is_read_in_pages_of_whole_cells() {
    let world = World::new();
    let sources: Vec<String> = (0..200)
        .map(|index| format!("value_{index} = {index}\n# {}", "x".repeat(400)))
        .collect();
    let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
    world.host.insert("long.ipynb", &sources);
    let mut seen = Vec::new();
    let mut offset = 0;
    let mut pages = 0;
    loop {
        let page = world
            .ok(
                "read_notebook",
                json!({"notebookRef": "long.ipynb", "view": "source", "cellOffset": offset,
                       "maxResponseChars": 20_000}),
            )
            .await;
        pages += 1;
        assert!(
            page.to_string().len() <= 20_000 + 2_000,
            "page {pages} is {} characters",
            page.to_string().len()
        );
        for cell in page["cells"].as_array().unwrap() {
            let source = cell["source"].as_str().unwrap();
            assert!(source.ends_with(&"x".repeat(400)), "cells are never cut");
            seen.push(cell["index"].as_u64().unwrap());
        }
        match page["nextCellOffset"].as_u64() {
            Some(next) => {
                assert!(page["notice"].as_str().is_some(), "a cut page says so");
                offset = next;
            }
            None => break,
        }
    }
    assert!(pages > 3, "200 long cells do not fit 20,000 characters");
    assert_eq!(
        seen,
        (0..200).collect::<Vec<u64>>(),
        "every cell once, in order"
    );
}

/// Reads `a.ipynb` (one cell, `a = 1`), lets someone else change the cell to `a = 2`, then edits
/// it with the rev of the read.
async fn edit_a_cell_someone_changed(world: &World) -> ToolOutput {
    world.host.insert("a.ipynb", &["a = 1"]);
    let outline = world.outline("a.ipynb").await;
    let cell = &outline["cells"][0];
    world.host.change_outside("a.ipynb", |notebook| {
        notebook.cell_mut(0).expect("a cell").set_source("a = 2");
    });
    world
        .call("edit_cells", code_edit("a.ipynb", cell, "a = 3"))
        .await
}

#[tokio::test]
async fn a_write_after_someone_elses_change_is_refused_with_nothing_applied() {
    let world = World::new();
    let refused = edit_a_cell_someone_changed(&world).await;
    assert!(refused.is_error, "{}", refused.text);
    assert_eq!(
        world.host.notebook("a.ipynb").unwrap().cells()[0].source(),
        "a = 2"
    );
}

/// A host whose documents are live and shared (a collaborative room).
fn shared_world() -> World {
    World::with_host(
        crate::testing::MemoryHost::new()
            .with_document_capabilities(crate::DocumentCapabilities { shared_live: true }),
    )
}

#[tokio::test]
async fn on_a_shared_document_a_change_elsewhere_does_not_refuse_an_edit() {
    let world = shared_world();
    world.host.insert("a.ipynb", &["a = 1", "b = 1"]);
    let outline = world.outline("a.ipynb").await;
    let cell = &outline["cells"][0];
    // A person changes the other cell meanwhile.
    world.host.change_outside("a.ipynb", |notebook| {
        notebook.cell_mut(1).expect("a cell").set_source("b = 2");
    });
    world.edit_code("a.ipynb", cell, "a = 3").await;
    let notebook = world.host.notebook("a.ipynb").unwrap();
    let sources: Vec<&str> = notebook.cells().iter().map(|cell| cell.source()).collect();
    assert_eq!(sources, ["a = 3", "b = 2"], "both changes are there");
}

#[tokio::test]
async fn on_a_shared_document_an_edit_of_a_cell_someone_changed_is_refused_with_its_source() {
    let world = shared_world();
    let refused = edit_a_cell_someone_changed(&world).await;
    assert!(refused.is_error, "{}", refused.text);
    let body: serde_json::Value = serde_json::from_str(&refused.text).unwrap();
    assert_eq!(body["error"]["code"], "rev_mismatch", "{body}");
    assert_eq!(
        body["error"]["details"]["current"]["source"], "a = 2",
        "the refusal carries the current source: {body}"
    );
    assert_eq!(
        world.host.notebook("a.ipynb").unwrap().cells()[0].source(),
        "a = 2"
    );
}

#[tokio::test]
async fn a_finding_repeated_in_many_cells_is_given_once_with_the_other_cells() {
    let world = World::new();
    // `train` is defined nowhere: the same finding in cells 1 to 40; `other` only in cell 41.
    let mut sources: Vec<String> = vec!["import os".to_owned()];
    sources.extend((1..=40).map(|index| format!("result_{index} = train(step={index})")));
    sources.push("print(other)".to_owned());
    let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
    world.host.insert("repeat.ipynb", &sources);
    let outline = world
        .ok(
            "read_notebook",
            json!({"notebookRef": "repeat.ipynb", "maxResponseChars": 0}),
        )
        .await;
    let lint = outline["lint"].as_array().unwrap();
    let train: Vec<_> = lint
        .iter()
        .filter(|finding| finding["message"].as_str().unwrap().contains("`train`"))
        .collect();
    assert_eq!(train.len(), 1, "one finding for one name: {lint:?}");
    assert_eq!(train[0]["cellIndex"], 1);
    assert_eq!(train[0]["alsoIn"], json!((2..=40).collect::<Vec<u64>>()));
    let other = lint
        .iter()
        .find(|finding| finding["message"].as_str().unwrap().contains("`other`"))
        .expect("the lone finding");
    assert_eq!(other["cellIndex"], 41);
    assert!(
        other.get("alsoIn").is_none(),
        "a lone finding has no alsoIn: {other}"
    );
    // The lint view keeps one finding per cell.
    let detail = world
        .ok(
            "read_notebook",
            json!({"notebookRef": "repeat.ipynb", "view": "lint"}),
        )
        .await;
    let detailed = detail["lint"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|finding| finding["message"].as_str().unwrap().contains("`train`"))
        .count();
    assert_eq!(detailed, 40);
    // Paged, each page names the repeats among its own cells, and the pages cover every cell.
    let mut covered = Vec::new();
    let mut offset = 0;
    loop {
        let page = world
            .ok(
                "read_notebook",
                json!({"notebookRef": "repeat.ipynb", "cellOffset": offset,
                       "maxResponseChars": 4_000}),
            )
            .await;
        let cells: Vec<u64> = page["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|cell| cell["index"].as_u64().unwrap())
            .collect();
        for finding in page["lint"].as_array().unwrap() {
            if finding["message"].as_str().unwrap().contains("`train`") {
                covered.push(finding["cellIndex"].as_u64().unwrap());
                for index in finding["alsoIn"].as_array().into_iter().flatten() {
                    assert!(
                        cells.contains(&index.as_u64().unwrap()),
                        "{finding} on {cells:?}"
                    );
                    covered.push(index.as_u64().unwrap());
                }
            }
        }
        match page["nextCellOffset"].as_u64() {
            Some(next) => offset = next as usize,
            None => break,
        }
    }
    assert_eq!(covered, (1..=40).collect::<Vec<u64>>());
}

/// A PNG of `width`×`height` pixels, base64: a pattern that compresses about as well as a plot.
fn png_base64(width: u32, height: u32) -> String {
    use base64::Engine as _;
    let pixels = image::RgbImage::from_fn(width, height, |x, y| {
        let shade = ((x * 7 + y * 13) % 251) as u8;
        image::Rgb([shade, (x % 256) as u8, (y % 256) as u8])
    });
    let mut bytes = std::io::Cursor::new(Vec::new());
    pixels
        .write_to(&mut bytes, image::ImageFormat::Png)
        .expect("a PNG encodes");
    base64::engine::general_purpose::STANDARD.encode(bytes.into_inner())
}

/// Plots of the sizes a read meets: one below the thumbnail side, one above it, one above the
/// full-size side (so that `includeImages: true` downscales too), and a 2×2 one.
fn plots() -> &'static [String] {
    static PLOTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    PLOTS.get_or_init(|| {
        vec![
            png_base64(2, 2),
            png_base64(300, 200),
            png_base64(640, 480),
            png_base64(1_300, 800),
        ]
    })
}

/// One output of a generated cell.
#[derive(Debug, Clone)]
enum GeneratedOutput {
    Text(usize),
    Plot(usize),
}

fn output_json(output: &GeneratedOutput) -> serde_json::Value {
    match output {
        GeneratedOutput::Text(length) => json!({
            "output_type": "stream",
            "name": "stdout",
            "text": "loss 0.25 \"quoted\"\n".repeat(*length / 20 + 1),
        }),
        GeneratedOutput::Plot(which) => json!({
            "output_type": "display_data",
            "metadata": {},
            "data": {"image/png": plots()[*which], "text/plain": "<Figure size 640x480>"},
        }),
    }
}

/// A notebook of code cells (source length, outputs each) as nbformat JSON.
fn notebook_with(cells: &[(usize, Vec<GeneratedOutput>)]) -> notebook_model::Notebook {
    let cells: Vec<serde_json::Value> = cells
        .iter()
        .enumerate()
        .map(|(index, (source_length, outputs))| {
            json!({
                "cell_type": "code",
                "id": format!("cell-{index}"),
                "metadata": {},
                "execution_count": index + 1,
                // `undefined_{index}` gives the outline a lint finding per cell.
                "source": format!(
                    "value_{index} = undefined_{index} + 1\n# {}",
                    "x".repeat(*source_length)
                ),
                "outputs": outputs.iter().map(output_json).collect::<Vec<_>>(),
            })
        })
        .collect();
    notebook_model::Notebook::from_value(json!({
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": cells,
    }))
    .expect("a generated notebook parses")
}

/// Reads `notebook` with these arguments and checks the one promise of the budget: the text the
/// client gets is at most `maxResponseChars` characters, unless the reply is a single cell.
async fn check_read_fits(
    notebook: notebook_model::Notebook,
    view: &str,
    max_response_chars: Option<u32>,
    include_images: Option<bool>,
    cell_offset: usize,
) -> Result<(), String> {
    let world = World::new();
    let notebook_cells = notebook.cells().len();
    world.host.insert_notebook("plots.ipynb", notebook);
    let mut arguments =
        json!({"notebookRef": "plots.ipynb", "view": view, "cellOffset": cell_offset});
    if let Some(chars) = max_response_chars {
        arguments["maxResponseChars"] = json!(chars);
    }
    if let Some(include) = include_images {
        arguments["includeImages"] = json!(include);
    }
    let output = world.call("read_notebook", arguments.clone()).await;
    if output.is_error {
        return Err(format!("{arguments} failed: {}", output.text));
    }
    let budget = max_response_chars.map_or(
        mcp_contract::params::DEFAULT_MAX_RESPONSE_CHARS as usize,
        |chars| chars as usize,
    );
    let length = output.text.chars().count();
    let returned = output.structured.as_ref().expect("a success")["cells"]
        .as_array()
        .map_or(0, Vec::len);
    // A page starting at the end holds no cell: its envelope is all there is to send.
    let past_the_end = returned == 0 && cell_offset >= notebook_cells;
    if length > budget && returned != 1 && !past_the_end {
        return Err(format!(
            "{arguments}: {length} characters for a budget of {budget}, with {returned} cells \
             and {} images",
            output.images.len()
        ));
    }
    Ok(())
}

#[tokio::test]
async fn a_page_that_reaches_the_thumbnail_cap_fits_its_budget() {
    // The case of the issue: many matplotlib figures, `view: "all"`, a small budget.
    let cells: Vec<(usize, Vec<GeneratedOutput>)> = (0..12)
        .map(|_| {
            (
                40,
                vec![GeneratedOutput::Text(60), GeneratedOutput::Plot(2)],
            )
        })
        .collect();
    for budget in (2_000..=12_000).step_by(250) {
        for include_images in [None, Some(true)] {
            check_read_fits(
                notebook_with(&cells),
                "all",
                Some(budget),
                include_images,
                0,
            )
            .await
            .unwrap();
        }
    }
}

fn generated_output() -> impl proptest::strategy::Strategy<Value = GeneratedOutput> {
    use proptest::prelude::*;
    // Mostly plots, so that pages often reach the image cap.
    prop_oneof![
        1 => (0usize..3_000).prop_map(GeneratedOutput::Text),
        3 => (0usize..4).prop_map(GeneratedOutput::Plot),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    #[test]
    fn every_read_fits_its_budget_or_is_one_cell(
        cells in proptest::collection::vec(
            (0usize..600, proptest::collection::vec(generated_output(), 0..4)),
            1..16,
        ),
        view in proptest::sample::select(vec!["outline", "source", "outputs", "all"]),
        max_response_chars in proptest::option::of(1u32..20_000),
        include_images in proptest::option::of(proptest::bool::ANY),
        offset_seed in 0usize..100,
    ) {
        let cell_offset = offset_seed % (cells.len() + 1);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let checked = runtime.block_on(check_read_fits(
            notebook_with(&cells),
            view,
            max_response_chars,
            include_images,
            cell_offset,
        ));
        proptest::prop_assert!(checked.is_ok(), "{}", checked.unwrap_err());
    }
}
