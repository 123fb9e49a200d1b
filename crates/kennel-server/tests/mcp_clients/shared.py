"""N parallel MCP sessions through kennel's /mcp/{pool} over
mcp-server-time, with the official MCP Python SDK; each lists the tools and
asks the time in UTC.

Usage: shared.py BASE POOL N. Prints one JSON object.
"""

import json
import sys

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def one(url, seen):
    async with streamable_http_client(url) as (read, write, *_):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            seen["tools"] = sorted(t.name for t in tools.tools)
            result = await session.call_tool("get_current_time", {"timezone": "UTC"})
            seen["timezones"].add(json.loads(result.content[0].text)["timezone"])
            seen["sessions"] += 1


async def main(base, pool, n):
    seen = {"sessions": 0, "timezones": set()}
    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one, f"{base}/mcp/{pool}", seen)
    seen["timezones"] = sorted(seen["timezones"])
    print(json.dumps(seen))


anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
