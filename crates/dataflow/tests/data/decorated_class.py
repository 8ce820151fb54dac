Class decorators and base-class keywords are read when the class statement runs.
# %%
from dataclasses import dataclass, field
# %%
@dataclass(frozen=FROZEN)
class Point(Base, order=True):
    x: float = 0.0
    tags: list = field(default_factory=list)
