For targets bind; loop bodies run in the module scope.
# %%
for i, (key, value) in enumerate(pairs):
    total = total + value
else:
    done = True
while running:
    step += 1
async_names = None
