// The client command the MCP conformance harness runs (`conformance client --command "node
// mcpload-client.mjs"`), written as a user of mcpload would write it: the harness appends the
// scenario server's URL and sets MCP_CONFORMANCE_SCENARIO and, for some scenarios,
// MCP_CONFORMANCE_CONTEXT (the tool calls it wants, OAuth credentials). This turns them into a
// profile (one client for 1 s, 5 s timeout) and one `mcpload run PROFILE --quiet --out DIR
// [--tool NAME --args JSON]` per `toolCalls` entry, and exits with the first failing run's code.
//
// The authorization code scenarios (`auth/*` but the client credentials ones) log in first,
// headlessly, as a user of a test server would: `mcpload auth login URL
// --login-follow-redirects` (a pre-registered client when the context names one, else the
// client ID metadata document URL below, which mcpload uses where the server takes one and
// otherwise registers dynamically), with the token store in the scenario's folder; the runs
// then use the stored login (`--oauth-login`).
//
// Environment: MCPLOAD (the binary; default `mcpload` on PATH), MCPLOAD_CONFORMANCE_DIR (where
// the profile, key, token store and run folders go; default a fresh temporary folder).
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

// The harness's client ID metadata document URL (it checks the id, it fetches nothing).
const CIMD_URL = "https://conformance-test.local/client-metadata.json";
const CLIENT_CREDENTIALS = new Set(["auth/client-credentials-basic", "auth/client-credentials-jwt"]);
if (scenario.startsWith("auth/") && !CLIENT_CREDENTIALS.has(scenario)) {
  env.XDG_CONFIG_HOME = path.join(dir, "config");
  const clientFlags = context.client_id !== undefined ? authFlags.splice(0) : ["--oauth-client-id", CIMD_URL];
  const login = spawnSync(mcpload, ["auth", "login", url, "--login-follow-redirects", ...clientFlags], {
    env,
    stdio: "inherit",
  });
  if (login.error) {
    console.error(`mcpload-client: cannot start ${mcpload}: ${login.error.message}`);
    process.exit(127);
  }
  if (login.status !== 0) {
    process.exit(login.status ?? 1);
  }
  // A pre-registered client names its login (and brings its secret); otherwise the newest.
  // A step-up or a new authorization server is authorized anew the same way.
  authFlags.push("--oauth-login", "--login-follow-redirects", ...(context.client_id !== undefined ? clientFlags : []));
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
