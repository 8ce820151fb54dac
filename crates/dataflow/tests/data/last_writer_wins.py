The nearest earlier writer is the input; a redefinition shadows the first definition.
# %%
df = load("a.csv")
# %%
df = load("b.csv")
# %%
summary = df.describe()
