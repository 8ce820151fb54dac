"""The 2026-07-28 side of the MCP feature tests: the official Python SDK (`mcp`, mode auto) as
a client of the jupyter-mcp server at URL, driving tasks, resources, subscriptions and prompts
against the notebooks the Rust test prepared under ROOT. Prints one JSON object of findings on
the last line; the Rust test (tests/tests/e2e/mcp_features.rs) asserts on them, and every check
that can be made here is also an assert (a failure exits non-zero with the reason).

    python mcp_2026.py URL ROOT
"""

import asyncio
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Literal

import anyio
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import CallToolResult, Request, RequestParams, Result

TASKS = "io.modelcontextprotocol/tasks"


class TaskId(RequestParams):
    task_id: str


class GetTask(Request[TaskId, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskId
    name_param = "taskId"


class CancelTask(Request[TaskId, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskId
    name_param = "taskId"


class CreatedTask(Result):
    result_type: Literal["task"]
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    status_message: str | None = None


class TaskState(Result):
    model_config = {"extra": "allow"}
    task_id: str
    status: str
    poll_interval_ms: int | None = None
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


async def follow_task(session, task_id: str) -> TaskState:
    """Polls tasks/get until the task is terminal (the extension has no pushed status)."""
    with anyio.fail_after(120):
        while True:
            state = await session.send_request(GetTask(params=TaskId(task_id=task_id)), TaskState)
            if state.status in ("completed", "failed", "cancelled"):
                return state
            await anyio.sleep((state.poll_interval_ms or 500) / 1000)


class Tasks(ClientExtension):
    """The client side of the tasks extension: a task handle is followed to its result."""

    identifier = TASKS

    def claims(self):
        async def resolve(created: CreatedTask, context: ClaimContext) -> CallToolResult:
            final = await follow_task(context.session, created.task_id)
            assert final.status == "completed", final
            return CallToolResult.model_validate(final.result)

        return [ResultClaim(result_type="task", model=CreatedTask, resolve=resolve)]


def receipt(result: CallToolResult) -> dict:
    return json.loads(result.content[0].text)


async def main(url: str, root: Path) -> None:
    warnings.simplefilter("ignore")
    findings: dict[str, Any] = {}
    async with Client(url, mode="auto", extensions=[Tasks()]) as client:
        findings["protocol"] = client.protocol_version
        assert client.protocol_version == "2026-07-28", client.protocol_version
        session = client.session

        # A task-run followed to completion: the claim turns the handle into the final receipt.
        done = receipt(await client.call_tool(
            "run_cells", {"notebookRef": "tasks.ipynb", "cellIds": ["quick"]}))
        assert done["status"] == "completed", done
        findings["task_output"] = done["cells"][0].get("output", "")

        # A task cancelled mid-run: the kernel is interrupted and the receipt says so.
        created = await session.call_tool(
            "run_cells", {"notebookRef": "tasks.ipynb", "cellIds": ["slow"]}, allow_claimed=True)
        assert isinstance(created, CreatedTask), created
        with anyio.fail_after(60):
            while True:  # until the cell is running in the kernel
                state = await session.send_request(
                    GetTask(params=TaskId(task_id=created.task_id)), TaskState)
                running = receipt(await client.call_tool(
                    "get_execution", {"notebookRef": "tasks.ipynb", "waitMs": 500,
                                      "includeOutputs": True}))
                if "sleeping" in json.dumps(running):
                    break
        await session.send_request(CancelTask(params=TaskId(task_id=created.task_id)), Result)
        cancelled = await follow_task(session, created.task_id)
        findings["cancelled_status"] = cancelled.status
        after = receipt(await client.call_tool(
            "get_execution", {"notebookRef": "tasks.ipynb", "waitMs": 30000, "includeOutputs": True}))
        findings["cancelled_receipt"] = {"status": after["status"],
                                         "reasonCode": after.get("reasonCode"),
                                         "text": json.dumps(after)[:4000]}

        # A retry with the same idempotency key gets the same task and starts nothing new.
        arguments = {"notebookRef": "tasks.ipynb", "cellIds": ["count"], "idempotencyKey": "k-1"}
        first = await session.call_tool("run_cells", arguments, allow_claimed=True)
        second = await session.call_tool("run_cells", arguments, allow_claimed=True)
        findings["same_task"] = first.task_id == second.task_id
        await follow_task(session, first.task_id)

        # Resources: the notebooks, the templates, a PNG output as a blob.
        listed = await client.list_resources()
        findings["resources"] = [(item.uri, item.mime_type) for item in listed.resources]
        templates = await client.list_resource_templates()
        findings["templates"] = [item.uri_template for item in templates.resource_templates]
        notebook_uri = next(uri for uri, _ in findings["resources"] if uri.endswith("plot.ipynb"))
        png = await client.read_resource(notebook_uri + "#cells/figure/outputs/0", cache_mode="bypass")
        blobs = [item.blob for item in png.contents if getattr(item, "blob", None)]
        findings["png_blob"] = blobs[0] if blobs else None

        # A read with a 2 MB log returns a link that resolves to the whole log.
        read = await client.call_tool(
            "read_notebook", {"notebookRef": "log.ipynb", "view": "outputs"})
        links = [item for item in read.content if item.type == "resource_link"]
        findings["log_links"] = [item.uri for item in links]
        if links:
            whole = await client.read_resource(links[0].uri, cache_mode="bypass")
            findings["log_length"] = len(whole.contents[0].text)

        # A subscription hears a change another process made to the file.
        watched = next(uri for uri, _ in findings["resources"] if uri.endswith("watched.ipynb"))
        async with client.listen(resource_subscriptions=[watched]) as subscription:
            path = root / "watched.ipynb"
            changed = json.loads(path.read_text())
            changed["cells"][0]["source"] = ["x = 2\n"]
            started = time.monotonic()
            path.write_text(json.dumps(changed, indent=1) + "\n")
            with anyio.fail_after(10):
                async for event in subscription:
                    findings["update_uri"] = getattr(event, "uri", None)
                    findings["update_seconds"] = time.monotonic() - started
                    break

        # Prompts, listed and rendered.
        prompts = await client.list_prompts()
        findings["prompts"] = [(item.name, bool(item.description)) for item in prompts.prompts]
        rendered = await client.get_prompt("orient", {"notebook": "tasks.ipynb"})
        findings["prompt_text"] = rendered.messages[0].content.text

        # The viewer is linked from the tools it shows.
        tools = await client.list_tools()
        findings["viewer_tools"] = sorted(
            tool.name for tool in tools.tools if ((tool.meta or {}).get("ui") or {}).get("resourceUri"))
    print(json.dumps(findings))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
