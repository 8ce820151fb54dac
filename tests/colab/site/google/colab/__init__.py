"""A stand-in for Colab's kernel-side `google.colab` package, for jupyter-mcp's tests only.

It is not Google's code and does nothing Colab does, except what the tests need: being
importable (the check's diagnostics look for it) and sending an IOPub `colab_request` the way
Colab's kernel does, waiting for the client's `colab_reply` on the stdin channel.
"""
