//! The embedding example (`examples/embedded-host`): a third-party host, in memory, serves our
//! tools over stdio to a real MCP client, listing only what it can do.

use jupyter_mcp_tests::{Client, workspace_binary};
use serde_json::json;

#[tokio::test]
async fn the_embedded_example_answers_tools_list_and_read_notebook_over_stdio() {
    let binary = workspace_binary("embedded-host", "embedded-host");
    let client = Client::stdio_command(tokio::process::Command::new(binary))
        .await
        .expect("the example speaks MCP over stdio");
    let tools = client.tool_names().await.expect("tools/list");
    assert!(
        tools.iter().any(|tool| tool == "read_notebook"),
        "{tools:?}"
    );
    assert!(tools.iter().any(|tool| tool == "edit_cells"), "{tools:?}");
    // Undo is the tools' own, so every host lists it.
    assert!(tools.iter().any(|tool| tool == "undo_last"), "{tools:?}");
    for kernel_tool in [
        "run_cells",
        "list_kernels",
        "upload_file",
        "get_kernel_info",
    ] {
        assert!(
            !tools.iter().any(|tool| tool == kernel_tool),
            "a host without kernels lists {kernel_tool}"
        );
    }
    let read = client.read_view("hello.ipynb", "source").await;
    let cells = read["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 2, "{read}");
    assert_eq!(cells[1]["cell_id"], "greet");
    assert_eq!(cells[1]["source"], "print('hello from memory')");
    // An edit through the tools lands in the host's memory and reads back.
    let edited = client
        .call(
            "edit_cells",
            json!({"notebookRef": "hello.ipynb", "edits": [{
                "editType": "edit", "cellId": "greet", "expectedRev": cells[1]["rev"],
                "newCode": "print('changed')"
            }]}),
        )
        .await
        .ok();
    assert_eq!(edited["cellCount"], 2, "{edited}");
    let again = client.read_view("hello.ipynb", "source").await;
    assert_eq!(again["cells"][1]["source"], "print('changed')");
    client.close().await.expect("close");
}
