Deeply nested expressions analyse without trouble.
# %%
value = ((((((((((((((((((((((((((((((leaf))))))))))))))))))))))))))))))
items = [[[[[[[[[[[[[[[[[[[[inner]]]]]]]]]]]]]]]]]]]]
