A star import between the definer and the user: both are inputs for the name.
# %%
value = 1
# %%
from helpers import *
# %%
print(value)
