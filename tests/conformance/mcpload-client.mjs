// The client command the MCP conformance harness runs (`conformance client --command "node
// mcpload-client.mjs"`), written as a user of mcpload would write it: the harness appends the
// scenario server's URL and sets MCP_CONFORMANCE_SCENARIO and, for some scenarios,
// MCP_CONFORMANCE_CONTEXT (the tool calls it wants, OAuth credentials). This turns them into a
// profile (one client for 1 s, 5 s timeout) and one `mcpload run PROFILE --quiet --out DIR
// [--tool NAME --args JSON]` per `toolCalls` entry, and exits with the first failing run's code.
//
// Environment: MCPLOAD (the binary; default `mcpload` on PATH), MCPLOAD_CONFORMANCE_DIR (where
// the profile, key and run folders go; default a fresh temporary folder).
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

// Scenarios that check the handshake and per-request metadata, not a tool: list tools.
const LIST_TOOLS = new Set(["initialize", "request-metadata"]);
// Scenarios whose server asks the client for input (elicitation) during a call.
const ELICITS = new Set(["elicitation-sep1034-client-defaults", "sep-2322-client-request-state"]);

const url = process.argv[process.argv.length - 1];
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? "";
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? "{}");
const mcpload = process.env.MCPLOAD ?? "mcpload";
const dir = process.env.MCPLOAD_CONFORMANCE_DIR ?? mkdtempSync(path.join(tmpdir(), "mcpload-conformance-"));
mkdirSync(dir, { recursive: true });

const toml = JSON.stringify; // a JSON string is a valid TOML basic string
const profile = [
  `name = ${toml(`conformance-${scenario.replaceAll("/", "-")}`)}`,
  "[target]",
  `url = ${toml(url)}`,
  "[load]",
  "concurrency = 1",
  'duration = "1s"',
  'warmup = "0s"',
  'timeout = "5s"',
  "[[mix]]",
  ...(LIST_TOOLS.has(scenario) ? ['method = "tools/list"'] : ['method = "tools/call"', 'tool = "*"']),
  ...(ELICITS.has(scenario) ? ["[input]", 'elicitation = { action = "accept" }'] : []),
];
const profilePath = path.join(dir, "profile.toml");
writeFileSync(profilePath, profile.join("\n") + "\n");

// OAuth client credentials from the context: the id as a flag, the secret through the
// environment, a private key through a file.
const authFlags = [];
const env = { ...process.env };
if (context.client_id !== undefined) {
  authFlags.push("--oauth-client-id", context.client_id);
}
if (context.client_secret !== undefined) {
  env.CONFORMANCE_CLIENT_SECRET = context.client_secret;
  authFlags.push("--oauth-client-secret-env", "CONFORMANCE_CLIENT_SECRET");
}
if (context.private_key_pem !== undefined) {
  const keyPath = path.join(dir, "client-key.pem");
  writeFileSync(keyPath, context.private_key_pem, { mode: 0o600 });
  authFlags.push("--oauth-auth-method", "private_key_jwt", "--oauth-private-key", keyPath);
}

const calls = context.toolCalls ?? [null];
for (const [index, call] of calls.entries()) {
  const toolFlags = call ? ["--tool", call.name, "--args", JSON.stringify(call.arguments ?? {})] : [];
  const out = path.join(dir, `run-${index + 1}`);
  const args = ["run", profilePath, "--quiet", "--out", out, ...authFlags, ...toolFlags];
  const run = spawnSync(mcpload, args, { env, stdio: "inherit" });
  if (run.error) {
    console.error(`mcpload-client: cannot start ${mcpload}: ${run.error.message}`);
    process.exit(127);
  }
  if (run.status !== 0) {
    process.exit(run.status ?? 1);
  }
}
