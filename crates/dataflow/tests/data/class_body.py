Class bodies run when the cell runs and read top to bottom; methods do not see class names.
# %%
class Model(Base, metaclass=Meta):
    rate = default_rate
    scaled = rate * 2

    def predict(self, x):
        return x * rate + bias

    @property
    def name(self):
        return self.__class__.__name__
# %%
m = Model()
