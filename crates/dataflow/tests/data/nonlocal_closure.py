`nonlocal` binds in the enclosing function, never at module level.
# %%
def make_counter():
    count = 0
    def increment():
        nonlocal count
        count += step
        return count
    return increment
# %%
counter = make_counter()
