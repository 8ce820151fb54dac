PEP 695 type parameters are local to their annotation scope; `type` aliases define a name.
# %%
type Pair[T] = tuple[T, T]
type Json = dict[str, Json] | list[Json] | Scalar

def first[T: Bound](items: list[T]) -> T:
    return items[0]

class Box[V = DefaultV]:
    content: V
