Stores through attributes and subscripts mutate the root name: a use and a write.
# %%
import types
obj = types.SimpleNamespace()
data = {}
# %%
obj.attr = 1
obj.inner.deep = 2
data["key"] = 3
data["a"]["b"] += 1
obj.count += 1
del data["key"]
# %%
print(obj, data)
