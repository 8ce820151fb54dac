A shell expansion of a defined name links the cell to its definer without requiring it.
# %%
import sys
out_dir = "build"
# %%
!{sys.executable} -m pip install -q requests
!mkdir -p $out_dir
