Builtins need no definer, unless a cell above shadows them.
# %%
print(len([1, 2]), sorted({3}), display)
# %%
list = [1, 2, 3]
# %%
print(list)
