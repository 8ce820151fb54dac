//! The tool catalogue: names, descriptions, annotations and schemas, in one place. `tools/list` is
//! built from it, and the book's tool table (`docs/src/tools.md`) is checked against it.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::params::*;
use crate::results::*;

/// What a host must provide for a tool to be listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// Reading and editing notebook documents (every host).
    Documents,
    /// Running code on kernels.
    Execute,
    /// Interrupting a kernel.
    Interrupt,
    /// Restarting a kernel.
    Restart,
    /// Listing, selecting and setting up kernels.
    ChooseKernel,
    /// Moving files through a kernel (kernels that can, and files on the host's side).
    Transfer,
    /// A Colab runtime is configured (the Colab tools).
    Colab,
    /// A Colab source whose servers have aliases to mount (`mount_colab_server`).
    ColabMount,
    /// An editor window the Colab extension is installed in: its preparation, preflight and
    /// terminals.
    ColabEnvironment,
}

/// MCP tool annotations (hints for clients).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Annotations {
    /// The tool only reads: it changes no notebook, kernel or file (`readOnlyHint`).
    pub read_only: bool,
    /// The tool may delete or overwrite something a client cannot get back by another call
    /// (`destructiveHint`).
    pub destructive: bool,
    /// Calling the tool again with the same arguments changes nothing more (`idempotentHint`).
    pub idempotent: bool,
    /// The tool reaches beyond the notebook documents, into a kernel that runs arbitrary code
    /// (`openWorldHint`).
    pub open_world: bool,
}

/// A plain write; the other kinds say how they differ from it.
const WRITE: Annotations = Annotations {
    read_only: false,
    destructive: false,
    idempotent: false,
    open_world: false,
};
const READ: Annotations = Annotations {
    read_only: true,
    idempotent: true,
    ..WRITE
};
const DESTRUCTIVE: Annotations = Annotations {
    destructive: true,
    ..WRITE
};
const IDEMPOTENT_WRITE: Annotations = Annotations {
    idempotent: true,
    ..WRITE
};
const EXECUTE: Annotations = Annotations {
    open_world: true,
    ..WRITE
};

/// One tool of the contract.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The snake_case name a client calls the tool by.
    pub name: &'static str,
    /// The tool, typed (its [`ToolName::as_str`] is `name`).
    pub tool: ToolName,
    /// A short human-readable title for clients' tool lists.
    pub title: &'static str,
    /// What the tool does and how to use it, as `tools/list` shows it to the model.
    pub description: &'static str,
    /// The MCP hints sent with the tool.
    pub annotations: Annotations,
    /// What the host must provide for the tool to be listed.
    pub capability: Capability,
    /// Builds the JSON Schema of the tool's arguments (strict, self-contained, strings bounded).
    pub input_schema: fn() -> Map<String, Value>,
    /// Builds the JSON Schema of the tool's `structuredContent`.
    pub output_schema: fn() -> Map<String, Value>,
}

/// The schema of a tool's arguments: strings bounded (see [`MAX_NAME_CHARS`]).
fn schema_object<T: JsonSchema>() -> Map<String, Value> {
    // The root is an object: this bounds the strings of its properties.
    rewritten(result_schema::<T>(), |root| bound_strings("", root))
}

/// The schema of a tool's `structuredContent`: what the server sends is not bounded, so no
/// `maxLength` (a client that validates results would refuse a long output).
fn result_schema<T: JsonSchema>() -> Map<String, Value> {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator();
    let schema: Schema = generator.into_root_schema_for::<T>();
    match schema.to_value() {
        Value::Object(mut map) => {
            map.remove("$schema");
            map.remove("title");
            map
        }
        other => panic!("schema of a tool type is not an object: {other}"),
    }
}

/// The input schema as published in `tools/list`: portable to clients that map tool schemas
/// onto a single-type dialect (Gemini-style function declarations). An optional property is
/// simply not required (no `type: [T, "null"]`), a cell reference is a string (the server still
/// reads a JSON number as an index, and `null` as an absent argument), and a union with `null`
/// is its other branch. The schema the server checks arguments against
/// ([`ToolSpec::input_schema`]) keeps the full types, so nothing it accepts changes.
pub fn portable_input_schema(spec: &ToolSpec) -> Map<String, Value> {
    rewritten((spec.input_schema)(), make_portable)
}

/// The output schema as published in `tools/list`: a nullable value is written as `anyOf` a
/// single type and `null` instead of a `type` array, which single-type dialects read. What it
/// accepts is unchanged.
pub fn portable_output_schema(spec: &ToolSpec) -> Map<String, Value> {
    rewritten((spec.output_schema)(), split_type_unions)
}

/// `schema` after `rewrite`, which keeps an object an object.
fn rewritten(schema: Map<String, Value>, rewrite: fn(&mut Value)) -> Map<String, Value> {
    let mut schema = Value::Object(schema);
    rewrite(&mut schema);
    into_object(schema)
}

/// The map of `value`, which is a JSON object by construction.
fn into_object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => unreachable!("not a JSON object: {other}"),
    }
}

/// Rewrites `{type: [a, b], ...}` as `{anyOf: [{type: a, ...}, {type: b}]}` (the keywords that
/// constrain a value go with its non-null branches), in this node and everything under it.
fn split_type_unions(node: &mut Value) {
    let Value::Object(map) = node else {
        return;
    };
    for child in schema_children(map) {
        split_type_unions(child);
    }
    let Some(Value::Array(types)) = map.get("type").cloned() else {
        return;
    };
    map.remove("type");
    // Annotations stay on the node; the rest constrains the typed branches.
    let mut constraints = Map::new();
    for key in map.keys().cloned().collect::<Vec<_>>() {
        if !matches!(
            key.as_str(),
            "description" | "title" | "default" | "examples" | "anyOf"
        ) {
            constraints.insert(key.clone(), map.remove(&key).expect("listed"));
        }
    }
    let branches: Vec<Value> = types
        .iter()
        .map(|kind| {
            let mut branch = Map::new();
            branch.insert("type".to_owned(), kind.clone());
            if kind != "null" {
                branch.extend(constraints.clone());
            }
            Value::Object(branch)
        })
        .collect();
    match map.remove("anyOf") {
        Some(existing) => {
            map.insert(
                "allOf".to_owned(),
                serde_json::json!([{"anyOf": existing}, {"anyOf": branches}]),
            );
        }
        None => {
            map.insert("anyOf".to_owned(), Value::Array(branches));
        }
    }
}

/// The subschemas directly under a schema node.
fn schema_children(map: &mut Map<String, Value>) -> Vec<&mut Value> {
    let mut children = Vec::new();
    for (key, child) in map.iter_mut() {
        match key.as_str() {
            "properties" | "$defs" | "definitions" | "patternProperties" => {
                if let Value::Object(named) = child {
                    children.extend(named.values_mut());
                }
            }
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                if let Value::Array(branches) = child {
                    children.extend(branches.iter_mut());
                }
            }
            "items" | "additionalProperties" | "not" | "contains" => children.push(child),
            _ => {}
        }
    }
    children
}

/// Rewrites one schema node and everything under it (see [`portable_input_schema`]).
fn make_portable(node: &mut Value) {
    let Value::Object(map) = node else {
        return;
    };
    if let Some(Value::Array(types)) = map.get("type") {
        let named: Vec<&str> = types
            .iter()
            .filter_map(Value::as_str)
            .filter(|kind| *kind != "null")
            .collect();
        // One type remains, or a cell reference (an index or an id) that is read from a string.
        let single = match named.as_slice() {
            [one] => Some((*one).to_owned()),
            many if many.contains(&"string") => Some("string".to_owned()),
            _ => None,
        };
        if let Some(single) = single {
            if single == "string" && named.len() > 1 {
                // The numeric keywords of the dropped integer branch do not apply to a string.
                for keyword in ["minimum", "maximum", "format"] {
                    map.remove(keyword);
                }
            }
            map.insert("type".to_owned(), Value::String(single));
        }
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(branches)) = map.get(key) else {
            continue;
        };
        let kept: Vec<Value> = branches
            .iter()
            .filter(|branch| branch.get("type").and_then(Value::as_str) != Some("null"))
            .cloned()
            .collect();
        if kept.len() == 1 && kept.len() < branches.len() {
            // `anyOf: [X, {type: null}]` is X; the node's own description wins over X's.
            map.remove(key);
            if let Value::Object(only) = &kept[0] {
                for (keyword, value) in only {
                    map.entry(keyword.clone()).or_insert_with(|| value.clone());
                }
            }
        } else if kept.len() < branches.len() {
            map.insert(key.to_owned(), Value::Array(kept));
        }
    }
    for child in schema_children(map) {
        make_portable(child);
    }
}

/// Longest string accepted where a string names something (a notebook, path, cell, kernel,
/// variable, run) or is a short text (a title, a search, a rev): longer ones are refused before
/// any work, so a huge value never reaches a path lookup or an error message.
pub const MAX_NAME_CHARS: u64 = 4096;

/// Arguments that carry cell content, bounded only by the size of a request.
pub const CONTENT_ARGUMENTS: &[&str] = &["newCode", "oldText"];

/// Adds `maxLength` to every string schema under the property `key` (its alternatives, array
/// items and nested object properties included), except cell content.
fn bound_strings(key: &str, schema: &mut Value) {
    let Value::Object(map) = schema else {
        return;
    };
    let is_string = crate::coerce::declares_string(map);
    let enumerated = map.contains_key("enum") || map.contains_key("const");
    if is_string && !enumerated && !CONTENT_ARGUMENTS.contains(&key) {
        map.entry("maxLength")
            .or_insert(Value::from(MAX_NAME_CHARS));
    }
    for alternative in crate::coerce::branches_mut(map) {
        bound_strings(key, alternative);
    }
    if let Some(items) = map.get_mut("items") {
        bound_strings(key, items);
    }
    for (child_key, child) in map
        .get_mut("properties")
        .and_then(Value::as_object_mut)
        .into_iter()
        .flatten()
    {
        bound_strings(child_key, child);
    }
}

/// The output schema of the execution tools: a receipt, described loosely because its cells carry
/// free-form output text.
fn receipt_schema() -> Map<String, Value> {
    into_object(serde_json::json!({
        "type": "object",
        "description": "An execution receipt",
        "properties": {
            "executionId": {"type": "string"},
            "notebookRef": {"type": "string"},
            "status": {"type": "string", "enum": ["requested", "running", "completed", "failed", "unavailable"]},
            "cells": {"type": "array", "items": {"type": "object"}},
            "reason": {"type": "string"},
            "reasonCode": {"type": "string"},
            "waitTimedOut": {"type": "boolean"},
            "notebookCommandPending": {"type": "boolean"}
        },
        "required": ["executionId", "status", "cells"]
    }))
}

/// A Colab setup receipt (`colab_setup::SetupReceipt`, written by hand: that crate sits beside
/// this one).
fn setup_receipt_schema() -> Map<String, Value> {
    into_object(serde_json::json!({
        "type": "object",
        "description": "A Colab setup receipt",
        "properties": {
            "setupId": {"type": "string"},
            "notebookRef": {"type": "string"},
            "route": {"type": "string"},
            "status": {"type": "string", "enum": ["running", "awaiting_kernel_selection", "awaiting_user", "ready", "failed", "cancelled"]},
            "stage": {"type": "string"},
            "providerStep": {"type": "string"},
            "failedStage": {"type": "string"},
            "failedProviderStep": {"type": "string"},
            "actionRequired": {"type": "object"},
            "serverAlias": {"type": "string"},
            "ready": {"type": "boolean"},
            "cleanupPending": {"type": "boolean"},
            "kernelChoices": {"type": "object"},
            "verification": {"type": "object"},
            "error": {"type": "object"},
            "hostBlocker": {
                "type": "object",
                "description": "For a failed or cancelled setup: the last thing the host could not do, as a code and a sentence (in VS Code, the native driver's blocker, e.g. native_marker_stale)"
            }
        },
        "required": ["setupId", "status", "stage", "ready"]
    }))
}

/// A `check_colab` receipt (`colab_setup::CheckReceipt`, written by hand like the setup's).
fn check_receipt_schema() -> Map<String, Value> {
    into_object(serde_json::json!({
        "type": "object",
        "description": "A check_colab receipt: verified only when the kernel's nonce was read back through the file service and the probe is gone both ways",
        "properties": {
            "verified": {"type": "boolean"},
            "root": {"type": "string"},
            "probePath": {"type": "string"},
            "timestampMs": {"type": "integer"},
            "finishedAtMs": {"type": "integer"},
            "pid": {"type": ["integer", "null"]},
            "pythonVersion": {"type": ["string", "null"]},
            "system": {"type": ["string", "null"]},
            "checks": {"type": "array", "items": {"type": "object"}},
            "cleanup": {"type": "string"},
            "settled": {"type": "boolean"},
            "identity": {"type": "object"},
            "error": {"type": "object"}
        },
        "required": ["verified", "root", "probePath", "checks", "cleanup", "identity"]
    }))
}

/// `configure_kernel`: the started kernel, or a Colab setup receipt.
fn configure_schema() -> Map<String, Value> {
    let mut map = free_object();
    map.insert(
        "anyOf".to_owned(),
        Value::Array(vec![
            Value::Object(result_schema::<ConfigureKernelResult>()),
            Value::Object(setup_receipt_schema()),
        ]),
    );
    map
}

fn free_object() -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("type".to_owned(), Value::String("object".to_owned()));
    map
}

macro_rules! tools {
    ($($variant:ident($name:literal, $title:literal, $capability:ident, $annotations:expr, $params:ty, $result:expr, $description:literal $(,)?)),* $(,)?) => {
        /// A tool of the contract, by name: what a call's name is parsed into once, so that no
        /// code above this crate matches a tool name as a string. Serialised as the snake_case
        /// name clients call it by.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum ToolName {
            $(
                #[doc = $title]
                #[serde(rename = $name)]
                $variant,
            )*
        }

        impl ToolName {
            word_methods!(ToolName, "Every tool, in the order `tools/list` shows them.", parse, "The tool called `word`, if there is one (retired names are none).", $($variant => $name),*);

            /// The tool's entry in the catalogue.
            pub fn spec(self) -> ToolSpec {
                match self {
                    $(ToolName::$variant => ToolSpec {
                        name: $name,
                        tool: ToolName::$variant,
                        title: $title,
                        description: $description,
                        annotations: $annotations,
                        capability: Capability::$capability,
                        input_schema: schema_object::<$params>,
                        output_schema: $result,
                    },)*
                }
            }
        }
    };
}

tools! {
    ListNotebooks(
        "list_notebooks",
        "List notebooks",
        Documents,
        READ,
        ListNotebooksParams,
        result_schema::<ListNotebooksResult>,
        "List every connected window (host) and its notebooks, with the short notebookRef to pass to other tools. The standalone server lists every .ipynb under its root folder."
    ),
    OpenNotebooks(
        "open_notebooks",
        "Open notebooks",
        Documents,
        IDEMPOTENT_WRITE,
        OpenNotebooksParams,
        result_schema::<OpenNotebooksResult>,
        "Open notebooks by file URI or root-relative path. An already open notebook is kept as it is (never reloaded over unsaved state)."
    ),
    CreateNotebook(
        "create_notebook",
        "Create a notebook",
        Documents,
        WRITE,
        CreateNotebookParams,
        result_schema::<CreateNotebookResult>,
        "Create a new notebook (a title heading and an empty code cell) and report the kernel it will use. Never overwrites a file."
    ),
    ReadNotebook(
        "read_notebook",
        "Read a notebook",
        Documents,
        READ,
        ReadNotebookParams,
        result_schema::<ReadNotebookResult>,
        "Read a notebook. The default `outline` view is cheap: per cell its index, id, kebab-case name, rev (quote it as expectedRev when editing), kind, state (fresh/stale/never-run/running/queued/error), inputs/dependents and a one-line summary, plus lint findings. `source`, `outputs` and `all` add source and condensed outputs (images as image content); `lint` lists findings only. Every cut is marked. A reply fits maxResponseChars (default 60000): cells past it are left out, and `notice` and `nextCellOffset` say how to read them (pass `cellOffset`)."
    ),
    SearchCells(
        "search_cells",
        "Search cells",
        Documents,
        READ,
        SearchCellsParams,
        result_schema::<SearchCellsResult>,
        "Search cell sources, saved output text and cell names (substring, case-insensitive by default; `regex: true` for regular expressions). Lines are 1-based, like read_notebook's startLine."
    ),
    EditCells(
        "edit_cells",
        "Edit cells",
        Documents,
        DESTRUCTIVE,
        EditCellsParams,
        result_schema::<EditCellsResult>,
        "Insert, edit, delete or replace (exact oldText, once) cells as one transaction: every edit of an existing cell quotes its rev as expectedRev; any mismatch or error rejects the whole batch and returns the cell's current rev and source. `run: true` runs the changed code cells afterwards, `run: \"stale\"` the stale set."
    ),
    MoveCells(
        "move_cells",
        "Move cells",
        Documents,
        WRITE,
        MoveCellsParams,
        result_schema::<MoveCellsResult>,
        "Move cells (in the order given) to toIndex among the cells that stay, keeping their content, outputs and metadata."
    ),
    ClearCellOutputs(
        "clear_cell_outputs",
        "Clear outputs",
        Documents,
        DESTRUCTIVE,
        ClearCellOutputsParams,
        result_schema::<ClearCellOutputsResult>,
        "Clear the outputs and execution counts of cells, keeping their source, id and metadata."
    ),
    SaveNotebooks(
        "save_notebooks",
        "Save notebooks",
        Documents,
        IDEMPOTENT_WRITE,
        NotebookRefsParams,
        result_schema::<SaveNotebooksResult>,
        "Write notebooks to disk in canonical nbformat form. (The standalone server already persists every change when it is made.)"
    ),
    ExportNotebook(
        "export_notebook",
        "Export a notebook",
        Documents,
        READ,
        ExportNotebookParams,
        result_schema::<ExportNotebookResult>,
        "Export a notebook as Markdown, Python (percent format, `# %%`) or HTML; return it, or write it to a new file under the root."
    ),
    UndoLast(
        "undo_last",
        "Undo the last change",
        Documents,
        DESTRUCTIVE,
        NotebookRefParams,
        result_schema::<UndoResult>,
        "Undo the last change made through this server to the notebook (edits, moves, cleared outputs; at most 20 kept per notebook while the server runs) as a rev-checked change, and say what changed. Only what that change did is reverted: changes others made since to other cells stay, and so do outputs written since. If a cell the change touched has been changed since, nothing is undone: rev_mismatch lists each such cell's current rev and source (read again; their change is kept; redo by hand what you wanted to undo)."
    ),
    GetKernelInfo(
        "get_kernel_info",
        "Kernel info",
        Execute,
        READ,
        NotebookRefParams,
        result_schema::<KernelInfoResult>,
        "Report the notebook's kernel as observed now: status, language, implementation, epoch, or why none is active. Never starts a kernel."
    ),
    ListKernels(
        "list_kernels",
        "List kernels",
        ChooseKernel,
        READ,
        NotebookRefParams,
        result_schema::<ListKernelsResult>,
        "List the kernels this notebook can use, with exact ids: installed kernelspecs and project virtual environments with ipykernel (a Jupyter Server's kernelspecs with --kernel-server or --jupyter; VS Code's kernel controllers in a VS Code window). Read-only."
    ),
    SelectKernel(
        "select_kernel",
        "Select a kernel",
        ChooseKernel,
        WRITE,
        SelectKernelParams,
        result_schema::<SelectKernelResult>,
        "Select an exact kernel id from list_kernels for a notebook: recorded in the notebook's metadata (with --jupyter also the server session's kernel, as JupyterLab's Change Kernel; in VS Code the controller of the notebook's editor). No fallback."
    ),
    ConfigureKernel(
        "configure_kernel",
        "Start the kernel",
        ChooseKernel,
        IDEMPOTENT_WRITE,
        ConfigureKernelParams,
        configure_schema,
        "Start the notebook's kernel now (the one select_kernel recorded, else the notebook's kernelspec, else python3) and report what it chose and whether it answers. With runtime \"colab\" (where a Colab source is configured): a tracked setup of the kernel on the Colab runtime, returned as a setup receipt (setupId, status, stage); it pauses at awaiting_kernel_selection (list_setup_kernels, select_setup_kernel) and is ready only after the check_colab nonce proof verified. serverAlias reuses exactly that earlier server and never creates one."
    ),
    GetKernelSetup(
        "get_kernel_setup",
        "Follow a Colab setup",
        Colab,
        READ,
        KernelSetupParams,
        setup_receipt_schema,
        "Get a Colab setup's receipt (status, stage, providerStep, actionRequired, serverAlias, verification), optionally waiting up to waitMs (0 to 60000) for it to change. Never starts or stops anything."
    ),
    ListSetupKernels(
        "list_setup_kernels",
        "List a Colab setup's kernels",
        Colab,
        READ,
        KernelSetupParams,
        setup_receipt_schema,
        "Observe the Colab runtime's kernel choices afresh for a setup awaiting a kernel selection; returns the receipt with kernelChoices (opaque kernelChoiceIds and labels). A new listing voids the ids of every earlier one. There is no default choice."
    ),
    SelectSetupKernel(
        "select_setup_kernel",
        "Select a Colab setup's kernel",
        Colab,
        WRITE,
        SelectSetupKernelParams,
        setup_receipt_schema,
        "Select one kernelChoiceId from the setup's latest list_setup_kernels listing: the kernel is started on the runtime, its file service connected and the nonce proof run. Returns the receipt after waiting up to waitMs (default 1000)."
    ),
    MountColabServer(
        "mount_colab_server",
        "Mount a Colab server",
        ColabMount,
        WRITE,
        MountColabServerParams,
        setup_receipt_schema,
        "Attach the file service of the Colab server with this exact alias (from an earlier setup's receipt) to the notebook's already active idle Python kernel, then verify it with the check_colab nonce proof. Selects and starts no kernel, edits no cell, creates and removes no server. A tracked setup: follow or cancel it with get_kernel_setup / cancel_kernel_setup."
    ),
    CancelKernelSetup(
        "cancel_kernel_setup",
        "Cancel a Colab setup",
        Colab,
        WRITE,
        KernelSetupParams,
        setup_receipt_schema,
        "Cancel a Colab setup: it ends cancelled and undoes exactly what it created (a runtime it assigned is released); a server that existed before is never touched. The notebook stays blocked until every command the setup sent has settled (cleanupPending)."
    ),
    CheckColab(
        "check_colab",
        "Check the Colab runtime",
        Colab,
        EXECUTE,
        CheckColabParams,
        check_receipt_schema,
        "Prove that the notebook's active idle Python kernel runs on the configured Colab runtime: the kernel writes a fresh nonce file in /content, the runtime's own file service (its Contents API behind Colab's proxy) must read the same nonce, then the probe is removed and its absence confirmed through both. verified is true only then; the build-info release tag is reported as identity evidence, never as proof. Reads no user file, edits no cell. Listed only where a Colab runtime is configured."
    ),
    InspectColabEnvironmentPreflight(
        "inspect_colab_environment_preflight",
        "Inspect Colab preparation blockers",
        ColabEnvironment,
        READ,
        ColabPreflightParams,
        result_schema::<ColabPreflightResult>,
        "Read-only counts and booleans of every connected window, for preparing Colab: workspace shape, open notebooks and text documents with their editors, tabs, terminals, debug sessions, quit and restore policy, and the native debugging listener's page candidates (the catalog only: nothing is bound or evaluated). Each window answers within 30 s or is listed unavailable. Never returns contents, commands, paths or titles; changes nothing."
    ),
    ListColabTerminals(
        "list_colab_terminals",
        "List a window's terminals",
        ColabEnvironment,
        READ,
        ListColabTerminalsParams,
        result_schema::<ColabTerminalsResult>,
        "List the window's terminals as an inventory of opaque terminalRefs with bounded name, shell pid, shell type, interaction and exit facts (never commands, arguments, history or environment). The inventory lives 60 s; a newer listing voids it. These facts cannot prove a terminal is idle."
    ),
    CloseColabTerminals(
        "close_colab_terminals",
        "Close named terminals",
        ColabEnvironment,
        DESTRUCTIVE,
        CloseColabTerminalsParams,
        result_schema::<CloseColabTerminalsResult>,
        "Close exactly the terminals named by terminalRefs from the window's latest list_colab_terminals inventory (Terminal.dispose: a running command ends and its scrollback is lost). Reports each as closed, already_gone or uncertain, and partial when not all closed. Never closes anything it was not given."
    ),
    PrepareColabEnvironment(
        "prepare_colab_environment",
        "Prepare a window for Colab",
        ColabEnvironment,
        WRITE,
        PrepareColabEnvironmentParams,
        result_schema::<ColabPreparationResult>,
        "Prepare the window before opening the notebook: check the native debugging connection binds to this window, open the local project folder (folderUri, else the window's one folder, else a new isolated one) and turn a single-folder window into an untitled workspace (updateWorkspaceFolders) so that mounting a Colab server later does not restart the extension host. The conversion restarts it once: reconnect, call list_notebooks, then get_colab_environment_preparation with the preparationId. Refused while notebooks, documents, terminals or debug sessions are open. Restarting VS Code itself is not supported."
    ),
    GetColabEnvironmentPreparation(
        "get_colab_environment_preparation",
        "Follow a Colab preparation",
        ColabEnvironment,
        READ,
        ColabPreparationParams,
        result_schema::<ColabPreparationResult>,
        "Check a preparation afresh (it survives extension-host restarts): the workspace is the prepared one with its root, trusted, and the native connection binds to this window now (environmentReady). Not runtime readiness; changes nothing."
    ),
    RunCells(
        "run_cells",
        "Run cells",
        Execute,
        EXECUTE,
        RunCellsParams,
        receipt_schema,
        "Run cells as one tracked run. Without cellIds: exactly the stale cells, in document order (minimal re-run). With cellIds: those cells in that order, after their stale ancestors (freshDeps, default true). Stops at the first failure. waitMs (default 1000) bounds only this call's wait; execution goes on, follow it with get_execution. Sends progress notifications when the request carries a progressToken."
    ),
    GetExecution(
        "get_execution",
        "Follow a run",
        Execute,
        READ,
        GetExecutionParams,
        receipt_schema,
        "Get a tracked run's receipt (default: the notebook's latest), optionally waiting up to waitMs for it to finish. Returns output so far while it runs. Never starts or stops anything."
    ),
    InterruptKernels(
        "interrupt_kernels",
        "Interrupt kernels",
        Interrupt,
        EXECUTE,
        NotebookRefsParams,
        result_schema::<KernelRequestsResult>,
        "Interrupt the notebooks' kernels (KeyboardInterrupt in the running cell). The tracked run ends as unavailable; queued cells are not run."
    ),
    RestartKernels(
        "restart_kernels",
        "Restart kernels",
        Restart,
        DESTRUCTIVE,
        NotebookRefsParams,
        result_schema::<KernelRequestsResult>,
        "Restart the notebooks' kernels: all kernel state is lost, every cell becomes stale, and a running tracked run ends as unavailable."
    ),
    InspectVariable(
        "inspect_variable",
        "Inspect a variable",
        Execute,
        READ,
        InspectVariableParams,
        free_object,
        "Inspect a live variable without adding cells or history: type, shape/length, schema (columns and dtypes for data frames) and its richest repr (data frames as CSV head, figures as images, else a bounded repr)."
    ),
    SummarizeCells(
        "summarize_cells",
        "Summarise cells",
        Documents,
        IDEMPOTENT_WRITE,
        SummarizeCellsParams,
        free_object,
        "Give cells a tldr, a description and an output summary, cached in cell metadata by content hash (unchanged cells are never re-summarised). Uses the Anthropic API when ANTHROPIC_API_KEY is set, else deterministic summaries marked with *."
    ),
    UploadFile(
        "upload_file",
        "Upload a file to the kernel",
        Transfer,
        WRITE,
        TransferParams,
        result_schema::<TransferResult>,
        "Copy a file from the server's machine (hostPath, inside the root folder or the window's workspace folders) to the kernel's filesystem (absolute kernelPath), chunked through the kernel, SHA-256 verified, atomically promoted, never overwriting by default."
    ),
    DownloadFile(
        "download_file",
        "Download a file from the kernel",
        Transfer,
        WRITE,
        TransferParams,
        result_schema::<TransferResult>,
        "Copy a file from the kernel's filesystem (absolute kernelPath) to the server's machine (hostPath, inside the root folder or the window's workspace folders), chunked through the kernel, verified against a kernel-side SHA-256 before the local file is promoted, never overwriting by default."
    ),
}

/// Every tool, in the order `tools/list` shows them.
pub fn all_tools() -> Vec<ToolSpec> {
    ToolName::ALL.iter().map(|tool| tool.spec()).collect()
}

/// The tool named `name`.
pub fn tool(name: &str) -> Option<ToolSpec> {
    ToolName::parse(name).map(ToolName::spec)
}

/// A name that is no tool of the contract (see [`RETIRED_TOOLS`] for the removed ones).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no tool is named `{0}`")]
pub struct UnknownToolName(pub String);

impl std::str::FromStr for ToolName {
    type Err = UnknownToolName;

    fn from_str(name: &str) -> Result<ToolName, UnknownToolName> {
        ToolName::parse(name).ok_or_else(|| UnknownToolName(name.to_owned()))
    }
}

impl std::fmt::Display for ToolName {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// Where a broker sends a call of a tool when several windows share one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerRoute {
    /// Every window lists its notebooks and the broker merges the listings (`list_notebooks`).
    MergedListing,
    /// Every window answers and the broker joins their answers
    /// (`inspect_colab_environment_preflight`).
    EveryWindow,
    /// The window that owns the notebook the arguments name (`notebookRef`, `notebookRefs`),
    /// else the window `windowId` names, else the broker's own.
    ByArguments,
}

/// The per-tool policies of the layers above this crate, decided here once so that they match
/// a [`ToolName`] and never a string.
impl ToolName {
    /// Where a broker sends a call of this tool.
    pub const fn broker_route(self) -> BrokerRoute {
        match self {
            ToolName::ListNotebooks => BrokerRoute::MergedListing,
            ToolName::InspectColabEnvironmentPreflight => BrokerRoute::EveryWindow,
            _ => BrokerRoute::ByArguments,
        }
    }

    /// The tool's `waitMs` bounds how long the call itself waits (a run's receipt), so a caller
    /// waiting for its answer waits that long plus a margin, and no longer.
    pub const fn wait_bounds_reply(self) -> bool {
        matches!(
            self,
            ToolName::RunCells | ToolName::GetExecution | ToolName::EditCells
        )
    }

    /// A client may call the tool as an MCP task (it follows a tracked run).
    pub const fn runs_as_task(self) -> bool {
        matches!(self, ToolName::RunCells)
    }

    /// The output viewer (an MCP App) shows the tool's results.
    pub const fn shown_in_viewer(self) -> bool {
        matches!(
            self,
            ToolName::ReadNotebook | ToolName::RunCells | ToolName::GetExecution
        )
    }

    /// The tool's reply carries a run receipt: the reply itself (`run_cells`,
    /// `get_execution`) or its `execution` (`edit_cells` with `run`).
    pub const fn replies_with_receipt(self) -> bool {
        matches!(
            self,
            ToolName::RunCells | ToolName::GetExecution | ToolName::EditCells
        )
    }
}

/// Tools the reference removed or renamed; calling them gets an error that says what replaced them.
pub const RETIRED_TOOLS: &[(&str, &str)] = &[
    ("get_notebooks", "list_notebooks"),
    ("get_cells", "read_notebook"),
    ("get_cells_source", "read_notebook with view \"source\""),
    ("get_cells_output", "read_notebook with view \"outputs\""),
    ("clear_outputs", "clear_cell_outputs"),
    ("restart_notebooks", "restart_kernels"),
    ("inspect_notebooks", "read_notebook"),
    (
        "read_cells",
        "read_notebook with view \"source\" or \"all\"",
    ),
    ("read_cell_outputs", "read_notebook with view \"outputs\""),
    ("notebook_overview", "read_notebook (outline view)"),
    ("add_cell", "edit_cells with editType \"insert\""),
    ("update_cell", "edit_cells with editType \"edit\""),
    ("remove_cell", "edit_cells with editType \"delete\""),
    ("move_cell", "move_cells"),
    ("run", "run_cells"),
    ("interrupt", "interrupt_kernels"),
    ("restart_kernel", "restart_kernels"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_object_schemas_that_reject_unknown_keys() {
        let tools = all_tools();
        assert_eq!(tools.len(), 34);
        for spec in &tools {
            let input = (spec.input_schema)();
            assert_eq!(
                input.get("type"),
                Some(&Value::from("object")),
                "{}",
                spec.name
            );
            assert_eq!(
                input.get("additionalProperties"),
                Some(&Value::Bool(false)),
                "{} must be strict",
                spec.name
            );
            let text = Value::Object(input).to_string();
            assert!(
                !text.contains("$ref"),
                "{} schema is self-contained",
                spec.name
            );
            let output = (spec.output_schema)();
            assert_eq!(
                output.get("type"),
                Some(&Value::from("object")),
                "{}",
                spec.name
            );
            // Results carry output text of any length: a bound would make validating clients
            // refuse them.
            assert!(
                !Value::Object(output).to_string().contains("maxLength"),
                "{} result schema bounds a string",
                spec.name
            );
        }
    }

    /// Where `node` (at `path`) breaks a rule of single-type dialects: a `type` array, a bare
    /// boolean schema, or a schema with no keyword that constrains it.
    fn unportable_nodes(node: &Value, path: &str, found: &mut Vec<String>) {
        let Value::Object(map) = node else {
            found.push(format!("{path}: bare {node}"));
            return;
        };
        if map.get("type").is_some_and(Value::is_array) {
            found.push(format!("{path}: type array"));
        }
        let constraining = map.keys().any(|key| {
            !matches!(
                key.as_str(),
                "description" | "title" | "default" | "examples" | "format"
            )
        });
        if !constraining {
            found.push(format!("{path}: accepts anything"));
        }
        let mut copy = map.clone();
        for (index, child) in schema_children(&mut copy).into_iter().enumerate() {
            if child.is_boolean() {
                // `additionalProperties: false|true` is the one place a boolean belongs.
                continue;
            }
            unportable_nodes(child, &format!("{path}/{index}"), found);
        }
    }

    #[test]
    fn published_schemas_use_one_type_per_node() {
        let mut found = Vec::new();
        for spec in all_tools() {
            let input = Value::Object(portable_input_schema(&spec));
            unportable_nodes(&input, &format!("{}.input", spec.name), &mut found);
            let output = Value::Object(portable_output_schema(&spec));
            unportable_nodes(&output, &format!("{}.output", spec.name), &mut found);
        }
        assert!(found.is_empty(), "{found:#?}");
    }

    #[test]
    fn a_nullable_value_becomes_two_branches_that_keep_its_constraints() {
        let mut node = serde_json::json!({
            "description": "a path",
            "type": ["string", "null"],
            "maxLength": 8,
        });
        split_type_unions(&mut node);
        assert_eq!(
            node,
            serde_json::json!({
                "description": "a path",
                "anyOf": [{"type": "string", "maxLength": 8}, {"type": "null"}],
            })
        );
        let mut nested = serde_json::json!({
            "type": "object",
            "properties": {"list": {"type": ["array", "null"], "items": {"type": "integer"}}},
        });
        split_type_unions(&mut nested);
        assert_eq!(
            nested["properties"]["list"],
            serde_json::json!({"anyOf": [
                {"type": "array", "items": {"type": "integer"}},
                {"type": "null"},
            ]})
        );
    }

    /// Paths of the properties under `schema` (nested objects, array items and alternatives
    /// included) that have no description, each written `tool.property.nested`.
    fn undescribed_properties(schema: &Map<String, Value>, path: &str, found: &mut Vec<String>) {
        if let Some(Value::Object(properties)) = schema.get("properties") {
            for (key, property) in properties {
                let property_path = format!("{path}.{key}");
                let described = property
                    .get("description")
                    .and_then(Value::as_str)
                    .is_some_and(|text| !text.trim().is_empty());
                if !described {
                    found.push(property_path.clone());
                }
                if let Value::Object(property) = property {
                    undescribed_properties(property, &property_path, found);
                }
            }
        }
        if let Some(Value::Object(items)) = schema.get("items") {
            undescribed_properties(items, &format!("{path}[]"), found);
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            for alternative in schema
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_object)
            {
                undescribed_properties(alternative, path, found);
            }
        }
    }

    #[test]
    fn every_input_property_is_described() {
        let mut undescribed = Vec::new();
        for spec in all_tools() {
            undescribed_properties(&(spec.input_schema)(), spec.name, &mut undescribed);
        }
        assert!(
            undescribed.is_empty(),
            "input properties without a description (give the params field a doc comment): {undescribed:?}"
        );
    }

    #[test]
    fn tool_names_parse_back_and_serialise_as_their_names() {
        assert_eq!(ToolName::ALL.len(), all_tools().len());
        for (tool, spec) in ToolName::ALL.iter().zip(all_tools()) {
            assert_eq!(spec.tool, *tool);
            assert_eq!(spec.name, tool.as_str());
            assert_eq!(ToolName::parse(spec.name), Some(*tool));
            assert_eq!(spec.name.parse::<ToolName>(), Ok(*tool));
            assert_eq!(tool.to_string(), spec.name);
            assert_eq!(serde_json::to_value(tool).unwrap(), Value::from(spec.name));
            assert_eq!(
                serde_json::from_value::<ToolName>(Value::from(spec.name)).unwrap(),
                *tool
            );
        }
        for (retired, _) in RETIRED_TOOLS {
            assert_eq!(
                retired.parse::<ToolName>(),
                Err(UnknownToolName((*retired).to_owned()))
            );
        }
        assert!(serde_json::from_value::<ToolName>(Value::from("Run_Cells")).is_err());
    }

    #[test]
    fn policies_name_the_tools_they_always_did() {
        let named = |policy: fn(ToolName) -> bool| -> Vec<&str> {
            ToolName::ALL
                .iter()
                .filter(|tool| policy(**tool))
                .map(|tool| tool.as_str())
                .collect()
        };
        assert_eq!(
            named(ToolName::shown_in_viewer),
            ["read_notebook", "run_cells", "get_execution"]
        );
        assert_eq!(named(ToolName::runs_as_task), ["run_cells"]);
        assert_eq!(
            named(ToolName::wait_bounds_reply),
            ["edit_cells", "run_cells", "get_execution"]
        );
        assert_eq!(
            named(ToolName::replies_with_receipt),
            named(ToolName::wait_bounds_reply)
        );
        let routes: Vec<(&str, BrokerRoute)> = ToolName::ALL
            .iter()
            .map(|tool| (tool.as_str(), tool.broker_route()))
            .filter(|(_, route)| *route != BrokerRoute::ByArguments)
            .collect();
        assert_eq!(
            routes,
            [
                ("list_notebooks", BrokerRoute::MergedListing),
                (
                    "inspect_colab_environment_preflight",
                    BrokerRoute::EveryWindow
                )
            ]
        );
    }

    #[test]
    fn names_are_unique_and_snake_case() {
        let tools = all_tools();
        let mut names: Vec<&str> = tools.iter().map(|spec| spec.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), tools.len());
        assert!(
            names
                .iter()
                .all(|name| name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        );
        for (retired, _) in RETIRED_TOOLS {
            assert!(!names.contains(retired));
        }
    }
}
