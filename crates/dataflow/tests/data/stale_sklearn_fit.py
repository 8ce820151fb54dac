`model.fit(X, y)` trains the estimator in place (scikit-learn, Keras): predictions made below
depend on the cell that fitted it.
edit: 2
stale: 2, 3, 4
# %%
from sklearn.linear_model import LinearRegression
# %%
model = LinearRegression()
# %%
X, y = [[0], [1]], [0, 1]
# %%
model.fit(X, y)
# %%
prediction = model.predict([[2]])
