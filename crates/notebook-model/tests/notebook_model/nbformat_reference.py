"""Writes each notebook the way Python's nbformat does, for the byte-for-byte corpus test.

Input: file paths on the command line. Output: one JSON object per line:
{"path": ..., "status": "written", "text": ..., "valid": bool, "minor": ...} or {"path": ..., "status": "refused", "reason": ...}.

nbformat gives 4.5 cells that lack an id (or repeat one) a random id when it reads them. jupyter-mcp
derives those ids from the cell content instead, so before nbformat reads the file this script puts
the same derived ids in place; everything else is nbformat's own doing.
"""

import hashlib
import json
import sys

import nbformat


def derived_id(kind, source, attempt):
    digest = hashlib.sha256()
    digest.update(b"jupyter-mcp-cell-id\0")
    digest.update(kind.encode())
    digest.update(b"\0")
    digest.update(source.encode())
    digest.update(b"\0")
    digest.update(attempt.to_bytes(4, "little"))
    return digest.hexdigest()[:8]


def join(source):
    return "".join(source) if isinstance(source, list) else source


def assign_ids_like_jupyter_mcp(raw):
    if raw.get("nbformat") != 4 or raw.get("nbformat_minor", 0) < 5:
        return
    cells = raw.get("cells", [])
    taken = set()
    needs = []
    for index, cell in enumerate(cells):
        cell_id = cell.get("id")
        if isinstance(cell_id, str) and cell_id and cell_id not in taken:
            taken.add(cell_id)
        else:
            needs.append(index)
    for index in needs:
        cell = cells[index]
        source = join(cell.get("source", ""))
        attempt = 0
        while derived_id(cell["cell_type"], source, attempt) in taken:
            attempt += 1
        cell["id"] = derived_id(cell["cell_type"], source, attempt)
        taken.add(cell["id"])


def main():
    for path in sys.argv[1:]:
        with open(path, encoding="utf8") as handle:
            text = handle.read()
        try:
            raw = json.loads(text)
            major = raw.get("nbformat")
            if major != 4:
                print(json.dumps({"path": path, "status": "refused", "reason": f"nbformat {major}"}))
                continue
            assign_ids_like_jupyter_mcp(raw)
            captured = {}
            notebook = nbformat.reads(
                json.dumps(raw), as_version=nbformat.NO_CONVERT, capture_validation_error=captured
            )
            written = nbformat.writes(notebook)
            if not written.endswith("\n"):
                written += "\n"
            record = {
                "path": path,
                "status": "written",
                "text": written,
                "valid": "ValidationError" not in captured,
                "minor": raw.get("nbformat_minor"),
            }
            print(json.dumps(record))
        except Exception as error:  # noqa: BLE001 - any failure is a refusal to report
            print(json.dumps({"path": path, "status": "refused", "reason": type(error).__name__}))


if __name__ == "__main__":
    main()
