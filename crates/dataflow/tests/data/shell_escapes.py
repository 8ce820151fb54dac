Shell escapes parse; `x = !cmd` defines `x`; `{expr}` and `$name` expansions are optional uses.
# %%
!pip install -q pandas
files = !ls {directory}
listing = !!ls -la
!echo $HOME $message {count + 1}
!awk '{print $1}' data.txt
# %%
print(files, listing)
