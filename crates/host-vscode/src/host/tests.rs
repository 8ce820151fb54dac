//! The window's pre-save (`saveBeforeExecute`) against a shell that records what it is asked:
//! a call with bad arguments changes nothing, the save included.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use host_core::{CallContext, Services, Tools};
use mcp_contract::ErrorCode;
use serde_json::{Value, json};

use super::{HostConfig, VsCodeHost};
use crate::plan::EditPlan;
use crate::shell::{NewNotebook, Shell, ShellError, Snapshot};

const URI: &str = "file:///w/a.ipynb";

/// One dirty, file-backed notebook; every save and edit is written down.
struct RecordingShell {
    snapshot: Snapshot,
    asked: Mutex<Vec<&'static str>>,
}

impl RecordingShell {
    fn new() -> Arc<RecordingShell> {
        let mut snapshot = crate::plan::tests::snapshot(&["import math", "print(math.pi)"]);
        snapshot.is_dirty = true;
        Arc::new(RecordingShell {
            snapshot,
            asked: Mutex::new(Vec::new()),
        })
    }

    fn asked(&self) -> Vec<&'static str> {
        self.asked.lock().expect("asked lock").clone()
    }
}

impl Shell for RecordingShell {
    fn list(&self) -> BoxFuture<'_, Result<Vec<String>, ShellError>> {
        Box::pin(async { Ok(vec![URI.to_owned()]) })
    }

    fn read(&self, uri: String) -> BoxFuture<'_, Result<Option<Snapshot>, ShellError>> {
        Box::pin(async move { Ok((uri == URI).then(|| self.snapshot.clone())) })
    }

    fn open(&self, uri: String) -> BoxFuture<'_, Result<(bool, Snapshot), ShellError>> {
        Box::pin(async move {
            if uri == URI {
                Ok((true, self.snapshot.clone()))
            } else {
                Err(ShellError::NotFound { uri })
            }
        })
    }

    fn apply(
        &self,
        uri: String,
        _base: u64,
        _plan: EditPlan,
    ) -> BoxFuture<'_, Result<Snapshot, ShellError>> {
        self.asked.lock().expect("asked lock").push("apply");
        // What the edit did is not this test's question: the shell refuses it.
        Box::pin(async move {
            Err(ShellError::Failed {
                reason: format!("{uri}: not in this test"),
            })
        })
    }

    fn create(
        &self,
        uri: String,
        _notebook: NewNotebook,
    ) -> BoxFuture<'_, Result<Snapshot, ShellError>> {
        Box::pin(async move { Err(ShellError::AlreadyExists { uri }) })
    }

    fn save(&self, _uri: String) -> BoxFuture<'_, Result<(), ShellError>> {
        self.asked.lock().expect("asked lock").push("save");
        Box::pin(async { Ok(()) })
    }
}

fn tools(shell: Arc<RecordingShell>) -> Tools<VsCodeHost> {
    let config = HostConfig {
        window_id: "w1".into(),
        window_label: "w".into(),
        workspace_folders: vec!["/w".into()],
        colab: None,
        save_before_execute: true,
    };
    Tools::with_services(
        // Our local kernels, so that the kernel tools are listed; none starts here.
        Arc::new(VsCodeHost::new(
            shell,
            config,
            Some(crate::local_kernels(None, None)),
        )),
        Services::default(),
    )
}

async fn call(tools: &Tools<VsCodeHost>, name: &str, arguments: Value) -> Option<ErrorCode> {
    let output = tools
        .call(name, arguments.as_object().cloned(), CallContext::default())
        .await;
    output.error_code()
}

#[tokio::test]
async fn bad_arguments_change_nothing_not_even_by_the_pre_save() {
    let shell = RecordingShell::new();
    let tools = tools(shell.clone());
    let refused = [
        (
            "edit_cells",
            json!({"notebookRef": URI, "edits": [
                {"editType": "insert", "newCode": "x = 1"},
                {"editType": "delete", "cellId": "no-such-cell", "expectedRev": "r"},
            ]}),
            ErrorCode::CellNotFound,
        ),
        (
            "edit_cells",
            json!({"notebookRef": URI, "edits": [
                {"editType": "edit", "cellId": "c0", "newCode": "import os", "expectedRev": "stale"},
            ]}),
            ErrorCode::RevMismatch,
        ),
        (
            "move_cells",
            json!({"notebookRef": URI, "cellIds": ["no-such-cell"], "toIndex": 0}),
            ErrorCode::CellNotFound,
        ),
        (
            "run_cells",
            json!({"notebookRef": URI, "cellIds": ["no-such-cell"]}),
            ErrorCode::CellNotFound,
        ),
    ];
    for (name, arguments, expected) in refused {
        let code = call(&tools, name, arguments.clone()).await;
        assert_eq!(code, Some(expected), "{name} {arguments}");
        assert_eq!(
            shell.asked(),
            Vec::<&str>::new(),
            "{name} {arguments} neither saved nor edited"
        );
    }
}

#[tokio::test]
async fn good_arguments_save_the_dirty_notebook_before_the_edit() {
    let shell = RecordingShell::new();
    let tools = tools(shell.clone());
    let arguments = json!({"notebookRef": URI, "edits": [
        {"editType": "insert", "newCode": "x = 1"},
    ]});
    let _ = call(&tools, "edit_cells", arguments).await;
    assert_eq!(shell.asked(), ["save", "apply"]);
}
