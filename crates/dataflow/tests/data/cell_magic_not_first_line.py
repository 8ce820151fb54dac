A `%%magic` that is not on the first line is an escape command with no effect on the analysis.
# %%
y = 1
%%time
z = y
