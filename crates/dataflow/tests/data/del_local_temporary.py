A name bound and deleted in the same cell is neither defined nor unused.
# %%
scratch = compute()
result = scratch * 2
del scratch
# %%
print(result)
