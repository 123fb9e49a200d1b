// One MCP session through kennel's /mcp/{pool} with the official
// TypeScript SDK (@modelcontextprotocol/sdk from npm): its Client and
// StreamableHTTPClientTransport, against server-everything. Prints one
// JSON object with what the session saw (tests/mcp_gateway.rs reads it).
//
// Usage: node session.mjs URL (NODE_PATH: the node_modules holding the SDK)

import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.env.NODE_PATH, 'x.js'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');

const url = new URL(process.argv[2]);
const client = new Client({ name: 'kennel-test', version: '1.0.0' });
const transport = new StreamableHTTPClientTransport(url);
await client.connect(transport);
const seen = { protocol: transport.protocolVersion, progress: [] };
const echo = await client.callTool({ name: 'echo', arguments: { message: 'from typescript' } });
seen.echo = echo.content[0].text;
await client.callTool(
  { name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 3 } },
  undefined,
  { onprogress: (p) => seen.progress.push(p.progress) },
);
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(seen));
