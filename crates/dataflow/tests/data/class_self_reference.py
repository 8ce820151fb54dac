A class body cannot read the class name (it is bound afterwards), but its methods can.
# %%
class Node:
    parent = Node
    def clone(self):
        return Node()
