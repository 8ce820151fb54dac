// The shared-port check of `cargo xtask e2e-vscode`: a standalone jupyter-mcp server started on
// the VS Code window's port has joined it as a peer, and the one URL serves both.
// Usage: node e2e/shared-port.js MCP_URL STANDALONE_ROOT
'use strict';
const assert = require('node:assert/strict');
const { connect } = require('./harness.js');

const [url] = process.argv.slice(2);

async function main() {
  const { client, call } = await connect(url, 'e2e-vscode-shared-port');
  const listing = await call('list_notebooks', {});
  assert.equal(listing.windows.length, 2, JSON.stringify(listing));
  const standalone = listing.windows.find((window) =>
    window.notebooks.some((notebook) => notebook.path === 'getting-started.ipynb'));
  assert.ok(standalone, `the standalone server's window is listed: ${JSON.stringify(listing)}`);
  const vscodeWindow = listing.windows.find((window) => window !== standalone);
  assert.ok(vscodeWindow.notebooks.some((notebook) => notebook.path === 'analysis.ipynb'), JSON.stringify(listing));
  const entry = standalone.notebooks.find((notebook) => notebook.path === 'getting-started.ipynb');
  const read = await call('read_notebook', { notebookRef: entry.notebookRef });
  assert.ok(read.cells.length > 0, JSON.stringify(read));
  console.log(`ok - one URL serves the VS Code window and a standalone peer (${listing.windows.length} windows, ${read.cells.length} cells read through the broker)`);
  await client.close();
}

main()
  .then(() => process.exit(0))
  .catch((error) => {
    console.log(`not ok - ${error && error.stack ? error.stack : error}`);
    process.exit(1);
  });
