Help syntax parses: `obj?`, `obj??` and `?obj` are optional uses of the object.
# %%
import numpy as np
# %%
np.linalg.norm?
model??
?len
np.*load*?
