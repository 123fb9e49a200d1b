"""One MCP session through kennel's /mcp/{pool}, with the official MCP
Python SDK (`mcp` from PyPI): its Streamable HTTP client and ClientSession.

Usage: session.py BASE POOL. BASE is kennel's address (http://127.0.0.1:PORT),
POOL a pool of @modelcontextprotocol/server-everything. Prints one JSON
object with what the session saw; the Rust test (tests/mcp_gateway.rs)
reads it.
"""

import json
import sys
import urllib.request

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client


def worker_pids(base, pool):
    with urllib.request.urlopen(f"{base}/pools/{pool}/workers") as r:
        rows = json.load(r)["workers"]
    return sorted(w["pid"] for w in rows if w.get("pid"))


async def main(base, pool):
    seen = {"progress": [], "logs": [], "sampled": []}

    async def sampling(context, params):
        text = params.messages[0].content.text
        seen["sampled"].append(text)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"sampled: {len(text)} chars"),
            model="kennel-test",
            stop_reason="endTurn",
        )

    async def logging(params):
        seen["logs"].append(params.level)

    async def progress(done, total, message):
        seen["progress"].append(done)

    async with streamable_http_client(f"{base}/mcp/{pool}") as (read, write, *_):
        async with ClientSession(
            read, write, sampling_callback=sampling, logging_callback=logging
        ) as session:
            init = await session.initialize()
            seen["protocol"] = init.protocol_version
            seen["server"] = init.server_info.name
            tools = await session.list_tools()
            seen["tools"] = sorted(t.name for t in tools.tools)
            echo = await session.call_tool("echo", {"message": "through kennel"})
            seen["echo"] = echo.content[0].text
            seen["pids_start"] = worker_pids(base, pool)

            await session.call_tool(
                "trigger-long-running-operation",
                {"duration": 1, "steps": 4},
                progress_callback=progress,
            )

            sampled = await session.call_tool(
                "trigger-sampling-request", {"prompt": "a haiku", "maxTokens": 10}
            )
            seen["sampling_result"] = sampled.content[0].text

            # Logging: the server's simulated logs, at the level set.
            await session.set_logging_level("debug")
            await session.call_tool("toggle-simulated-logging", {})
            with anyio.move_on_after(20):
                while len(seen["logs"]) < 2:
                    await anyio.sleep(0.1)
            await session.call_tool("toggle-simulated-logging", {})

            # A call the client gives up on: the SDK sends
            # notifications/cancelled; the server process stays.
            with anyio.move_on_after(1.5):
                await session.call_tool(
                    "trigger-long-running-operation", {"duration": 30, "steps": 1}
                )
            seen["cancelled"] = True
            after = await session.call_tool("echo", {"message": "after the cancel"})
            seen["after_cancel"] = after.content[0].text
            seen["pids_after_cancel"] = worker_pids(base, pool)
    print(json.dumps(seen))


anyio.run(main, sys.argv[1], sys.argv[2])
