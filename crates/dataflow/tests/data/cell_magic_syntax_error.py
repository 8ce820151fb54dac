A syntax error in the body of `%%time` is reported at the line the user sees.
# %%
%%time
ok = 1
broken = [
