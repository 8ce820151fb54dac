Identifiers are Unicode.
# %%
π = 3.14159
größe = 2
# %%
fläche = π * größe ** 2
print(fläche)
