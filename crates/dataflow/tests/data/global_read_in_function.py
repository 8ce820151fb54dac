A function that declares `global` and only reads the name is a use, not a definition.
# %%
def show():
    global settings
    return settings
