Names read in a function body are uses of the cell (calling the function reads them later),
unless the function binds them or the cell defines them anywhere.
# %%
scale = 2
# %%
def transform(values):
    result = []
    for value in values:
        result.append(value * scale + offset)
    return helper(result)

def helper(items):
    return sorted(items)
# %%
offset = 1
print(transform([3, 1, 2]))
