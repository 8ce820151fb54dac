// Unit tests of the TypeScript shell against a STAND-IN of the `vscode` module (VS Code itself
// cannot run here; see vscode-stand-in.js), driving the real native module (crates/host-napi)
// through a real MCP client (the official TypeScript SDK over Streamable HTTP), with real
// .ipynb files and a real ipykernel.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const os = require('os');
const path = require('path');

const standIn = require('./vscode-stand-in');
standIn.install();
const { vscode, state } = standIn;

const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');

const repository = path.resolve(__dirname, '..', '..');
const extension = require('../out/extension.js');

/** Links the test Python environment into `folder` as its `.venv`, where our controller finds kernels. */
function linkVenv(folder) {
  const venv = process.env.JUPYTER_MCP_TEST_VENV ?? path.join(repository, '.venv');
  if (fs.existsSync(venv)) fs.symlinkSync(venv, path.join(folder, '.venv'));
}

/** A workspace folder with one notebook and the test Python environment as its `.venv`. */
function workspace() {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'jupyter-mcp-ext-'));
  linkVenv(folder);
  const notebook = {
    cells: [
      { cell_type: 'markdown', id: 'intro', metadata: {}, source: ['# Title ünï 🐍\n', 'text'] },
      { cell_type: 'code', id: 'load', metadata: { tags: ['keep'] }, execution_count: null, outputs: [], source: ['x = 40\n', 'print(x + 2)'] },
      { cell_type: 'code', id: 'show', metadata: {}, execution_count: 3, outputs: [{ output_type: 'stream', name: 'stdout', text: ['old\n'] }], source: ['x'] },
    ],
    metadata: { kernelspec: { display_name: 'Python 3', language: 'python', name: 'python3' }, language_info: { name: 'python' } },
    nbformat: 4,
    nbformat_minor: 5,
  };
  const file = path.join(folder, 'analysis.ipynb');
  fs.writeFileSync(file, JSON.stringify(notebook, null, 1) + '\n');
  return { folder, file, uri: vscode.Uri.file(file).toString() };
}

function context() {
  return { subscriptions: [], extension: { id: 'jupyter-mcp.jupyter-mcp' } };
}

async function activate(options = {}) {
  standIn.reset({ folders: options.folders ?? [], settings: { 'jupyterMcp.port': 0, ...(options.settings ?? {}) } });
  if (options.jupyter) standIn.installJupyterStandIn(options.jupyter);
  const api = await extension.activate(context());
  await api.ready();
  return api;
}

async function connect(url) {
  const client = new Client({ name: 'stand-in-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

/** Activates with `options`, connects a client, runs `body` with it, then closes and deactivates. */
async function withClient(options, body) {
  const api = await activate(options);
  const client = await connect(api.url);
  try {
    return await body(client, api);
  } finally {
    await client.close();
    await extension.deactivate();
  }
}

async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  const body = JSON.parse(result.content[0].text);
  return { isError: Boolean(result.isError), body };
}

/** The status item created with `id` in this activation. */
function statusItem(id) {
  const item = state.statusItems.findLast((candidate) => candidate.id === id);
  assert.ok(item, `a status item ${id}`);
  return item;
}

async function ok(client, name, args) {
  const { isError, body } = await call(client, name, args);
  assert.equal(isError, false, `${name} failed: ${JSON.stringify(body)}`);
  return body;
}

test('stand-in vscode: activation serves MCP and shows the status item with the URL', async () => {
  const api = await activate();
  try {
    assert.match(api.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp\?token=[0-9a-f]{64}$/);
    const item = statusItem('jupyterMcp.status');
    assert.equal(item.text, '$(notebook) MCP');
    // Without a native debugging port, the marker item stays hidden.
    assert.equal(statusItem('jupyterMcp.native').visible, false);
    assert.equal(item.visible, true);
    assert.ok(item.tooltip.includes(api.url));
    await vscode.commands.executeCommand('jupyterMcp.copyUrl');
    assert.equal(state.clipboard, api.url);
    assert.ok(state.outputLines.some((line) => line.startsWith('[jupyter-mcp] serving MCP at')));
    const client = await connect(api.url);
    const { tools } = await client.listTools();
    const names = tools.map((tool) => tool.name);
    for (const name of ['list_notebooks', 'read_notebook', 'edit_cells', 'save_notebooks', 'run_cells', 'create_notebook']) {
      assert.ok(names.includes(name), name);
    }
    await client.close();
    const bare = new URL(api.url);
    bare.search = '';
    const refused = await fetch(bare, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    assert.equal(refused.status, 401, 'the URL without its token is refused');
  } finally {
    await extension.deactivate();
  }
  assert.equal(statusItem('jupyterMcp.status').visible, false, 'the item hides when the server stops');
});

test('stand-in vscode: disabling the server stops it; changing a setting restarts it', async () => {
  const api = await activate();
  try {
    const first = api.url;
    state.settings['jupyterMcp.enabled'] = false;
    standIn.onDidChangeConfiguration.fire({ affectsConfiguration: (section) => section === 'jupyterMcp' });
    await api.ready();
    assert.equal(api.url, undefined);
    state.settings['jupyterMcp.enabled'] = true;
    standIn.onDidChangeConfiguration.fire({ affectsConfiguration: (section) => section === 'jupyterMcp' });
    await api.ready();
    assert.match(api.url, /^http:/);
    assert.notEqual(api.url, undefined, first);
  } finally {
    await extension.deactivate();
  }
});

test('stand-in vscode: open, read and edit the live document with expectedRev, then save it', async () => {
  const { folder, file, uri } = workspace();
  const api = await activate({ folders: [folder] });
  const client = await connect(api.url);
  try {
    const opened = await ok(client, 'open_notebooks', { uris: [uri] });
    assert.equal(opened.notebooks[0].status, 'opened');
    const listing = await ok(client, 'list_notebooks', {});
    const window = listing.windows[0];
    assert.equal(window.windowLabel, path.basename(folder));
    assert.equal(window.notebooks[0].uri, uri);
    assert.equal(window.notebooks[0].path, 'analysis.ipynb');
    const ref = window.notebooks[0].notebookRef;
    assert.match(ref, /^nb_[0-9a-f]{24}$/);

    const document = state.documents[0];
    const loadCell = document.cellAt(1);
    const read = await ok(client, 'read_notebook', { notebookRef: ref, view: 'all' });
    assert.equal(read.cellCount, 3);
    assert.deepEqual(read.cells.map((cell) => cell.cell_id), ['intro', 'load', 'show']);
    assert.equal(read.cells[1].source, 'x = 40\nprint(x + 2)');
    assert.ok(read.cells[2].outputs.includes('old'));

    // The user types in the live document; the agent reads the unsaved text.
    loadCell.document.text = 'x = 41\nprint(x + 2)';
    document.changed();
    const again = await ok(client, 'read_notebook', { notebookRef: ref, view: 'source', cellIds: ['load'] });
    assert.equal(again.cells[0].source, 'x = 41\nprint(x + 2)');

    const edited = await ok(client, 'edit_cells', {
      notebookRef: ref,
      edits: [
        { editType: 'replace', cellId: 'load', expectedRev: again.cells[0].rev, oldText: 'print(x + 2)', newCode: 'print(x + 1)  # ü🐍' },
        { editType: 'insert', cellId: 'BOTTOM', newCode: 'print("new")' },
      ],
    });
    assert.equal(edited.cellCount, 4);
    // A kept cell is edited in place (same cell object), never replaced; the file is untouched.
    assert.equal(document.cellAt(1), loadCell);
    assert.equal(loadCell.document.getText(), 'x = 41\nprint(x + 1)  # ü🐍');
    assert.deepEqual(loadCell.metadata.metadata.tags, ['keep']);
    assert.equal(document.cellAt(3).document.getText(), 'print("new")');
    assert.equal(JSON.parse(fs.readFileSync(file, 'utf8')).cells.length, 3, 'nothing written behind the editor');

    // A stale rev is refused and changes nothing.
    const stale = await call(client, 'edit_cells', {
      notebookRef: ref,
      edits: [{ editType: 'edit', cellId: 'load', expectedRev: again.cells[0].rev, newCode: 'nope' }],
    });
    assert.equal(stale.isError, true);
    assert.equal(stale.body.error.code, 'rev_mismatch');
    assert.equal(loadCell.document.getText(), 'x = 41\nprint(x + 1)  # ü🐍');

    await ok(client, 'save_notebooks', { notebookRefs: [ref] });
    const saved = JSON.parse(fs.readFileSync(file, 'utf8'));
    assert.equal(saved.cells.length, 4);
    assert.equal(saved.cells[1].source.join(''), 'x = 41\nprint(x + 1)  # ü🐍');
    assert.equal(saved.cells[1].id, 'load');
    assert.equal(saved.cells[0].source.join(''), '# Title ünï 🐍\ntext');
    assert.equal(document.isDirty, false);

    // Saving a clean document still writes it (force-save).
    fs.writeFileSync(file, '{}');
    await ok(client, 'save_notebooks', { notebookRefs: [ref] });
    assert.equal(JSON.parse(fs.readFileSync(file, 'utf8')).cells.length, 4);
    assert.equal(document.metadata.__jupyterMcpForceSave, undefined, 'the force-save marker is gone');

    // Opening it again reveals the live document and keeps it.
    loadCell.document.text = 'unsaved';
    document.changed();
    const reopened = await ok(client, 'open_notebooks', { uris: [uri] });
    assert.equal(reopened.notebooks[0].status, 'already-open');
    assert.equal(state.documents.length, 1);
    assert.equal(loadCell.document.getText(), 'unsaved');
  } finally {
    await client.close();
    await extension.deactivate();
  }
});

test('stand-in vscode: an edit planned against an older version is refused', async () => {
  const { folder, uri } = workspace();
  await withClient({ folders: [folder] }, async (client) => {
    await ok(client, 'open_notebooks', { uris: [uri] });
    const read = await ok(client, 'read_notebook', { notebookRef: uri, view: 'source' });
    // Someone else changes the document after the agent read it.
    const document = state.documents[0];
    document.cellAt(2).document.text = 'y';
    document.changed();
    const refused = await call(client, 'edit_cells', {
      notebookRef: uri,
      edits: [{ editType: 'edit', cellId: 'load', expectedRev: read.cells[1].rev, newCode: 'z = 1' }],
    });
    assert.equal(refused.isError, true);
    assert.equal(refused.body.error.code, 'notebook_changed_on_disk');
    assert.equal(document.cellAt(1).document.getText(), 'x = 40\nprint(x + 2)');
    // The next call works on what is there now.
    await ok(client, 'edit_cells', {
      notebookRef: uri,
      edits: [{ editType: 'edit', cellId: 'load', expectedRev: read.cells[1].rev, newCode: 'z = 1' }],
    });
    assert.equal(document.cellAt(1).document.getText(), 'z = 1');
  });
});

test('stand-in vscode: run_cells runs on a real ipykernel and writes outputs through the controller', { timeout: 120000 }, async () => {
  const { folder, uri } = workspace();
  await withClient({ folders: [folder], settings: { 'jupyterMcp.saveBeforeExecute': false } }, async (client) => {
    await ok(client, 'open_notebooks', { uris: [uri] });
    const document = state.documents[0];
    const controller = state.controllers[0];
    assert.ok(controller.selectedFor.has(uri), 'without the Jupyter extension our controller is selected');
    const cell = document.cellAt(1);
    const receipt = await ok(client, 'run_cells', { notebookRef: uri, cellIds: ['load'], waitMs: 60000 });
    assert.equal(receipt.status, 'completed', JSON.stringify(receipt));
    assert.equal(document.cellAt(1), cell, 'outputs are written into the same cell');
    const text = Buffer.from(cell.outputs[0].items[0].data).toString();
    assert.equal(cell.outputs[0].items[0].mime, 'application/vnd.code.notebook.stdout');
    assert.equal(text, '42\n');
    assert.equal(cell.executionSummary.success, true);
    assert.equal(cell.executionSummary.executionOrder, 1);
    assert.equal(cell.metadata.execution_count, 1);
    const read = await ok(client, 'read_notebook', { notebookRef: uri, view: 'outputs', cellIds: ['load'] });
    assert.ok(read.cells[0].outputs.includes('42'));

    // The user presses Run: the controller runs on the same kernel (x is defined there).
    const show = document.cellAt(2);
    await controller.run([show]);
    const result = show.outputs[0].items.find((item) => item.mime === 'text/plain');
    assert.equal(Buffer.from(result.data).toString(), '40');
    assert.equal(show.executionSummary.executionOrder, 2);
    const execution = await ok(client, 'get_execution', { notebookRef: uri });
    assert.equal(execution.status, 'completed');
  });
});

/** `size` random bytes in a new file under `folder`, with their SHA-256. */
function randomFile(folder, name, size) {
  const bytes = require('crypto').randomBytes(size);
  fs.writeFileSync(path.join(folder, name), bytes);
  return require('crypto').createHash('sha256').update(bytes).digest('hex');
}

function sha256(file) {
  return require('crypto').createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

test('stand-in vscode: files move through our controller\'s kernel within the workspace folders', { timeout: 120000 }, async () => {
  const { folder, uri } = workspace();
  await withClient({ folders: [folder], settings: { 'jupyterMcp.saveBeforeExecute': false } }, async (client) => {
    await ok(client, 'open_notebooks', { uris: [uri] });
    const digest = randomFile(folder, 'data.bin', 2 * 1024 * 1024 + 17);
    const kernelPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'jupyter-mcp-kernel-')), 'data.bin');
    const refused = await call(client, 'upload_file', { notebookRef: uri, hostPath: 'data.bin', kernelPath });
    assert.equal(refused.isError, true, 'a transfer never starts a kernel');
    assert.equal(refused.body.error.code, 'kernel_unavailable');
    await ok(client, 'configure_kernel', { notebookRef: uri });
    const up = await ok(client, 'upload_file', { notebookRef: uri, hostPath: 'data.bin', kernelPath });
    assert.equal(up.sha256, digest);
    assert.equal(up.verified, true);
    assert.equal(sha256(kernelPath), digest);
    const down = await ok(client, 'download_file', { notebookRef: uri, hostPath: 'back/data.bin', kernelPath });
    assert.equal(down.sha256, digest);
    assert.equal(sha256(path.join(folder, 'back', 'data.bin')), digest);
    // Binary buffers: the wire carries about the file's size, not a third more of base64.
    assert.ok(down.wireBytes < 1.05 * down.bytes + 65536, JSON.stringify(down));

    const outside = path.join(os.tmpdir(), `jupyter-mcp-outside-${process.pid}.bin`);
    for (const hostPath of [outside, '../escape.bin', vscode.Uri.file(outside).toString()]) {
      const escaped = await call(client, 'download_file', { notebookRef: uri, hostPath, kernelPath });
      assert.equal(escaped.isError, true, hostPath);
      assert.equal(escaped.body.error.code, 'path_outside_root', JSON.stringify(escaped.body));
    }
    assert.equal(fs.existsSync(outside), false, 'nothing was written outside the workspace');
    const again = await call(client, 'download_file', { notebookRef: uri, hostPath: 'data.bin', kernelPath });
    assert.equal(again.body.error.code, 'already_exists', 'never overwritten without overwrite');
  });
});

test('stand-in vscode: create_notebook without a folder makes an untitled notebook', async () => {
  const api = await activate();
  const client = await connect(api.url);
  try {
    const created = await ok(client, 'create_notebook', { title: 'Scratch' });
    assert.match(created.uri, /^untitled:/);
    const document = state.documents[0];
    assert.equal(document.uri.toString(), created.uri);
    assert.equal(document.cellAt(0).document.getText(), '# Scratch');
    assert.equal(document.cellAt(0).kind, vscode.NotebookCellKind.Markup);
    const listing = await ok(client, 'list_notebooks', {});
    assert.equal(listing.windows[0].windowLabel, 'Empty window');
    assert.equal(listing.windows[0].notebooks[0].uri, created.uri);
    // An untitled notebook has no file yet: skipped and reported, not a failure.
    const saved = await ok(client, 'save_notebooks', { notebookRefs: [created.uri] });
    assert.deepEqual(saved.saved, []);
    assert.match(saved.skipped[0].reason, /Save As/);
  } finally {
    await client.close();
    await extension.deactivate();
  }
});

test('stand-in vscode: create_notebook in a folder writes the file and opens it', async () => {
  const { folder } = workspace();
  const api = await activate({ folders: [folder] });
  const client = await connect(api.url);
  try {
    const created = await ok(client, 'create_notebook', { title: 'Results', path: 'sub/results.ipynb' });
    assert.equal(created.path, 'sub/results.ipynb');
    const file = path.join(folder, 'sub', 'results.ipynb');
    const written = JSON.parse(fs.readFileSync(file, 'utf8'));
    assert.equal(written.cells[0].source.join(''), '# Results');
    assert.equal(state.reveals.at(-1), created.uri);
    const again = await call(client, 'create_notebook', { title: 'Results', path: 'sub/results.ipynb' });
    assert.equal(again.body.error.code, 'already_exists');
  } finally {
    await client.close();
    await extension.deactivate();
  }
});

// ---- With a STAND-IN of the Jupyter extension (ms-toolsai.jupyter) ----------------------------

const DEFAULT_CELLS = [['a', 'print(1)'], ['b', 'raise ValueError()'], ['c', 'print(3)'], ['h', 'hang()']];

/** A folder with a notebook of code cells, each `[id, source]` (by default, small cells the stand-in Jupyter kernel understands). */
function jupyterWorkspace(cells = DEFAULT_CELLS) {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'jupyter-mcp-jup-'));
  const code = (id, source) => ({ cell_type: 'code', id, metadata: {}, execution_count: null, outputs: [], source: [source] });
  const notebook = {
    cells: cells.map(([id, source]) => code(id, source)),
    metadata: { kernelspec: { display_name: 'Python 3', language: 'python', name: 'python3' } },
    nbformat: 4,
    nbformat_minor: 5,
  };
  const file = path.join(folder, 'jupyter.ipynb');
  fs.writeFileSync(file, JSON.stringify(notebook, null, 1) + '\n');
  return { folder, uri: vscode.Uri.file(file).toString() };
}

/** Runs `body` with an MCP client of a window that has `uri` open, then stops the window. */
async function inWindow(api, uri, select, body) {
  const client = await connect(api.url);
  try {
    await ok(client, 'open_notebooks', { uris: [uri] });
    await select(client);
    await body({ client, uri, folder: path.dirname(vscode.Uri.parse(uri).fsPath), document: state.documents[0], jupyter: state.jupyter });
  } finally {
    await client.close();
    await extension.deactivate();
  }
}

const STAND_IN_KERNEL = 'ms-toolsai.jupyter/python-stand-in';

/** Activates with the stand-in Jupyter extension, opens the notebook and selects its kernel. */
async function withJupyter(options, body) {
  const { folder, uri } = jupyterWorkspace(options.cells);
  const api = await activate({ folders: [folder], settings: { 'jupyterMcp.saveBeforeExecute': false }, jupyter: options });
  const select = async (client) => {
    if (options.select !== false) await ok(client, 'select_kernel', { notebookRef: uri, kernelId: STAND_IN_KERNEL });
  };
  await inWindow(api, uri, select, body);
}

/**
 * Activates without the Jupyter extension, so that our own controller is the notebook's (its
 * kernels: a real ipykernel from the folder's `.venv`), and opens a notebook of `cells`.
 */
async function withController(cells, body) {
  const { folder, uri } = jupyterWorkspace(cells);
  linkVenv(folder);
  const api = await activate({ folders: [folder], settings: { 'jupyterMcp.saveBeforeExecute': false } });
  await inWindow(api, uri, async () => {}, body);
}

test('stand-in Jupyter extension: list_kernels and select_kernel use exact controller ids, with no fallback', async () => {
  await withJupyter({ select: false }, async ({ client, uri, jupyter }) => {
    const ours = state.controllers.find((controller) => controller.extension === undefined);
    assert.equal(ours.selectedFor.has(uri), false, 'with the Jupyter extension our controller is not selected');
    const listed = await ok(client, 'list_kernels', { notebookRef: uri });
    const ids = listed.kernels.map((kernel) => kernel.id);
    assert.ok(ids.includes(STAND_IN_KERNEL), JSON.stringify(ids));
    assert.ok(ids.includes('ms-toolsai.jupyter/python-other'));
    assert.equal(listed.kernels.find((kernel) => kernel.id === STAND_IN_KERNEL).source, 'ms-toolsai.jupyter');

    const near = await call(client, 'select_kernel', { notebookRef: uri, kernelId: 'python-stand-in' });
    assert.equal(near.isError, true);
    assert.equal(near.body.error.code, 'kernel_not_found');
    assert.ok(near.body.error.message.includes(STAND_IN_KERNEL), 'the error lists the available ids');
    assert.ok(jupyter.controllers.every((controller) => !controller.selectedFor.has(uri)), 'nothing was selected');

    const info = await ok(client, 'get_kernel_info', { notebookRef: uri });
    assert.equal(info.kernel.runtime, 'unknown');
    assert.match(info.kernel.runtimeReason, /no active kernel/);

    const selected = await ok(client, 'select_kernel', { notebookRef: uri, kernelId: STAND_IN_KERNEL });
    assert.equal(selected.kernel.id, STAND_IN_KERNEL);
    assert.equal(state.selectedThroughEditor.at(-1), true, 'the notebook\'s own editor was passed');
    assert.ok(jupyter.controllers[0].selectedFor.has(uri));
    assert.ok(!jupyter.controllers[1].selectedFor.has(uri));
    const active = await ok(client, 'get_kernel_info', { notebookRef: uri });
    assert.equal(active.kernel.runtime, 'active');
    assert.equal(active.kernel.label, 'Python 3 (stand-in Jupyter)');
  });
});

test('stand-in Jupyter extension: a tracked run completes while the execute command never settles', async () => {
  await withJupyter({ commandPromise: 'hang' }, async ({ client, uri, document }) => {
    const receipt = await ok(client, 'run_cells', { notebookRef: uri, cellIds: ['a', 'c'], waitMs: 30000 });
    assert.equal(receipt.status, 'completed', JSON.stringify(receipt));
    assert.deepEqual(receipt.cells.map((cell) => cell.state), ['completed', 'completed']);
    assert.ok(JSON.stringify(receipt).includes('ran: print(1)'), 'the receipt carries the output Jupyter wrote');
    const cell = document.cellAt(0);
    assert.equal(cell.outputs.length, 1, 'outputs are Jupyter\'s own, not written again');
    assert.equal(cell.executionSummary.success, true);
    assert.equal(document.cellAt(1).executionSummary, undefined, 'only the requested cells ran');
  });
});

test('stand-in Jupyter extension: a failing cell fails the run and later cells are not dispatched', async () => {
  await withJupyter({}, async ({ client, uri, document }) => {
    const receipt = await ok(client, 'run_cells', { notebookRef: uri, cellIds: ['a', 'b', 'c'], waitMs: 30000 });
    assert.equal(receipt.status, 'failed', JSON.stringify(receipt));
    assert.deepEqual(receipt.cells.map((cell) => cell.state), ['completed', 'failed', 'not-run']);
    assert.equal(document.cellAt(2).executionSummary, undefined, 'cell c never ran');
    assert.ok(JSON.stringify(receipt).includes('ValueError'));
  });
});

test('stand-in Jupyter extension: a rejected dispatch fails the run with a sanitised reason', async () => {
  const unhandled = [];
  const onUnhandled = (reason) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    await withJupyter({ commandPromise: 'reject' }, async ({ client, uri, document }) => {
      const result = await call(client, 'run_cells', { notebookRef: uri, cellIds: ['a', 'c'], waitMs: 30000 });
      assert.equal(result.isError, false);
      const text = JSON.stringify(result.body);
      assert.equal(result.body.status, 'failed', text);
      assert.equal(result.body.reasonCode, 'dispatch_failed');
      assert.deepEqual(result.body.cells.map((cell) => cell.state), ['failed', 'not-run']);
      assert.ok(!text.includes('secret-token-4711') && !text.includes('.ssh'), 'no raw error text: ' + text);
      assert.equal(document.cellAt(0).executionSummary, undefined);
    });
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
  assert.deepEqual(unhandled, []);
});

test('stand-in Jupyter extension: a 3 MiB file moves through executeCode as base64 in the source and printed receipts', { timeout: 180000 }, async () => {
  await withJupyter({}, async ({ client, uri, jupyter }) => {
    const folder = path.dirname(vscode.Uri.parse(uri).fsPath);
    const size = 3 * 1024 * 1024;
    const digest = randomFile(folder, 'upload.bin', size);
    const kernelPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'jupyter-mcp-kernel-')), 'upload.bin');
    const up = await ok(client, 'upload_file', { notebookRef: uri, hostPath: 'upload.bin', kernelPath });
    assert.equal(up.sha256, digest);
    assert.equal(sha256(kernelPath), digest, 'the kernel holds the same bytes');
    // Code only: the chunks travelled as base64 literals in the source (about 4/3 of the file).
    assert.ok(up.wireBytes > 1.3 * size, JSON.stringify(up));
    assert.ok(jupyter.executed_code.length >= 3, 'several requests, all through executeCode');
    const down = await ok(client, 'download_file', { notebookRef: uri, hostPath: 'sub/back.bin', kernelPath });
    assert.equal(down.sha256, digest);
    assert.equal(sha256(path.join(folder, 'sub', 'back.bin')), digest);
    const overwrite = await call(client, 'download_file', { notebookRef: uri, hostPath: 'sub/back.bin', kernelPath });
    assert.equal(overwrite.body.error.code, 'already_exists');
  });
});

test('stand-in Jupyter extension: restart_kernels is a request that invalidates the running observation', async () => {
  await withJupyter({ commandPromise: 'hang' }, async ({ client, uri, jupyter }) => {
    const started = await ok(client, 'run_cells', { notebookRef: uri, cellIds: ['h', 'a'], waitMs: 0 });
    await jupyter.executed;
    const restart = await ok(client, 'restart_kernels', { notebookRefs: [uri] });
    const entry = restart.results[0];
    assert.equal(entry.outcome, 'restart-requested');
    assert.equal(entry.invalidatedExecution, started.executionId);
    assert.deepEqual(jupyter.requests, [['restart', uri]]);
    const after = await ok(client, 'get_execution', { notebookRef: uri, waitMs: 30000 });
    assert.equal(after.status, 'unavailable', JSON.stringify(after));
    assert.equal(after.reasonCode, 'invalidated_by_restart');
    assert.deepEqual(after.cells.map((cell) => cell.state), ['unavailable', 'not-run']);

    const interrupt = await ok(client, 'interrupt_kernels', { notebookRefs: [uri] });
    assert.equal(interrupt.results[0].outcome, 'interrupt-requested');
    assert.deepEqual(jupyter.requests.at(-1), ['interrupt', uri]);
  });
});

test('stand-in Jupyter extension: run_cells before a kernel is chosen answers no_kernel at once and runs nothing', async () => {
  await withJupyter({ select: false }, async ({ client, uri, jupyter }) => {
    const refused = await call(client, 'run_cells', { notebookRef: uri, cellIds: ['a'], waitMs: 30000 });
    assert.equal(refused.isError, true, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'no_kernel');
    assert.match(refused.body.error.message, /list_kernels/);
    assert.match(refused.body.error.message, /select_kernel/);
    assert.deepEqual(jupyter.cellsRun, [], 'nothing was dispatched, so no picker opened');
    await ok(client, 'select_kernel', { notebookRef: uri, kernelId: STAND_IN_KERNEL });
    const receipt = await ok(client, 'run_cells', { notebookRef: uri, cellIds: ['a'], waitMs: 30000 });
    assert.equal(receipt.status, 'completed', JSON.stringify(receipt));
  });
});

test('stand-in Jupyter extension: cells become fresh, and run_cells without cellIds runs exactly the stale set [parity: an_edit_makes_exactly_its_cell_and_dependents_stale_and_a_stale_run_runs_them] [parity: a_background_runs_outputs_reach_the_file]', { timeout: 120000 }, async () => {
  const cells = [['load', 'x = 1'], ['double', 'y = x * 2'], ['other', 'z = 5']];
  await withJupyter({ cells }, async ({ client, uri, jupyter }) => {
    const stateOf = async () => (await ok(client, 'read_notebook', { notebookRef: uri })).cells.map((cell) => cell.state);
    const first = await ok(client, 'run_cells', { notebookRef: uri, waitMs: 60000 });
    assert.equal(first.status, 'completed', JSON.stringify(first));
    assert.deepEqual(jupyter.cellsRun, ['x = 1', 'y = x * 2', 'z = 5']);
    assert.deepEqual(await stateOf(), ['fresh', 'fresh', 'fresh']);
    const read = await ok(client, 'read_notebook', { notebookRef: uri });
    // An edit right after the run is accepted: the outputs Jupyter wrote are no foreign change.
    await ok(client, 'edit_cells', {
      notebookRef: uri,
      edits: [{ editType: 'edit', cellId: 'double', expectedRev: read.cells[1].rev, newCode: 'y = x * 3' }],
    });
    assert.deepEqual(await stateOf(), ['fresh', 'stale', 'fresh']);
    const second = await ok(client, 'run_cells', { notebookRef: uri, waitMs: 60000 });
    assert.equal(second.status, 'completed', JSON.stringify(second));
    assert.deepEqual(jupyter.cellsRun, ['x = 1', 'y = x * 2', 'z = 5', 'y = x * 3'], 'only the stale cell ran');
    assert.deepEqual(await stateOf(), ['fresh', 'fresh', 'fresh']);
    // Outputs Jupyter wrote reach the file: the run saved the file-backed notebook.
    const onDisk = JSON.parse(fs.readFileSync(vscode.Uri.parse(uri).fsPath, 'utf8'));
    assert.equal(onDisk.cells[1].outputs.length, 1, JSON.stringify(onDisk.cells[1]));
    // A restart the person makes in VS Code: nothing is fresh any more.
    jupyter.restartKernel(vscode.Uri.parse(uri));
    assert.deepEqual(await stateOf(), ['stale', 'stale', 'stale']);
  });
});

test('stand-in Jupyter extension: a kernel that dies mid-run ends the run unavailable, later cells not run [parity: a_kernel_killed_mid_run_ends_the_run_unavailable]', { timeout: 60000 }, async () => {
  await withJupyter({}, async ({ client, uri, jupyter }) => {
    await ok(client, 'run_cells', { notebookRef: uri, cellIds: ['h', 'a'], waitMs: 0 });
    await jupyter.executed;
    jupyter.killKernel(vscode.Uri.parse(uri));
    // The server waits at most 5 s for the run to end: a receipt that is not terminal by then fails.
    const ended = await ok(client, 'get_execution', { notebookRef: uri, waitMs: 5000 });
    assert.equal(ended.status, 'unavailable', JSON.stringify(ended));
    assert.equal(ended.reasonCode, 'kernel_died', JSON.stringify(ended));
    assert.deepEqual(ended.cells.map((cell) => cell.state), ['unavailable', 'not-run']);
  });
});

test('stand-in Jupyter extension: a restart mid-run settles the pending command, so the next run is admitted', { timeout: 60000 }, async () => {
  await withJupyter({}, async ({ client, uri, jupyter }) => {
    await ok(client, 'run_cells', { notebookRef: uri, cellIds: ['h', 'a'], waitMs: 0 });
    await jupyter.executed;
    const restart = await ok(client, 'restart_kernels', { notebookRefs: [uri] });
    assert.equal(restart.results[0].outcome, 'restart-requested');
    assert.match(restart.results[0].detail, /seen restarting/, JSON.stringify(restart));
    const ended = await ok(client, 'get_execution', { notebookRef: uri, waitMs: 30000 });
    assert.equal(ended.reasonCode, 'invalidated_by_restart', JSON.stringify(ended));
    const next = await ok(client, 'run_cells', { notebookRef: uri, cellIds: ['a'], waitMs: 30000 });
    assert.equal(next.status, 'completed', JSON.stringify(next));
    assert.equal(next.notebookCommandPending, false);
  });
});

test('stand-in Jupyter extension: restart_kernels sends nothing when no kernel runs', async () => {
  await withJupyter({ select: false }, async ({ client, uri, jupyter }) => {
    const restart = await ok(client, 'restart_kernels', { notebookRefs: [uri] });
    assert.equal(restart.results[0].outcome, 'not-running', JSON.stringify(restart));
    assert.deepEqual(jupyter.requests, []);
  });
});

test('stand-in vscode: save_notebooks skips an untitled notebook and saves the others', async () => {
  const { uri, file } = workspace();
  const api = await activate({ folders: [] });
  const client = await connect(api.url);
  try {
    const created = await ok(client, 'create_notebook', { title: 'Scratch' });
    assert.match(created.uri, /^untitled:/);
    await ok(client, 'open_notebooks', { uris: [uri] });
    const before = fs.statSync(file).mtimeMs;
    const saved = await ok(client, 'save_notebooks', { notebookRefs: [created.uri, uri] });
    assert.deepEqual(saved.saved, [uri]);
    assert.equal(saved.skipped.length, 1, JSON.stringify(saved));
    assert.equal(saved.skipped[0].notebook, created.uri);
    assert.match(saved.skipped[0].reason, /untitled/);
    assert.ok(fs.statSync(file).mtimeMs >= before);
  } finally {
    await client.close();
    await extension.deactivate();
  }
});

test('stand-in Jupyter extension: restart_kernels makes every cell stale [parity: a_restart_makes_every_cell_stale]', { timeout: 60000 }, async () => {
  const cells = [['load', 'x = 1'], ['double', 'y = x * 2']];
  await withJupyter({ cells }, async ({ client, uri }) => {
    await ok(client, 'run_cells', { notebookRef: uri, waitMs: 60000 });
    const stateOf = async () => (await ok(client, 'read_notebook', { notebookRef: uri })).cells.map((cell) => cell.state);
    assert.deepEqual(await stateOf(), ['fresh', 'fresh']);
    await ok(client, 'restart_kernels', { notebookRefs: [uri] });
    assert.deepEqual(await stateOf(), ['stale', 'stale']);
  });
});

test('stand-in Jupyter extension: undo_last restores the agent\'s change and refuses after the person changed the cell [parity: undo_restores_the_agents_last_change] [parity: undo_refuses_when_the_person_changed_the_cell_since]', async () => {
  const cells = [['load', 'x = 1'], ['double', 'y = x * 2']];
  await withJupyter({ cells }, async ({ client, uri, document }) => {
    const read = await ok(client, 'read_notebook', { notebookRef: uri });
    await ok(client, 'edit_cells', {
      notebookRef: uri,
      edits: [{ editType: 'edit', cellId: 'double', expectedRev: read.cells[1].rev, newCode: 'y = x * 3' }, { editType: 'insert', cellId: 'BOTTOM', newCode: 'z = 0' }],
    });
    assert.equal(document.cellCount, 3);
    await ok(client, 'undo_last', { notebookRef: uri });
    assert.equal(document.cellCount, 2);
    assert.equal(document.cellAt(1).document.getText(), 'y = x * 2');
    const again = await ok(client, 'read_notebook', { notebookRef: uri });
    await ok(client, 'edit_cells', {
      notebookRef: uri,
      edits: [{ editType: 'edit', cellId: 'double', expectedRev: again.cells[1].rev, newCode: 'y = x * 4' }],
    });
    // The person changes the agent's cell in the editor: undo refuses and keeps it.
    document.cellAt(1).document.text = 'y = x * 5  # the person';
    document.changed();
    const refused = await call(client, 'undo_last', { notebookRef: uri });
    assert.equal(refused.isError, true, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'rev_mismatch');
    assert.equal(document.cellAt(1).document.getText(), 'y = x * 5  # the person');
  });
});

test('stand-in Jupyter extension: an interrupt ends the running cell, later cells not run, and a new run is admitted [parity: an_interrupt_ends_the_running_cell_and_a_new_run_is_admitted]', { timeout: 120000 }, async () => {
  const cells = [['sleeper', 'hang()'], ['after', 'after = 1']];
  await withJupyter({ cells }, async ({ client, uri, jupyter }) => {
    await ok(client, 'run_cells', { notebookRef: uri, cellIds: ['sleeper', 'after'], waitMs: 0, freshDeps: false });
    await jupyter.hangs;
    const interrupt = await ok(client, 'interrupt_kernels', { notebookRefs: [uri] });
    // The window asks the Jupyter extension to interrupt (it holds no kernel connection of its
    // own): the contract's outcome for that is `interrupt-requested`, where a host that sends
    // the interrupt itself answers `interrupt-sent`.
    assert.equal(interrupt.results[0].outcome, 'interrupt-requested', JSON.stringify(interrupt));
    assert.deepEqual(jupyter.requests, [['interrupt', uri]]);
    const ended = await ok(client, 'get_execution', { notebookRef: uri, waitMs: 60000 });
    assert.ok(['failed', 'unavailable'].includes(ended.status), `ended, and not completed: ${JSON.stringify(ended)}`);
    assert.equal(ended.cells[1].state, 'not-run', JSON.stringify(ended));
    assert.deepEqual(jupyter.cellsRun, ['hang()'], 'the queued cell never ran');
    const next = await ok(client, 'run_cells', { notebookRef: uri, cellIds: ['after'], waitMs: 60000, freshDeps: false });
    assert.equal(next.status, 'completed', JSON.stringify(next));
  });
});

/**
 * A STAND-IN of Anthropic's Messages API (the real one is not reachable from tests), as
 * tests/src/messages.rs is for the Rust suite: a local HTTP server that answers
 * `POST /v1/messages` with one summary per cell id in the request and records the requests.
 */
async function messagesStandIn() {
  const received = [];
  const server = require('http').createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString());
      received.push({ method: request.method, path: request.url, headers: request.headers, body });
      const cells = JSON.parse(body.messages[0].content);
      const summaries = cells.map((cell) => ({ id: cell.id, tldr: `Model tldr of ${cell.id}`, description: 'What the model says.', outputSummary: '' }));
      const answer = {
        id: 'msg_test', type: 'message', role: 'assistant', model: body.model,
        content: [{ type: 'text', text: JSON.stringify(summaries) }],
        stop_reason: 'end_turn',
      };
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const close = () => new Promise((resolve) => server.close(resolve));
  return { base: `http://127.0.0.1:${server.address().port}`, received, close };
}

/** Runs `body` with environment variables set as in `variables`, then puts them back. */
async function withEnvironment(variables, body) {
  const before = Object.fromEntries(Object.keys(variables).map((name) => [name, process.env[name]]));
  Object.assign(process.env, variables);
  try {
    return await body();
  } finally {
    for (const [name, value] of Object.entries(before)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

// ---- Parity scenarios (tests/tests/e2e/parity.rs) that both VS Code columns run ----------------
//
// The same scenario, with the same assertions as the Rust suite, in the window with the stand-in
// of the Jupyter extension (titles `stand-in Jupyter extension:`) and in the window on our own
// controller and a real ipykernel (titles `stand-in vscode:`).

/** The Rust suite's `CHAIN`: each cell depends on the one before, but the last. */
const CHAIN = [['load', '# load\na = 1'], ['double', '# double\nb = a * 2'], ['report', '# report\nc = b + 1'], ['other', '# other\nd = 5']];

async function summariesComeFromTheModelAndAreNotAskedAgain(withWindow) {
  const messages = await messagesStandIn();
  const ids = CHAIN.map(([id]) => id);
  try {
    // The window's summarizer comes from the extension host's environment at activation.
    const variables = { ANTHROPIC_API_KEY: 'parity-key', ANTHROPIC_BASE_URL: messages.base, JUPYTER_MCP_SUMMARY_MODEL: 'stand-in-model' };
    await withEnvironment(variables, () => withWindow(CHAIN, async ({ client, uri }) => {
      const first = await ok(client, 'summarize_cells', { notebookRef: uri });
      assert.equal(first.modelRequests, 1, JSON.stringify(first));
      assert.equal(first.model, 'stand-in-model');
      assert.ok(first.cells.every((cell) => cell.source === 'model'), JSON.stringify(first));
      assert.deepEqual(first.cells.map((cell) => cell.tldr), ids.map((id) => `Model tldr of ${id}`));
      assert.equal(messages.received.length, 1);
      const [request] = messages.received;
      assert.equal(`${request.method} ${request.path}`, 'POST /v1/messages');
      assert.equal(request.headers['x-api-key'], 'parity-key');
      assert.equal(request.body.model, 'stand-in-model');
      assert.deepEqual(JSON.parse(request.body.messages[0].content).map((cell) => cell.id), ids);

      const again = await ok(client, 'summarize_cells', { notebookRef: uri });
      assert.equal(again.modelRequests, 0, JSON.stringify(again));
      assert.deepEqual(again.cells.map((cell) => cell.tldr), ids.map((id) => `Model tldr of ${id}`), 'the cached summaries');
      assert.equal(messages.received.length, 1, 'asked the model once');
    }));
  } finally {
    await messages.close();
  }
}

async function aTenMibFileGoesToTheKernelAndBackUnchanged({ client, uri, folder }) {
  const run = await ok(client, 'run_cells', { notebookRef: uri, waitMs: 120000 });
  assert.equal(run.status, 'completed', JSON.stringify(run));
  const digest = randomFile(folder, 'payload.bin', 10 * 1024 * 1024);
  const kernelPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'jupyter-mcp-kernel-')), 'payload.bin');
  const up = await ok(client, 'upload_file', { notebookRef: uri, hostPath: 'payload.bin', kernelPath });
  assert.equal(up.sha256, digest, JSON.stringify(up));
  const down = await ok(client, 'download_file', { notebookRef: uri, hostPath: 'back/payload.bin', kernelPath });
  assert.equal(down.sha256, digest, JSON.stringify(down));
  assert.equal(sha256(path.join(folder, 'back', 'payload.bin')), digest);
}

async function everyListedToolAnswers({ client }) {
  const { tools } = await client.listTools();
  assert.ok(tools.length >= 10, JSON.stringify(tools.map((tool) => tool.name)));
  for (const tool of tools) {
    const answer = await call(client, tool.name, {});
    if (answer.isError) assert.notEqual(answer.body.error.code, 'unknown_tool', `${tool.name}: ${JSON.stringify(answer.body)}`);
  }
}

/** The `state` of each code cell, in order. */
async function cellStates(client, uri) {
  const read = await ok(client, 'read_notebook', { notebookRef: uri });
  return read.cells.filter((cell) => cell.kind === 'code').map((cell) => cell.state);
}

const withJupyterCells = (cells, body) => withJupyter({ cells }, body);

test('stand-in Jupyter extension: summarize_cells returns the model\'s summaries and asks nothing again for unchanged cells [parity: summaries_come_from_the_model_and_are_not_asked_again]', async () => {
  await summariesComeFromTheModelAndAreNotAskedAgain(withJupyterCells);
});

test('stand-in vscode: summarize_cells returns the model\'s summaries and asks nothing again for unchanged cells [parity: summaries_come_from_the_model_and_are_not_asked_again]', async () => {
  await summariesComeFromTheModelAndAreNotAskedAgain(withController);
});

test('stand-in Jupyter extension: a 10 MiB file goes to the kernel and back unchanged through executeCode [parity: a_10_mib_file_goes_to_the_kernel_and_back_unchanged]', { timeout: 600000 }, async () => {
  await withJupyterCells([['only', 'x = 1']], aTenMibFileGoesToTheKernelAndBackUnchanged);
});

test('stand-in vscode: a 10 MiB file goes to our controller\'s kernel and back unchanged [parity: a_10_mib_file_goes_to_the_kernel_and_back_unchanged]', { timeout: 600000 }, async () => {
  await withController([['only', 'x = 1']], aTenMibFileGoesToTheKernelAndBackUnchanged);
});

test('stand-in Jupyter extension: every listed tool answers something other than unknown_tool [parity: every_listed_tool_answers]', async () => {
  await withJupyter({}, everyListedToolAnswers);
});

test('stand-in vscode: every listed tool answers something other than unknown_tool on our controller [parity: every_listed_tool_answers]', async () => {
  await withController(CHAIN, everyListedToolAnswers);
});

test('stand-in vscode: on our controller, an edit makes exactly its cell and dependents stale, and a stale run runs them [parity: an_edit_makes_exactly_its_cell_and_dependents_stale_and_a_stale_run_runs_them]', { timeout: 240000 }, async () => {
  await withController(CHAIN, async ({ client, uri }) => {
    const first = await ok(client, 'run_cells', { notebookRef: uri, waitMs: 120000 });
    assert.equal(first.status, 'completed', JSON.stringify(first));
    assert.equal(first.cells.length, 4, JSON.stringify(first));
    assert.deepEqual(await cellStates(client, uri), ['fresh', 'fresh', 'fresh', 'fresh']);
    const outline = (await ok(client, 'read_notebook', { notebookRef: uri })).cells;
    await ok(client, 'edit_cells', {
      notebookRef: uri,
      edits: [{ editType: 'edit', cellId: outline[1].cell_id, expectedRev: outline[1].rev, newCode: '# double\nb = a * 3' }],
    });
    assert.deepEqual(await cellStates(client, uri), ['fresh', 'stale', 'stale', 'fresh']);
    const second = await ok(client, 'run_cells', { notebookRef: uri, waitMs: 120000 });
    assert.equal(second.status, 'completed', JSON.stringify(second));
    assert.deepEqual(second.cells.map((cell) => cell.cellId), [outline[1].cell_id, outline[2].cell_id], `exactly the stale cells ran: ${JSON.stringify(second)}`);
    assert.deepEqual(await cellStates(client, uri), ['fresh', 'fresh', 'fresh', 'fresh']);
  });
});

test('stand-in vscode: on our controller, a restart makes every cell stale [parity: a_restart_makes_every_cell_stale]', { timeout: 240000 }, async () => {
  await withController(CHAIN, async ({ client, uri }) => {
    const run = await ok(client, 'run_cells', { notebookRef: uri, waitMs: 120000 });
    assert.equal(run.status, 'completed', JSON.stringify(run));
    assert.deepEqual(await cellStates(client, uri), ['fresh', 'fresh', 'fresh', 'fresh']);
    const restart = await ok(client, 'restart_kernels', { notebookRefs: [uri] });
    assert.equal(restart.results[0].outcome, 'restarted', JSON.stringify(restart));
    assert.deepEqual(await cellStates(client, uri), ['stale', 'stale', 'stale', 'stale']);
  });
});

/** The Rust suite's `SLEEPER`: a cell that prints its kernel's pid and sleeps, and one after it. */
const SLEEPER = [['sleeper', "import os, time\nprint('pid', os.getpid(), flush=True)\ntime.sleep(120)"], ['after', 'after = 1']];

const isTerminal = (receipt) => ['completed', 'failed', 'unavailable'].includes(receipt.status);

/** Follows the notebook's latest run until `done` holds of its receipt (the waits are the server's); fails after `patience` ms. */
async function follow(client, uri, patience, done) {
  const deadline = Date.now() + patience;
  for (;;) {
    const receipt = await ok(client, 'get_execution', { notebookRef: uri, waitMs: 500, includeOutputs: true });
    if (done(receipt)) return receipt;
    assert.ok(Date.now() < deadline, `gave up waiting: ${JSON.stringify(receipt)}`);
  }
}

/** Starts a run of `SLEEPER` and waits until its first cell sleeps: the kernel's pid. */
async function startSleeper(client, uri) {
  await ok(client, 'run_cells', { notebookRef: uri, cellIds: ['sleeper', 'after'], waitMs: 0, freshDeps: false });
  const receipt = await follow(client, uri, 120000, (candidate) => String(candidate.cells[0].output ?? '').includes('pid '));
  const pid = Number(/pid (\d+)/.exec(receipt.cells[0].output)?.[1]);
  assert.ok(Number.isInteger(pid), `no pid in ${receipt.cells[0].output}`);
  return pid;
}

test('stand-in vscode: on our controller, a kernel killed mid-run ends the run unavailable [parity: a_kernel_killed_mid_run_ends_the_run_unavailable]', { timeout: 240000 }, async () => {
  await withController(SLEEPER, async ({ client, uri }) => {
    const pid = await startSleeper(client, uri);
    process.kill(pid, 'SIGKILL');
    // The run has ended within 5 s of the kill (the waits are the server's).
    const ended = await ok(client, 'get_execution', { notebookRef: uri, waitMs: 5000 });
    assert.ok(isTerminal(ended), `not ended within 5 s: ${JSON.stringify(ended)}`);
    assert.equal(ended.status, 'unavailable', JSON.stringify(ended));
    assert.equal(typeof ended.reasonCode, 'string', JSON.stringify(ended));
    assert.equal(ended.cells[1].state, 'not-run', JSON.stringify(ended));
  });
});

test('stand-in vscode: on our controller, an interrupt ends the running cell and a new run is admitted [parity: an_interrupt_ends_the_running_cell_and_a_new_run_is_admitted]', { timeout: 240000 }, async () => {
  await withController(SLEEPER, async ({ client, uri }) => {
    await startSleeper(client, uri);
    const interrupt = await ok(client, 'interrupt_kernels', { notebookRefs: [uri] });
    assert.equal(interrupt.results[0].outcome, 'interrupt-sent', JSON.stringify(interrupt));
    const ended = await follow(client, uri, 60000, isTerminal);
    assert.notEqual(ended.status, 'completed', JSON.stringify(ended));
    assert.equal(ended.cells[1].state, 'not-run', JSON.stringify(ended));
    const next = await ok(client, 'run_cells', { notebookRef: uri, cellIds: ['after'], waitMs: 60000, freshDeps: false });
    assert.equal(next.status, 'completed', JSON.stringify(next));
  });
});

test('stand-in vscode: on our controller, undo_last restores the agent\'s last change [parity: undo_restores_the_agents_last_change]', async () => {
  await withController(CHAIN, async ({ client, uri }) => {
    const before = (await ok(client, 'read_notebook', { notebookRef: uri })).cells;
    await ok(client, 'edit_cells', {
      notebookRef: uri,
      edits: [
        { editType: 'edit', cellId: before[1].cell_id, expectedRev: before[1].rev, newCode: '# double\nb = a * 10' },
        { editType: 'insert', cellId: 'BOTTOM', newCode: 'e = 6' },
      ],
    });
    assert.equal((await ok(client, 'read_notebook', { notebookRef: uri })).cells.length, before.length + 1);
    const undone = await ok(client, 'undo_last', { notebookRef: uri });
    assert.equal(undone.cellCount, before.length, JSON.stringify(undone));
    const after = (await ok(client, 'read_notebook', { notebookRef: uri })).cells;
    assert.deepEqual(after.map((cell) => cell.rev), before.map((cell) => cell.rev), 'the notebook is as it was');
  });
});

test('stand-in vscode: on our controller, undo_last refuses when the person changed the cell since [parity: undo_refuses_when_the_person_changed_the_cell_since]', async () => {
  await withController(CHAIN, async ({ client, uri, document }) => {
    const before = (await ok(client, 'read_notebook', { notebookRef: uri })).cells;
    await ok(client, 'edit_cells', {
      notebookRef: uri,
      edits: [{ editType: 'edit', cellId: before[1].cell_id, expectedRev: before[1].rev, newCode: '# double\nb = a * 10' }],
    });
    // The person changes the cell where they work: the live document in the editor.
    document.cellAt(1).document.text = "# double\nb = a * 100  # the person's";
    document.changed();
    const seen = await ok(client, 'read_notebook', { notebookRef: uri, view: 'source' });
    assert.ok(seen.cells[1].source.includes("the person's"), JSON.stringify(seen));
    const refused = await call(client, 'undo_last', { notebookRef: uri });
    assert.equal(refused.isError, true, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'rev_mismatch');
    const read = await ok(client, 'read_notebook', { notebookRef: uri, view: 'source' });
    assert.ok(read.cells[1].source.includes("the person's"), `the person's change is kept: ${JSON.stringify(read)}`);
  });
});

test('stand-in vscode: on our controller, a background run\'s outputs reach the file [parity: a_background_runs_outputs_reach_the_file]', { timeout: 240000 }, async () => {
  await withController([['only', "print('parity-output-' + str(6 * 7))"]], async ({ client, uri }) => {
    await ok(client, 'run_cells', { notebookRef: uri, waitMs: 0 });
    const ended = await follow(client, uri, 120000, isTerminal);
    assert.equal(ended.status, 'completed', JSON.stringify(ended));
    const text = fs.readFileSync(vscode.Uri.parse(uri).fsPath, 'utf8');
    assert.ok(text.includes('parity-output-42'), `written before the receipt: ${text}`);
  });
});
