"""`jupyter-mcp-rs` (what `uvx jupyter-mcp-rs ...` runs): the `jupyter-mcp` binary, as it is."""

import os
import sys

from .binary import binary_path


def main():
    try:
        binary = binary_path()
    except FileNotFoundError as error:
        print(f"jupyter-mcp-rs: {error}", file=sys.stderr)
        return 1
    arguments = [binary, *sys.argv[1:]]
    if os.name == "nt":
        import subprocess

        try:
            return subprocess.call(arguments)
        except KeyboardInterrupt:
            return 130
    os.execv(binary, arguments)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
