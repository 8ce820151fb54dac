`%run` defines unknown names, like a star import.
# %%
%run setup.py --fast
# %%
print(settings)
