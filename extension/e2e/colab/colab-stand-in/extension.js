// Colab (stand-in for tests): see README.md. Not Google's Colab extension; no Google service.
'use strict';
const vscode = require('vscode');
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');

const SERVERS_KEY = 'colabStandIn.servers';
const SCENARIO_FILE = '.colab-stand-in.json';
const CLIENT_AGENT = 'vscode-standin';
const log = vscode.window.createOutputChannel('Colab (stand-in)');

let context;
const serversChanged = new vscode.EventEmitter();

function standInBase() {
  const base = process.env.COLAB_STANDIN_URL;
  if (!base) throw new Error('COLAB_STANDIN_URL is not set');
  return base.endsWith('/') ? base : `${base}/`;
}

function googleToken() {
  return process.env.COLAB_STANDIN_GOOGLE_TOKEN || 'standin-google-access-token';
}

function parseColabJson(text) {
  return JSON.parse(text.replace(/^\)\]\}'\n/, ''));
}

/** Stored servers: [{ id, alias, endpoint, url, token, accelerator, shape, version }]. */
function servers() {
  return context.globalState.get(SERVERS_KEY, []);
}

async function saveServers(list) {
  await context.globalState.update(SERVERS_KEY, list);
  serversChanged.fire();
}

function scenario() {
  const folder = (vscode.workspace.workspaceFolders ?? []).find((candidate) => candidate.uri.scheme === 'file');
  if (!folder) return {};
  try {
    return JSON.parse(fs.readFileSync(path.join(folder.uri.fsPath, SCENARIO_FILE), 'utf8'));
  } catch {
    return {};
  }
}

// ---------------------------------------------------------------------------------------------
// The runtime stand-in's tunnel API

async function tunnel(method, pathAndQuery, extraHeaders = {}) {
  const response = await fetch(`${standInBase()}tun/m/${pathAndQuery}`, {
    method,
    headers: { Authorization: `Bearer ${googleToken()}`, ...extraHeaders },
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`tunnel ${method} ${pathAndQuery.split('?')[0]}: HTTP ${response.status}`);
  return parseColabJson(text);
}

async function assign() {
  const query = `assign?nbh=${crypto.randomBytes(16).toString('hex')}&variant=DEFAULT&accelerator=NONE&authuser=0`;
  const first = await tunnel('GET', query);
  if (first.runtimeProxyInfo) return first;
  const second = await tunnel('POST', query, { 'X-Goog-Colab-Token': first.token });
  if (!second.runtimeProxyInfo) throw new Error('the assignment returned no runtime');
  return second;
}

/** The newest proxy token for the server, from the assignment list (best effort). */
async function refresh(server) {
  try {
    const answer = await tunnel('GET', 'assignments');
    const match = (answer.assignments ?? []).find((assignment) => assignment.endpoint === server.endpoint);
    if (match && match.runtimeProxyInfo.token !== server.token) {
      server.token = match.runtimeProxyInfo.token;
      await saveServers(servers().map((known) => (known.id === server.id ? server : known)));
    }
  } catch (error) {
    log.appendLine(`token refresh failed: ${error}`);
  }
  return server;
}

function headersOf(server) {
  return { 'X-Colab-Runtime-Proxy-Token': server.token, 'X-Colab-Client-Agent': CLIENT_AGENT };
}

// ---------------------------------------------------------------------------------------------
// New Colab Server: the prompts

function pickOne(title, placeholder, items) {
  return new Promise((resolve) => {
    const quickPick = vscode.window.createQuickPick();
    quickPick.title = title;
    quickPick.placeholder = placeholder;
    quickPick.items = items;
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
    quickPick.show();
  });
}

function defaultAlias(label) {
  const taken = new Set(servers().map((server) => server.alias));
  if (!taken.has(label)) return label;
  for (let n = 1; ; n += 1) {
    if (!taken.has(`${label} (${n})`)) return `${label} (${n})`;
  }
}

async function newServer() {
  const wanted = scenario();
  if (wanted.unexpectedPrompt) {
    // A prompt the picker driver does not know; nothing is created whatever is chosen.
    await pickOne('Choose a region', 'Where should the server run?', [
      { label: 'us-central1 (Iowa)' },
      { label: 'europe-west4 (Netherlands)' },
    ]);
    return undefined;
  }
  const type = await pickOne('Select a Colab server type', 'Select an accelerator', [
    { label: 'CPU' },
    { label: 'GPU', description: 'T4 (stand-in: not served)' },
    { label: 'TPU', description: 'v5e-1 (stand-in: not served)' },
  ]);
  if (!type) return undefined;
  if (type.label !== 'CPU') {
    vscode.window.showWarningMessage('The Colab stand-in serves CPU runtimes only.');
    return undefined;
  }
  let shape = 'Standard';
  if (wanted.shapes) {
    const chosen = await pickOne('Select a machine shape', 'Machine shape', [{ label: 'Standard' }, { label: 'High-RAM' }]);
    if (!chosen) return undefined;
    shape = chosen.label;
  }
  let version = 'Latest';
  if (wanted.versions) {
    const chosen = await pickOne('Select a runtime version', 'Runtime version', [{ label: 'Latest' }, { label: '2025.10' }]);
    if (!chosen) return undefined;
    version = chosen.label;
  }
  const alias = await vscode.window.showInputBox({
    title: 'Alias your server',
    prompt: 'Provide a local alias for the new Colab CPU server',
    value: defaultAlias('Colab CPU'),
    ignoreFocusOut: true,
    validateInput: (value) => {
      if (!value.trim()) return 'The alias must not be empty';
      if (value.length > 40) return 'The alias must be under 40 characters';
      if (servers().some((server) => server.alias === value)) return 'A server with this alias exists already';
      return undefined;
    },
  });
  if (alias === undefined) return undefined;
  const assignment = await assign();
  const server = {
    id: crypto.randomUUID(),
    alias,
    endpoint: assignment.endpoint,
    url: assignment.runtimeProxyInfo.url,
    token: assignment.runtimeProxyInfo.token,
    accelerator: 'CPU',
    shape,
    version,
  };
  await saveServers([...servers(), server]);
  log.appendLine(`assigned ${server.endpoint} as ${alias}`);
  return { id: server.id, label: server.alias };
}

// ---------------------------------------------------------------------------------------------
// colab:// over the Contents API

function contentsPath(uri) {
  return uri.path.split('/').filter(Boolean).map(encodeURIComponent).join('/');
}

function serverOf(uri) {
  const server = servers().find((candidate) => candidate.id === uri.authority);
  if (!server) throw vscode.FileSystemError.Unavailable(uri);
  return server;
}

async function contents(uri, method, query, body) {
  const server = serverOf(uri);
  const url = `${server.url}api/contents/${contentsPath(uri)}${query ? `?${query}` : ''}`;
  const send = () => fetch(url, {
    method,
    headers: { ...headersOf(server), ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  let response = await send();
  if (response.status === 401) {
    await refresh(server);
    response = await send();
  }
  if (response.status === 404) throw vscode.FileSystemError.FileNotFound(uri);
  if (response.status === 401 || response.status === 403) throw vscode.FileSystemError.NoPermissions(uri);
  if (!response.ok) throw vscode.FileSystemError.Unavailable(uri);
  const text = await response.text();
  return text ? JSON.parse(text) : undefined;
}

const fileSystem = {
  onDidChangeFile: new vscode.EventEmitter().event,
  watch: () => new vscode.Disposable(() => undefined),
  async stat(uri) {
    const model = await contents(uri, 'GET', 'content=0');
    const time = (text) => (text ? Date.parse(text) : 0);
    return {
      type: model.type === 'directory' ? vscode.FileType.Directory : vscode.FileType.File,
      ctime: time(model.created),
      mtime: time(model.last_modified),
      size: model.size ?? 0,
    };
  },
  async readDirectory(uri) {
    const model = await contents(uri, 'GET', 'content=1');
    if (model.type !== 'directory') throw vscode.FileSystemError.FileNotADirectory(uri);
    return model.content.map((entry) => [entry.name, entry.type === 'directory' ? vscode.FileType.Directory : vscode.FileType.File]);
  },
  async readFile(uri) {
    const model = await contents(uri, 'GET', 'type=file&format=base64&content=1');
    if (model.type === 'directory') throw vscode.FileSystemError.FileIsADirectory(uri);
    return new Uint8Array(Buffer.from(model.content, 'base64'));
  },
  async writeFile(uri, content, options) {
    let exists = true;
    try {
      await this.stat(uri);
    } catch (error) {
      if (!(error instanceof vscode.FileSystemError) || error.code !== 'FileNotFound') throw error;
      exists = false;
    }
    if (exists && !options.overwrite) throw vscode.FileSystemError.FileExists(uri);
    if (!exists && !options.create) throw vscode.FileSystemError.FileNotFound(uri);
    await contents(uri, 'PUT', '', { type: 'file', format: 'base64', content: Buffer.from(content).toString('base64') });
  },
  async createDirectory(uri) {
    await contents(uri, 'PUT', '', { type: 'directory' });
  },
  async delete(uri) {
    await contents(uri, 'DELETE', '');
  },
  async rename(from, to, options) {
    if (!options.overwrite) {
      try {
        await this.stat(to);
        throw vscode.FileSystemError.FileExists(to);
      } catch (error) {
        if (!(error instanceof vscode.FileSystemError) || error.code !== 'FileNotFound') throw error;
      }
    }
    await contents(from, 'PATCH', '', { path: decodeURIComponent(contentsPath(to)) });
  },
};

// ---------------------------------------------------------------------------------------------
// Commands

async function chooseServer(title) {
  const list = servers();
  if (list.length === 0) {
    vscode.window.showInformationMessage('There are no Colab servers.');
    return undefined;
  }
  const chosen = await pickOne(title, 'Select a server', list.map((server) => ({ label: server.alias, server })));
  return chosen?.server;
}

async function mountServer() {
  if (!vscode.workspace.getConfiguration('colab').get('serverMounting')) {
    vscode.window.showErrorMessage('Mounting Colab servers needs the experimental colab.serverMounting setting.');
    return;
  }
  const server = await chooseServer('Select a server to mount');
  if (!server) return;
  const uri = vscode.Uri.from({ scheme: 'colab', authority: server.id, path: '/' });
  const folders = vscode.workspace.workspaceFolders ?? [];
  if (folders.some((folder) => folder.uri.toString() === uri.toString())) return;
  vscode.workspace.updateWorkspaceFolders(folders.length, 0, { uri, name: server.alias });
}

async function removeServer() {
  const server = await chooseServer('Select a server to remove');
  if (!server) return;
  try {
    const first = await tunnel('GET', `unassign/${server.endpoint}`);
    await tunnel('POST', `unassign/${server.endpoint}`, { 'X-Goog-Colab-Token': first.token });
  } catch (error) {
    log.appendLine(`unassign failed: ${error}`);
  }
  await saveServers(servers().filter((known) => known.id !== server.id));
}

async function openTerminal() {
  const list = servers();
  const server = list.length === 1 ? list[0] : await chooseServer('Select a server for the terminal');
  if (!server) return;
  const write = new vscode.EventEmitter();
  const terminal = vscode.window.createTerminal({
    name: `Colab: ${server.alias}`,
    pty: {
      onDidWrite: write.event,
      open: () => write.fire(`Colab stand-in terminal for ${server.alias} (a local echo; no /colab/tty)\r\n`),
      close: () => write.dispose(),
      handleInput: (data) => write.fire(data === '\r' ? '\r\n' : data),
    },
  });
  terminal.show();
}

async function activate(extensionContext) {
  context = extensionContext;
  context.subscriptions.push(log, serversChanged);
  context.subscriptions.push(vscode.workspace.registerFileSystemProvider('colab', fileSystem, { isCaseSensitive: true }));
  context.subscriptions.push(vscode.commands.registerCommand('colab.mountServer', mountServer));
  context.subscriptions.push(vscode.commands.registerCommand('colab.removeServer', removeServer));
  context.subscriptions.push(vscode.commands.registerCommand('colab.openTerminal', openTerminal));
  const jupyter = vscode.extensions.getExtension('ms-toolsai.jupyter');
  const api = jupyter.isActive ? jupyter.exports : await jupyter.activate();
  const collection = api.createJupyterServerCollection('colab', 'Colab', {
    onDidChangeServers: serversChanged.event,
    provideJupyterServers: () => servers().map((server) => ({ id: server.id, label: server.alias })),
    resolveJupyterServer: async (wanted) => {
      const server = servers().find((candidate) => candidate.id === wanted.id);
      if (!server) return undefined;
      await refresh(server);
      return {
        id: server.id,
        label: server.alias,
        connectionInformation: { baseUrl: vscode.Uri.parse(server.url), headers: headersOf(server) },
      };
    },
  });
  collection.commandProvider = {
    provideCommands: () => [{ label: 'New Colab Server' }],
    handleCommand: async (command) => {
      if (command.label !== 'New Colab Server') return undefined;
      try {
        return await newServer();
      } catch (error) {
        log.appendLine(`New Colab Server failed: ${error} ${error?.cause ?? ''}`);
        vscode.window.showErrorMessage(`Colab (stand-in): could not create a server: ${error?.message ?? error}`);
        return undefined;
      }
    },
  };
  context.subscriptions.push(collection);
}

module.exports = { activate };
