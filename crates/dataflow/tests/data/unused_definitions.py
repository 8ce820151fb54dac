Unused definitions and imports are linted; `_` names and names used in their own cell are not.
# %%
import os
import sys
_private = 1
helper = 2
local_only = 3
print(local_only)
def unused_function():
    pass
# %%
print(sys.argv)
