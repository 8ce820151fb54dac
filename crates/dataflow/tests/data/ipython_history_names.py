IPython's history names (`_`, `_3`, `_i2`, `In`, `Out`) are builtins.
# %%
previous = _ + _3
source = _i2 + In[1]
outputs = Out
