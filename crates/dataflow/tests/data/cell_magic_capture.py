`%%capture out` analyses the body and defines the output variable.
# %%
%%capture --no-stderr captured
installed = install(package)
# %%
print(captured.stdout, installed)
