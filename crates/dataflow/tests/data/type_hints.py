Annotations are uses (evaluated lazily); string annotations are not parsed.
# %%
from typing import List

def process(items: List[Item], limit: int = 5) -> "Result":
    total: Accumulator = 0
    return total

class Record:
    field: FieldType
    other: "Later" = None
