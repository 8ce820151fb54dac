A function of a module is called, not a method of a container: `np.add(x, 2)` does not change
`np`, so the cell below that only uses `np` stays fresh when `x` changes (issue 38).
edit: 1
stale: 1, 2
# %%
import numpy as np
# %%
x = np.arange(4)
# %%
np.add(x, 2)
# %%
y = np.ones(3)
