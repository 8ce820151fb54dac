//! One notebook's calls through a real MCP client, which the end-to-end tests make with its
//! `notebookRef` filled in, and the steps the remote-kernel scenarios share (a Jupyter Server, a
//! Kernel Gateway, a JupyterHub user's server): runs, interrupts, restarts and transfers, each
//! with the checks that hold wherever the kernel runs.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{Call, Client, is_terminal, random_bytes, receipt_output, sha256_hex};

/// One notebook of a client, and how long a run may take to reach what a test waits for.
pub struct NotebookRuns<'a> {
    pub client: &'a Client,
    pub notebook: &'a str,
    pub patience: Duration,
}

impl NotebookRuns<'_> {
    /// Calls `tool` with `arguments` (an object) and the notebook as its `notebookRef`.
    pub async fn call(&self, tool: &str, mut arguments: Value) -> Call {
        arguments["notebookRef"] = json!(self.notebook);
        self.client.call(tool, arguments).await
    }

    /// Like [`NotebookRuns::call`]: the structured content of a success.
    pub async fn ok(&self, tool: &str, arguments: Value) -> Value {
        self.call(tool, arguments).await.ok()
    }

    /// `run_cells` on `cells` with their outputs, waiting up to `wait_ms`: the receipt.
    pub async fn run(&self, cells: Value, wait_ms: u64) -> Value {
        let arguments = json!({"cellIds": cells, "waitMs": wait_ms, "includeOutputs": true});
        self.ok("run_cells", arguments).await
    }

    /// `get_execution` of run `execution_id` with its outputs, waiting up to `wait_ms`: the
    /// receipt.
    pub async fn execution(&self, execution_id: &str, wait_ms: u64) -> Value {
        let arguments =
            json!({"executionId": execution_id, "waitMs": wait_ms, "includeOutputs": true});
        self.ok("get_execution", arguments).await
    }

    /// Follows the notebook's latest run until `done` holds for its receipt; panics after the
    /// patience.
    pub async fn follow(&self, done: impl Fn(&Value) -> bool) -> Value {
        self.client.follow(self.notebook, self.patience, done).await
    }

    /// The notebook's `list_kernels` answer and its entry for kernel `id`, which must be listed.
    pub async fn listed_kernel(&self, id: &str) -> (Value, Value) {
        let listed = self.ok("list_kernels", json!({})).await;
        let kernel = listed["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|kernel| kernel["id"] == id)
            .unwrap_or_else(|| panic!("{id} is listed: {listed}"))
            .clone();
        (listed, kernel)
    }

    /// The running kernel's epoch.
    pub async fn epoch(&self) -> u64 {
        let info = self.ok("get_kernel_info", json!({})).await;
        info["kernel"]["epoch"].as_u64().expect("a running kernel")
    }

    /// Starts `cells` without waiting (the first prints `ticks` lines `tick N`, the last prints
    /// 42), follows the run until the first cell printed `seen` and then to its end, and checks
    /// that it completed with every tick and the 42.
    pub async fn follow_ticks(&self, cells: Value, seen: &str, ticks: usize) {
        self.run(cells, 0).await;
        self.follow(|receipt| receipt_output(receipt, 0).contains(seen))
            .await;
        let finished = self.follow(is_terminal).await;
        assert_eq!(finished["status"], "completed", "{finished}");
        assert_eq!(
            printed_lines(&receipt_output(&finished, 0), "tick ").len(),
            ticks
        );
        assert!(receipt_output(&finished, 1).contains("42"));
    }

    /// Runs `cells` (the first prints `sleeping` and sleeps) and returns once it sleeps.
    pub async fn start_sleeping(&self, cells: Value) {
        self.run(cells, 0).await;
        self.follow(|receipt| receipt_output(receipt, 0).contains("sleeping"))
            .await;
    }

    /// Runs `cells` (the first prints `sleeping` and sleeps), interrupts the kernel once it
    /// sleeps, and checks that the cell got a `KeyboardInterrupt` and the next one did not run.
    pub async fn interrupt_sleeping_cell(&self, cells: Value) {
        self.start_sleeping(cells).await;
        let interrupted = self
            .client
            .kernel_action("interrupt_kernels", self.notebook)
            .await;
        assert_eq!(interrupted["results"][0]["outcome"], "interrupt-sent");
        let receipt = self.follow(is_terminal).await;
        assert!(
            receipt_output(&receipt, 0).contains("KeyboardInterrupt"),
            "{receipt}"
        );
        assert_eq!(receipt["cells"][1]["state"], "not-run");
    }

    /// Restarts the kernel and checks that the epoch moved on.
    pub async fn restart(&self) {
        let before = self.epoch().await;
        let restarted = self
            .client
            .kernel_action("restart_kernels", self.notebook)
            .await;
        assert_eq!(
            restarted["results"][0]["outcome"], "restarted",
            "{restarted}"
        );
        assert!(self.epoch().await > before);
    }

    /// `tool` (`upload_file` or `download_file`) between `host_path` and `kernel_path`; its
    /// result.
    pub async fn transfer(&self, tool: &str, host_path: &str, kernel_path: &str) -> Value {
        let arguments = json!({"hostPath": host_path, "kernelPath": kernel_path});
        self.ok(tool, arguments).await
    }

    /// 10 MiB of random bytes (from `seed`) uploaded from the served folder `root` to a folder of
    /// the kernel's machine (this one) and downloaded back, with both ends checked.
    pub async fn transfer_round_trip(&self, root: &Path, seed: u64) {
        let payload = random_bytes(10 * 1024 * 1024, seed);
        let digest = sha256_hex(&payload);
        std::fs::write(root.join("payload.bin"), &payload).unwrap();
        let kernel_side = tempfile::tempdir().unwrap();
        let kernel_file = kernel_side.path().join("payload.bin");
        let kernel_path = kernel_file.to_str().unwrap();
        let uploaded = self
            .transfer("upload_file", "payload.bin", kernel_path)
            .await;
        assert_eq!(uploaded["sha256"], digest.as_str(), "{uploaded}");
        assert!(
            std::fs::read(&kernel_file).unwrap() == payload,
            "the kernel's copy is intact"
        );
        let downloaded = self
            .transfer("download_file", "back.bin", kernel_path)
            .await;
        assert_eq!(downloaded["sha256"], digest.as_str(), "{downloaded}");
        assert!(std::fs::read(root.join("back.bin")).unwrap() == payload);
    }
}

/// The lines of a receipt's output that start with `prefix`.
pub fn printed_lines(output: &str, prefix: &str) -> Vec<String> {
    output
        .lines()
        .filter(|line| line.starts_with(prefix))
        .map(str::to_owned)
        .collect()
}
