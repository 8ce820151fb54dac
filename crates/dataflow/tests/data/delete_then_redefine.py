`del x; x = ...` leaves x defined; the deletion is not listed.
# %%
x = 1
# %%
del x
x = 2
# %%
print(x)
