Comprehension targets are local; the first iterable is read in the enclosing scope; nested
generators and conditions read free names.
# %%
matrix = [[1, 2], [3, 4]]
# %%
flat = [cell for row in matrix for cell in row if cell > threshold]
pairs = {key: value for key, value in mapping.items()}
unique = {x % modulus for x in flat}
gen = (y for y in flat)
print(row)
