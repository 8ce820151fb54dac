# The kernel side of one jupyter-mcp transfer step.
#
# Both renderings of a `KernelRequest` (`to_python`, `to_python_with_buffers`) embed this
# program as a string literal and run it with `exec` in a fresh globals dict that holds only
# `__builtins__`, `NONCE` (this transfer's nonce), `REQUEST` (the step as JSON) and `PAYLOAD`: a
# tuple of upload chunks, each as base64 (empty without chunks), or `None` when the chunks came
# as the execute request's binary buffers.
# Nothing here touches the user's namespace. Whatever happens, it prints exactly one receipt line:
# `__JUPYTER_MCP_FILE_RECEIPT__<nonce>:<compact JSON object>`. Exceptions are reported by class
# name only, because their messages can carry user data.
import base64
import hashlib
import json
import linecache
import os
import stat
import sys
import zlib

MARKER = "__JUPYTER_MCP_FILE_RECEIPT__"
TAG = "# jupyter-mcp-transfer-request"
BLOCK = 262144
SAMPLE_SLICES = 4
SAMPLE_SLICE = 4096


class TransferOffsetMismatch(Exception):
    pass


class TransferSizeMismatch(Exception):
    pass


class TransferHashMismatch(Exception):
    pass


class TransferShortRead(Exception):
    pass


class TransferShortWrite(Exception):
    pass


class TransferNotRegularFile(Exception):
    pass


class TransferBuffersUnavailable(Exception):
    pass


def forget_tagged_sources():
    # IPython caches every cell's source in linecache for the kernel's lifetime, under a name
    # that depends on the kernel flavour (`<ipython-input-N-...>`, `/tmp/ipykernel_*/....py`).
    # Our requests are recognised by their first line instead, so payload-bearing sources are
    # dropped however they were sent. This includes the running request's own entry.
    cache = linecache.cache
    for key in list(cache):
        entry = cache.get(key)
        if type(entry) is tuple and len(entry) > 2:
            lines = entry[2]
            if type(lines) is list and lines and type(lines[0]) is str and lines[0].startswith(TAG):
                cache.pop(key, None)


def file_digest(path):
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while True:
            block = handle.read(BLOCK)
            if not block:
                break
            size += len(block)
            digest.update(block)
    return size, digest.hexdigest()


def saves_ten_percent(raw_len, packed_len):
    return raw_len > 0 and packed_len * 10 <= raw_len * 9


def pack(data):
    # zlib at level 1 when that saves at least 10 %, else None. Data that a sample of it shows
    # to be incompressible (random, already compressed) is not compressed whole.
    if len(data) > SAMPLE_SLICES * SAMPLE_SLICE:
        stride = len(data) // SAMPLE_SLICES
        sample = b"".join(
            data[index * stride : index * stride + SAMPLE_SLICE] for index in range(SAMPLE_SLICES)
        )
        if not saves_ten_percent(len(sample), len(zlib.compress(sample, 1))):
            return None
    packed = zlib.compress(data, 1)
    return packed if saves_ten_percent(len(data), len(packed)) else None


def payload_chunks():
    # The chunks as bytes, still compressed where they were sent compressed.
    if PAYLOAD is not None:
        return [base64.b64decode(encoded, validate=True) for encoded in PAYLOAD]
    # The execute request's buffers, from the parent message the kernel is handling (the
    # kernel API since ipykernel 6).
    try:
        parent = sys.modules["IPython"].get_ipython().kernel.get_parent()
        buffers = parent["buffers"]
    except Exception:
        raise TransferBuffersUnavailable() from None
    return [bytes(buffer) for buffer in buffers]


def create_temp(request):
    with open(request["temp"], "xb"):
        pass
    return {"kind": "init"}


def append_chunks(request):
    # Decode every chunk before writing any, so a bad chunk leaves the file as it was.
    specs = request["chunks"]
    chunks = payload_chunks()
    if len(specs) != len(chunks):
        raise TransferSizeMismatch()
    blocks = []
    for spec, data in zip(specs, chunks):
        if spec["encoding"] == "zlib":
            data = zlib.decompress(data)
        if len(data) != spec["bytes"]:
            raise TransferSizeMismatch()
        blocks.append(data)
    with open(request["temp"], "r+b") as handle:
        handle.seek(0, 2)
        if handle.tell() != request["offset"]:
            raise TransferOffsetMismatch()
        written = 0
        for data in blocks:
            if handle.write(data) != len(data):
                raise TransferShortWrite()
            written += len(data)
    # Durability is settled once, by the fsync before promotion, not per chunk.
    return {"kind": "chunks", "offset": request["offset"], "bytes": written, "count": len(blocks)}


def promote_temp(request):
    temp = request["temp"]
    with open(temp, "rb") as handle:
        os.fsync(handle.fileno())
    size, digest = file_digest(temp)
    if size != request["bytes"]:
        raise TransferSizeMismatch()
    if digest != request["sha256"]:
        raise TransferHashMismatch()
    if request["overwrite"]:
        os.replace(temp, request["destination"])
    else:
        # A hard link fails when the destination exists, so an existing file is never replaced,
        # even by a racing writer.
        os.link(temp, request["destination"])
        try:
            os.unlink(temp)
        except Exception as error:
            return {"kind": "error", "type": type(error).__name__, "committed": True}
    return {"kind": "done", "bytes": size, "sha256": digest}


def remove_temp(request):
    try:
        os.unlink(request["temp"])
    except FileNotFoundError:
        return {"kind": "clean", "removed": False}
    return {"kind": "clean", "removed": True}


def inspect_source(request):
    info = os.stat(request["source"])
    if not stat.S_ISREG(info.st_mode):
        raise TransferNotRegularFile()
    return {"kind": "meta", "bytes": info.st_size}


def send_buffers(payloads):
    # Sends the chunks as the binary buffers of one IOPub `display_data` message answering the
    # running request (ipykernel 6 or later): no base64, no JSON and no signature over them.
    # False when this kernel offers no way to, and the caller inlines them instead. The message
    # shows nothing (empty data) and its buffers mean something only to the receipt naming them.
    try:
        kernel = sys.modules["IPython"].get_ipython().kernel
        session = kernel.session
        socket = kernel.iopub_socket
        parent = kernel.get_parent()
    except Exception:
        return False
    try:
        session.send(
            socket,
            "display_data",
            {"data": {}, "metadata": {}, "transient": {}},
            parent=parent,
            buffers=payloads,
        )
    except Exception:
        return False
    return True


def read_chunks(request):
    with open(request["source"], "rb") as handle:
        handle.seek(request["offset"])
        data = handle.read(request["bytes"])
    if len(data) != request["bytes"]:
        raise TransferShortRead()
    step = request["chunk"]
    chunks = []
    payloads = []
    for start in range(0, len(data), step):
        chunk = data[start : start + step]
        encoding = "raw"
        packed = pack(chunk)
        if packed is not None:
            encoding = "zlib"
            chunk = packed
        chunks.append({"bytes": min(step, len(data) - start), "encoding": encoding})
        payloads.append(chunk)
    if request.get("buffers") and send_buffers(payloads):
        for index, chunk in enumerate(chunks):
            chunk["buffer"] = index
    else:
        for chunk, payload in zip(chunks, payloads):
            chunk["data"] = base64.b64encode(payload).decode("ascii")
    return {"kind": "chunks", "offset": request["offset"], "bytes": len(data), "chunks": chunks}


def hash_source(request):
    size, digest = file_digest(request["source"])
    return {"kind": "done", "bytes": size, "sha256": digest}


OPERATIONS = {
    "create_temp": create_temp,
    "append_chunks": append_chunks,
    "promote_temp": promote_temp,
    "remove_temp": remove_temp,
    "inspect_source": inspect_source,
    "read_chunks": read_chunks,
    "hash_source": hash_source,
}

try:
    forget_tagged_sources()
    request = json.loads(REQUEST)
    result = OPERATIONS[request["op"]](request)
except Exception as error:
    result = {"kind": "error", "type": type(error).__name__}
sys.stdout.write(MARKER + NONCE + ":" + json.dumps(result, separators=(",", ":")) + "\n")
sys.stdout.flush()
