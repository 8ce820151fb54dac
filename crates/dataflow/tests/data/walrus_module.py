A walrus at module level binds a global.
# %%
if (n := len(data)) > 10:
    print(f"{n} items")
# %%
print(n)
