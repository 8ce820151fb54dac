A walrus in a comprehension inside a function binds in the function, not globally.
# %%
def f(items):
    found = any((hit := item) > limit for item in items)
    return hit
