// Drives `mcpload serve` with the official TypeScript MCP SDK client (npm
// `@modelcontextprotocol/sdk`, legacy era: initialize handshake).
//
// Usage: node node_client.mjs http URL | node node_client.mjs stdio BINARY
// Prints one JSON line describing what the client saw; any failure exits non-zero.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [kind, target] = process.argv.slice(2);
const transport =
  kind === "http"
    ? new StreamableHTTPClientTransport(new URL(target))
    : new StdioClientTransport({ command: target, args: ["serve", "--stdio"] });
const client = new Client({ name: "mcpload-interop-node", version: "1.0.0" });
await client.connect(transport);

const progress = [];
const tools = await client.listTools();
const echo = await client.callTool({ name: "echo", arguments: { message: "hello from node" } });
const toolError = await client.callTool({ name: "tool_error", arguments: {} });
const slow = await client.callTool(
  { name: "progress", arguments: { steps: 3, ms: 1 } },
  undefined,
  { onprogress: (p) => progress.push(p.progress) },
);
const item = await client.readResource({ uri: "mem://item/7" });
const prompt = await client.getPrompt({ name: "greet", arguments: { name: "Ada" } });
let failCode = null;
try {
  await client.callTool({ name: "fail", arguments: { code: -32042 } });
} catch (e) {
  failCode = e.code ?? null;
}
const sessionId = kind === "http" ? transport.sessionId ?? null : null;
if (kind === "http") {
  await transport.terminateSession();
}
console.log(
  JSON.stringify({
    protocol_version: transport.protocolVersion ?? null,
    session: sessionId !== null,
    tools: tools.tools.map((t) => t.name).sort(),
    echo: echo.content[0].text,
    tool_error: toolError.isError === true,
    progress_result: slow.content[0].text,
    progress_seen: progress,
    item: item.contents[0].text,
    prompt: prompt.messages[0].content.text,
    fail_code: failCode,
  }),
);
await client.close();
