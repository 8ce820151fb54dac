`df.update(other)` changes the DataFrame in place: the analysis cannot know `df`'s type, but a
method named `update` on an object that is not a module is taken to change it.
edit: 2
stale: 2, 3, 4
# %%
import pandas as pd
# %%
df = pd.read_csv("a.csv")
# %%
other = pd.read_csv("b.csv")
# %%
df.update(other)
# %%
summary = df.describe()
