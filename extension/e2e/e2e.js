// The end-to-end check of `cargo xtask e2e-vscode`: a real MCP client against the extension
// running in a real extension host (code-server with a headless Chromium connected).
// Usage: node e2e/e2e.js MCP_URL WORKSPACE_FOLDER
'use strict';
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { pathToFileURL } = require('url');
const { step, finish, connect } = require('./harness.js');

const [url, folder] = process.argv.slice(2);
const file = path.join(folder, 'analysis.ipynb');
const uri = pathToFileURL(file).toString();
async function main() {
  await step('a request without the token is refused with 401', async () => {
    const bare = new URL(url);
    assert.ok(bare.searchParams.get('token'), 'the URL carries the token');
    bare.search = '';
    const response = await fetch(bare, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    assert.equal(response.status, 401);
  });
  const { client, call } = await connect(url, 'e2e-vscode');
  let ref;
  let rev;
  await step('tools/list lists what the window can do', async () => {
    const { tools } = await client.listTools();
    const names = tools.map((tool) => tool.name);
    // undo_last is the tools' own (the agent's changes, rev-checked), listed in every host.
    for (const name of ['read_notebook', 'run_cells', 'upload_file', 'download_file', 'list_kernels', 'undo_last']) {
      assert.ok(names.includes(name), `${name} missing: ${names}`);
    }
  });
  await step('list_notebooks lists this window', async () => {
    const listing = await call('list_notebooks', {});
    assert.equal(listing.windows.length, 1);
    assert.equal(listing.windows[0].windowLabel, path.basename(folder));
  });
  await step('open_notebooks opens the file in the editor', async () => {
    const opened = await call('open_notebooks', { uris: [uri] });
    assert.equal(opened.notebooks[0].cellCount, 2);
    const listing = await call('list_notebooks', {});
    const entry = listing.windows[0].notebooks.find((notebook) => notebook.path === 'analysis.ipynb');
    assert.ok(entry, JSON.stringify(listing));
    ref = entry.notebookRef;
  });
  await step('read_notebook reads the live document', async () => {
    const read = await call('read_notebook', { notebookRef: ref, view: 'all' });
    assert.deepEqual(read.cells.map((cell) => cell.cell_id), ['intro', 'load']);
    assert.equal(read.cells[1].source, 'x = 40\nprint(x + 2)');
    rev = read.cells[1].rev;
  });
  await step('edit_cells with expectedRev changes the live document, not the file', async () => {
    const edited = await call('edit_cells', {
      notebookRef: ref,
      edits: [
        { editType: 'replace', cellId: 'load', expectedRev: rev, oldText: 'print(x + 2)', newCode: 'print(x + 2)  # 🐍' },
        { editType: 'insert', cellId: 'BOTTOM', newCode: 'y = x * 2\ny' },
      ],
    });
    assert.equal(edited.cellCount, 3);
    const read = await call('read_notebook', { notebookRef: ref, view: 'source' });
    assert.equal(read.cells[1].source, 'x = 40\nprint(x + 2)  # 🐍');
    assert.equal(read.cells[2].source, 'y = x * 2\ny');
    const onDisk = JSON.parse(fs.readFileSync(file, 'utf8'));
    assert.equal(onDisk.cells.length, 2, 'nothing is written behind the editor');
    const stale = await client.callTool({
      name: 'edit_cells',
      arguments: { notebookRef: ref, edits: [{ editType: 'edit', cellId: 'load', expectedRev: rev, newCode: 'no' }] },
    });
    assert.equal(stale.isError, true, 'an old rev is refused');
  });
  await step('save_notebooks writes the file', async () => {
    await call('save_notebooks', { notebookRefs: [ref] });
    const onDisk = JSON.parse(fs.readFileSync(file, 'utf8'));
    assert.equal(onDisk.cells.length, 3);
    assert.equal(onDisk.cells[1].id, 'load');
    assert.deepEqual(onDisk.cells[1].metadata.tags, ['keep']);
    assert.equal(onDisk.cells[1].source.join(''), 'x = 40\nprint(x + 2)  # 🐍');
  });
  await step('run_cells runs through the local kernel controller and the output is read back', async () => {
    const receipt = await call('run_cells', { notebookRef: ref, cellIds: ['load', 2], waitMs: 120000 });
    assert.equal(receipt.status, 'completed', JSON.stringify(receipt));
    const read = await call('read_notebook', { notebookRef: ref, view: 'outputs' });
    assert.ok(read.cells[1].outputs.includes('42'), JSON.stringify(read.cells[1]));
    assert.ok(read.cells[2].outputs.includes('80'), JSON.stringify(read.cells[2]));
    assert.equal(read.cells[1].executionState ?? 'success', 'success');
  });
  await step('the outputs reach the file on save', async () => {
    await call('save_notebooks', { notebookRefs: [ref] });
    const onDisk = JSON.parse(fs.readFileSync(file, 'utf8'));
    const load = onDisk.cells[1];
    assert.equal(load.outputs[0].output_type, 'stream');
    assert.equal([].concat(load.outputs[0].text).join(''), '42\n');
    assert.equal(load.execution_count, 1);
    assert.equal(onDisk.cells[2].outputs[0].output_type, 'execute_result');
  });
  await step('a 10 MiB file goes to our controller\'s kernel and back, SHA-256 equal', async () => {
    const crypto = require('crypto');
    const bytes = crypto.randomBytes(10 * 1024 * 1024);
    const digest = crypto.createHash('sha256').update(bytes).digest('hex');
    fs.writeFileSync(path.join(folder, 'payload.bin'), bytes);
    const kernelDir = fs.mkdtempSync(path.join(require('os').tmpdir(), 'jupyter-mcp-e2e-kernel-'));
    const kernelPath = path.join(kernelDir, 'payload.bin');
    const up = await call('upload_file', { notebookRef: ref, hostPath: 'payload.bin', kernelPath });
    assert.equal(up.sha256, digest);
    assert.equal(crypto.createHash('sha256').update(fs.readFileSync(kernelPath)).digest('hex'), digest);
    const down = await call('download_file', { notebookRef: ref, hostPath: 'returned/payload.bin', kernelPath });
    assert.equal(down.sha256, digest);
    const back = fs.readFileSync(path.join(folder, 'returned', 'payload.bin'));
    assert.equal(crypto.createHash('sha256').update(back).digest('hex'), digest);
  });
  await step('a hostPath outside the workspace folders is refused and nothing is written', async () => {
    const outside = path.join(path.dirname(folder), `outside-${process.pid}.bin`);
    const result = await client.callTool({
      name: 'download_file',
      arguments: { notebookRef: ref, hostPath: outside, kernelPath: '/etc/hostname' },
    });
    assert.equal(result.isError, true);
    const body = JSON.parse(result.content[0].text);
    assert.equal(body.error.code, 'path_outside_root', JSON.stringify(body));
    assert.equal(fs.existsSync(outside), false);
  });
  await client.close();
}

finish(main);
