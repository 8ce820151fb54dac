// A STAND-IN for the `vscode` module, for the extension's unit tests: VS Code itself cannot run
// here. It imitates the parts of the API the extension uses, with VS Code's rules where they
// matter to what is tested: the cell indices of one workspace edit refer to the document before
// it, a document's version moves with every change, a controller may write outputs only to
// notebooks it is selected for, and `.ipynb` files are read and written as the built-in ipynb
// extension does (metadata layout, outputs, raw cells, language ids).
'use strict';
const fs = require('fs');
const path = require('path');
const Module = require('module');

function encodePath(text) {
  return text.replace(/[^A-Za-z0-9\-._~/]/g, (character) =>
    Array.from(Buffer.from(character, 'utf8'))
      .map((byte) => '%' + byte.toString(16).toUpperCase().padStart(2, '0'))
      .join(''),
  );
}

class Uri {
  constructor(scheme, uriPath, fragment = '') {
    this.scheme = scheme;
    this.path = uriPath;
    this.fragment = fragment;
  }
  static parse(text) {
    const colon = text.indexOf(':');
    const scheme = text.slice(0, colon);
    let rest = text.slice(colon + 1);
    let fragment = '';
    const hash = rest.indexOf('#');
    if (hash >= 0) {
      fragment = decodeURIComponent(rest.slice(hash + 1));
      rest = rest.slice(0, hash);
    }
    if (rest.startsWith('//')) rest = rest.slice(rest.indexOf('/', 2));
    return new Uri(scheme, decodeURIComponent(rest), fragment);
  }
  static file(filePath) {
    return new Uri('file', filePath);
  }
  get fsPath() {
    return this.path;
  }
  with(change) {
    return new Uri(change.scheme ?? this.scheme, change.path ?? this.path, change.fragment ?? this.fragment);
  }
  toString() {
    const fragment = this.fragment ? '#' + encodeURIComponent(this.fragment) : '';
    if (this.scheme === 'file') return 'file://' + encodePath(this.path) + fragment;
    return this.scheme + ':' + encodePath(this.path) + fragment;
  }
}

class EventEmitter {
  constructor() {
    this.listeners = [];
    this.event = (listener) => {
      this.listeners.push(listener);
      return { dispose: () => (this.listeners = this.listeners.filter((other) => other !== listener)) };
    };
  }
  fire(value) {
    for (const listener of [...this.listeners]) listener(value);
  }
}

class Range {
  constructor(startLine, startCharacter, endLine, endCharacter) {
    Object.assign(this, { startLine, startCharacter, endLine, endCharacter });
  }
}
class NotebookRange {
  constructor(start, end) {
    Object.assign(this, { start, end });
  }
}
const NotebookCellKind = { Markup: 1, Code: 2 };
class NotebookCellData {
  constructor(kind, value, languageId) {
    Object.assign(this, { kind, value, languageId, metadata: {}, outputs: [] });
  }
}
class NotebookCellOutputItem {
  constructor(data, mime) {
    this.data = data;
    this.mime = mime;
  }
}
class NotebookCellOutput {
  constructor(items, metadata) {
    this.items = items;
    this.metadata = metadata;
  }
}
const NotebookEdit = {
  replaceCells: (range, newCells) => ({ kind: 'replace', range, newCells }),
  updateCellMetadata: (index, newCellMetadata) => ({ kind: 'cellMetadata', index, newCellMetadata }),
  updateNotebookMetadata: (newNotebookMetadata) => ({ kind: 'notebookMetadata', newNotebookMetadata }),
};
class WorkspaceEdit {
  constructor() {
    this.textEdits = [];
    this.notebookEdits = [];
  }
  replace(uri, range, text) {
    this.textEdits.push({ uri, range, text });
  }
  set(uri, edits) {
    this.notebookEdits.push({ uri, edits });
  }
}

// ---- Documents ------------------------------------------------------------------------------

/** What a test starts from: no documents, the given folders and settings. */
function freshState({ folders = [], settings = {} } = {}) {
  return {
    documents: [],
    folders,
    settings,
    extensions: {},
    activeEditor: undefined,
    reveals: [],
    selectedThroughEditor: [],
    statusItems: [],
    outputLines: [],
    messages: [],
    clipboard: '',
    controllers: [],
    commands: new Map(),
    jupyter: undefined,
  };
}

// The counters run on across resets, so a handle or untitled name is never reused.
const state = { ...freshState(), handleCounter: 0, untitledCounter: 0 };
const onDidChangeConfiguration = new EventEmitter();
const onDidOpenNotebookDocument = new EventEmitter();
const onDidChangeNotebookDocument = new EventEmitter();
const onDidCloseNotebookDocument = new EventEmitter();

function offsetOf(text, line, character) {
  const lines = text.split('\n');
  let offset = 0;
  for (let index = 0; index < line; index += 1) offset += lines[index].length + 1;
  // Characters are UTF-16 code units, as JavaScript strings count them.
  return offset + character;
}

class TextDocument {
  constructor(cell, text, languageId) {
    this.cell = cell;
    this.text = text;
    this.languageId = languageId;
    state.handleCounter += 1;
    this.uri = new Uri('vscode-notebook-cell', cell.notebook.uri.path, `W${state.handleCounter}sZmlsZQ==`);
  }
  getText() {
    return this.text;
  }
}

class NotebookCell {
  constructor(notebook, data) {
    this.notebook = notebook;
    this.kind = data.kind;
    this.document = new TextDocument(this, data.value, data.languageId);
    this.metadata = data.metadata ?? {};
    this.outputs = data.outputs ?? [];
    this.executionSummary = data.executionSummary;
  }
  get index() {
    return this.notebook.cells.indexOf(this);
  }
}

class NotebookDocument {
  constructor(uri, data) {
    this.uri = uri;
    this.notebookType = 'jupyter-notebook';
    this.version = 1;
    this.isDirty = false;
    this.metadata = data.metadata ?? {};
    this.cells = data.cells.map((cell) => new NotebookCell(this, cell));
  }
  get isUntitled() {
    return this.uri.scheme === 'untitled';
  }
  get cellCount() {
    return this.cells.length;
  }
  getCells() {
    return [...this.cells];
  }
  cellAt(index) {
    return this.cells[index];
  }
  changed() {
    this.version += 1;
    this.isDirty = true;
    onDidChangeNotebookDocument.fire({ notebook: this });
  }
  async save() {
    if (this.isUntitled) return false;
    fs.writeFileSync(this.uri.fsPath, serializeIpynb(this));
    this.isDirty = false;
    return true;
  }
}

// ---- The ipynb extension's mapping, as a stand-in -------------------------------------------

const joined = (value) => (Array.isArray(value) ? value.join('') : value ?? '');

function outputFromIpynb(output) {
  const type = output.output_type;
  if (type === 'stream') {
    const mime = output.name === 'stderr' ? 'application/vnd.code.notebook.stderr' : 'application/vnd.code.notebook.stdout';
    return new NotebookCellOutput([new NotebookCellOutputItem(Buffer.from(joined(output.text)), mime)], { outputType: 'stream' });
  }
  if (type === 'error') {
    const error = { name: output.ename, message: output.evalue, stack: (output.traceback ?? []).join('\n') };
    return new NotebookCellOutput(
      [new NotebookCellOutputItem(Buffer.from(JSON.stringify(error)), 'application/vnd.code.notebook.error')],
      { outputType: 'error', originalError: output },
    );
  }
  const items = Object.entries(output.data ?? {}).map(([mime, value]) => {
    if (mime.startsWith('image/') && !mime.startsWith('image/svg')) return new NotebookCellOutputItem(Buffer.from(joined(value), 'base64'), mime);
    if (mime === 'application/json' || mime.endsWith('+json')) return new NotebookCellOutputItem(Buffer.from(JSON.stringify(value)), mime);
    return new NotebookCellOutputItem(Buffer.from(joined(value)), mime);
  });
  const metadata = { outputType: type, metadata: output.metadata ?? {} };
  if (type === 'execute_result') metadata.executionCount = output.execution_count ?? null;
  return new NotebookCellOutput(items, metadata);
}

function outputToIpynb(output) {
  const item = output.items.find((candidate) => candidate.mime.startsWith('application/vnd.code.notebook.std'));
  if (item) {
    return { output_type: 'stream', name: item.mime.endsWith('stderr') ? 'stderr' : 'stdout', text: Buffer.from(item.data).toString() };
  }
  const error = output.items.find((candidate) => candidate.mime === 'application/vnd.code.notebook.error');
  if (error) {
    if (output.metadata?.originalError) return output.metadata.originalError;
    const parsed = JSON.parse(Buffer.from(error.data).toString());
    return { output_type: 'error', ename: parsed.name, evalue: parsed.message, traceback: parsed.stack.split('\n') };
  }
  const data = {};
  for (const candidate of output.items) {
    const text = Buffer.from(candidate.data).toString();
    if (candidate.mime.startsWith('image/') && !candidate.mime.startsWith('image/svg')) data[candidate.mime] = Buffer.from(candidate.data).toString('base64');
    else if (candidate.mime === 'application/json' || candidate.mime.endsWith('+json')) data[candidate.mime] = JSON.parse(text);
    else data[candidate.mime] = text;
  }
  const result = { output_type: output.metadata?.outputType ?? 'display_data', data, metadata: output.metadata?.metadata ?? {} };
  if (result.output_type === 'execute_result') result.execution_count = output.metadata?.executionCount ?? null;
  return result;
}

function deserializeIpynb(text) {
  const notebook = text.trim() ? JSON.parse(text) : { cells: [], metadata: {}, nbformat: 4, nbformat_minor: 5 };
  const language = notebook.metadata?.kernelspec?.language ?? notebook.metadata?.language_info?.name ?? 'python';
  return {
    metadata: { metadata: notebook.metadata ?? {}, nbformat: notebook.nbformat, nbformat_minor: notebook.nbformat_minor },
    cells: notebook.cells.map((cell) => {
      const metadata = { metadata: cell.metadata ?? {} };
      if (cell.id) metadata.id = cell.id;
      if (cell.attachments) metadata.attachments = cell.attachments;
      if (cell.cell_type === 'markdown') {
        return { kind: NotebookCellKind.Markup, value: joined(cell.source), languageId: 'markdown', metadata, outputs: [] };
      }
      if (cell.cell_type === 'raw') {
        return { kind: NotebookCellKind.Code, value: joined(cell.source), languageId: 'raw', metadata, outputs: [] };
      }
      metadata.execution_count = cell.execution_count ?? null;
      return {
        kind: NotebookCellKind.Code,
        value: joined(cell.source),
        languageId: cell.metadata?.vscode?.languageId ?? language,
        metadata,
        outputs: (cell.outputs ?? []).map(outputFromIpynb),
        executionSummary: cell.execution_count ? { executionOrder: cell.execution_count } : undefined,
      };
    }),
  };
}

function serializeIpynb(document) {
  const meta = document.metadata ?? {};
  const split = (text) => text.split(/(?<=\n)/).filter((line) => line !== '');
  const cells = document.cells.map((cell) => {
    const metadata = cell.metadata ?? {};
    const base = { metadata: metadata.metadata ?? {}, source: split(cell.document.getText()) };
    if (metadata.id) base.id = metadata.id;
    if (metadata.attachments) base.attachments = metadata.attachments;
    if (cell.kind === NotebookCellKind.Markup) return { cell_type: 'markdown', ...base };
    if (cell.document.languageId === 'raw') return { cell_type: 'raw', ...base };
    return {
      cell_type: 'code',
      execution_count: metadata.execution_count ?? cell.executionSummary?.executionOrder ?? null,
      ...base,
      outputs: cell.outputs.map(outputToIpynb),
    };
  });
  const notebook = { cells, metadata: meta.metadata ?? {}, nbformat: meta.nbformat ?? 4, nbformat_minor: meta.nbformat_minor ?? 5 };
  return JSON.stringify(notebook, null, 1) + '\n';
}

// ---- Edits ----------------------------------------------------------------------------------

function applyEdit(edit) {
  // Validate everything first: a refused edit changes nothing.
  const touched = new Set();
  for (const text of edit.textEdits) {
    const cell = state.documents.flatMap((document) => document.cells).find((candidate) => candidate.document.uri.toString() === text.uri.toString());
    if (!cell) return false;
    text.cell = cell;
  }
  for (const group of edit.notebookEdits) {
    const document = state.documents.find((candidate) => candidate.uri.toString() === group.uri.toString());
    if (!document) return false;
    group.document = document;
    for (const notebookEdit of group.edits) {
      if (notebookEdit.kind === 'replace' && (notebookEdit.range.start > notebookEdit.range.end || notebookEdit.range.end > document.cells.length)) return false;
      if (notebookEdit.kind === 'cellMetadata' && notebookEdit.index >= document.cells.length) return false;
    }
  }
  for (const text of edit.textEdits) {
    const source = text.cell.document.text;
    const start = offsetOf(source, text.range.startLine, text.range.startCharacter);
    const end = offsetOf(source, text.range.endLine, text.range.endCharacter);
    text.cell.document.text = source.slice(0, start) + text.text + source.slice(end);
    touched.add(text.cell.notebook);
  }
  for (const group of edit.notebookEdits) {
    const document = group.document;
    const before = [...document.cells];
    // As VS Code does: indices refer to the document before the edit; apply from the end.
    const ordered = [...group.edits].sort((left, right) => indexOf(right) - indexOf(left));
    for (const notebookEdit of ordered) {
      if (notebookEdit.kind === 'cellMetadata') before[notebookEdit.index].metadata = notebookEdit.newCellMetadata;
      if (notebookEdit.kind === 'notebookMetadata') document.metadata = notebookEdit.newNotebookMetadata;
      if (notebookEdit.kind === 'replace') {
        const cells = notebookEdit.newCells.map((data) => new NotebookCell(document, data));
        document.cells.splice(notebookEdit.range.start, notebookEdit.range.end - notebookEdit.range.start, ...cells);
      }
    }
    touched.add(document);
  }
  for (const document of touched) document.changed();
  return true;
}

function indexOf(notebookEdit) {
  if (notebookEdit.kind === 'replace') return notebookEdit.range.start;
  if (notebookEdit.kind === 'cellMetadata') return notebookEdit.index;
  return -1;
}

// ---- Controllers ----------------------------------------------------------------------------

function createNotebookController(id, notebookType, label) {
  const selectionChanged = new EventEmitter();
  const controller = {
    id,
    notebookType,
    label,
    selectedFor: new Set(),
    affinities: new Map(),
    executeHandler: undefined,
    interruptHandler: undefined,
    onDidChangeSelectedNotebooks: selectionChanged.event,
    updateNotebookAffinity(document, affinity) {
      this.affinities.set(document.uri.toString(), affinity);
    },
    select(document) {
      this.selectedFor.add(document.uri.toString());
      selectionChanged.fire({ notebook: document, selected: true });
    },
    deselect(document) {
      this.selectedFor.delete(document.uri.toString());
      selectionChanged.fire({ notebook: document, selected: false });
    },
    createNotebookCellExecution(cell) {
      if (!this.selectedFor.has(cell.notebook.uri.toString())) throw new Error('notebook controller is NOT associated to notebook');
      let started = false;
      return {
        executionOrder: undefined,
        start() {
          started = true;
        },
        async replaceOutput(outputs) {
          if (!started) throw new Error('execution not started');
          cell.outputs = outputs;
          cell.notebook.changed();
        },
        end(success, endTime) {
          cell.executionSummary = { executionOrder: this.executionOrder, success, timing: endTime ? { startTime: endTime, endTime } : undefined };
          cell.notebook.changed();
        },
      };
    },
    /** Runs cells as VS Code does when the user presses Run. */
    async run(cells) {
      await this.executeHandler(cells, cells[0].notebook, this);
    },
    dispose() {},
  };
  state.controllers.push(controller);
  return controller;
}

function controllerExtension(controller) {
  return controller.extension ?? 'jupyter-mcp.jupyter-mcp';
}

// ---- A STAND-IN for the Jupyter extension (ms-toolsai.jupyter) -----------------------------
//
// Two controllers of the extension `ms-toolsai.jupyter`, its `kernels.getKernel` API and its
// restart/interrupt commands. Its "kernel" runs a cell by writing the document as the Jupyter
// extension does, a moment later: a start time, then outputs, an execution order and a success
// mark. `raise` in a cell fails it; `hang` in a cell starts and ends only when the kernel
// restarts, dies or is interrupted. `commandPromise` says what `notebook.cell.execute` answers: `settle` (when
// the cell ends), `hang` (never) or `reject` (at once, with an error whose message holds secret
// text, running nothing). Each notebook's kernel is one object (as the API hands out) with a
// status and `onDidChangeStatus`; `restartKernel`/`killKernel` restart it (a new Python process,
// as the restart command does) or kill it (status `dead`, and the running cell marked failed,
// as the Jupyter extension reports a kernel that died under a cell). The interrupt command ends
// a hanging cell as an interrupted Jupyter cell ends: a KeyboardInterrupt error, marked failed,
// and the cells queued after it are not run.

/** A real ipykernel behind `executeCode`, through kernel-bridge.py (started on first use). */
class BridgedKernel {
  constructor() {
    this.pending = new Map();
    this.next = 0;
    this.child = undefined;
  }

  start() {
    const venv = process.env.JUPYTER_MCP_TEST_VENV ?? require('path').resolve(__dirname, '..', '..', '.venv');
    this.child = require('child_process').spawn(require('path').join(venv, 'bin', 'python'), [require('path').join(__dirname, 'kernel-bridge.py')], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let buffered = '';
    this.child.stdout.on('data', (chunk) => {
      buffered += chunk.toString();
      let newline;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const answer = JSON.parse(buffered.slice(0, newline));
        buffered = buffered.slice(newline + 1);
        this.pending.get(answer.id)?.(answer.outputs);
        this.pending.delete(answer.id);
      }
    });
  }

  run(code) {
    if (!this.child) this.start();
    const id = ++this.next;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      this.child.stdin.write(JSON.stringify({ id, code }) + '\n');
    });
  }

  stop() {
    this.child?.kill();
    this.child = undefined;
  }
}

process.on('exit', () => state.jupyter?.kernel?.stop());

function installJupyterStandIn({ commandPromise = 'settle' } = {}) {
  let order = 0;
  let notifyExecuted;
  let notifyHangs;
  const jupyter = {
    requests: [],
    commands: new Map(),
    executed: new Promise((resolve) => (notifyExecuted = resolve)),
    // Settles once a `hang` cell runs and waits for its kernel.
    hangs: new Promise((resolve) => (notifyHangs = resolve)),
    controllers: [],
  };
  const later = () => new Promise((resolve) => setImmediate(resolve));
  // Cells hanging now, each with how to end it: ('restarted' | 'died' | 'interrupted') => void.
  const hanging = new Set();
  async function runCell(cell) {
    const startTime = Date.now();
    cell.executionSummary = { timing: { startTime, endTime: undefined } };
    cell.outputs = [];
    cell.notebook.changed();
    await later();
    const source = cell.document.getText();
    jupyter.cellsRun.push(source);
    if (source.includes('hang')) {
      // Ends when the kernel restarts (unmarked, as an interrupted execution), dies or is
      // interrupted (failed, with the error Jupyter shows).
      const ending = await new Promise((resolve) => {
        hanging.add(resolve);
        notifyHangs();
      });
      const errors = {
        died: { ename: 'KernelDied', evalue: 'the kernel died' },
        interrupted: { ename: 'KeyboardInterrupt', evalue: '' },
      };
      if (errors[ending]) {
        order += 1;
        cell.outputs = [outputFromIpynb({ output_type: 'error', ...errors[ending], traceback: [] })];
        cell.executionSummary = { executionOrder: order, success: false, timing: { startTime, endTime: Date.now() } };
        cell.notebook.changed();
      }
      return false;
    }
    order += 1;
    const failed = source.includes('raise');
    cell.outputs = failed
      ? [outputFromIpynb({ output_type: 'error', ename: 'ValueError', evalue: 'boom', traceback: ['ValueError: boom'] })]
      : [outputFromIpynb({ output_type: 'stream', name: 'stdout', text: `ran: ${source}\n` })];
    cell.notebook.changed();
    await later();
    cell.executionSummary = { executionOrder: order, success: !failed, timing: { startTime, endTime: Date.now() } };
    cell.metadata = { ...cell.metadata, execution_count: order };
    cell.notebook.changed();
    return !failed;
  }
  for (const [id, label] of [['python-stand-in', 'Python 3 (stand-in Jupyter)'], ['python-other', 'Other Python (stand-in Jupyter)']]) {
    const controller = createNotebookController(id, 'jupyter-notebook', label);
    controller.extension = 'ms-toolsai.jupyter';
    controller.description = 'a stand-in of a Jupyter extension kernel';
    controller.executeHandler = async (cells) => {
      notifyExecuted(cells.map((cell) => cell.index));
      if (commandPromise === 'reject') {
        const error = new Error('secret-token-4711 at /home/someone/.ssh/id_rsa');
        error.name = 'CanceledError';
        throw error;
      }
      const running = (async () => {
        for (const cell of cells) if (!(await runCell(cell))) break;
      })();
      if (commandPromise === 'hang') return new Promise(() => {});
      await running;
    };
    jupyter.controllers.push(controller);
  }
  const selected = (uri) => jupyter.controllers.find((controller) => controller.selectedFor.has(uri.toString()));
  // One kernel object per notebook, as the API hands out, for as long as its kernel lives.
  const kernelObjects = new Map();
  function kernelObject(uri, controller) {
    let kernel = kernelObjects.get(uri);
    if (!kernel) {
      const listeners = new Set();
      kernel = {
        label: controller.label,
        language: 'python',
        status: 'idle',
        executeCode,
        onDidChangeStatus(listener) {
          listeners.add(listener);
          return { dispose: () => listeners.delete(listener) };
        },
        setStatus(status) {
          this.status = status;
          for (const listener of listeners) listener(status);
        },
      };
      kernelObjects.set(uri, kernel);
    }
    return kernel;
  }
  jupyter.cellsRun = [];
  jupyter.restartKernel = (uri) => {
    const kernel = kernelObjects.get(uri.toString());
    kernel?.setStatus('restarting');
    jupyter.kernel.stop();
    for (const end of hanging) end('restarted');
    hanging.clear();
    kernel?.setStatus('idle');
  };
  jupyter.killKernel = (uri) => {
    kernelObjects.get(uri.toString())?.setStatus('dead');
    jupyter.kernel.stop();
    for (const end of hanging) end('died');
    hanging.clear();
  };
  jupyter.interruptKernel = () => {
    for (const end of hanging) end('interrupted');
    hanging.clear();
  };
  jupyter.commands.set('jupyter.restartkernel', (uri) => {
    jupyter.requests.push(['restart', uri.toString()]);
    jupyter.restartKernel(uri);
  });
  jupyter.commands.set('jupyter.interruptkernel', (uri) => {
    jupyter.requests.push(['interrupt', uri.toString()]);
    jupyter.interruptKernel();
  });
  state.jupyter = jupyter;
  // The public API's `executeCode(code, token)`: an async iterable of outputs, each with its
  // items' bytes, as the Jupyter extension yields them.
  jupyter.kernel = new BridgedKernel();
  jupyter.executed_code = [];
  async function* executeCode(code) {
    jupyter.executed_code.push(code);
    for (const items of await jupyter.kernel.run(code)) {
      yield { items: items.map((item) => ({ mime: item.mime, data: new TextEncoder().encode(item.text) })) };
    }
  }
  state.extensions['ms-toolsai.jupyter'] = {
    id: 'ms-toolsai.jupyter',
    isActive: true,
    exports: {
      kernels: {
        async getKernel(uri) {
          const controller = selected(uri);
          return controller ? kernelObject(uri.toString(), controller) : undefined;
        },
      },
    },
    async activate() {
      return this.exports;
    },
  };
  return jupyter;
}

// ---- The module -----------------------------------------------------------------------------

async function openNotebookDocument(target, data) {
  if (typeof target === 'string') {
    state.untitledCounter += 1;
    const document = new NotebookDocument(new Uri('untitled', `Untitled-${state.untitledCounter}.ipynb`), data);
    state.documents.push(document);
    onDidOpenNotebookDocument.fire(document);
    return document;
  }
  const open = state.documents.find((document) => document.uri.toString() === target.toString());
  if (open) return open;
  const content = target.scheme === 'untitled' ? '' : fs.readFileSync(target.fsPath, 'utf8');
  const document = new NotebookDocument(target, deserializeIpynb(content));
  state.documents.push(document);
  onDidOpenNotebookDocument.fire(document);
  return document;
}

class CancellationTokenSource {
  constructor() {
    this.token = { isCancellationRequested: false, onCancellationRequested: () => ({ dispose() {} }) };
  }

  cancel() {
    this.token.isCancellationRequested = true;
  }

  dispose() {}
}

const vscode = {
  CancellationTokenSource,
  Uri,
  Range,
  NotebookRange,
  NotebookCellKind,
  NotebookCellData,
  NotebookCellOutput,
  NotebookCellOutputItem,
  NotebookEdit,
  WorkspaceEdit,
  EventEmitter,
  NotebookControllerAffinity: { Default: 1, Preferred: 2 },
  StatusBarAlignment: { Left: 1, Right: 2 },
  workspace: {
    get notebookDocuments() {
      return [...state.documents];
    },
    get workspaceFolders() {
      return state.folders.length ? state.folders.map((folder, index) => ({ uri: Uri.file(folder), name: path.basename(folder), index })) : undefined;
    },
    getConfiguration(section) {
      return { get: (key, fallback) => state.settings[`${section}.${key}`] ?? fallback };
    },
    onDidChangeConfiguration: onDidChangeConfiguration.event,
    onDidOpenNotebookDocument: onDidOpenNotebookDocument.event,
    onDidChangeNotebookDocument: onDidChangeNotebookDocument.event,
    onDidCloseNotebookDocument: onDidCloseNotebookDocument.event,
    async applyEdit(edit) {
      return applyEdit(edit);
    },
    openNotebookDocument,
    fs: {
      async stat(uri) {
        return fs.statSync(uri.fsPath);
      },
      async writeFile(uri, bytes) {
        // As VS Code's file service does, missing parent folders are created.
        fs.mkdirSync(path.dirname(uri.fsPath), { recursive: true });
        fs.writeFileSync(uri.fsPath, bytes);
      },
    },
  },
  window: {
    createOutputChannel: (name) => ({ name, appendLine: (line) => state.outputLines.push(line), dispose() {} }),
    // Both overloads: (alignment?, priority?) and (id, alignment?, priority?).
    createStatusBarItem(...args) {
      const id = typeof args[0] === 'string' ? args.shift() : undefined;
      const [alignment, priority] = args;
      const item = { id, alignment, priority, text: '', tooltip: '', visible: false, show() { this.visible = true; }, hide() { this.visible = false; }, dispose() {} };
      state.statusItems.push(item);
      return item;
    },
    async showNotebookDocument(document) {
      state.reveals.push(document.uri.toString());
      state.activeEditor = { notebook: document };
      return state.activeEditor;
    },
    get activeNotebookEditor() {
      return state.activeEditor;
    },
    get visibleNotebookEditors() {
      return state.activeEditor ? [state.activeEditor] : [];
    },
    async showWarningMessage(message) {
      state.messages.push(message);
    },
    async showInformationMessage(message) {
      state.messages.push(message);
    },
  },
  notebooks: { createNotebookController },
  commands: {
    registerCommand(id, callback) {
      state.commands.set(id, callback);
      return { dispose: () => state.commands.delete(id) };
    },
    async executeCommand(id, argument) {
      if (id === 'notebook.selectKernel' || id === '_notebook.selectKernel') {
        // Selection is per notebook and exclusive, as in VS Code.
        const controller = state.controllers.find(
          (candidate) => candidate.id === argument.id && (argument.extension === undefined || controllerExtension(candidate) === argument.extension || id === 'notebook.selectKernel'),
        );
        // The public command takes the notebook's editor; without one, the active editor's.
        const editor = argument.notebookEditor ?? state.activeEditor;
        state.selectedThroughEditor.push(argument.notebookEditor !== undefined);
        if (!controller || !editor) return false;
        const document = editor.notebook;
        for (const other of state.controllers) {
          if (other !== controller && other.selectedFor.has(document.uri.toString())) other.deselect(document);
        }
        controller.select(document);
        return true;
      }
      if (id === '_resolveNotebookKernels') {
        return state.controllers.map((controller) => ({
          id: `${controllerExtension(controller)}/${controller.id}`,
          label: controller.label,
          description: controller.description,
        }));
      }
      if (id === 'notebook.cell.execute') {
        // As VS Code does: the notebook's selected controller runs the range.
        const document = state.documents.find((candidate) => candidate.uri.toString() === argument.document.toString());
        const controller = state.controllers.find((candidate) => candidate.selectedFor.has(argument.document.toString()));
        if (!document || !controller) throw new Error('no kernel selected');
        const cells = argument.ranges.flatMap((range) => document.cells.slice(range.start, range.end));
        return controller.executeHandler(cells, document, controller);
      }
      if (state.jupyter?.commands.has(id)) return state.jupyter.commands.get(id)(argument);
      return state.commands.get(id)?.(argument);
    },
  },
  extensions: {
    getExtension: (id) => state.extensions[id],
  },
  env: {
    clipboard: {
      async writeText(text) {
        state.clipboard = text;
      },
      async readText() {
        return state.clipboard;
      },
    },
  },
};

/** Makes `require('vscode')` return the stand-in. */
function install() {
  const originalResolve = Module._resolveFilename;
  Module._resolveFilename = function resolve(request, ...rest) {
    if (request === 'vscode') return 'vscode';
    return originalResolve.call(this, request, ...rest);
  };
  require.cache.vscode = { id: 'vscode', filename: 'vscode', loaded: true, exports: vscode };
}

/** Clears documents and settings between tests. */
function reset({ folders = [], settings = {} } = {}) {
  state.jupyter?.kernel?.stop();
  Object.assign(state, freshState({ folders, settings }));
}

module.exports = { vscode, state, install, reset, installJupyterStandIn, onDidChangeConfiguration, serializeIpynb, deserializeIpynb };
