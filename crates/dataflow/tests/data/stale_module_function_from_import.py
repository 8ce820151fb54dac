A module bound by `from package import module` is a module too: `char.add(...)` is
`numpy.char.add`, a function.
edit: 1
stale: 1, 2
# %%
from numpy import char
# %%
names = ["a", "b"]
# %%
char.add(names, "_x")
# %%
upper = char.upper(["c"])
