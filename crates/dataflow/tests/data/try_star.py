`except*` (PEP 654) handler names bind.
# %%
try:
    run_tasks()
except* ValueError as group:
    failures = group.exceptions
except* (TypeError, KeyError):
    pass
