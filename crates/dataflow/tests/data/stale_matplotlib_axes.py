`ax.set_title(title)` changes the axes, which belong to `fig`: the saved figure carries the new
title. No method rule sees this (setters are not mutating methods, and `ax` is not `fig`), so
the last cell is a known miss.
edit: 2
stale: 2, 3, 4
# %%
import matplotlib.pyplot as plt
# %%
fig, ax = plt.subplots()
# %%
title = "Loss"
# %%
ax.set_title(title)
# %%
fig.savefig("loss.png")
