Objects of types the analysis cannot know (`Counter`, `deque`) are changed by their mutating
methods like the built-in containers: the rule keeps them.
edit: 1
stale: 1, 3, 4
# %%
from collections import Counter, deque
# %%
words = ["a", "b"]
# %%
counter = Counter()
queue = deque()
# %%
counter.update(words)
queue.append(words[0])
# %%
top = counter.most_common(1)
first = queue[0]
