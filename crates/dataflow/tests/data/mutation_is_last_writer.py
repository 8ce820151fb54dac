A mutating cell becomes the last writer: cells below depend on it, and it depends on the
definer.
# %%
results = []
# %%
results.append(42)
# %%
print(results)
