Columns count characters, not bytes.
# %%
café = "naïve" + )
