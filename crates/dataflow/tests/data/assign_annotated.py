Annotated assignment: the annotation is a (lazy) use; `x: T` without a value binds nothing.
# %%
from typing import Optional
# %%
limit: int = 10
name: Optional[str]
config: "Config" = None
# %%
print(limit, name)
