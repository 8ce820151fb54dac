Containers the notebook built are changed in place by their methods: a cell that reads them
after `append`, `update` or `add` depends on the cell that called it.
edit: 3
stale: 3, 4, 5, 6, 7
# %%
items = []
# %%
d = {}
# %%
s = set()
# %%
value = 1
# %%
items.append(value)
# %%
d.update(key=value)
# %%
s.add(value)
# %%
print(items, d, s)
