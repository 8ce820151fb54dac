`np.add.at(a, idx, 1)` and `torch.add(t, 1)` call functions of modules: neither changes the
module, so a later cell that only uses the module does not depend on them.
edit: 3
stale: 3, 4
# %%
import numpy as np
import torch
# %%
a = np.zeros(5)
idx = [0, 2]
# %%
np.add.at(a, idx, 1)
# %%
t = torch.ones(3)
# %%
torch.add(t, 1)
# %%
b = np.ones(3)
u = torch.zeros(2)
