A star import defines unknown names: names nothing else defines are linked to it, not reported.
Builtins are not taken to be shadowed by it.
# %%
from math import *
# %%
r = 2.0
# %%
area = pi * r ** 2
print(area, sqrt(area), len([1]))
