"""Where the `jupyter-mcp` binary of this installation is."""

import os
import shutil
import sys
import sysconfig

NAME = "jupyter-mcp.exe" if os.name == "nt" else "jupyter-mcp"


def binary_path():
    """The binary installed with this package: in the environment's scripts folder (pip, uv,
    pipx), the user scheme's (`pip install --user`), beside the interpreter, else on `PATH`."""
    folders = [sysconfig.get_path("scripts")]
    try:
        folders.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:
        pass
    folders.append(os.path.dirname(sys.executable))
    for folder in folders:
        if folder:
            candidate = os.path.join(folder, NAME)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    found = shutil.which("jupyter-mcp")
    if found:
        return found
    raise FileNotFoundError(
        f"the {NAME} binary of jupyter-mcp-rs is missing (looked in {', '.join(f for f in folders if f)} "
        "and on PATH): reinstall the package, e.g. `pip install --force-reinstall jupyter-mcp-rs`"
    )
