`%timeit` runs its statement inside a function: it reads globals but defines nothing.
# %%
%timeit result = compute(x)
# %%
print(result)
