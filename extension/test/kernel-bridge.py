"""The kernel behind the STAND-IN of the Jupyter extension's `executeCode`: a real ipykernel,
started with jupyter_client, that runs each request read from stdin (one JSON line
`{"id": N, "code": "..."}`) and answers one JSON line `{"id": N, "outputs": [...]}` with the
outputs as VS Code's Jupyter extension yields them: streams as
`application/vnd.code.notebook.stdout|stderr` items, errors as
`application/vnd.code.notebook.error` (JSON name/message/stack), other MIME types as they are.
"""
import json
import sys

from jupyter_client.manager import start_new_kernel

STREAM = "application/vnd.code.notebook.{}"
ERROR = "application/vnd.code.notebook.error"


def main():
    manager, client = start_new_kernel(kernel_name="python3")
    try:
        for line in sys.stdin:
            request = json.loads(line)
            outputs = []

            def collect(message):
                kind = message["msg_type"]
                content = message["content"]
                if kind == "stream":
                    outputs.append([{"mime": STREAM.format(content["name"]), "text": content["text"]}])
                elif kind == "error":
                    error = {"name": content["ename"], "message": content["evalue"],
                             "stack": "\n".join(content["traceback"])}
                    outputs.append([{"mime": ERROR, "text": json.dumps(error)}])
                elif kind in ("execute_result", "display_data"):
                    outputs.append([
                        {"mime": mime, "text": value if isinstance(value, str) else json.dumps(value)}
                        for mime, value in content["data"].items()
                    ])

            client.execute_interactive(request["code"], output_hook=collect, store_history=False,
                                       timeout=300)
            sys.stdout.write(json.dumps({"id": request["id"], "outputs": outputs}) + "\n")
            sys.stdout.flush()
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


if __name__ == "__main__":
    main()
