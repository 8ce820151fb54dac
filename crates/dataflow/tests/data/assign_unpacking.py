Tuple, list and star unpacking, chained assignment.
# %%
a, b = 1, 2
[c, (d, e)] = [3, (4, 5)]
first, *rest = range(10)
p = q = 0
# %%
print(a, b, c, d, e, first, rest, p, q)
