`%%time` on the first line: the body is analysed; line numbers are unchanged.
# %%

%%time
features = extract(raw)
model = fit(features)
# %%
print(model)
