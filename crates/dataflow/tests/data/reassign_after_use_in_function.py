A function reading a global that a later cell redefines: the function's cell depends on the
definer above it; the later redefinition is its own definer for cells below.
# %%
rate = 0.1
# %%
def apply(x):
    return x * (1 + rate)
# %%
rate = 0.2
print(apply(10))
