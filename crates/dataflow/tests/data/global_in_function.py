`global x` in a function that assigns `x` makes the cell a definer of `x`.
# %%
def init():
    global config, counter
    config = {"debug": True}
    counter += 1
    local_only = 1

init()
print(config)
# %%
print(config, counter)
