// The extension's own notebook controller: runs cells on a local Jupyter kernel through the
// native server (the same kernels and run records MCP clients use), and writes the outputs of
// runs into cells the VS Code way, with an execution order and a success mark.
import * as vscode from 'vscode';
import type { Native } from './native';
import { NOTEBOOK_TYPE } from './shell';

export const CONTROLLER_ID = 'jupyter-mcp-local-kernel';

export class FallbackController implements vscode.Disposable {
  readonly controller: vscode.NotebookController;
  private readonly selected = new Set<string>();
  /** Executions created when the user pressed Run, waiting for their outputs. */
  private readonly pending = new Map<string, vscode.NotebookCellExecution>();

  constructor(
    private readonly server: () => Native.JupyterMcpServer | undefined,
    private readonly extensionId: string,
    private readonly preferred: boolean,
    private readonly log: (line: string) => void,
  ) {
    this.controller = vscode.notebooks.createNotebookController(CONTROLLER_ID, NOTEBOOK_TYPE, 'Jupyter MCP (local kernel)');
    this.controller.description = 'A local Jupyter kernel, shared with MCP clients';
    this.controller.supportedLanguages = ['python'];
    this.controller.supportsExecutionOrder = true;
    this.controller.executeHandler = (cells, notebook) => this.execute(cells, notebook);
    this.controller.interruptHandler = (notebook) => this.interrupt(notebook);
    this.controller.onDidChangeSelectedNotebooks(({ notebook, selected }) => {
      if (selected) this.selected.add(notebook.uri.toString());
      else this.selected.delete(notebook.uri.toString());
    });
  }

  isSelectedFor(document: vscode.NotebookDocument): boolean {
    return this.selected.has(document.uri.toString());
  }

  /**
   * Without the Jupyter extension this controller is the way cells run: it is preferred for
   * every notebook, and selected for the ones MCP opens or creates when nothing else is.
   */
  async offerFor(document: vscode.NotebookDocument): Promise<void> {
    if (!this.preferred) return;
    this.controller.updateNotebookAffinity(document, vscode.NotebookControllerAffinity.Preferred);
    if (this.isSelectedFor(document)) return;
    const editor = vscode.window.activeNotebookEditor;
    if (!editor || editor.notebook.uri.toString() !== document.uri.toString()) return;
    try {
      await vscode.commands.executeCommand('notebook.selectKernel', { id: CONTROLLER_ID, extension: this.extensionId });
    } catch {
      this.log(`could not select the local kernel for ${document.uri.toString()}`);
    }
  }

  private async execute(cells: vscode.NotebookCell[], notebook: vscode.NotebookDocument): Promise<void> {
    const server = this.server();
    if (!server) {
      void vscode.window.showWarningMessage('Jupyter MCP: the server is not running, so cells cannot run on its kernel.');
      return;
    }
    for (const cell of cells) {
      this.pending.set(cell.document.uri.toString(), this.controller.createNotebookCellExecution(cell));
    }
    const reply = await server.runCells(notebook.uri.toString(), cells.map((cell) => cell.index));
    if (reply.isError) {
      this.log(`run failed: ${reply.text}`);
      void vscode.window.showWarningMessage(`Jupyter MCP could not run the cells: ${errorMessage(reply.text)}`);
    }
    // Cells that never ran (an earlier cell failed) end without a mark.
    for (const cell of cells) {
      const execution = this.pending.get(cell.document.uri.toString());
      if (execution) {
        this.pending.delete(cell.document.uri.toString());
        execution.start();
        execution.end(undefined);
      }
    }
  }

  private async interrupt(notebook: vscode.NotebookDocument): Promise<void> {
    const reply = await this.server()?.interrupt(notebook.uri.toString());
    if (reply?.isError) this.log(`interrupt failed: ${reply.text}`);
  }

  /** Writes a cell's outputs and execution summary as one execution of this controller. */
  async writeOutputs(
    cell: vscode.NotebookCell,
    outputs: vscode.NotebookCellOutput[],
    summary: vscode.NotebookCellExecutionSummary | undefined,
  ): Promise<void> {
    const key = cell.document.uri.toString();
    const execution = this.pending.get(key) ?? this.controller.createNotebookCellExecution(cell);
    this.pending.delete(key);
    execution.executionOrder = summary?.executionOrder;
    execution.start(summary?.timing?.startTime ?? Date.now());
    await execution.replaceOutput(outputs);
    execution.end(summary?.success, summary?.timing?.endTime ?? Date.now());
  }

  dispose(): void {
    this.controller.dispose();
  }
}

function errorMessage(text: string): string {
  try {
    return JSON.parse(text).error?.message ?? text;
  } catch {
    return text;
  }
}
