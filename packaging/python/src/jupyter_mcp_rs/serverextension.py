"""The Jupyter Server extension: MCP at `<base_url>mcp`, on this server's live documents.

Installed means enabled (the wheel puts `jupyter_mcp_rs.json` in the environment's
`etc/jupyter/jupyter_server_config.d`). When the server starts, the extension

- mints a credential for the `jupyter-mcp` binary and teaches the server's identity provider to
  accept it, from loopback only, as a user of its own ("jupyter-mcp");
- starts `jupyter-mcp serve --jupyter <this server over loopback> --port 0` (the JupyterLab
  host: it edits the shared documents the people in JupyterLab have open, and runs cells on their
  kernels), the credential in its environment, never on its command line;
- serves `<base_url>mcp` itself, behind the server's own authentication and authorization (its
  token, its login, JupyterHub's OAuth and API tokens: a request the server would refuse is
  refused), and passes each request through to the binary over loopback, streams (SSE) chunk by
  chunk;
- stops the binary with the server. The binary also stops when its stdin closes
  (`--exit-on-stdin-close`), so it ends with the server even when the server is killed.

When the binary cannot start or has stopped, the server's log says why and `/mcp` answers 503
with that reason.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import json
import os
import re
import secrets
import time
import urllib.parse

from jupyter_server.auth.decorator import authorized
from jupyter_server.auth.identity import User
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import httpclient, web
from tornado.simple_httpclient import SimpleAsyncHTTPClient

from .binary import binary_path

AGENT_USERNAME = "jupyter-mcp"
SETTINGS_KEY = "jupyter_mcp_rs_backend"
# How long a request waits for a starting binary before it is answered 503.
READY_WAIT_SECONDS = 60.0
# A binary that failed is started again by the next request, at most this often.
RESTART_INTERVAL_SECONDS = 30.0
# Headers that belong to one connection, never passed through (RFC 9110, 7.6.1), and those the
# proxy sets itself.
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
}
NOT_FORWARDED = HOP_BY_HOP | {
    "authorization",
    "cookie",
    "host",
    "origin",
    "referer",
    "x-xsrftoken",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
}
ANNOUNCEMENT = re.compile(r"serving .* at (http://\S+)")


def _loopback(ip: str | None) -> bool:
    return ip in ("127.0.0.1", "::1", "::ffff:127.0.0.1")


class Backend:
    """The `jupyter-mcp` process this server runs, and what became of it."""

    def __init__(self, serverapp):
        self.serverapp = serverapp
        self.log = serverapp.log
        self.credential = secrets.token_urlsafe(32)
        self.process: asyncio.subprocess.Process | None = None
        # The binary's MCP endpoint (http://127.0.0.1:<port>/mcp) and its token, once it said so.
        self.url: str | None = None
        self.token: str | None = None
        self.reason: str | None = "jupyter-mcp has not started yet"
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=200)
        self.started_at = 0.0
        self.stopping = False
        # The binary of the last start could not start or has stopped (`reason` says why).
        self.failed = False
        self.changed = asyncio.Event()
        self.client = SimpleAsyncHTTPClient(
            force_instance=True, max_clients=256, max_body_size=1 << 40
        )

    # What the binary is started with -------------------------------------------------------

    def server_url(self) -> str:
        """This server as the binary reaches it: over loopback, unless it listens elsewhere."""
        app = self.serverapp
        if getattr(app, "sock", ""):
            raise RuntimeError(
                "this Jupyter Server listens on a Unix socket, which jupyter-mcp cannot reach: "
                "serve it on a TCP port to use /mcp"
            )
        scheme = "https" if app.certfile else "http"
        host = app.ip if app.ip not in ("", "0.0.0.0", "::", "*", "localhost") else "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"{scheme}://{host}:{app.port}{app.base_url}"

    def command(self, binary: str) -> list[str]:
        app = self.serverapp
        command = [
            binary,
            "serve",
            "--port",
            "0",
            "--exit-on-stdin-close",
            "--jupyter",
            self.server_url(),
            "--root",
            os.path.abspath(os.path.expanduser(app.root_dir)),
        ]
        if app.certfile:
            command += ["--kernel-server-ca", app.certfile]
        if app.ip not in ("", "0.0.0.0", "::", "*", "localhost", "127.0.0.1", "::1") and not app.certfile:
            command.append("--allow-insecure-http")
        return command

    # Life -----------------------------------------------------------------------------------

    def _fail(self, reason: str) -> None:
        self.url = None
        self.token = None
        self.failed = True
        self.reason = reason
        self.log.error("jupyter-mcp: %s", reason)
        self.changed.set()

    async def start(self) -> None:
        self.started_at = time.monotonic()
        self.stopping = False
        self.failed = False
        self.url = self.token = None
        self.reason = "jupyter-mcp is starting"
        self.stderr_tail.clear()
        try:
            binary = binary_path()
            command = self.command(binary)
        except (FileNotFoundError, RuntimeError) as error:
            self._fail(str(error))
            return
        environment = dict(os.environ)
        environment["JUPYTER_MCP_KERNEL_SERVER_TOKEN"] = self.credential
        for name in ("JUPYTER_MCP_TOKEN", "JUPYTER_MCP_KERNEL_SERVER_TOKEN_FILE"):
            environment.pop(name, None)
        try:
            self.process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=environment,
            )
        except OSError as error:
            self._fail(f"could not start {binary}: {error}")
            return
        self.log.info("jupyter-mcp: started %s (pid %s)", binary, self.process.pid)
        process = self.process
        readers = [
            asyncio.ensure_future(self._read_stderr(process)),
            asyncio.ensure_future(self._read_stdout(process)),
        ]
        asyncio.ensure_future(self._watch(process, readers))

    async def _read_stdout(self, process) -> None:
        while True:
            line = await process.stdout.readline()
            if not line:
                return
            text = line.decode("utf-8", "replace").strip()
            match = ANNOUNCEMENT.search(text)
            if match and self.url is None:
                url = urllib.parse.urlsplit(match.group(1))
                query = urllib.parse.parse_qs(url.query)
                self.token = (query.get("token") or [None])[0]
                self.url = urllib.parse.urlunsplit((url.scheme, url.netloc, url.path, "", ""))
                self.reason = None
                self.log.info(
                    "jupyter-mcp: serving this server's notebooks at %smcp",
                    self.serverapp.base_url,
                )
                self.changed.set()
            else:
                self.log.debug("jupyter-mcp: %s", text)

    async def _read_stderr(self, process) -> None:
        while True:
            line = await process.stderr.readline()
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip()
            if text:
                self.stderr_tail.append(text)
                self.log.info("jupyter-mcp: %s", text)

    async def _watch(self, process, readers) -> None:
        code = await process.wait()
        # What the process wrote last, read to its end.
        await asyncio.gather(*readers, return_exceptions=True)
        if self.stopping or process is not self.process:
            return
        self._fail(f"jupyter-mcp exited with code {code}: {self.last_error()}")

    def last_error(self) -> str:
        """What the binary said last: its `Error:` with its causes (without a backtrace), else
        its last lines."""
        lines = list(self.stderr_tail)
        starts = [index for index, line in enumerate(lines) if line.startswith("Error:")]
        if starts:
            error = []
            for line in lines[starts[-1] :]:
                if line.startswith("Stack backtrace:"):
                    break
                error.append(line.strip())
            return " ".join(part for part in error if part)
        return " | ".join(lines[-12:]) or "it printed nothing"

    async def ready(self) -> tuple[str, str | None] | str:
        """The binary's `(url, token)` once it serves, or why it does not."""
        if (
            self.failed
            and not self.stopping
            and time.monotonic() - self.started_at >= RESTART_INTERVAL_SECONDS
        ):
            self.log.info("jupyter-mcp: starting it again")
            await self.start()
        deadline = time.monotonic() + READY_WAIT_SECONDS
        while True:
            # Cleared before looking, so that a change made after the look wakes the wait.
            self.changed.clear()
            if self.url is not None:
                return (self.url, self.token)
            if self.stopping or self.failed:
                return self.reason or "jupyter-mcp is not running"
            # Not started yet, or starting, or exited with its watcher still reading what it
            # said last: each ends in `url` or `failed`, and sets `changed`.
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return f"jupyter-mcp is still starting after {READY_WAIT_SECONDS:.0f} s"
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    async def stop(self) -> None:
        self.stopping = True
        self.reason = "the Jupyter Server is stopping"
        process = self.process
        if process is None or process.returncode is not None:
            return
        self.log.info("jupyter-mcp: stopping (pid %s)", process.pid)
        # The binary stops when its stdin closes; a signal if it does not in time.
        try:
            process.stdin.close()
        except (OSError, AttributeError):
            pass
        for ask in (None, process.terminate, process.kill):
            if ask is not None:
                try:
                    ask()
                except ProcessLookupError:
                    return
            try:
                await asyncio.wait_for(process.wait(), 5)
                return
            except asyncio.TimeoutError:
                continue


def _carries(handler, credential: str) -> bool:
    """Whether a request is the binary's own: the minted credential, from loopback."""
    header = handler.request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() not in ("token", "bearer"):
        return False
    return hmac.compare_digest(value.strip().encode(), credential.encode()) and _loopback(
        handler.request.remote_ip
    )


def _admit_the_binary(serverapp, credential: str) -> User:
    """Teaches the server's identity provider and authorizer the binary's credential."""
    agent = User(
        username=AGENT_USERNAME,
        name="jupyter-mcp",
        display_name="jupyter-mcp (agent)",
        initials="AI",
    )
    identity = serverapp.identity_provider
    get_user = identity.get_user

    def get_user_or_agent(handler):
        if _carries(handler, credential):
            handler._token_authenticated = True
            return agent
        return get_user(handler)

    identity.get_user = get_user_or_agent

    authorizer = serverapp.authorizer
    is_authorized = authorizer.is_authorized

    def is_authorized_or_agent(handler, user, action, resource):
        if user is agent:
            return True
        return is_authorized(handler, user, action, resource)

    authorizer.is_authorized = is_authorized_or_agent
    return agent


class McpHandler(APIHandler):
    """`<base_url>mcp`: the server's authentication, then the binary."""

    auth_resource = "mcp"

    def initialize(self):
        self.backend: Backend = self.settings[SETTINGS_KEY]
        self.sent_headers = False
        self.client_gone = False

    def on_connection_close(self):
        self.client_gone = True

    def write_error(self, status_code, **kwargs):
        self.set_header("Content-Type", "application/json")
        reason = kwargs.get("reason") or self._reason
        self.finish(json.dumps({"error": reason}))

    def _refuse(self, status: int, reason: str) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"error": reason}))

    def _upstream_url(self, base: str, subpath: str | None) -> str:
        arguments = [
            (name, value)
            for name, values in self.request.query_arguments.items()
            if name != "token"
            for value in values
        ]
        url = base + (subpath or "")
        if arguments:
            url += "?" + urllib.parse.urlencode(
                [(name, value.decode("utf-8", "replace")) for name, value in arguments]
            )
        return url

    def _on_header_line(self, line: str) -> None:
        line = line.rstrip("\r\n")
        if line.startswith("HTTP/"):
            parts = line.split(" ", 2)
            self._upstream_status = int(parts[1])
            self._upstream_headers = []
            return
        if line:
            name, _, value = line.partition(":")
            self._upstream_headers.append((name.strip(), value.strip()))
            return
        # The end of the headers (a 1xx answer's too, which the next status line replaces).
        if self._upstream_status < 200:
            return
        self.set_status(self._upstream_status)
        self.clear_header("Content-Type")
        for name, value in self._upstream_headers:
            if name.lower() not in HOP_BY_HOP and name.lower() != "www-authenticate":
                self.add_header(name, value)
        # Streams must reach the client as they are written, through any proxy in front.
        self.set_header("X-Accel-Buffering", "no")
        self.set_header("Cache-Control", "no-cache, no-transform")
        self.sent_headers = True

    def _on_chunk(self, chunk: bytes) -> None:
        if self.client_gone:
            # Ends the upstream request: the client is no longer there to read it.
            raise ConnectionAbortedError("the MCP client went away")
        self.write(chunk)
        future = self.flush()
        future.add_done_callback(lambda done: done.exception())

    async def _proxy(self, subpath: str | None) -> None:
        ready = await self.backend.ready()
        if isinstance(ready, str):
            self._refuse(503, ready)
            return
        base, token = ready
        headers = {
            name: value
            for name, value in self.request.headers.get_all()
            if name.lower() not in NOT_FORWARDED
        }
        if token:
            headers["Authorization"] = f"Bearer {token}"
        body = self.request.body if self.request.method in ("POST", "PUT", "PATCH") else None
        request = httpclient.HTTPRequest(
            self._upstream_url(base, subpath),
            method=self.request.method,
            headers=headers,
            body=body,
            allow_nonstandard_methods=True,
            follow_redirects=False,
            decompress_response=False,
            connect_timeout=10,
            request_timeout=7 * 24 * 3600,
            header_callback=self._on_header_line,
            streaming_callback=self._on_chunk,
        )
        self._upstream_status = 0
        self._upstream_headers = []
        try:
            response = await self.backend.client.fetch(request, raise_error=False)
        except Exception as error:  # noqa: BLE001: the connection itself failed
            response = None
            failure = str(error)
        else:
            failure = str(response.error) if response.code == 599 else None
        if self.client_gone:
            return
        if not self.sent_headers:
            self._refuse(502, f"jupyter-mcp did not answer: {failure or 'no response'}")
            return
        if response is not None and response.code == 401:
            self.log.warning("jupyter-mcp refused the extension's own token")
        self.finish()

    @web.authenticated
    @authorized
    async def get(self, subpath=None):
        await self._proxy(subpath)

    @web.authenticated
    @authorized
    async def post(self, subpath=None):
        await self._proxy(subpath)

    @web.authenticated
    @authorized
    async def delete(self, subpath=None):
        await self._proxy(subpath)


def _load_jupyter_server_extension(serverapp):
    backend = Backend(serverapp)
    _admit_the_binary(serverapp, backend.credential)
    web_app = serverapp.web_app
    web_app.settings[SETTINGS_KEY] = backend
    web_app.add_handlers(
        ".*$", [(url_path_join(serverapp.base_url, r"mcp(/.*)?"), McpHandler)]
    )
    # Stop the binary with the server (its stdin closing stops it too, however the server ends).
    cleanup_extensions = serverapp.cleanup_extensions

    async def cleanup_extensions_and_the_binary():
        await backend.stop()
        await cleanup_extensions()

    serverapp.cleanup_extensions = cleanup_extensions_and_the_binary
    serverapp.log.info("jupyter-mcp: MCP will be served at %smcp", serverapp.base_url)


async def _start_jupyter_server_extension(serverapp):
    # The server listens by now: the binary's first call to it is answered.
    backend = serverapp.web_app.settings.get(SETTINGS_KEY)
    if backend is not None:
        await backend.start()
