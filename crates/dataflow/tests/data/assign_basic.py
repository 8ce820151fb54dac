Plain assignments: a cell defines what it assigns and uses what it reads first.
# %%
x = 1
y = x + 1
# %%
z = x * y
print(z)
