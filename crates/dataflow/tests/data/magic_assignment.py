`x = %magic` defines `x`.
# %%
env = %env
path = %pwd
