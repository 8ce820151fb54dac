A cell that does not parse reports the first error, defines nothing, and does not break others.
# %%
good = 1
# %%
bad = (1,
print(good)
# %%
print(good, bad)
