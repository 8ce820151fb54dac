"""A real MCP client (the official Python SDK) at a Jupyter Server's `/mcp`, which the
jupyter-mcp-rs server extension serves: lists the tools and the server's notebooks, replaces the
source of cell CELL of NOTEBOOK with SOURCE, runs it, and prints one JSON object of findings on
the last line for the Rust test (tests/tests/packages/server_extension.rs) to assert on.

With GATED and GATE, it also proves that the proxy streams: it runs cell c0 of the notebook
GATED, which prints and then waits until the file GATE exists, and this client makes GATE only
when a progress notification of that call has reached it. A proxy that held the stream back until
the call ended would never deliver one, and the run would not end (the script fails after 90 s).

    python mcp_through_jupyter.py URL TOKEN NOTEBOOK CELL SOURCE [GATED GATE]

TOKEN goes in `Authorization: token <TOKEN>`, as Jupyter's clients send it. Over https the CA
comes from SSL_CERT_FILE.
"""

import asyncio
import json
import os
import ssl
import sys
import warnings

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def payload(result):
    assert not result.is_error, result
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def main(url, token, notebook, cell, source, gated=None, gate=None):
    warnings.simplefilter("ignore")
    verify = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"]) if "SSL_CERT_FILE" in os.environ else True
    http = httpx2.AsyncClient(
        headers={"Authorization": f"token {token}"},
        timeout=httpx2.Timeout(30, read=300),
        verify=verify,
    )
    findings = {}
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        tools = await client.list_tools()
        findings["tools"] = sorted(tool.name for tool in tools.tools)
        listed = payload(await client.call_tool("list_notebooks", {}))
        findings["notebooks"] = listed
        read = payload(await client.call_tool("read_notebook", {"notebookRef": notebook}))
        rev = next(entry["rev"] for entry in read["cells"] if entry.get("cell_id") == cell)
        edit = payload(
            await client.call_tool(
                "edit_cells",
                {
                    "notebookRef": notebook,
                    "edits": [
                        {"editType": "edit", "cellId": cell, "expectedRev": rev, "newCode": source}
                    ],
                },
            )
        )
        findings["edit"] = edit
        run = payload(
            await client.call_tool(
                "run_cells",
                {"notebookRef": notebook, "cellIds": [cell], "waitMs": 60000, "outputMode": "full"},
            )
        )
        findings["run"] = run
        if gated:
            progress = []

            async def on_progress(done, total, message):
                progress.append({"progress": done, "total": total, "message": message})
                if not os.path.exists(gate):
                    with open(gate, "w"):
                        pass

            with anyio.fail_after(90):
                streamed = payload(
                    await client.call_tool(
                        "run_cells",
                        {"notebookRef": gated, "cellIds": ["c0"], "waitMs": 80000},
                        progress_callback=on_progress,
                    )
                )
            findings["streamed"] = {"run": streamed, "progress": progress}
    print(json.dumps(findings), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:8]))
