`with ... as` targets bind.
# %%
with open(path) as handle, lock:
    text = handle.read()
with ctx() as (a, b):
    pass
