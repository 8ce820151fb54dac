Template strings (PEP 750) read their interpolations like f-strings.
# %%
template = t"Hello {user}!"
