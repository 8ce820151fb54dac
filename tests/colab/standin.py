"""A Colab stand-in for jupyter-mcp's end-to-end tests. It is not Colab and talks to no Google
service: a real Jupyter Server (from PyPI) behind a small HTTPS proxy that behaves, on the wire,
like the parts of Colab the standalone host uses (public facts: shared/spec/colab-facts.md).

- Runtimes live under `https://127.0.0.1:<port>/rt/<endpoint>/`, all backed by the one Jupyter
  Server. Every REST call needs the header `X-Colab-Runtime-Proxy-Token` (the Contents API also
  takes the query parameter `colab-runtime-proxy-token`); the kernel WebSocket needs the query
  parameter. Tokens expire (`--token-ttl`) and are renewed through the tunnel API's assignment
  list or the control endpoints. The Jupyter token never leaves the stand-in.
- `/rt/<endpoint>/api/colab/build-info` and `/api/colab/resources` answer with the `)]}'`
  prefix. The kernel sees `/content` (a private mount of the runtime's folder, in a mount
  namespace of its own), which is `content/` of the Contents API.
- `/tun/m/...` stands in for the tunnel API (Bearer Google token): assign in two steps (GET for
  an XSRF token, POST with `X-Goog-Colab-Token`), 412 "too many", 503 "unavailable", a POST that
  never answers ("stuck"), the assignment list, unassign in two steps, keep-alive.
- `/standin/...` (no auth) lets a test issue and expire tokens, drop kernel sockets, release a
  runtime, change the assign mode and read counters.
- `/standin/oauth/token` stands in for Google's OAuth token endpoint: the refresh-token grant
  (form POST) with the one refresh token it knows (`--google-refresh-token`) gives the Google
  access token the tunnel accepts; any other gives 400 `invalid_grant`.

Usage: standin.py --cert C --key K --state-dir D [--token-ttl S] [--runtimes N]
Prints one JSON line `{"port": P, "endpoints": [...]}` when it answers, then serves until killed.
"""

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.parse

import tornado.httpclient
import tornado.web
import tornado.websocket

XSSI = ")]}'\n"
TOKEN_HEADER = "X-Colab-Runtime-Proxy-Token"
TOKEN_QUERY = "colab-runtime-proxy-token"
HERE = os.path.dirname(os.path.abspath(__file__))


class Runtime:
    def __init__(self, endpoint, ttl, nbh=None):
        self.endpoint = endpoint
        self.nbh = nbh
        self.ttl = ttl
        self.tokens = {}  # token -> expiry (monotonic seconds)
        self.latest = None
        self.released = False
        self.kernels = set()
        self.sockets = set()
        self.keep_alives = 0
        self.issue()

    def issue(self):
        token = "standin-" + secrets.token_urlsafe(24)
        self.tokens[token] = time.monotonic() + self.ttl
        self.latest = token
        return token

    def expire_all_but_latest(self):
        self.tokens = {self.latest: self.tokens[self.latest]}

    def valid(self, token):
        expiry = self.tokens.get(token or "")
        return expiry is not None and expiry > time.monotonic()

    def seconds_left(self):
        return max(0, int(self.tokens[self.latest] - time.monotonic()))


class State:
    def __init__(self, args, jupyter_port, jupyter_token):
        self.args = args
        self.jupyter = f"http://127.0.0.1:{jupyter_port}"
        self.jupyter_ws = f"ws://127.0.0.1:{jupyter_port}"
        self.jupyter_token = jupyter_token
        self.port = None
        self.runtimes = {}
        self.assign_mode = "ok"
        self.xsrf = set()
        self.counters = {
            "assign_get": 0, "assign_post": 0, "unassign": 0, "assignments": 0, "oauth_token": 0,
        }
        self.google_token = args.google_token
        self.stuck = []

    def url(self, runtime):
        return f"https://127.0.0.1:{self.port}/rt/{runtime.endpoint}/"

    def new_runtime(self, nbh=None):
        endpoint = "standin-" + secrets.token_hex(6)
        runtime = Runtime(endpoint, self.args.token_ttl, nbh)
        self.runtimes[endpoint] = runtime
        return runtime

    def proxy_info(self, runtime):
        return {
            "token": runtime.latest,
            "tokenExpiresInSeconds": runtime.seconds_left(),
            "url": self.url(runtime),
        }

    async def release(self, runtime):
        runtime.released = True
        for connection in list(runtime.sockets):
            connection.close(1001, "runtime released")
        client = tornado.httpclient.AsyncHTTPClient()
        for kernel in list(runtime.kernels):
            await client.fetch(
                f"{self.jupyter}/api/kernels/{kernel}",
                method="DELETE",
                headers={"Authorization": f"token {self.jupyter_token}"},
                raise_error=False,
            )


def runtime_token(handler, allow_query):
    token = handler.request.headers.get(TOKEN_HEADER)
    if token is None and allow_query:
        token = handler.get_query_argument(TOKEN_QUERY, None)
    return token


def forwarded_query(handler):
    pairs = [
        (name, value.decode())
        for name, values in handler.request.query_arguments.items()
        if name not in (TOKEN_QUERY, "authuser", "token")
        for value in values
    ]
    return ("?" + urllib.parse.urlencode(pairs)) if pairs else ""


class Base(tornado.web.RequestHandler):
    def initialize(self, state):
        self.state = state

    def check_xsrf_cookie(self):
        pass

    def reply(self, status, value, prefix=True):
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish((XSSI if prefix else "") + json.dumps(value))


class RuntimeApi(Base):
    """Everything under /rt/<endpoint>/ except the kernel WebSocket."""

    async def handle(self, endpoint, path):
        runtime = self.state.runtimes.get(endpoint)
        if runtime is None or runtime.released:
            return self.reply(404, {"error": "no such runtime"}, prefix=False)
        allow_query = path.startswith("api/contents")
        if not runtime.valid(runtime_token(self, allow_query)):
            return self.reply(401, {"error": "proxy token missing, wrong or expired"}, False)
        if path == "api/colab/build-info":
            return self.reply(200, {"release_tag": self.state.args.release_tag})
        if path == "api/colab/resources":
            usage = shutil.disk_usage(self.state.args.content)
            return self.reply(
                200,
                {
                    "memory": {"totalBytes": 13 * 2**30, "freeBytes": 12 * 2**30},
                    "disks": [
                        {
                            "filesystem": {
                                "label": "/content",
                                "totalBytes": usage.total,
                                "usedBytes": usage.used,
                            }
                        }
                    ],
                    "gpus": [],
                },
            )
        body = self.request.body if self.request.method in ("POST", "PUT", "PATCH") else None
        headers = {"Authorization": f"token {self.state.jupyter_token}"}
        if "Content-Type" in self.request.headers:
            headers["Content-Type"] = self.request.headers["Content-Type"]
        response = await tornado.httpclient.AsyncHTTPClient().fetch(
            f"{self.state.jupyter}/{path}{forwarded_query(self)}",
            method=self.request.method,
            headers=headers,
            body=body,
            raise_error=False,
            allow_nonstandard_methods=True,
            request_timeout=600,
        )
        if (
            self.request.method == "POST"
            and path.rstrip("/") == "api/kernels"
            and response.code == 201
        ):
            runtime.kernels.add(json.loads(response.body)["id"])
        self.set_status(response.code)
        for name in ("Content-Type", "Location"):
            if name in response.headers:
                self.set_header(name, response.headers[name])
        if response.body:
            self.write(response.body)
        self.finish()

    get = post = put = patch = delete = handle


class Channels(tornado.websocket.WebSocketHandler):
    """The kernel WebSocket, passed through frame by frame."""

    def initialize(self, state):
        self.state = state
        self.upstream = None
        self.runtime = None

    async def get(self, endpoint, kernel_id):
        runtime = self.state.runtimes.get(endpoint)
        if runtime is None or runtime.released:
            self.set_status(404)
            return self.finish("no such runtime")
        if not runtime.valid(self.get_query_argument(TOKEN_QUERY, None)):
            self.set_status(401)
            return self.finish("proxy token missing, wrong or expired")
        header = self.request.headers.get(TOKEN_HEADER)
        if header is not None and not runtime.valid(header):
            self.set_status(401)
            return self.finish("proxy token header wrong or expired")
        request = tornado.httpclient.HTTPRequest(
            f"{self.state.jupyter_ws}/api/kernels/{kernel_id}/channels{forwarded_query(self)}",
            headers={"Authorization": f"token {self.state.jupyter_token}"},
        )
        try:
            self.upstream = await tornado.websocket.websocket_connect(
                request, max_message_size=512 * 2**20
            )
        except tornado.httpclient.HTTPClientError as error:
            self.set_status(error.code)
            return self.finish("upstream refused")
        self.runtime = runtime
        await super().get(endpoint, kernel_id)

    def select_subprotocol(self, subprotocols):
        return None

    def get_compression_options(self):
        return None

    def open(self, endpoint, kernel_id):
        self.runtime.sockets.add(self)
        asyncio.ensure_future(self.pump())

    async def pump(self):
        while True:
            message = await self.upstream.read_message()
            if message is None:
                break
            try:
                await self.write_message(message, binary=isinstance(message, bytes))
            except tornado.websocket.WebSocketClosedError:
                break
        self.close()

    async def on_message(self, message):
        if self.upstream is not None:
            await self.upstream.write_message(message, binary=isinstance(message, bytes))

    def on_close(self):
        if self.runtime is not None:
            self.runtime.sockets.discard(self)
        if self.upstream is not None:
            self.upstream.close()


class Tunnel(Base):
    """The tunnel API stand-in: /tun/m/..."""

    def authorised(self):
        if self.request.headers.get("Authorization") != f"Bearer {self.state.google_token}":
            self.reply(401, {"error": "Google credentials missing or expired"}, prefix=False)
            return False
        return True

    async def get(self, path):
        if not self.authorised():
            return
        state = self.state
        if path == "assign":
            state.counters["assign_get"] += 1
            nbh = self.get_query_argument("nbh", "")
            for runtime in state.runtimes.values():
                if runtime.nbh == nbh and not runtime.released:
                    return self.reply(
                        200,
                        {"endpoint": runtime.endpoint, "runtimeProxyInfo": state.proxy_info(runtime)},
                    )
            token = secrets.token_urlsafe(16)
            state.xsrf.add(token)
            return self.reply(
                200,
                {"acc": self.get_query_argument("accelerator", "NONE"), "nbh": nbh, "token": token,
                 "variant": "DEFAULT"},
            )
        if path == "assignments":
            state.counters["assignments"] += 1
            return self.reply(
                200,
                {
                    "assignments": [
                        {
                            "accelerator": "NONE",
                            "endpoint": runtime.endpoint,
                            "variant": 0,
                            "machineShape": 0,
                            "runtimeProxyInfo": state.proxy_info(runtime),
                        }
                        for runtime in state.runtimes.values()
                        if not runtime.released
                    ]
                },
            )
        if path.startswith("unassign/"):
            token = secrets.token_urlsafe(16)
            state.xsrf.add(token)
            return self.reply(200, {"token": token})
        if path.endswith("/keep-alive/") or path.endswith("/keep-alive"):
            runtime = state.runtimes.get(path.split("/")[0])
            if runtime is None or runtime.released:
                return self.reply(404, {"error": "no such runtime"}, prefix=False)
            if self.request.headers.get("X-Colab-Tunnel") != "Google":
                return self.reply(400, {"error": "X-Colab-Tunnel missing"}, prefix=False)
            runtime.keep_alives += 1
            return self.reply(200, {})
        return self.reply(404, {"error": "unknown tunnel path"}, prefix=False)

    async def post(self, path):
        if not self.authorised():
            return
        state = self.state
        xsrf = self.request.headers.get("X-Goog-Colab-Token")
        if xsrf not in state.xsrf:
            return self.reply(400, {"error": "X-Goog-Colab-Token missing or stale"}, prefix=False)
        state.xsrf.discard(xsrf)
        if path == "assign":
            state.counters["assign_post"] += 1
            if state.assign_mode == "too_many":
                return self.reply(412, {"error": "too many assignments"}, prefix=False)
            if state.assign_mode == "unavailable":
                return self.reply(503, {"error": "accelerator unavailable"}, prefix=False)
            if state.assign_mode == "quota":
                # Colab's quota denial: an answer without a runtime, its `outcome` says why.
                return self.reply(200, {"outcome": 1, "variant": 0, "machineShape": 0})
            if state.assign_mode == "stuck":
                waiter = asyncio.get_running_loop().create_future()
                state.stuck.append(waiter)
                await waiter
                return self.reply(503, {"error": "gave up"}, prefix=False)
            runtime = state.new_runtime(self.get_query_argument("nbh", ""))
            return self.reply(
                200,
                {
                    "accelerator": "NONE",
                    "endpoint": runtime.endpoint,
                    "variant": 0,
                    "machineShape": 0,
                    "outcome": 4,
                    "runtimeProxyInfo": state.proxy_info(runtime),
                },
            )
        if path.startswith("unassign/"):
            state.counters["unassign"] += 1
            runtime = state.runtimes.get(path[len("unassign/"):])
            if runtime is not None and not runtime.released:
                await state.release(runtime)
            return self.reply(200, {})
        return self.reply(404, {"error": "unknown tunnel path"}, prefix=False)


class OAuthToken(Base):
    """Google's OAuth token endpoint, the refresh-token grant only."""

    async def post(self):
        state = self.state
        state.counters["oauth_token"] += 1
        grant = self.get_body_argument("grant_type", "")
        refresh = self.get_body_argument("refresh_token", "")
        if grant != "refresh_token" or not self.get_body_argument("client_id", ""):
            return self.reply(400, {"error": "unsupported_grant_type"}, prefix=False)
        if refresh != state.args.google_refresh_token:
            return self.reply(
                400,
                {"error": "invalid_grant", "error_description": "Token has been expired or revoked."},
                prefix=False,
            )
        return self.reply(
            200,
            {"access_token": state.google_token, "expires_in": 3599, "token_type": "Bearer",
             "scope": "https://www.googleapis.com/auth/colaboratory"},
            prefix=False,
        )


class Control(Base):
    """The test's controls: /standin/<action>?endpoint=..."""

    async def get(self, action):
        state = self.state
        if action == "state":
            return self.reply(
                200,
                {
                    "assignMode": state.assign_mode,
                    "counters": state.counters,
                    "runtimes": {
                        endpoint: {
                            "released": runtime.released,
                            "nbh": runtime.nbh,
                            "kernels": sorted(runtime.kernels),
                            "sockets": len(runtime.sockets),
                            "keepAlives": runtime.keep_alives,
                            "url": state.url(runtime),
                        }
                        for endpoint, runtime in state.runtimes.items()
                    },
                },
                prefix=False,
            )
        return self.reply(404, {"error": "unknown control"}, prefix=False)

    async def post(self, action):
        state = self.state
        if action == "assign-mode":
            state.assign_mode = self.get_query_argument("mode")
            if state.assign_mode != "stuck":
                for waiter in state.stuck:
                    if not waiter.done():
                        waiter.set_result(None)
                state.stuck = []
            return self.reply(200, {"assignMode": state.assign_mode}, prefix=False)
        if action == "runtime":
            runtime = state.new_runtime(self.get_query_argument("nbh", None))
            return self.reply(
                200, {"endpoint": runtime.endpoint, **state.proxy_info(runtime)}, prefix=False
            )
        runtime = state.runtimes.get(self.get_query_argument("endpoint", ""))
        if runtime is None:
            return self.reply(404, {"error": "no such runtime"}, prefix=False)
        if action == "issue-token":
            return self.reply(200, {"token": runtime.issue()}, prefix=False)
        if action == "expire-tokens":
            # Every token but the newest stops working; with drop=1 the kernel sockets close,
            # so the client must reconnect with the newest token.
            runtime.expire_all_but_latest()
            dropped = 0
            if self.get_query_argument("drop", "0") == "1":
                for connection in list(runtime.sockets):
                    connection.close(1011, "token expired")
                    dropped += 1
            return self.reply(200, {"dropped": dropped}, prefix=False)
        if action == "release":
            await state.release(runtime)
            return self.reply(200, {"released": runtime.endpoint}, prefix=False)
        return self.reply(404, {"error": "unknown control"}, prefix=False)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_jupyter(args, port, token):
    """The real Jupyter Server, in a mount namespace of its own whose /content is the runtime's
    folder (so the machine's own /content, an empty mount point, is never written)."""
    root = args.root
    ipython = os.path.join(args.state_dir, "ipython")
    startup = os.path.join(ipython, "profile_default", "startup")
    os.makedirs(startup, exist_ok=True)
    shutil.copy(os.path.join(HERE, "kernel_startup.py"), os.path.join(startup, "00-colab-standin.py"))
    if not os.path.isdir("/content"):
        os.makedirs("/content")
    env = dict(os.environ)
    env.update(
        {
            "JUPYTER_TOKEN": token,
            "JUPYTER_RUNTIME_DIR": os.path.join(args.state_dir, "runtime"),
            "JUPYTER_CONFIG_DIR": os.path.join(args.state_dir, "config"),
            "JUPYTER_DATA_DIR": os.path.join(args.state_dir, "data"),
            "IPYTHONDIR": ipython,
            "PYTHONPATH": os.path.join(HERE, "site"),
            "COLAB_STANDIN_RELEASE_TAG": args.release_tag,
        }
    )
    env.pop("JUPYTER_PATH", None)
    command = [
        "unshare", "--mount", "--propagation", "private", "--",
        "sh", "-c", 'mount --bind "$0" /content && exec "$@"', args.content,
        sys.executable, "-m", "jupyter_server",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        "--ServerApp.open_browser=False", "--ServerApp.allow_root=True",
        f"--ServerApp.root_dir={root}",
    ]
    log = open(os.path.join(args.state_dir, "jupyter.log"), "ab")
    return subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            cwd=root)


async def wait_for_jupyter(process, port, token):
    client = tornado.httpclient.AsyncHTTPClient()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the Jupyter Server exited ({process.returncode}); see jupyter.log")
        try:
            response = await client.fetch(
                f"http://127.0.0.1:{port}/api/kernelspecs",
                headers={"Authorization": f"token {token}"},
                raise_error=False,
            )
            if response.code == 200:
                return
        except OSError:
            pass
        await asyncio.sleep(0.1)
    raise SystemExit("the Jupyter Server did not answer within 90 s")


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--token-ttl", type=float, default=3600)
    parser.add_argument("--runtimes", type=int, default=1)
    parser.add_argument("--release-tag", default="release-colab-standin-20261201")
    parser.add_argument("--google-token", default="standin-google-access-token")
    parser.add_argument("--google-refresh-token", default="standin-google-refresh-token")
    args = parser.parse_args()
    args.root = os.path.join(args.state_dir, "root")
    args.content = os.path.join(args.root, "content")
    os.makedirs(args.content, exist_ok=True)
    jupyter_port, jupyter_token = free_port(), secrets.token_hex(16)
    process = start_jupyter(args, jupyter_port, jupyter_token)
    try:
        await wait_for_jupyter(process, jupyter_port, jupyter_token)
        state = State(args, jupyter_port, jupyter_token)
        for _ in range(args.runtimes):
            state.new_runtime()
        app = tornado.web.Application(
            [
                (r"/rt/([^/]+)/api/kernels/([^/]+)/channels", Channels, {"state": state}),
                (r"/rt/([^/]+)/(.*)", RuntimeApi, {"state": state}),
                (r"/tun/m/(.*)", Tunnel, {"state": state}),
                (r"/standin/oauth/token", OAuthToken, {"state": state}),
                (r"/standin/([a-z-]+)", Control, {"state": state}),
            ],
            websocket_max_message_size=512 * 2**20,
        )
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(args.cert, args.key)
        server = app.listen(0, "127.0.0.1", ssl_options=context, max_body_size=512 * 2**20,
                            max_buffer_size=512 * 2**20)
        state.port = next(iter(server._sockets.values())).getsockname()[1]
        print(
            json.dumps(
                {
                    "port": state.port,
                    "runtimes": [
                        {"endpoint": runtime.endpoint, **state.proxy_info(runtime)}
                        for runtime in state.runtimes.values()
                    ],
                }
            ),
            flush=True,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


if __name__ == "__main__":
    asyncio.run(main())
