// A real MCP client (the official TypeScript SDK) driven by a JSON script, for agentsh's tests.
//
//   node mcp-client.mjs '<steps json>' -- CMD ARGS...
//   node mcp-client.mjs '<steps json>' --url URL     (Streamable HTTP instead of stdio)
//   node mcp-client.mjs '<steps json>' --sse-url URL (the older HTTP+SSE transport: a GET
//                                                      stream, answers to POSTs arrive on it)
//
// Steps: [{"op":"list"}, {"op":"call","name":"read_file","arguments":{...}},
//         {"op":"wait","path":"/tmp/go"} (until that file exists, at most 60 s),
//         {"op":"wait_list_changed"} (until a tools/list_changed notification not yet waited
//         for has arrived, at most 60 s), ...]
// Prints one JSON line per step: {"op","ok":true,"result"} or {"op","ok":false,"error":{code,message}}.
// Exits 0 when every step ran (a refused call is a result, not a failure), 1 on a broken session.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const sep = process.argv.indexOf("--");
const urlFlag = process.argv.indexOf("--url");
const sseFlag = process.argv.indexOf("--sse-url");
const given = (flag) => flag >= 0 && flag + 1 < process.argv.length;
if ((sep < 0 || sep + 1 >= process.argv.length) && !given(urlFlag) && !given(sseFlag)) {
  console.error(
    "usage: mcp-client.mjs STEPS_JSON -- CMD ARGS... | mcp-client.mjs STEPS_JSON --url URL | mcp-client.mjs STEPS_JSON --sse-url URL",
  );
  process.exit(2);
}
const steps = JSON.parse(process.argv[2]);

let transport;
if (given(urlFlag)) {
  transport = new StreamableHTTPClientTransport(new URL(process.argv[urlFlag + 1]));
} else if (given(sseFlag)) {
  transport = new SSEClientTransport(new URL(process.argv[sseFlag + 1]));
} else {
  const [command, ...args] = process.argv.slice(sep + 1);
  transport = new StdioClientTransport({
    command,
    args,
    env: { ...getDefaultEnvironment(), ...process.env },
    stderr: "inherit",
  });
}
const client = new Client({ name: "agentsh-test-client", version: "1.0.0" }, { capabilities: {} });

// tools/list_changed notifications received, and how many a wait_list_changed step consumed.
let listChanged = 0;
let listChangedSeen = 0;
client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
  listChanged += 1;
});

const emit = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

// Over HTTP, a server that never completes the handshake (an SSE stream whose `endpoint`
// event never comes, say) fails the session instead of hanging it.
const CONNECT_LIMIT_MS = 30_000;

try {
  if (given(urlFlag) || given(sseFlag)) {
    let timer;
    const timedOut = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`not connected within ${CONNECT_LIMIT_MS} ms`)), CONNECT_LIMIT_MS);
    });
    await Promise.race([client.connect(transport), timedOut]);
    clearTimeout(timer);
  } else {
    await client.connect(transport);
  }
  for (const step of steps) {
    try {
      switch (step.op) {
        case "list": {
          const tools = [];
          let cursor;
          do {
            const page = await client.listTools(cursor ? { cursor } : {});
            tools.push(...page.tools);
            cursor = page.nextCursor;
          } while (cursor);
          emit({ op: "list", ok: true, result: { tools } });
          break;
        }
        case "call": {
          const result = await client.callTool({ name: step.name, arguments: step.arguments ?? {} });
          emit({ op: "call", name: step.name, ok: true, result });
          break;
        }
        case "wait": {
          const { existsSync } = await import("node:fs");
          const deadline = Date.now() + 60_000;
          while (!existsSync(step.path)) {
            if (Date.now() > deadline) throw new Error(`timed out waiting for ${step.path}`);
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
          emit({ op: "wait", ok: true });
          break;
        }
        case "wait_list_changed": {
          const deadline = Date.now() + 60_000;
          while (listChanged <= listChangedSeen) {
            if (Date.now() > deadline) throw new Error("no tools/list_changed notification within 60 s");
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
          listChangedSeen = listChanged;
          emit({ op: "wait_list_changed", ok: true });
          break;
        }
        default:
          throw new Error(`unknown op ${step.op}`);
      }
    } catch (err) {
      emit({ op: step.op, name: step.name, ok: false, error: { code: err.code ?? null, message: String(err.message ?? err) } });
    }
  }
  await client.close();
  process.exit(0);
} catch (err) {
  console.error("mcp-client: session failed:", err);
  process.exit(1);
}
