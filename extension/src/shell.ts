// The document operations the native server asks for, done with VS Code's notebook API.
// Each answers with a ShellReply; failures are data ({ error: { code, message } }), in our own
// words. No notebook logic lives here: Rust decides what changes, this file only applies it.
import * as vscode from 'vscode';
import type { Native } from './native';
import type { FallbackController } from './controller';

type ShellReply = Native.ShellReply;

export const NOTEBOOK_TYPE = 'jupyter-notebook';

function failure(code: string, message: string): ShellReply {
  return { error: { code, message } };
}

function findDocument(uri: string): vscode.NotebookDocument | undefined {
  const wanted = vscode.Uri.parse(uri).toString();
  return vscode.workspace.notebookDocuments.find(
    (document) => document.notebookType === NOTEBOOK_TYPE && document.uri.toString() === wanted,
  );
}

function toJsOutput(output: vscode.NotebookCellOutput): Native.JsOutput {
  return {
    items: output.items.map((item) => ({ mime: item.mime, dataBase64: Buffer.from(item.data).toString('base64') })),
    metadata: output.metadata,
  };
}

export function toVsOutput(output: Native.JsOutput): vscode.NotebookCellOutput {
  return new vscode.NotebookCellOutput(
    output.items.map((item) => new vscode.NotebookCellOutputItem(new Uint8Array(Buffer.from(item.dataBase64, 'base64')), item.mime)),
    output.metadata ?? undefined,
  );
}

function toVsSummary(summary: Native.JsExecutionSummary | undefined | null): vscode.NotebookCellExecutionSummary | undefined {
  if (!summary) return undefined;
  const timing =
    summary.startTime != null && summary.endTime != null ? { startTime: summary.startTime, endTime: summary.endTime } : undefined;
  return { executionOrder: summary.executionOrder ?? undefined, success: summary.success ?? undefined, timing };
}

function toCellData(cell: Native.JsCellData): vscode.NotebookCellData {
  const data = new vscode.NotebookCellData(cell.kind as vscode.NotebookCellKind, cell.source, cell.languageId);
  data.metadata = cell.metadata;
  data.outputs = cell.outputs.map(toVsOutput);
  data.executionSummary = toVsSummary(cell.executionSummary);
  return data;
}

export class Shell {
  constructor(
    private readonly controller: FallbackController,
    private readonly log: (line: string) => void,
  ) {}

  snapshot(document: vscode.NotebookDocument): Native.JsSnapshot {
    return {
      uri: document.uri.toString(),
      version: document.version,
      isUntitled: document.isUntitled,
      isDirty: document.isDirty,
      metadata: document.metadata ?? {},
      cells: document.getCells().map((cell) => ({
        data: {
          kind: cell.kind,
          languageId: cell.document.languageId,
          source: cell.document.getText(),
          metadata: cell.metadata ?? {},
          outputs: cell.outputs.map(toJsOutput),
          executionSummary: cell.executionSummary
            ? {
                executionOrder: cell.executionSummary.executionOrder,
                success: cell.executionSummary.success,
                startTime: cell.executionSummary.timing?.startTime,
                endTime: cell.executionSummary.timing?.endTime,
              }
            : undefined,
        },
        fragment: cell.document.uri.fragment,
      })),
      canWriteOutputs: this.controller.isSelectedFor(document),
    };
  }

  async list(): Promise<ShellReply> {
    return {
      uris: vscode.workspace.notebookDocuments
        .filter((document) => document.notebookType === NOTEBOOK_TYPE)
        .map((document) => document.uri.toString()),
    };
  }

  async read(uri: string): Promise<ShellReply> {
    const document = findDocument(uri);
    return document ? { snapshot: this.snapshot(document) } : {};
  }

  private async show(document: vscode.NotebookDocument): Promise<void> {
    await vscode.window.showNotebookDocument(document, { preview: false, preserveFocus: false });
    await this.controller.offerFor(document);
  }

  async open(uri: string): Promise<ShellReply> {
    const open = findDocument(uri);
    if (open) {
      // A live document is revealed, never reloaded: unsaved changes stay.
      await this.show(open);
      return { alreadyOpen: true, snapshot: this.snapshot(open) };
    }
    const target = vscode.Uri.parse(uri);
    if (target.scheme !== 'file') return failure('not_found', uri);
    try {
      await vscode.workspace.fs.stat(target);
    } catch {
      return failure('not_found', uri);
    }
    try {
      const document = await vscode.workspace.openNotebookDocument(target);
      await this.show(document);
      return { alreadyOpen: false, snapshot: this.snapshot(document) };
    } catch {
      return failure('failed', `VS Code could not open ${uri} as a Jupyter notebook`);
    }
  }

  async apply(request: Native.ApplyRequest): Promise<ShellReply> {
    const document = findDocument(request.uri);
    if (!document) return failure('not_found', request.uri);
    if (document.version !== request.baseVersion) return failure('stale', request.uri);
    // Cells as they are now: every index of the request refers to this state.
    const cells = document.getCells();
    const edit = new vscode.WorkspaceEdit();
    for (const text of request.textEdits) {
      const range = new vscode.Range(text.startLine, text.startCharacter, text.endLine, text.endCharacter);
      edit.replace(cells[text.cell].document.uri, range, text.text);
    }
    const notebookEdits: vscode.NotebookEdit[] = [];
    for (const metadata of request.metadataEdits) {
      notebookEdits.push(vscode.NotebookEdit.updateCellMetadata(metadata.cell, metadata.metadata));
    }
    for (const replacement of request.replacements) {
      notebookEdits.push(
        vscode.NotebookEdit.replaceCells(
          new vscode.NotebookRange(replacement.start, replacement.end),
          replacement.cells.map(toCellData),
        ),
      );
    }
    if (request.notebookMetadata) {
      notebookEdits.push(vscode.NotebookEdit.updateNotebookMetadata(request.notebookMetadata));
    }
    if (notebookEdits.length > 0) edit.set(document.uri, notebookEdits);
    if (request.textEdits.length > 0 || notebookEdits.length > 0) {
      const applied = await vscode.workspace.applyEdit(edit);
      if (!applied) return failure('failed', `VS Code refused the edit of ${request.uri}; nothing was changed`);
    }
    for (const outputs of request.outputEdits) {
      await this.controller.writeOutputs(
        cells[outputs.cell],
        outputs.outputs.map(toVsOutput),
        toVsSummary(outputs.executionSummary),
      );
    }
    return { snapshot: this.snapshot(document) };
  }

  async create(request: Native.CreateRequest): Promise<ShellReply> {
    const target = vscode.Uri.parse(request.uri);
    try {
      let document: vscode.NotebookDocument;
      if (target.scheme === 'untitled') {
        // An untitled document of exactly this name, then its cells.
        document = await vscode.workspace.openNotebookDocument(target);
        const edit = new vscode.WorkspaceEdit();
        edit.set(document.uri, [
          vscode.NotebookEdit.replaceCells(new vscode.NotebookRange(0, document.cellCount), request.cells.map(toCellData)),
          vscode.NotebookEdit.updateNotebookMetadata(request.metadata),
        ]);
        if (!(await vscode.workspace.applyEdit(edit))) {
          return failure('failed', `VS Code refused to fill the new notebook ${request.uri}`);
        }
      } else {
        try {
          await vscode.workspace.fs.stat(target);
          return failure('already_exists', request.uri);
        } catch {
          // It does not exist: good.
        }
        await vscode.workspace.fs.writeFile(target, new TextEncoder().encode(request.ipynb));
        document = await vscode.workspace.openNotebookDocument(target);
      }
      await this.show(document);
      return { snapshot: this.snapshot(document) };
    } catch {
      return failure('failed', `VS Code could not create ${request.uri}`);
    }
  }

  async save(uri: string): Promise<ShellReply> {
    const document = findDocument(uri);
    if (!document) return failure('not_found', uri);
    if (document.isUntitled) return failure('failed', `${uri} is untitled: save it in VS Code with Save As`);
    if (!document.isDirty) {
      // VS Code saves only dirty documents: make it dirty with a metadata round trip.
      const original = { ...(document.metadata ?? {}) };
      for (const metadata of [{ ...original, __jupyterMcpForceSave: Math.random().toString(36).slice(2) }, original]) {
        const edit = new vscode.WorkspaceEdit();
        edit.set(document.uri, [vscode.NotebookEdit.updateNotebookMetadata(metadata)]);
        if (!(await vscode.workspace.applyEdit(edit))) {
          return failure('failed', `VS Code refused to mark ${uri} for saving`);
        }
      }
    }
    const saved = await document.save();
    // `save` also answers false when there was nothing to save: the two metadata edits can
    // leave the document at its saved version again. Clean after the call, the file on disk
    // holds what the window shows, which is what was asked.
    if (!saved && document.isDirty) return failure('failed', `VS Code did not save ${uri}`);
    this.log(`saved ${uri}`);
    return {};
  }
}
