pandas methods mutate only with `inplace=True`.
# %%
import pandas as pd
df = pd.DataFrame({"a": [1, None]})
# %%
df.fillna(0, inplace=True)
df.reset_index(drop=True, inplace=True)
other = df.drop(columns=["a"])
df.sort_values("a", inplace=False)
# %%
print(df, other)
