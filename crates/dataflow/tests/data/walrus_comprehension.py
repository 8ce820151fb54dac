PEP 572: a walrus in a comprehension binds in the enclosing scope; the iteration variable stays
local to the comprehension.
# %%
values = [1, 2, 3]
# %%
squares = [last := v * v for v in values]
totals = {k: (running := k) for k in range(3)}
# %%
print(last, running, v)
