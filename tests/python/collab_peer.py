"""A person in a JupyterLab room, played by a real Yjs client: a pycrdt document kept in sync
over an httpx-ws WebSocket as JupyterLab's y-websocket provider keeps it (`PersonProvider`),
with jupyter-ydoc's YNotebook over the document, as the end-to-end tests of the JupyterLab host
need one.

It reads one JSON command per line on stdin and answers each with one JSON line on stdout
({"id": ..., "ok": true, ...} or {"id": ..., "ok": false, "error": ...}). Waiting commands watch
the document's own change events with a deadline (no polling sleeps). Times, for the
benchmark, are `time.time_ns()` when the WebSocket frame that carried the satisfying change
arrived (`at_ns`) and when the document applied it (`applied_ns`).

    python collab_peer.py BASE_URL TOKEN

Commands: open {path}; cells; wait {cell, contains?, output?, count?, timeout}; type {cell,
after?, text}; type_offline {cell, after, text} then deliver_offline {after: a wait}; set_source
{cell, source}; kernelspec {name, timeout} (waits for the document's metadata.kernelspec to
name it); awareness; collaborators {name?}; cursors; cursor_updates {interval_ms} (0 stops them);
baseline {path, rounds, cursor_interval_ms?}; close.
"""

import asyncio
import json
import sys
import time

import httpx
from httpx_ws import aconnect_ws
from jupyter_ydoc import YNotebook
from pycrdt import (
    Awareness,
    Doc,
    Map,
    Provider,
    YMessageType,
    YSyncMessageType,
    create_awareness_message,
    create_sync_message,
    create_update_message,
    handle_sync_message,
    read_message,
)
from pycrdt.websocket.websocket import HttpxWebsocket

BASE = sys.argv[1].rstrip("/")
TOKEN = sys.argv[2]


class AwarenessTap(HttpxWebsocket):
    """The room's socket, with awareness messages applied to `awareness` on the way in, and
    each frame's arrival time kept in `last_frame_ns`."""

    def __init__(self, websocket, path, awareness):
        super().__init__(websocket, path)
        self.awareness = awareness
        self.last_frame_ns = 0

    async def recv(self):
        message = await super().recv()
        self.last_frame_ns = time.time_ns()
        if message and message[0] == 1:
            self.awareness.apply_awareness_update(read_message(message[1:]), "remote")
        return message


class PersonProvider:
    """Keeps a document in sync through a room's socket as JupyterLab's y-websocket provider
    does: updates from the room are applied, and only the person's own changes go back.
    (pycrdt's Provider also sends back every update it receives, which a browser never does;
    a client that answers every frame makes its TCP stack delay its acknowledgements, and so
    changes when Jupyter Server sends the next frame.)"""

    def __init__(self, doc, channel):
        self.doc = doc
        self.channel = channel
        self.synced = asyncio.Event()
        self.applying = False
        self.outbox = asyncio.Queue()
        self.tasks = []
        self.subscription = doc.observe(self.on_change)

    def on_change(self, event):
        if not self.applying:
            self.outbox.put_nowait(create_update_message(event.update))

    async def __aenter__(self):
        await self.channel.send(create_sync_message(self.doc))
        self.tasks = [asyncio.create_task(self.receive()), asyncio.create_task(self.send())]
        return self

    async def __aexit__(self, *_):
        while not self.outbox.empty():
            await self.channel.send(self.outbox.get_nowait())
        for task in self.tasks:
            task.cancel()
        self.doc.unobserve(self.subscription)

    async def receive(self):
        async for message in self.channel:
            if message[0] != YMessageType.SYNC:
                continue
            self.applying = True
            try:
                reply = handle_sync_message(message[1:], self.doc)
            finally:
                self.applying = False
            if message[1] == YSyncMessageType.SYNC_STEP2:
                self.synced.set()
            if reply is not None:
                await self.channel.send(reply)

    async def send(self):
        while True:
            await self.channel.send(await self.outbox.get())


class Room:
    """One connection to a notebook's room."""

    def __init__(self, doc, notebook, awareness):
        self.doc = doc
        self.notebook = notebook
        self.awareness = awareness
        self.channel = None
        self.changed = asyncio.Event()
        self.last_change_ns = 0
        self.last_change_frame_ns = 0
        self.cursor_task = None

        def on_change(_event):
            self.last_change_ns = time.time_ns()
            # The provider applies a remote update as soon as its frame arrived, so the
            # newest frame is the one that carried this change.
            self.last_change_frame_ns = self.channel.last_frame_ns if self.channel else 0
            self.changed.set()

        self.subscription = doc.observe(on_change)

    async def send_cursors(self, interval):
        """Moves this person's cursor every `interval` seconds and tells the room, as
        JupyterLab sends an awareness update on each cursor move."""
        position = 0
        while True:
            position += 1
            self.awareness.set_local_state(
                {
                    "user": {"username": "person", "display_name": "Person", "color": "#1f77b4"},
                    "cursors": [{"anchor": position, "head": position, "primary": True, "empty": True}],
                }
            )
            update = self.awareness.encode_awareness_update([self.awareness.client_id])
            await self.channel.send(create_awareness_message(update))
            await asyncio.sleep(interval)

    def cursor_updates(self, interval_ms):
        if self.cursor_task is not None:
            self.cursor_task.cancel()
            self.cursor_task = None
        if interval_ms:
            self.cursor_task = asyncio.create_task(self.send_cursors(interval_ms / 1000))


async def session(client, path):
    response = await client.put(
        f"{BASE}/api/collaboration/session/{path}",
        headers={"Authorization": f"token {TOKEN}"},
        json={"format": "json", "type": "notebook"},
    )
    response.raise_for_status()
    return response.json()


def room_url(info):
    return (
        f"{BASE}/api/collaboration/room/json:notebook:{info['fileId']}"
        f"?sessionId={info['sessionId']}&token={TOKEN}"
    )


def cell_view(cell):
    outputs = cell.get("outputs") or []
    texts = []
    for output in outputs:
        if output.get("output_type") == "stream":
            texts.append(output.get("text", ""))
        elif "data" in output:
            texts.append(str(output["data"].get("text/plain", "")))
        elif output.get("output_type") == "error":
            texts.append(output.get("ename", ""))
    count = cell.get("execution_count")
    return {
        "id": cell.get("id"),
        "cell_type": cell.get("cell_type"),
        "source": cell.get("source"),
        "output_text": "".join(texts),
        "output_count": len(outputs),
        "execution_count": int(count) if isinstance(count, (int, float)) else None,
    }


def cells(room):
    return [cell_view(room.notebook.get_cell(index)) for index in range(len(room.notebook.ycells))]


def find(room, cell):
    views = cells(room)
    if isinstance(cell, int):
        return cell if cell < len(views) else None
    for index, view in enumerate(views):
        if view["id"] == cell:
            return index
    return None


def satisfied(room, command):
    index = find(room, command.get("cell", 0))
    if index is None:
        return False
    view = cells(room)[index]
    if "contains" in command and command["contains"] not in (view["source"] or ""):
        return False
    if "output" in command and command["output"] not in view["output_text"]:
        return False
    if "count" in command and view["execution_count"] is None:
        return False
    return True


async def wait_until(room, predicate, timeout):
    deadline = time.monotonic() + timeout
    while not predicate():
        room.changed.clear()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"not seen within {timeout} s; cells: {json.dumps(cells(room))}")
        try:
            await asyncio.wait_for(room.changed.wait(), remaining)
        except asyncio.TimeoutError:
            pass
    return room.last_change_frame_ns, room.last_change_ns


async def wait_awareness(awareness, found, timeout):
    """Waits (with a deadline) until `found()` returns something, re-checking on every
    awareness change."""
    changed = asyncio.Event()
    subscription = awareness.observe(lambda *_: changed.set())
    try:
        deadline = time.monotonic() + timeout
        while (result := found()) is None:
            changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"not seen within {timeout} s: {list(awareness.states.values())}")
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass
        return result
    finally:
        awareness.unobserve(subscription)


class Peer:
    def __init__(self, stack, client):
        self.stack = stack
        self.client = client
        self.room = None
        self.global_awareness = None
        self.pending = None

    async def connect(self, path, stack=None):
        stack = stack or self.stack
        info = await session(self.client, path)
        doc = Doc()
        notebook = YNotebook(doc)
        awareness = Awareness(doc)
        websocket = await stack.enter_async_context(aconnect_ws(room_url(info), self.client))
        room = Room(doc, notebook, awareness)
        room.channel = AwarenessTap(websocket, path, awareness)
        provider = PersonProvider(doc, room.channel)
        await stack.enter_async_context(provider)
        await asyncio.wait_for(provider.synced.wait(), 30)
        return room

    async def open(self, command):
        self.room = await self.connect(command["path"])
        # The collaborator list JupyterLab shows comes from this room.
        global_doc = Doc()
        self.global_awareness = Awareness(global_doc)
        websocket = await self.stack.enter_async_context(
            aconnect_ws(f"{BASE}/api/collaboration/room/JupyterLab:globalAwareness?token={TOKEN}", self.client)
        )
        await self.stack.enter_async_context(
            Provider(global_doc, AwarenessTap(websocket, "global", self.global_awareness))
        )
        return {"cells": cells(self.room)}

    async def handle(self, command):
        name = command["cmd"]
        room = self.room
        if name == "open":
            return await self.open(command)
        if name == "cells":
            return {"cells": cells(room)}
        if name == "wait":
            at, applied = await wait_until(room, lambda: satisfied(room, command), command.get("timeout", 60))
            return {"at_ns": at, "applied_ns": applied, "cells": cells(room)}
        if name == "type":
            index = find(room, command["cell"])
            source = room.notebook.ycells[index]["source"]
            text = str(source)
            position = len(text)
            if "after" in command:
                position = text.index(command["after"]) + len(command["after"])
            source.insert(position, command["text"])
            return {"cells": cells(room)}
        if name == "type_offline":
            # Typing that crosses an edit of the agent's: made on a copy of the document as it
            # is now, delivered (`deliver_offline`) only after the agent's edit arrived, so
            # neither side knew of the other's change when it made its own.
            copy = Doc()
            copy.apply_update(room.doc.get_update())
            before = copy.get_state()
            copy_notebook = YNotebook(copy)
            index = find(room, command["cell"])
            source = copy_notebook.ycells[index]["source"]
            position = str(source).index(command["after"]) + len(command["after"])
            source.insert(position, command["text"])
            self.pending = copy.get_update(before)
            return {}
        if name == "deliver_offline":
            await wait_until(room, lambda: satisfied(room, command["after"]), command.get("timeout", 60))
            room.doc.apply_update(self.pending)
            self.pending = None
            return {"cells": cells(room)}
        if name == "set_source":
            index = find(room, command["cell"])
            source = room.notebook.ycells[index]["source"]
            source.clear()
            source += command["source"]
            return {"cells": cells(room)}
        if name == "kernelspec":

            def kernelspec():
                meta = room.doc.get("meta", type=Map).to_py() or {}
                return (meta.get("metadata") or {}).get("kernelspec") or {}

            at, _ = await wait_until(
                room, lambda: kernelspec().get("name") == command["name"], command.get("timeout", 60)
            )
            return {"at_ns": at, "kernelspec": kernelspec()}
        if name == "awareness":
            return {"states": list(room.awareness.states.values())}
        if name == "collaborators":
            wanted = command.get("name")

            def named():
                states = [state for state in self.global_awareness.states.values() if state]
                names = [state.get("user", {}).get("display_name") for state in states]
                return states if wanted is None or wanted in names else None

            return {"states": await wait_awareness(self.global_awareness, named, command.get("timeout", 30))}
        if name == "cursors":

            def with_cursor():
                states = [state for state in room.awareness.states.values() if state and "cursors" in state]
                return states or None

            return {"states": await wait_awareness(room.awareness, with_cursor, command.get("timeout", 30))}
        if name == "cursor_updates":
            room.cursor_updates(command.get("interval_ms", 0))
            return {}
        if name == "baseline":
            return await self.baseline(command)
        raise ValueError(f"unknown command {name}")

    async def baseline(self, command):
        """Round trips between two bare Yjs clients on the same room, as the benchmark's
        yardstick: from one client's edit to the arrival of the frame that carried it at the
        other (which sends cursor updates every `cursor_interval_ms` when given). Both leave the
        room afterwards, and the marker they typed is taken out again."""
        from contextlib import AsyncExitStack

        path = command["path"]
        async with AsyncExitStack() as stack:
            writer = await self.connect(path, stack)
            reader = await self.connect(path, stack)
            reader.cursor_updates(command.get("cursor_interval_ms", 0))
            index = find(writer, command.get("cell", 0))
            source = writer.notebook.ycells[index]["source"]
            original = str(source)
            latencies = []
            for round_number in range(command.get("rounds", 20)):
                marker = f"#b{round_number}"
                started = time.time_ns()
                source.insert(len(str(source)), marker)
                at, _ = await wait_until(reader, lambda: marker in (cells(reader)[index]["source"] or ""), 30)
                latencies.append(at - started)
            reader.cursor_updates(0)
            source.clear()
            source += original
            await wait_until(reader, lambda: cells(reader)[index]["source"] == original, 30)
        return {"latencies_ns": latencies}


async def main():
    from contextlib import AsyncExitStack

    loop = asyncio.get_running_loop()
    async with AsyncExitStack() as stack:
        # The token also as a header, on every request and WebSocket upgrade: a JupyterHub user's
        # server may refuse tokens in URLs.
        client = await stack.enter_async_context(
            httpx.AsyncClient(timeout=30, headers={"Authorization": f"token {TOKEN}"})
        )
        peer = Peer(stack, client)
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            command = json.loads(line)
            if command["cmd"] == "close":
                print(json.dumps({"id": command.get("id"), "ok": True}), flush=True)
                break
            try:
                answer = await peer.handle(command)
                answer.update({"id": command.get("id"), "ok": True})
            except Exception as error:  # reported to the test, which fails with it
                answer = {"id": command.get("id"), "ok": False, "error": f"{type(error).__name__}: {error}"}
            print(json.dumps(answer), flush=True)


asyncio.run(main())
