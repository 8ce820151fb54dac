Except handler names bind; `try`/`else`/`finally` bodies run in the module scope.
# %%
try:
    import ujson as json
except ImportError as error:
    import json
    reason = str(error)
except (ValueError, CustomError):
    pass
else:
    ok = True
finally:
    cleanup()
