Module dunders are builtins; `_`-prefixed definitions are never unused.
# %%
if __name__ == "__main__":
    __version__ = "1.0"
    _cache = {}
print(__doc__)
