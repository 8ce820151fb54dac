`os.path.join`, `plt.plot` and `os.path.basename` are no mutating methods under any rule: cells
that only share the module stay independent.
edit: 1
stale: 1, 2, 3
# %%
import os
import matplotlib.pyplot as plt
# %%
base = "data"
xs = [1, 2, 3]
# %%
path = os.path.join(base, "a.csv")
# %%
plt.plot(xs)
# %%
name = os.path.basename("b/c.csv")
