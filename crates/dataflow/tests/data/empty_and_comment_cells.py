Empty and comment-only cells analyse to nothing.
# %%
# %%
# just a comment
# %%

