"""The stand-in's `colab_request`: an IOPub message the client must answer on stdin.

The wire shape follows Colab's (public facts in shared/spec/colab-facts.md): msg_type
`colab_request`, content `{"request": body}`, metadata `{"colab_request_type": type,
"colab_msg_id": n}`; the reply is an `input_reply` whose `value` is `{"type": "colab_reply",
"colab_msg_id": n, "error"|"data": ...}`. The kernel polls the stdin socket itself, without an
`input_request`, so a client that ignores the request leaves the cell waiting until `timeout`.
"""

import itertools
import time

_ids = itertools.count(1)


class MessageError(RuntimeError):
    """The client answered the request with an error."""


class RequestTimeout(RuntimeError):
    """Nobody answered within the timeout."""


def blocking_request(request_type, body=None, timeout_sec=5.0):
    import zmq
    from IPython import get_ipython

    kernel = get_ipython().kernel
    msg_id = next(_ids)
    parent = kernel.get_parent("shell")
    kernel.session.send(
        kernel.iopub_socket,
        "colab_request",
        {"request": body or {}},
        parent=parent,
        metadata={"colab_request_type": request_type, "colab_msg_id": msg_id},
    )
    deadline = time.monotonic() + timeout_sec
    socket = kernel.stdin_socket
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RequestTimeout(request_type)
        if not socket.poll(min(remaining, 0.025) * 1000, zmq.POLLIN):
            continue
        _, reply = kernel.session.recv(socket, 0)
        if not reply or reply["header"]["msg_type"] != "input_reply":
            continue
        value = reply["content"].get("value")
        if not isinstance(value, dict) or value.get("type") != "colab_reply":
            continue
        if value.get("colab_msg_id") != msg_id:
            continue
        if "error" in value:
            raise MessageError(value["error"])
        return value.get("data")
