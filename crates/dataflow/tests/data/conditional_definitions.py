Definitions in branches count as definitions; reads after them in the cell are local.
# %%
if flag:
    mode = "fast"
else:
    mode = "slow"
print(mode)
