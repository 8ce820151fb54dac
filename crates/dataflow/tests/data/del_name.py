`del x` uses and deletes `x`; a later use of `x` is linted.
# %%
tmp = load()
cache = {}
# %%
del cache
# %%
print(cache)
