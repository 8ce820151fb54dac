CRLF line endings keep line numbers and columns.
# %%
first = 1
second = first + 1
# %%
third = second
fourth = (third,
