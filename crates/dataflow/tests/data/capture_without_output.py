`%%capture` without an output name defines only what the body defines.
# %%
%%capture
import noisy_module
noisy_module.configure()
