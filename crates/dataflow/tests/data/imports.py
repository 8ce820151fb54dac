Import forms: `import a.b` binds `a`, aliases bind the alias, `__future__` binds nothing.
# %%
from __future__ import annotations
import os
import os.path
import numpy as np
import matplotlib.pyplot as plt
from collections import OrderedDict, defaultdict as dd
from . import sibling
from ..pkg.mod import thing as other
# %%
print(os.sep, np.pi, plt, OrderedDict, dd, sibling, other)
