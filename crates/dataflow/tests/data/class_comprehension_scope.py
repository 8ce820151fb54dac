A comprehension in a class body sees class names only in its first iterable.
# %%
class Config:
    keys = ["a", "b"]
    upper = [k.upper() for k in keys]
    pairs = [(k, keys) for k in range(2)]
