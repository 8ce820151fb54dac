Mutating a name the cell bound itself is not an external mutation.
# %%
rows = []
rows.append(1)
rows[0] = 2
print(rows)
