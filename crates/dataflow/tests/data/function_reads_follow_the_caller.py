Using a function reads what its body reads, as defined above the using cell: redefining a global
between the function and its caller links the caller to the redefinition. Transitive through
helpers; methods count for their class.
# %%
threshold = 1
# %%
def is_large(value):
    return value > threshold and check(value)

def check(value):
    return value not in blocklist

class Filter:
    def apply(self, values):
        return [v for v in values if is_large(v)]
# %%
threshold = 10
blocklist = {13}
# %%
kept = Filter().apply(range(20))
