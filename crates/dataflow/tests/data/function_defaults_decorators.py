Decorators and default values run when the `def` runs, in the enclosing scope; annotations are
lazily evaluated uses.
# %%
import functools
DEFAULT = 3
# %%
@functools.lru_cache(maxsize=LIMIT)
def compute(n: Number = DEFAULT, *args: Any, key=lambda item: item, **kwargs) -> Result:
    return n
