// Jupyter (stand-in for tests): see README.md. Not Microsoft's Jupyter extension.
'use strict';
const vscode = require('vscode');
const crypto = require('crypto');

const NOTEBOOK_TYPE = 'jupyter-notebook';
const STDOUT = 'application/vnd.code.notebook.stdout';
const STDERR = 'application/vnd.code.notebook.stderr';
const ERROR = 'application/vnd.code.notebook.error';

const log = vscode.window.createOutputChannel('Jupyter (stand-in)');

/** Collections registered through `createJupyterServerCollection`, by id. */
const collections = new Map();
const sourcesChanged = new vscode.EventEmitter();
/** Controllers by id: { controller, server, spec, connection }. */
const controllers = new Map();
/** notebook uri string -> { entry, kernel: Promise<Kernel> } for the notebook's selected controller of ours. */
const selections = new Map();

// ---------------------------------------------------------------------------------------------
// Talking to a Jupyter Server (REST and the kernel WebSocket)

function joinUrl(base, path) {
  const text = base.toString();
  return (text.endsWith('/') ? text : `${text}/`) + path;
}

async function rest(connection, method, path, body) {
  const response = await fetch(joinUrl(connection.baseUrl, path), {
    method,
    headers: { ...connection.headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: HTTP ${response.status}`);
  return text ? JSON.parse(text.replace(/^\)\]\}'\n/, '')) : undefined;
}

function message(session, msgType, content, channel) {
  return {
    header: {
      msg_id: crypto.randomUUID(),
      username: 'standin',
      session,
      msg_type: msgType,
      version: '5.3',
      date: new Date().toISOString(),
    },
    parent_header: {},
    metadata: {},
    content,
    channel,
    buffers: [],
  };
}

/** One kernel on a Jupyter Server, its WebSocket opened once; requests are handled one at a time. */
class Kernel {
  constructor(connection, spec, kernelId) {
    this.connection = connection;
    this.spec = spec;
    this.id = kernelId;
    this.session = crypto.randomUUID();
    this.status = 'starting';
    this.listeners = new Map(); // parent msg_id -> function(msg)
    this.queue = Promise.resolve();
    this.socket = undefined;
  }

  static async start(connection, spec) {
    const model = await rest(connection, 'POST', 'api/kernels', { name: spec.name });
    const kernel = new Kernel(connection, spec, model.id);
    await kernel.connect();
    return kernel;
  }

  connect() {
    const url = new URL(joinUrl(this.connection.baseUrl, `api/kernels/${this.id}/channels`));
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    url.searchParams.set('session_id', this.session);
    const token = this.connection.headers['X-Colab-Runtime-Proxy-Token'];
    if (token) url.searchParams.set('colab-runtime-proxy-token', token);
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(url.toString());
      socket.onopen = () => {
        this.socket = socket;
        this.status = 'idle';
        resolve();
      };
      socket.onerror = () => reject(new Error('kernel WebSocket failed'));
      socket.onclose = () => {
        if (this.socket === socket) this.socket = undefined;
        this.status = 'unknown';
        for (const listener of this.listeners.values()) listener(undefined);
      };
      socket.onmessage = (event) => {
        if (typeof event.data !== 'string') return; // binary frames: not used by these kernels
        const msg = JSON.parse(event.data);
        if (msg.msg_type === 'status' || msg.header?.msg_type === 'status') {
          this.status = msg.content.execution_state;
        }
        const parent = msg.parent_header?.msg_id;
        const listener = parent && this.listeners.get(parent);
        if (listener) listener(msg);
      };
    });
  }

  /**
   * Runs `code`, calling `onMessage` with each iopub message of the request; resolves with the
   * execute_reply's content once the reply and the idle status have both arrived.
   */
  execute(code, onMessage) {
    const run = async () => {
      if (!this.socket) await this.connect();
      const request = message(this.session, 'execute_request', {
        code,
        silent: false,
        store_history: true,
        user_expressions: {},
        allow_stdin: false,
        stop_on_error: true,
      }, 'shell');
      return new Promise((resolve, reject) => {
        let reply;
        let idle = false;
        const finish = () => {
          if (reply && idle) {
            this.listeners.delete(request.header.msg_id);
            resolve(reply);
          }
        };
        this.listeners.set(request.header.msg_id, (msg) => {
          if (msg === undefined) {
            this.listeners.delete(request.header.msg_id);
            reject(new Error('kernel WebSocket closed'));
            return;
          }
          const type = msg.header.msg_type;
          if (msg.channel === 'shell' && type === 'execute_reply') {
            reply = msg.content;
            finish();
          } else if (msg.channel === 'iopub') {
            if (type === 'status') {
              if (msg.content.execution_state === 'idle') {
                idle = true;
                finish();
              }
            } else {
              onMessage(msg);
            }
          }
        });
        this.socket.send(JSON.stringify(request));
      });
    };
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }

  interrupt() {
    return rest(this.connection, 'POST', `api/kernels/${this.id}/interrupt`).catch(() => undefined);
  }
}

/** The output items of one iopub message, as `{ mime, data: Uint8Array }`. */
function outputItems(msg) {
  const type = msg.header.msg_type;
  const encode = (text) => new TextEncoder().encode(text);
  if (type === 'stream') {
    return [{ mime: msg.content.name === 'stderr' ? STDERR : STDOUT, data: encode(msg.content.text) }];
  }
  if (type === 'execute_result' || type === 'display_data') {
    return Object.entries(msg.content.data ?? {}).map(([mime, value]) => {
      if (mime === 'application/json' || mime.endsWith('+json')) return { mime, data: encode(JSON.stringify(value)) };
      const text = Array.isArray(value) ? value.join('') : String(value);
      if (mime.startsWith('image/') && mime !== 'image/svg+xml') return { mime, data: new Uint8Array(Buffer.from(text, 'base64')) };
      return { mime, data: encode(text) };
    });
  }
  if (type === 'error') {
    const error = { name: msg.content.ename, message: msg.content.evalue, stack: (msg.content.traceback ?? []).join('\n') };
    return [{ mime: ERROR, data: encode(JSON.stringify(error)) }];
  }
  return undefined; // clear_output, execute_input, comm messages: not outputs
}

// ---------------------------------------------------------------------------------------------
// Controllers

function controllerId(collectionId, server, spec) {
  const safe = (text) => String(text).replace(/[^A-Za-z0-9_.-]/g, '_');
  return `standin-${safe(collectionId)}-${safe(server.id)}-${safe(spec.name)}`;
}

function kernelFor(document, entry) {
  const key = document.uri.toString();
  const current = selections.get(key);
  if (current && current.entry === entry && current.kernel) return current.kernel;
  const kernel = Kernel.start(entry.connection, entry.spec);
  kernel.catch((error) => log.appendLine(`kernel start failed: ${error}`));
  selections.set(key, { entry, kernel });
  return kernel;
}

function ensureController(collectionId, server, connection, spec) {
  const id = controllerId(collectionId, server, spec);
  const known = controllers.get(id);
  if (known) {
    known.connection = connection;
    return id;
  }
  const controller = vscode.notebooks.createNotebookController(id, NOTEBOOK_TYPE, spec.display_name);
  controller.description = server.label;
  controller.detail = `${collectionId} server (stand-in)`;
  controller.supportedLanguages = ['python'];
  controller.supportsExecutionOrder = true;
  const entry = { controller, server, spec, connection };
  controllers.set(id, entry);
  let order = 0;
  controller.executeHandler = async (cells, document) => {
    for (const cell of cells) {
      const execution = controller.createNotebookCellExecution(cell);
      execution.start(Date.now());
      await execution.clearOutput();
      let success = false;
      try {
        const kernel = await kernelFor(document, entry);
        execution.token.onCancellationRequested(() => kernel.interrupt());
        const reply = await kernel.execute(cell.document.getText(), (msg) => {
          if (msg.header.msg_type === 'clear_output') {
            execution.clearOutput();
            return;
          }
          const items = outputItems(msg);
          if (!items) return;
          execution.appendOutput(new vscode.NotebookCellOutput(
            items.map((item) => new vscode.NotebookCellOutputItem(item.data, item.mime)),
            msg.content.metadata ?? {},
          ));
        });
        success = reply.status === 'ok';
        order = reply.execution_count ?? order + 1;
        execution.executionOrder = order;
      } catch (error) {
        log.appendLine(`execution failed: ${error}`);
      }
      execution.end(success, Date.now());
    }
  };
  controller.interruptHandler = async (document) => {
    const selected = selections.get(document.uri.toString());
    if (selected?.kernel) (await selected.kernel).interrupt();
  };
  controller.onDidChangeSelectedNotebooks(({ notebook, selected }) => {
    const key = notebook.uri.toString();
    if (selected) {
      kernelFor(notebook, entry);
    } else if (selections.get(key)?.entry === entry) {
      selections.delete(key);
    }
  });
  return id;
}

// ---------------------------------------------------------------------------------------------
// The picker: Colab (kernel source) → servers → kernels

/** Shows a quick pick and resolves with the accepted item, or undefined when it is hidden. */
function pick({ title, placeholder, items, busyUntil }) {
  return new Promise((resolve) => {
    const quickPick = vscode.window.createQuickPick();
    quickPick.title = title;
    quickPick.placeholder = placeholder;
    quickPick.ignoreFocusOut = true;
    let done = false;
    const finish = (value) => {
      if (done) return;
      done = true;
      resolve(value);
      quickPick.hide();
      quickPick.dispose();
    };
    quickPick.onDidAccept(() => finish(quickPick.selectedItems[0]));
    quickPick.onDidHide(() => finish(undefined));
    if (busyUntil) {
      quickPick.busy = true;
      busyUntil.then((loaded) => {
        quickPick.items = loaded;
        quickPick.busy = false;
      }, (error) => {
        log.appendLine(`loading the pick failed: ${error}`);
        finish(undefined);
      });
    } else {
      quickPick.items = items;
    }
    quickPick.show();
  });
}

async function connectionOf(collection, server) {
  const token = new vscode.CancellationTokenSource().token;
  const resolved = (await collection.serverProvider.resolveJupyterServer?.(server, token)) ?? server;
  const info = resolved.connectionInformation;
  if (!info) throw new Error('the server has no connection information');
  return { baseUrl: info.baseUrl.toString(), headers: { ...(info.headers ?? {}) } };
}

/** The command behind the collection's kernel source: returns the chosen controller's id. */
async function chooseFromCollection(collectionId) {
  const collection = collections.get(collectionId);
  if (!collection) return undefined;
  const token = new vscode.CancellationTokenSource().token;
  const commands = (await collection.commandProvider?.provideCommands(undefined, token)) ?? [];
  const servers = (await collection.serverProvider.provideJupyterServers(token)) ?? [];
  const chosen = await pick({
    title: collection.label,
    placeholder: 'Select a Jupyter Server',
    items: [
      ...commands.map((command) => ({ label: command.label, description: command.description, command })),
      ...servers.map((server) => ({ label: server.label, server })),
    ],
  });
  if (!chosen) return undefined;
  let server = chosen.server;
  if (chosen.command) {
    server = await collection.commandProvider.handleCommand(chosen.command, token);
    if (!server) return undefined;
  }
  const connection = await connectionOf(collection, server);
  const specs = rest(connection, 'GET', 'api/kernelspecs').then((answer) =>
    Object.values(answer.kernelspecs ?? {})
      .map((spec) => ({ name: spec.name, display_name: spec.spec?.display_name ?? spec.name, language: spec.spec?.language }))
      .sort((a, b) => a.display_name.localeCompare(b.display_name))
      .map((spec) => ({ label: spec.display_name, spec })),
  );
  const kernel = await pick({ title: `Select a Kernel from ${server.label}`, placeholder: 'Select a kernel', busyUntil: specs });
  if (!kernel) return undefined;
  return ensureController(collectionId, server, connection, kernel.spec);
}

// ---------------------------------------------------------------------------------------------
// The API other extensions use

function createJupyterServerCollection(id, label, serverProvider) {
  const collection = {
    id,
    label,
    serverProvider,
    commandProvider: undefined,
    documentation: undefined,
    dispose() {
      collections.delete(id);
      sourcesChanged.fire();
    },
  };
  collections.set(id, collection);
  context.subscriptions.push(vscode.commands.registerCommand(`jupyter.standin.kernelSource.${id}`, () => chooseFromCollection(id)));
  sourcesChanged.fire();
  return collection;
}

/** One API object per kernel, as the real extension keeps them (a WeakMap by kernel). */
const apiKernels = new WeakMap();

/** What the real extension's `kernels.getKernel(uri)` returns, for our controllers only. */
async function getKernel(uri) {
  const selected = selections.get(uri.toString());
  if (!selected) return undefined;
  const kernel = await selected.kernel.catch(() => undefined);
  if (!kernel) return undefined;
  if (!apiKernels.has(kernel)) apiKernels.set(kernel, apiKernel(selected, kernel));
  return apiKernels.get(kernel);
}

function apiKernel(selected, kernel) {
  return {
    get label() {
      return selected.entry.spec.display_name;
    },
    language: 'python',
    get status() {
      return kernel.status;
    },
    executeCode(code, token) {
      return executeCode(kernel, code, token);
    },
  };
}

async function* executeCode(kernel, code, token) {
  const outputs = [];
  let wake;
  let finished = false;
  let failure;
  const done = kernel.execute(code, (msg) => {
    const items = outputItems(msg);
    if (!items) return;
    outputs.push({ items, metadata: msg.content.metadata ?? {} });
    if (wake) wake();
  }).then(() => {
    finished = true;
  }, (error) => {
    finished = true;
    failure = error;
  }).finally(() => wake && wake());
  token?.onCancellationRequested?.(() => kernel.interrupt());
  while (true) {
    while (outputs.length) yield outputs.shift();
    if (finished) break;
    await new Promise((resolve) => {
      wake = resolve;
      if (outputs.length || finished) resolve();
    });
    wake = undefined;
  }
  await done;
  while (outputs.length) yield outputs.shift();
  if (failure) throw failure;
}

let context;

function activate(extensionContext) {
  context = extensionContext;
  context.subscriptions.push(log, sourcesChanged);
  context.subscriptions.push(vscode.notebooks.registerKernelSourceActionProvider(NOTEBOOK_TYPE, {
    onDidChangeNotebookKernelSourceActions: sourcesChanged.event,
    provideNotebookKernelSourceActions() {
      return [...collections.values()].map((collection) => ({
        label: collection.label,
        command: `jupyter.standin.kernelSource.${collection.id}`,
      }));
    },
  }));
  return { createJupyterServerCollection, kernels: { getKernel } };
}

module.exports = { activate };
