A name defined nowhere is undefined; one defined only in a later cell is an out-of-order bug.
# %%
print(later, nowhere)
# %%
later = 1
