// The Colab half of the shell: each request of the native server's Colab tools is one VS Code
// call, answered as data. What a request means, when it is allowed and what the answer proves
// are decided in Rust (crates/host-vscode/src/colab.rs). Nothing here reads document contents,
// terminal commands or paths beyond the URIs Rust names; errors cross as their class or code only.
import * as vscode from 'vscode';
import { NOTEBOOK_TYPE } from './shell';

export const COLAB_EXTENSION_ID = 'google.colab';

type Answer = Record<string, unknown>;

function errorName(error: unknown): string {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string' && /^[A-Za-z]{1,40}$/.test(code)) return code;
  return error instanceof Error ? error.name : 'Error';
}

/** The terminal's shell pid, or null when it has none (an extension's pseudoterminal: VS Code
 * says undefined, code-server -1). */
async function shellPid(terminal: vscode.Terminal): Promise<number | null> {
  const pid = await terminal.processId;
  return typeof pid === 'number' && Number.isInteger(pid) && pid > 0 ? pid : null;
}

const DOCUMENT_SCHEMES = new Set(['file', 'untitled']);

export class ColabShell {
  private activationFailed = false;
  // An opaque name per terminal object, for as long as it lives: two Colab terminals share a
  // name and have no shell pid, and only the object tells them apart.
  private readonly terminalHandles = new WeakMap<vscode.Terminal, string>();
  private nextTerminalHandle = 1;

  constructor(private readonly context: vscode.ExtensionContext) {}

  async call(request: any): Promise<Answer> {
    try {
      switch (request?.op) {
        case 'state':
          return this.state();
        case 'activate':
          return await this.activate();
        case 'openKernelPicker':
          return await this.openKernelPicker(String(request.uri));
        case 'mountServer':
          return await this.mountServer();
        case 'fs':
          return await this.fs(String(request.action), String(request.uri), request.dataBase64);
        case 'terminals':
          return await this.terminals();
        case 'closeTerminal':
          return await this.closeTerminal(String(request.handle), String(request.name), request.processId);
        case 'preflight':
          return this.preflight();
        case 'updateWorkspaceFolders':
          return this.updateWorkspaceFolders(request.start, request.deleteCount, request.folders ?? []);
        case 'stateGet':
          return { value: this.context.globalState.get(String(request.key)) ?? null };
        case 'stateSet':
          await this.context.globalState.update(String(request.key), request.value);
          return { accepted: true };
        default:
          return { errorName: 'UnknownRequest' };
      }
    } catch (error) {
      return { errorName: errorName(error) };
    }
  }

  private state(): Answer {
    const extension = vscode.extensions.getExtension(COLAB_EXTENSION_ID);
    return {
      installed: extension !== undefined,
      active: extension?.isActive ?? false,
      activationFailed: this.activationFailed,
      folders: (vscode.workspace.workspaceFolders ?? []).map((folder) => ({ uri: folder.uri.toString(), name: folder.name })),
      workspaceFile: vscode.workspace.workspaceFile?.toString() ?? null,
      remoteName: vscode.env.remoteName ?? null,
      trusted: vscode.workspace.isTrusted,
    };
  }

  private async activate(): Promise<Answer> {
    const extension = vscode.extensions.getExtension(COLAB_EXTENSION_ID);
    if (!extension) return { accepted: false, errorName: 'NotInstalled' };
    try {
      await extension.activate();
      return { accepted: true };
    } catch (error) {
      // A failed activation stays failed until the window reloads.
      this.activationFailed = true;
      return { accepted: false, errorName: errorName(error) };
    }
  }

  private async openKernelPicker(uri: string): Promise<Answer> {
    const wanted = vscode.Uri.parse(uri).toString();
    const document = vscode.workspace.notebookDocuments.find(
      (candidate) => candidate.notebookType === NOTEBOOK_TYPE && candidate.uri.toString() === wanted,
    );
    if (!document) return { accepted: false, errorName: 'NotOpen' };
    const editor = await vscode.window.showNotebookDocument(document, { preview: false, preserveFocus: false });
    if (editor.notebook.uri.toString() !== wanted) return { accepted: false, errorName: 'OtherEditor' };
    // For exactly this editor. The picker's promise settles only when it closes: the driver
    // operates it meanwhile.
    void Promise.resolve(vscode.commands.executeCommand('notebook.selectKernel', { notebookEditor: editor })).catch(() => undefined);
    return { accepted: true };
  }

  private async mountServer(): Promise<Answer> {
    const commands = await vscode.commands.getCommands(true);
    if (!commands.includes('colab.mountServer')) return { accepted: false, errorName: 'NoMountCommand' };
    void Promise.resolve(vscode.commands.executeCommand('colab.mountServer')).catch(() => undefined);
    return { accepted: true };
  }

  private async fs(action: string, uri: string, dataBase64: unknown): Promise<Answer> {
    const target = vscode.Uri.parse(uri);
    if (target.scheme !== 'colab') return { exists: false, errorName: 'NotColab' };
    try {
      switch (action) {
        case 'stat': {
          const stat = await vscode.workspace.fs.stat(target);
          return { exists: true, size: stat.size };
        }
        case 'read': {
          const bytes = await vscode.workspace.fs.readFile(target);
          return { exists: true, size: bytes.byteLength, dataBase64: Buffer.from(bytes).toString('base64') };
        }
        case 'write': {
          const bytes = Buffer.from(typeof dataBase64 === 'string' ? dataBase64 : '', 'base64');
          await vscode.workspace.fs.writeFile(target, new Uint8Array(bytes));
          return { exists: true, size: bytes.byteLength };
        }
        case 'delete':
          await vscode.workspace.fs.delete(target, { recursive: false, useTrash: false });
          return { exists: false };
        default:
          return { exists: false, errorName: 'UnknownAction' };
      }
    } catch (error) {
      return { exists: false, errorName: errorName(error) };
    }
  }

  private async terminals(): Promise<Answer> {
    const terminals = await Promise.all(
      vscode.window.terminals.map(async (terminal) => {
        const state = terminal.state as { isInteractedWith?: boolean; shell?: string };
        return {
          handle: this.handleOf(terminal),
          name: terminal.name,
          processId: await shellPid(terminal),
          shellType: typeof state.shell === 'string' ? state.shell : null,
          interacted: state.isInteractedWith === true,
          exited: terminal.exitStatus !== undefined,
          exitCode: terminal.exitStatus?.code ?? null,
        };
      }),
    );
    return { terminals };
  }

  private handleOf(terminal: vscode.Terminal): string {
    let handle = this.terminalHandles.get(terminal);
    if (handle === undefined) {
      handle = `t${this.nextTerminalHandle++}`;
      this.terminalHandles.set(terminal, handle);
    }
    return handle;
  }

  private async closeTerminal(handle: string, name: string, processId: unknown): Promise<Answer> {
    const terminal = vscode.window.terminals.find((candidate) => this.terminalHandles.get(candidate) === handle);
    if (terminal === undefined) return { outcome: 'already_gone' };
    // The listed terminal, still as it was listed: a renamed one is left alone.
    if (terminal.name !== name || (await shellPid(terminal)) !== (processId ?? null)) return { outcome: 'uncertain' };
    const closed = new Promise<void>((resolve) => {
      const listener = vscode.window.onDidCloseTerminal((gone) => {
        if (gone === terminal) {
          listener.dispose();
          resolve();
        }
      });
    });
    terminal.dispose();
    await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 3000))]);
    return { outcome: vscode.window.terminals.includes(terminal) ? 'uncertain' : 'closed' };
  }

  private preflight(): Answer {
    const notebooks = vscode.workspace.notebookDocuments.filter((document) => document.notebookType === NOTEBOOK_TYPE);
    const texts = vscode.workspace.textDocuments.filter((document) => DOCUMENT_SCHEMES.has(document.uri.scheme));
    const isText = (editor: vscode.TextEditor | undefined) => editor !== undefined && DOCUMENT_SCHEMES.has(editor.document.uri.scheme);
    const tabs = vscode.window.tabGroups.all.flatMap((group) => group.tabs);
    const windowSettings = vscode.workspace.getConfiguration('window');
    return {
      notebooks: {
        open: notebooks.length,
        dirty: notebooks.filter((document) => document.isDirty).length,
        untitled: notebooks.filter((document) => document.isUntitled).length,
        visibleEditors: vscode.window.visibleNotebookEditors.length,
        activeEditor: vscode.window.activeNotebookEditor !== undefined,
      },
      textDocuments: {
        open: texts.length,
        dirty: texts.filter((document) => document.isDirty).length,
        untitled: texts.filter((document) => document.isUntitled).length,
        visibleEditors: vscode.window.visibleTextEditors.filter(isText).length,
        activeEditor: isText(vscode.window.activeTextEditor),
      },
      tabs: {
        groups: vscode.window.tabGroups.all.length,
        tabs: tabs.length,
        dirty: tabs.filter((tab) => tab.isDirty).length,
      },
      terminals: vscode.window.terminals.length,
      debugSessions: vscode.debug.activeDebugSession ? 1 : 0,
      confirmBeforeClose: windowSettings.get<string>('confirmBeforeClose') ?? null,
      restoreWindows: windowSettings.get<string>('restoreWindows') ?? null,
    };
  }

  private updateWorkspaceFolders(start: number, deleteCount: number, folders: { uri: string; name: string }[]): Answer {
    const accepted = vscode.workspace.updateWorkspaceFolders(
      start,
      deleteCount,
      ...folders.map((folder) => ({ uri: vscode.Uri.parse(folder.uri), name: folder.name })),
    );
    return { accepted };
  }
}
