A read before the cell's own binding is still a use of an earlier cell.
# %%
x = 1
# %%
print(x)
x = 2
