A mutating method called on an attribute of a module changes the module's state: after
`plt.rcParams.update(...)` a new figure has the new settings, and `sys.path.append(...)` changes
what later imports find. Only a call on the module itself is a function call.
edit: 1
stale: 1, 2, 3
# %%
import matplotlib.pyplot as plt
import sys
# %%
dpi = 150
lib = "../lib"
# %%
plt.rcParams.update({"figure.dpi": dpi})
sys.path.append(lib)
# %%
fig = plt.figure()
