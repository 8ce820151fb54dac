// The Jupyter extension's half of the shell: each request the native server makes is one VS Code
// call, answered as data. Which command runs, what an answer means and when a cell counts as run
// are decided in Rust (crates/host-vscode/src/jupyter.rs); nothing here waits, retries or judges.
// Exception text never crosses: only an error's class name does, and Rust checks that too.
import * as vscode from 'vscode';
import type { Native } from './native';
import type { FallbackController } from './controller';
import { NOTEBOOK_TYPE } from './shell';

export const JUPYTER_EXTENSION_ID = 'ms-toolsai.jupyter';

type Answer = Native.JupyterAnswer;

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : 'Error';
}

function findDocument(uri: string): vscode.NotebookDocument | undefined {
  const wanted = vscode.Uri.parse(uri).toString();
  return vscode.workspace.notebookDocuments.find(
    (document) => document.notebookType === NOTEBOOK_TYPE && document.uri.toString() === wanted,
  );
}

/** Statuses after which a kernel object is another process than before. */
const LIFECYCLE_STATUSES = new Set(['restarting', 'autorestarting', 'dead', 'terminating']);

/** What the shell has seen of one kernel object of the Jupyter extension's API. */
interface Watched {
  /** A number of its own: a new number is another kernel. */
  identity: number;
  /** Restarts, deaths and terminations seen through its `onDidChangeStatus`. */
  lifecycle: number;
}

export class JupyterShell implements vscode.Disposable {
  private readonly watched = new WeakMap<object, Watched>();
  private readonly subscriptions: vscode.Disposable[] = [];
  private nextIdentity = 1;

  constructor(private readonly controller: FallbackController) {}

  dispose(): void {
    for (const subscription of this.subscriptions.splice(0)) subscription.dispose();
  }

  /** Numbers a kernel object on first sight and counts its lifecycle statuses from then on. */
  private watch(kernel: any): Watched {
    let seen = this.watched.get(kernel);
    if (!seen) {
      const watched: Watched = { identity: this.nextIdentity++, lifecycle: 0 };
      seen = watched;
      this.watched.set(kernel, watched);
      if (typeof kernel.onDidChangeStatus === 'function') {
        this.subscriptions.push(
          kernel.onDidChangeStatus((status: unknown) => {
            if (typeof status === 'string' && LIFECYCLE_STATUSES.has(status)) watched.lifecycle += 1;
          }),
        );
      }
    }
    return seen;
  }

  async call(request: Native.JupyterCall): Promise<Answer> {
    switch (request.op) {
      case 'backend':
        return this.backend(request.uri);
      case 'kernel':
        return this.kernel(request.uri);
      case 'controllers':
        return this.controllers(request.uri);
      case 'reveal':
        return this.reveal(request.uri);
      case 'select':
        return this.select(request.uri, request.id ?? '', request.extension ?? '');
      case 'configure':
        return this.configure(request.uri);
      case 'command':
        return this.command(request.command ?? '', request.uri);
      case 'execute':
        return this.execute(request.uri, request.index ?? 0);
      case 'executeCode':
        return this.executeCode(request.uri, request.code ?? '');
      default:
        return { errorName: 'UnknownRequest' };
    }
  }

  private backend(uri: string): Answer {
    const installed = vscode.extensions.getExtension(JUPYTER_EXTENSION_ID) !== undefined;
    const document = findDocument(uri);
    return { installed, ownControllerSelected: document !== undefined && this.controller.isSelectedFor(document) };
  }

  /** The notebook's kernel through the Jupyter extension's API, or why there is none. */
  private async activeKernel(uri: string): Promise<{ kernel?: any; lookupFailure?: string }> {
    const extension = vscode.extensions.getExtension(JUPYTER_EXTENSION_ID);
    if (!extension) return { lookupFailure: 'unavailable' };
    let api: any;
    try {
      api = extension.isActive ? extension.exports : await extension.activate();
    } catch {
      return { lookupFailure: 'activation-failed' };
    }
    const getKernel = api?.kernels?.getKernel ?? api?.getKernel;
    if (typeof getKernel !== 'function') return { lookupFailure: 'no-lookup' };
    let kernel: any;
    try {
      kernel = await getKernel.call(api?.kernels?.getKernel ? api.kernels : api, vscode.Uri.parse(uri));
    } catch {
      return { lookupFailure: 'lookup-failed' };
    }
    return kernel ? { kernel } : { lookupFailure: 'no-kernel' };
  }

  private async kernel(uri: string): Promise<Answer> {
    const { kernel, lookupFailure } = await this.activeKernel(uri);
    if (!kernel) return { lookupFailure };
    const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
    const { identity, lifecycle } = this.watch(kernel);
    return {
      kernel: { label: text(kernel.label) ?? text(kernel.name), language: text(kernel.language), status: text(kernel.status), identity, lifecycle },
    };
  }

  /** `kernel.executeCode(code)`: every output it yields, gathered until the iteration ends. */
  private async executeCode(uri: string, code: string): Promise<Answer> {
    const { kernel, lookupFailure } = await this.activeKernel(uri);
    if (!kernel) return { errorName: lookupFailure === 'no-kernel' ? 'NoActiveKernel' : 'KernelLookupFailed' };
    if (typeof kernel.executeCode !== 'function') return { errorName: 'NoExecuteCode' };
    const cancellation = new vscode.CancellationTokenSource();
    try {
      const outputs: Native.JsOutput[] = [];
      for await (const output of kernel.executeCode(code, cancellation.token)) {
        outputs.push({
          items: (output?.items ?? []).map((item: any) => ({
            mime: String(item.mime),
            dataBase64: Buffer.from(item.data ?? []).toString('base64'),
          })),
          metadata: output?.metadata,
        });
      }
      return { outputs };
    } catch (error) {
      return { errorName: errorName(error) };
    } finally {
      cancellation.dispose();
    }
  }

  private async controllers(uri: string): Promise<Answer> {
    const extension = vscode.extensions.getExtension(JUPYTER_EXTENSION_ID);
    if (extension && !extension.isActive) {
      try {
        await extension.activate();
      } catch {
        // Enumeration below still answers with what VS Code knows.
      }
    }
    const document = findDocument(uri);
    const found = (await vscode.commands.executeCommand('_resolveNotebookKernels', {
      viewType: document?.notebookType ?? NOTEBOOK_TYPE,
      uri: vscode.Uri.parse(uri),
    })) as any[] | undefined;
    const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
    return {
      controllers: (found ?? [])
        .filter((entry) => typeof entry?.id === 'string')
        .map((entry) => ({ id: entry.id, label: text(entry.label) ?? entry.id, description: text(entry.description), detail: text(entry.detail) })),
    };
  }

  private async reveal(uri: string): Promise<Answer> {
    const document = findDocument(uri);
    if (!document) return { accepted: false };
    const editor = await vscode.window.showNotebookDocument(document, { preview: false, preserveFocus: false });
    return { accepted: editor?.notebook?.uri?.toString() === document.uri.toString() };
  }

  /** Selects the controller for the notebook's own editor (never whichever editor is active). */
  private async select(uri: string, id: string, extension: string): Promise<Answer> {
    const document = findDocument(uri);
    const notebookEditor = vscode.window.visibleNotebookEditors?.find((editor) => editor.notebook === document);
    if (!document || !notebookEditor) return { accepted: false };
    const result = await vscode.commands.executeCommand('notebook.selectKernel', { notebookEditor, id, extension });
    return { accepted: result === true };
  }

  private async configure(uri: string): Promise<Answer> {
    const tool = vscode.lm?.tools?.find((candidate) => candidate.name === 'configure_notebook');
    if (!tool) return {};
    const result: any = await vscode.lm.invokeTool(
      'configure_notebook',
      { input: { filePath: vscode.Uri.parse(uri).fsPath }, toolInvocationToken: undefined } as any,
    );
    const parts: any[] = result?.content ?? [];
    return { detail: parts.map((part) => (typeof part?.value === 'string' ? part.value : '')).join('') };
  }

  private async command(command: string, uri: string): Promise<Answer> {
    try {
      await vscode.commands.executeCommand(command, vscode.Uri.parse(uri));
      return {};
    } catch (error) {
      return { errorName: errorName(error) };
    }
  }

  private async execute(uri: string, index: number): Promise<Answer> {
    try {
      await vscode.commands.executeCommand('notebook.cell.execute', {
        document: vscode.Uri.parse(uri),
        ranges: [{ start: index, end: index + 1 }],
      });
      return {};
    } catch (error) {
      return { errorName: errorName(error) };
    }
  }
}
