`x = %time expr` analyses the expression and binds `x`.
# %%
def f():
    return 1
# %%
result = %time f()
