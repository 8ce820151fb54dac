`async def`, `await`, `async for` and `async with`; top-level await is allowed in IPython.
# %%
import asyncio

async def fetch(url):
    async with session.get(url) as response:
        async for chunk in response.content:
            yield chunk

result = await asyncio.gather(fetch(URL))
async for item in stream():
    collected = item
