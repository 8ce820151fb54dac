# The Colab stand-in's kernel start-up file (copied into the kernel's IPython profile by
# standin.py). It sets the release tag a Colab kernel carries, and makes the working folder
# /content, as Colab's kernels have it. Test code sends a colab_request with
# `google.colab._message.blocking_request(...)`.
import os

os.environ.setdefault("COLAB_RELEASE_TAG", os.environ.get("COLAB_STANDIN_RELEASE_TAG", "standin"))
if os.path.isdir("/content"):
    os.chdir("/content")
