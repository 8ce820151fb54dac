Lambda bodies are deferred reads; their parameters are local.
# %%
key = lambda item: item[index] * weight
add = lambda a, b=offset: a + b
weight = 2
