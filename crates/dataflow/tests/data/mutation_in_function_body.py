A mutation inside a function body happens when the function is called, not when the cell runs.
# %%
registry = []
# %%
def register(item):
    registry.append(item)
