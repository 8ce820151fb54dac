Allowlisted mutating methods and `setattr` mutate their receiver; other calls do not.
# %%
items = []
seen = set()
table = {}
# %%
items.append(1)
items.sort()
seen.add(2)
table.update(a=1)
table.setdefault("b", 2)
setattr(holder, "field", 3)
length = len(items)
copy = items.copy()
# %%
print(items, seen, table, copy, length)
