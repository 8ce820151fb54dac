Other cell magics are opaque: the body is not Python and defines nothing.
# %%
%%bash
for f in *.csv; do echo $f; done
x = 1
# %%
%%writefile script.py
import os
print(os.getcwd())
# %%
print(x)
