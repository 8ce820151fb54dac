// Activation, settings, the status bar item, the output channel and the server's lifecycle.
// Everything the server does is in the native module; this file only wires it to VS Code.
import * as vscode from 'vscode';
import { FallbackController } from './controller';
import { loadNative, type Native } from './native';
import { JUPYTER_EXTENSION_ID, JupyterShell } from './jupyter';
import { Shell } from './shell';
import { COLAB_EXTENSION_ID, ColabShell } from './colab';

let server: Native.JupyterMcpServer | undefined;
let statusItem: vscode.StatusBarItem | undefined;
let output: vscode.OutputChannel | undefined;
let shell: Shell | undefined;
let jupyter: JupyterShell | undefined;
let colab: ColabShell | undefined;
let nativeItem: vscode.StatusBarItem | undefined;
let starting: Promise<void> = Promise.resolve();

function log(line: string): void {
  output?.appendLine(`[jupyter-mcp] ${line}`);
}

/** What the extension exposes to other extensions and to its tests. */
export interface JupyterMcpApi {
  readonly url: string | undefined;
  /** Resolves once a pending start or restart has finished. */
  ready(): Promise<void>;
}

export async function activate(context: vscode.ExtensionContext): Promise<JupyterMcpApi> {
  output = vscode.window.createOutputChannel('Jupyter MCP Server');
  const hasJupyter = vscode.extensions.getExtension(JUPYTER_EXTENSION_ID) !== undefined;
  const controller = new FallbackController(() => server, context.extension.id, !hasJupyter, log);
  shell = new Shell(controller, log);
  jupyter = new JupyterShell(controller);
  colab = new ColabShell(context);
  // While a native debugging port is set, this item's accessibility label carries the marker that
  // binds the driver to this window (it names no path, title or content).
  nativeItem = vscode.window.createStatusBarItem('jupyterMcp.native', vscode.StatusBarAlignment.Right, 99);
  nativeItem.name = 'Jupyter MCP native connection';
  statusItem = vscode.window.createStatusBarItem('jupyterMcp.status', vscode.StatusBarAlignment.Right, 100);
  statusItem.command = 'jupyterMcp.showStatus';
  context.subscriptions.push(
    output,
    statusItem,
    nativeItem,
    controller,
    jupyter,
    vscode.commands.registerCommand('jupyterMcp.showStatus', showStatus),
    vscode.commands.registerCommand('jupyterMcp.copyUrl', copyUrl),
    vscode.commands.registerCommand('jupyterMcp.restart', () => restart()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration('jupyterMcp')) void restart();
    }),
    // Runs through the Jupyter extension are observed in the document: report every change.
    vscode.workspace.onDidChangeNotebookDocument((event) => server?.notebookChanged(event.notebook.uri.toString())),
    vscode.workspace.onDidCloseNotebookDocument((document) => server?.notebookChanged(document.uri.toString())),
    vscode.workspace.onDidOpenNotebookDocument((document) => {
      if (!hasJupyter && document.notebookType === 'jupyter-notebook') {
        controller.controller.updateNotebookAffinity(document, vscode.NotebookControllerAffinity.Preferred);
      }
    }),
  );
  log(
    hasJupyter
      ? 'the Jupyter extension is installed: MCP runs cells through the controller selected for each notebook'
      : 'no Jupyter extension: cells run on the local kernel controller',
  );
  await restart();
  return {
    get url() {
      return server?.url ?? undefined;
    },
    ready: () => starting,
  };
}

export async function deactivate(): Promise<void> {
  await stop();
}

function restart(): Promise<void> {
  starting = starting.then(async () => {
    await stop();
    await start();
  });
  return starting;
}

async function stop(): Promise<void> {
  const running = server;
  server = undefined;
  updateStatus();
  if (running) {
    await running.stop();
    log('server stopped');
  }
}

async function start(): Promise<void> {
  const config = vscode.workspace.getConfiguration('jupyterMcp');
  if (!config.get<boolean>('enabled', true)) {
    log('disabled by jupyterMcp.enabled');
    return;
  }
  const nativeDebugPort = config.get<number>('nativeDebugPort', 0) || Number(process.env.JUPYTER_MCP_NATIVE_DEBUG_PORT ?? 0) || 0;
  const colabInstalled = vscode.extensions.getExtension(COLAB_EXTENSION_ID) !== undefined;
  const folders = vscode.workspace.workspaceFolders ?? [];
  const target = shell!;
  const kernels = jupyter!;
  const colabShell = colab!;
  try {
    const native = loadNative();
    server = await native.startServer(
      {
        transport: config.get<string>('transport', 'http'),
        port: config.get<number>('port', 51303),
        windowLabel: folders.length > 0 ? folders.map((folder) => folder.name).join(', ') : 'Empty window',
        workspaceFolders: folders.filter((folder) => folder.uri.scheme === 'file').map((folder) => folder.uri.fsPath),
        saveBeforeExecute: config.get<boolean>('saveBeforeExecute', true),
        colabInstalled,
        nativeDebugPort: Number.isInteger(nativeDebugPort) && nativeDebugPort > 0 && nativeDebugPort < 65536 ? nativeDebugPort : 0,
      },
      () => target.list(),
      (uri) => target.read(uri),
      (uri) => target.open(uri),
      (request) => target.apply(request),
      (request) => target.create(request),
      (uri) => target.save(uri),
      (request) => kernels.call(request),
      (request) => colabShell.call(request),
    );
    log(server.url ? `serving MCP at ${server.url}` : 'serving MCP over stdio');
    if (colabInstalled) {
      log(nativeDebugPort ? `Colab tools listed; native debugging port ${nativeDebugPort}` : 'Colab tools listed; no native debugging port (jupyterMcp.nativeDebugPort), so Colab setup is refused');
    }
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    log(`could not start: ${message}`);
    void vscode.window.showWarningMessage(`Jupyter MCP could not start: ${message}`);
  }
  updateStatus();
}

function updateStatus(): void {
  if (nativeItem) {
    const marker = server?.nativeMarker;
    const config = vscode.workspace.getConfiguration('jupyterMcp');
    const port = config.get<number>('nativeDebugPort', 0) || Number(process.env.JUPYTER_MCP_NATIVE_DEBUG_PORT ?? 0);
    if (marker && port && vscode.extensions.getExtension(COLAB_EXTENSION_ID)) {
      nativeItem.text = '$(plug)';
      nativeItem.tooltip = 'Jupyter MCP: Colab setup may operate this window\'s kernel picker';
      nativeItem.accessibilityInformation = { label: `Jupyter MCP window ${marker}` };
      nativeItem.show();
    } else {
      nativeItem.hide();
    }
  }
  if (!statusItem) return;
  const url = server?.url;
  if (!url) {
    statusItem.hide();
    return;
  }
  statusItem.text = '$(notebook) MCP';
  statusItem.tooltip = `Jupyter MCP server\n${url}\nClick to copy the URL`;
  statusItem.show();
}

async function copyUrl(): Promise<void> {
  const url = server?.url;
  if (!url) {
    void vscode.window.showWarningMessage('Jupyter MCP: the server has no URL (it is stopped or uses stdio).');
    return;
  }
  await vscode.env.clipboard.writeText(url);
}

async function showStatus(): Promise<void> {
  const url = server?.url;
  if (!url) {
    void vscode.window.showWarningMessage('Jupyter MCP: the server is not running over HTTP.');
    return;
  }
  await copyUrl();
  const again = await vscode.window.showInformationMessage(`Jupyter MCP server: ${url} (copied)`, 'Copy again');
  if (again) await copyUrl();
}
