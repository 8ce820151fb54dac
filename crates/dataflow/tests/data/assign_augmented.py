Augmented assignment reads and rebinds; within one cell a bound name is not a use.
# %%
total = 0
# %%
total += 5
counter = 0
counter += 1
# %%
print(total, counter)
