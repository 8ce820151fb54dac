Markdown cells take no part; indexes still count them.
# %%
x = 1
# %% [markdown]
# A heading that mentions x and y
# %%
y = x + 1
