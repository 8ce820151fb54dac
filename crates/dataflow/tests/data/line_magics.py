Line magics parse; `%time` arguments are analysed as code, other magics define nothing.
# %%
%matplotlib inline
%load_ext autoreload
%autoreload 2
%time model = train(data)
%timeit -n 10 -r 3 predict(model, sample)
%env
# %%
print(model)
