Match captures bind (`as`, `*rest`, `**kw`, bare names); value patterns and class patterns read.
# %%
match command:
    case [action, *rest]:
        handled = action
    case {"kind": kind, **extra}:
        pass
    case Point(x=0, y=py) as point:
        pass
    case Color.RED | Color.GREEN:
        pass
    case str() | bytes() if strict:
        pass
    case _:
        pass
