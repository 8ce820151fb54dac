// The Colab phase of `cargo xtask e2e-vscode`: a real MCP client against the extension in a
// code-server window whose Jupyter and Colab extensions are our stand-ins (e2e/colab/, named as
// stand-ins) and whose runtimes come from the Colab runtime stand-in (tests/colab/standin.py).
// The extension's native driver operates the real workbench picker over Chromium's loopback
// DevTools port; this test uses the same port only for its own moves (reloading the window,
// opening terminals through the palette) and to look at what the workbench shows.
// Usage (Node 24): node e2e/colab-e2e.js MCP_URL PROJECT_FOLDER DEVTOOLS_PORT STANDIN_URL
'use strict';
const assert = require('node:assert/strict');
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { pathToFileURL } = require('url');
const { step, finish, connect } = require('./harness.js');
const { Page } = require('./colab/cdp.js');

const [url, folder, devtoolsPort, standinUrl] = process.argv.slice(2);
const SCENARIO = path.join(folder, '.colab-stand-in.json');
const WORKSPACE_FILE = path.join(path.dirname(folder), 'colab.code-workspace');
const ALIAS = /^m[0-9a-f]{8}$/;

// Every tool name and receipt field the test relies on, in one place (the lead finalises them).
const TOOLS = {
  configure: 'configure_kernel',
  poll: 'get_kernel_setup',
  list: 'list_setup_kernels',
  select: 'select_setup_kernel',
  cancel: 'cancel_kernel_setup',
  check: 'check_colab',
  mount: 'mount_colab_server',
  preflight: 'inspect_colab_environment_preflight',
  terminals: 'list_colab_terminals',
  closeTerminals: 'close_colab_terminals',
  prepare: 'prepare_colab_environment',
  preparation: 'get_colab_environment_preparation',
};
const choicesOf = (listing) => listing.kernelChoices?.choices ?? listing.choices ?? [];
const blockerOf = (receipt) => receipt.error?.code ?? receipt.blocker?.code ?? receipt.failure?.code ?? receipt.blocker;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what, check, timeoutMs = 60000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await check();
      if (last) return last;
    } catch (error) {
      last = error;
    }
    await sleep(250);
  }
  throw new Error(`timed out waiting for ${what}; last: ${last && last.stack ? last.stack : JSON.stringify(last)}`);
}

/** The runtime stand-in's control endpoints (no auth; its CA comes in NODE_EXTRA_CA_CERTS). */
async function standin(method, control) {
  const response = await fetch(new URL(`standin/${control}`, standinUrl), { method });
  assert.equal(response.status, 200, `stand-in ${control}`);
  return response.json();
}

/** One MCP session; `connect` again after the window reloads (the extension host restarts). */
class Session {
  async connect() {
    this.client = await until('the window\'s MCP server', async () => {
      const { client } = await connect(url, 'e2e-vscode-colab');
      await client.listTools();
      return client;
    }, 120000);
  }

  async raw(name, args) {
    const result = await this.client.callTool({ name, arguments: args });
    return { isError: result.isError === true, body: JSON.parse(result.content[0].text) };
  }

  async call(name, args) {
    const { isError, body } = await this.raw(name, args);
    assert.ok(!isError, `${name} failed: ${JSON.stringify(body)}`);
    return body;
  }

  async notebookRef(file) {
    const listing = await this.call('list_notebooks', {});
    const entry = listing.windows.flatMap((window) => window.notebooks).find((notebook) => notebook.path === file);
    return entry?.notebookRef;
  }

  async open(file) {
    await this.call('open_notebooks', { uris: [pathToFileURL(path.join(folder, file)).toString()] });
    const ref = await this.notebookRef(file);
    assert.ok(ref, `${file} listed`);
    return ref;
  }

  /** get_kernel_setup until `done(receipt)`. */
  async follow(notebookRef, setupId, done, timeoutMs = 180000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const receipt = await this.call(TOOLS.poll, { notebookRef, setupId, waitMs: 5000 });
      if (done(receipt) || Date.now() > deadline) return receipt;
    }
  }

  /** configure_kernel (runtime colab) followed to the kernel choice, then the first Python choice. */
  async setUp(notebookRef, extra = {}) {
    const started = await this.call(TOOLS.configure, { notebookRef, runtime: 'colab', ...extra });
    const setupId = started.setupId;
    assert.ok(setupId, JSON.stringify(started));
    const awaiting = started.status === 'running'
      ? await this.follow(notebookRef, setupId, (receipt) => receipt.status !== 'running')
      : started;
    assert.equal(awaiting.status, 'awaiting_kernel_selection', JSON.stringify(awaiting));
    const choices = choicesOf(await this.call(TOOLS.list, { notebookRef, setupId }));
    const python = choices.filter((choice) => choice.label.includes('Python 3 (ipykernel)'));
    assert.equal(python.length, 1, `one Python choice: ${JSON.stringify(choices)}`);
    const selected = await this.call(TOOLS.select, { notebookRef, setupId, kernelChoiceId: python[0].kernelChoiceId, waitMs: 60000 });
    const settled = selected.status === 'running'
      ? await this.follow(notebookRef, setupId, (receipt) => receipt.status !== 'running')
      : selected;
    return { awaiting, choices, settled };
  }
}

async function main() {
  const session = new Session();
  await session.connect();
  let page = await Page.connect(devtoolsPort);
  const before = await standin('GET', 'state');
  let ref;
  let alias;

  await step('tools/list lists the Colab tools in a window with the Colab (stand-in) extension', async () => {
    const { tools } = await session.client.listTools();
    const names = tools.map((tool) => tool.name);
    for (const name of Object.values(TOOLS)) assert.ok(names.includes(name), `${name} missing: ${names}`);
  });

  let preparationId;
  await step('prepare_colab_environment keeps the window\'s workspace and binds the native connection to it', async () => {
    const prepared = await session.call(TOOLS.prepare, {});
    assert.equal(prepared.status, 'ready', JSON.stringify(prepared));
    assert.equal(prepared.environmentReady, true, JSON.stringify(prepared));
    assert.equal(prepared.converted, false);
    assert.equal(prepared.nativeBound, true);
    assert.equal(prepared.folderUri, pathToFileURL(folder).toString());
    preparationId = prepared.preparationId;
    const refused = await session.raw(TOOLS.prepare, { restartMode: 'restore-clean-workspace' });
    assert.equal(refused.isError, true);
    assert.equal(refused.body.error.code, 'not_supported', JSON.stringify(refused.body));
  });

  await step('open_notebooks opens the notebook; nothing has a kernel yet', async () => {
    ref = await session.open('analysis.ipynb');
    fs.copyFileSync(path.join(folder, 'analysis.ipynb'), path.join(folder, 'second.ipynb'));
  });

  await step('configure_kernel runtime colab: the driver walks Colab → New Colab Server → CPU → alias, then waits for a kernel choice', async () => {
    const { awaiting, settled } = await session.setUp(ref);
    assert.match(awaiting.serverAlias, ALIAS, JSON.stringify(awaiting));
    alias = awaiting.serverAlias;
    assert.equal(settled.status, 'ready', JSON.stringify(settled));
    assert.equal(settled.ready, true, JSON.stringify(settled));
    assert.equal(settled.verification?.verified, true, JSON.stringify(settled));
    assert.equal(settled.serverAlias, alias);
    // The runtime stand-in assigned exactly one runtime through its tunnel API, and its kernel runs.
    const state = await standin('GET', 'state');
    assert.equal(state.counters.assign_post, before.counters.assign_post + 1, JSON.stringify(state.counters));
    const runtimes = Object.values(state.runtimes).filter((runtime) => runtime.kernels.length > 0);
    assert.equal(runtimes.length, 1, JSON.stringify(state.runtimes));
    // Nothing of the picker is left open, and the server is mounted under its alias.
    assert.equal((await page.snapshot()).visible, false);
    const workspace = JSON.parse(fs.readFileSync(WORKSPACE_FILE, 'utf8'));
    const mounted = workspace.folders.filter((entry) => String(entry.uri ?? '').startsWith('colab://'));
    assert.deepEqual(mounted.map((entry) => entry.name), [alias], JSON.stringify(workspace));
  });

  await step('a cell runs on the Colab kernel and its output is read back', async () => {
    const receipt = await session.call('run_cells', { notebookRef: ref, cellIds: ['load'], waitMs: 60000 });
    assert.equal(receipt.status, 'completed', JSON.stringify(receipt));
    const read = await session.call('read_notebook', { notebookRef: ref, view: 'outputs' });
    assert.ok(read.cells[1].outputs.includes('42'), JSON.stringify(read.cells[1]));
    const info = await session.call('get_kernel_info', { notebookRef: ref });
    assert.ok(JSON.stringify(info.colabRootCandidates ?? []).includes('colab://'), JSON.stringify(info));
  });

  await step('check_colab verifies the kernel through the colab:// file system', async () => {
    const check = await session.call(TOOLS.check, { notebookRef: ref });
    assert.equal(check.verified, true, JSON.stringify(check));
  });

  await step('a 6 MiB file goes up and back through the native colab:// route, SHA-256 equal', async () => {
    const bytes = crypto.randomBytes(6 * 1024 * 1024);
    const digest = crypto.createHash('sha256').update(bytes).digest('hex');
    fs.writeFileSync(path.join(folder, 'payload6.bin'), bytes);
    const up = await session.call('upload_file', { notebookRef: ref, hostPath: 'payload6.bin', kernelPath: '/content/payload6.bin' });
    assert.equal(up.sha256, digest, JSON.stringify(up));
    // Above 4 MiB the bytes go through the Colab file system, not the kernel channel.
    assert.equal(up.route, 'contents', JSON.stringify(up));
    const down = await session.call('download_file', { notebookRef: ref, hostPath: 'returned/payload6.bin', kernelPath: '/content/payload6.bin' });
    assert.equal(down.sha256, digest, JSON.stringify(down));
    assert.equal(down.route, 'contents', JSON.stringify(down));
    const back = fs.readFileSync(path.join(folder, 'returned', 'payload6.bin'));
    assert.equal(crypto.createHash('sha256').update(back).digest('hex'), digest);
  });

  await step('after a window reload, configure_kernel with serverAlias reuses exactly that server', async () => {
    await session.call('save_notebooks', { notebookRefs: [ref] });
    await page.reload();
    page.close();
    page = await until('the reloaded page target', () => Page.connect(devtoolsPort), 60000);
    await session.connect();
    // The reloaded window may or may not restore the notebook's editor.
    ref = (await session.notebookRef('analysis.ipynb')) ?? (await session.open('analysis.ipynb'));
    // The preparation's receipt outlived the extension host, and still holds.
    const again = await session.call(TOOLS.preparation, { preparationId });
    assert.equal(again.environmentReady, true, JSON.stringify(again));
    const counters = (await standin('GET', 'state')).counters;
    const { settled } = await session.setUp(ref, { serverAlias: alias });
    assert.equal(settled.status, 'ready', JSON.stringify(settled));
    assert.equal(settled.serverAlias, alias);
    assert.equal(settled.serverCreated, false, JSON.stringify(settled));
    assert.equal((await standin('GET', 'state')).counters.assign_post, counters.assign_post, 'no new server');
  });

  let second;
  await step('cancel_kernel_setup mid-setup ends cancelled and selects nothing', async () => {
    second = await session.open('second.ipynb');
    // The runtime stand-in holds the assignment until released: the setup is surely mid-way.
    await standin('POST', 'assign-mode?mode=stuck');
    try {
      const started = await session.call(TOOLS.configure, { notebookRef: second, runtime: 'colab' });
      const setupId = started.setupId;
      await until('the assignment request', async () => (await standin('GET', 'state')).counters.assign_get > 0 && (await session.call(TOOLS.poll, { notebookRef: second, setupId })).status === 'running');
      const cancelled = await session.call(TOOLS.cancel, { notebookRef: second, setupId });
      const final = cancelled.status === 'cancelled' && !cancelled.cleanupPending
        ? cancelled
        : await session.follow(second, setupId, (receipt) => receipt.status !== 'running' && !receipt.cleanupPending);
      assert.equal(final.status, 'cancelled', JSON.stringify(final));
    } finally {
      await standin('POST', 'assign-mode?mode=ok');
    }
    // The provider gives up on the released request and the workbench may reopen its source
    // picker: the driver leaves nothing open once it settles.
    await until('no quick input left open', async () => !(await page.snapshot()).visible, 30000);
    const info = await session.raw('get_kernel_info', { notebookRef: second });
    assert.ok(!JSON.stringify(info.body).includes('ipykernel'), `no kernel selected: ${JSON.stringify(info.body)}`);
  });

  await step('an unexpected prompt in the picker ends the setup failed with a named blocker, nothing selected', async () => {
    fs.writeFileSync(SCENARIO, JSON.stringify({ unexpectedPrompt: true }));
    try {
      const counters = (await standin('GET', 'state')).counters;
      const started = await session.call(TOOLS.configure, { notebookRef: second, runtime: 'colab' });
      // Settled, and its cleanup (the picker's dismissal) done.
      const final = await session.follow(second, started.setupId, (receipt) => !['running', 'awaiting_kernel_selection'].includes(receipt.status) && !receipt.cleanupPending);
      assert.equal(final.status, 'failed', JSON.stringify(final));
      assert.match(String(blockerOf(final)), /unexpected/, JSON.stringify(final));
      assert.ok(final.failedProviderStep, JSON.stringify(final));
      assert.equal((await standin('GET', 'state')).counters.assign_post, counters.assign_post, 'no server');
      await until('no quick input left open', async () => !(await page.snapshot()).visible, 30000);
      const info = await session.raw('get_kernel_info', { notebookRef: second });
      assert.ok(!JSON.stringify(info.body).includes('ipykernel'), `no kernel selected: ${JSON.stringify(info.body)}`);
    } finally {
      fs.rmSync(SCENARIO, { force: true });
    }
  });

  await step('two terminals opened in the window are listed, one closed, and the preflight counts them', async () => {
    const preflightBefore = await session.call(TOOLS.preflight, {});
    assert.equal(preflightBefore.windows.length, 1);
    const windowBefore = preflightBefore.windows[0];
    assert.equal(windowBefore.status, 'available');
    assert.equal(windowBefore.colabExtension, true);
    assert.equal(windowBefore.terminals, 0, JSON.stringify(windowBefore));
    assert.equal(windowBefore.notebooks.open, 2, JSON.stringify(windowBefore));
    assert.equal(windowBefore.workspace.isWorkspace, true);
    assert.equal(windowBefore.workspace.localFolders, 1);
    assert.equal(windowBefore.workspace.colabFolders, 1);
    assert.equal(windowBefore.native.configured, true);
    assert.equal(windowBefore.native.pageCandidates, 1, JSON.stringify(windowBefore.native));
    for (let opened = 1; opened <= 2; opened += 1) {
      await page.runCommand('Colab: Open Terminal');
      await until(`terminal ${opened}`, async () => (await session.call(TOOLS.terminals, {})).terminals.length === opened, 30000);
    }
    const inventory = await session.call(TOOLS.terminals, {});
    assert.deepEqual(inventory.terminals.map((terminal) => terminal.name), [`Colab: ${alias}`, `Colab: ${alias}`]);
    const closed = await session.call(TOOLS.closeTerminals, { inventoryId: inventory.inventoryId, terminalRefs: [inventory.terminals[0].terminalRef] });
    assert.deepEqual(closed.results.map((result) => result.outcome), ['closed'], JSON.stringify(closed));
    assert.equal(closed.partial, false);
    assert.equal((await session.call(TOOLS.terminals, {})).terminals.length, 1);
    const preflightAfter = await session.call(TOOLS.preflight, {});
    assert.equal(preflightAfter.windows[0].terminals, 1, JSON.stringify(preflightAfter.windows[0]));
  });

  page.close();
  await session.client.close();
}

finish(main);
