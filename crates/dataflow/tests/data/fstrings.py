F-string expressions are reads, including nested f-strings and format specs (PEP 701).
# %%
width = 10
# %%
label = f"{name!r:>{width}} {f'{inner}'} {value:.{precision}f}"
message = f"{'nested ' + f"{deep}"}"
