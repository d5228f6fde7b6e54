// An MCP client on the official TypeScript SDK v2 (@modelcontextprotocol/client) in a chosen
// protocol era, over stdio: the same command line and output as tests/peers/mcp2/client.py.
//
//     node client.mjs --mode auto|legacy|2026-07-28 [--no-list] [--call TOOL[:JSON_ARGS]]...
//                     -- COMMAND ARGS...
//
// It connects (legacy: initialize; 2026-07-28: pinned, after a server/discover probe; auto:
// probes and falls back), lists the tools (unless --no-list: a client with a cached listing),
// calls each --call in order, and prints one JSON object:
//
//     {"protocol_version": str, "instructions": str|null, "tools": [names],
//      "calls": [{"tool": str, "ok": bool, "text": str}],       // text: the result's, or the error
//      "asked": [{"kind": "elicitation"|"sampling"|"roots", ...}],  // what reached the callbacks
//      "logs": [{"level": str, "logger": str|null, "data": any}]}   // server log messages
//
// The callbacks say yes to everything (a password, a URL sign-in, an answer from "the model",
// one root), so anything that reaches them is visible in "asked". On the SDK's stdio transport
// the probe of `auto` and of a pin runs on a sibling process spawned from the same command.

import { parseArgs } from 'node:util';

import { Client, LOG_LEVEL_META_KEY } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const { values: args, positionals: command } = parseArgs({
    allowPositionals: true,
    options: {
        mode: { type: 'string', default: 'auto' },
        call: { type: 'string', multiple: true, default: [] },
        'no-list': { type: 'boolean', default: false },
    },
});
if (command.length === 0) {
    console.error('client.mjs: the server command follows --');
    process.exit(2);
}

const negotiation = {
    legacy: { mode: 'legacy' },
    auto: { mode: 'auto' },
}[args.mode] ?? { mode: { pin: args.mode } };

const asked = [];
const logs = [];
const out = { calls: [], asked, logs };

const client = new Client(
    { name: 'ts2-client', version: '1.0.0' },
    {
        capabilities: { sampling: {}, elicitation: { form: {}, url: {} }, roots: {} },
        versionNegotiation: negotiation,
    },
);

client.setRequestHandler('elicitation/create', async (request) => {
    const mode = request.params.mode === 'url' ? 'url' : 'form';
    asked.push({ kind: 'elicitation', mode, message: request.params.message });
    if (mode === 'url') return { action: 'accept' };
    return { action: 'accept', content: { password: 'hunter2' } };
});
client.setRequestHandler('sampling/createMessage', async () => {
    asked.push({ kind: 'sampling' });
    return { role: 'assistant', content: { type: 'text', text: 'a summary' }, model: 'm' };
});
client.setRequestHandler('roots/list', async () => {
    asked.push({ kind: 'roots' });
    return { roots: [{ uri: 'file:///work', name: 'work' }] };
});
client.setNotificationHandler('notifications/message', (notification) => {
    const { level, logger, data } = notification.params;
    logs.push({ level, logger: logger ?? null, data });
});

const [program, ...programArgs] = command;
await client.connect(
    new StdioClientTransport({ command: program, args: programArgs, env: { ...process.env } }),
);
const modern = client.getProtocolEra() === 'modern';
out.protocol_version = client.getNegotiatedProtocolVersion();
out.instructions = client.getInstructions() ?? null;

// Every log, as client.py asks: per session on 2025-11-25, per request on 2026-07-28.
if (!modern) await client.setLoggingLevel('debug');
const meta = modern ? { _meta: { [LOG_LEVEL_META_KEY]: 'debug' } } : {};

if (!args['no-list']) {
    const listed = await client.listTools(meta._meta ? { ...meta } : undefined);
    out.tools = listed.tools.map((tool) => tool.name).sort();
}
for (const spec of args.call) {
    const colon = spec.indexOf(':');
    const name = colon < 0 ? spec : spec.slice(0, colon);
    const toolArgs = colon < 0 ? {} : JSON.parse(spec.slice(colon + 1));
    try {
        const result = await client.callTool({ name, arguments: toolArgs, ...meta });
        const text = (result.content ?? []).map((c) => c.text ?? '').join(' ');
        out.calls.push({ tool: name, ok: !result.isError, text });
    } catch (error) {
        // The SDK throws the JSON-RPC error (ProtocolError) or a local one (SdkError).
        const code = error?.code !== undefined ? ` (${error.code})` : '';
        out.calls.push({ tool: name, ok: false, text: `${error?.message ?? error}${code}` });
    }
}
await client.close();
console.log(JSON.stringify(out));
