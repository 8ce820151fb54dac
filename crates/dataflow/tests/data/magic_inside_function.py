Escape commands inside function bodies are deferred like the rest of the body.
# %%
def setup():
    %time prepared = prepare(source)
    !echo {target}
    return prepared
