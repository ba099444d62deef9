// echo-node: the well-behaved Node test extension (echo, sleep, progress, env, fail).
// Concurrent by nature: `sleep` is a timer, so cancels and other calls are read meanwhile.
'use strict';
const readline = require('readline');

const NAME = 'echo-node', VERSION = '1.0.0';
const schema = (properties, required = []) => ({ type: 'object', properties, required });
const TOOLS = [
  { name: 'echo', description: 'Return input.text as text content',
    parameters: schema({ text: { type: 'string' } }, ['text']), capabilities: [] },
  { name: 'sleep', description: 'Wait input.ms milliseconds; tools/cancel answers it with -32004',
    parameters: schema({ ms: { type: 'number' } }, ['ms']), capabilities: [] },
  { name: 'progress', description: 'Send input.count tools/progress notifications, then return',
    parameters: schema({ count: { type: 'integer' } }), capabilities: [] },
  { name: 'env', description: 'Return the JSON encoding of process.env[input.name], or null',
    parameters: schema({ name: { type: 'string' } }, ['name']), capabilities: [] },
  { name: 'fail', description: 'Return a result with isError: true',
    parameters: schema({ message: { type: 'string' } }), capabilities: [] },
];

// Writes to a pipe are synchronous on Linux, so each line is out before the next one starts.
const send = (msg) => process.stdout.write(JSON.stringify(msg) + '\n');
const reply = (id, result) => send({ jsonrpc: '2.0', id, result });
const error = (id, code, message) => send({ jsonrpc: '2.0', id, error: { code, message } });
const text = (s, isError = false) =>
  isError ? { content: [{ type: 'text', text: s }], isError: true } : { content: [{ type: 'text', text: s }] };

const sleepers = new Map(); // toolCallId -> function that cancels it

function execute(id, params) {
  const input = params.input || {};
  const callId = params.toolCallId;
  switch (params.toolName) {
    case 'echo':
      return reply(id, text(typeof input.text === 'string' ? input.text : JSON.stringify(input.text ?? '')));
    case 'sleep': {
      const ms = input.ms ?? 1000;
      if (typeof ms !== 'number' || !(ms >= 0)) return error(id, -32602, 'input.ms must be a non-negative number');
      const timer = setTimeout(() => { sleepers.delete(callId); reply(id, text(`slept ${ms} ms`)); }, ms);
      sleepers.set(callId, () => { clearTimeout(timer); sleepers.delete(callId); error(id, -32004, 'cancelled'); });
      return;
    }
    case 'progress': {
      const count = Number(input.count ?? 3);
      for (let i = 1; i <= count; i++) {
        send({ jsonrpc: '2.0', method: 'tools/progress',
               params: { toolCallId: callId, update: { message: `step ${i} of ${count}`, progress: i, total: count } } });
      }
      return reply(id, text(`sent ${count} progress updates`));
    }
    case 'env': {
      const value = typeof input.name === 'string' && input.name in process.env ? process.env[input.name] : null;
      return reply(id, { ...text(JSON.stringify(value)), metadata: { name: input.name, value } });
    }
    case 'fail':
      return reply(id, text(input.message ?? 'tool failed', true));
    default:
      return error(id, -32601, `unknown tool: ${params.toolName}`);
  }
}

function handle(line) {
  let msg;
  try { msg = JSON.parse(line); } catch { return error(null, -32700, 'parse error'); }
  if (msg === null || typeof msg !== 'object' || typeof msg.method !== 'string') return; // a response or junk
  const params = msg.params || {};
  if (!('id' in msg)) { // notification: never answered
    if (msg.method === 'tools/cancel') {
      const cancels = params.toolCallId === undefined ? [...sleepers.values()] : [sleepers.get(params.toolCallId)];
      cancels.forEach((cancel) => cancel && cancel());
    }
    return;
  }
  try {
    request(msg.id, msg.method, params);
  } catch (e) {
    error(msg.id, -32602, `invalid params: ${e.message}`);
  }
}

function request(id, method, params) {
  switch (method) {
    case 'initialize':
      return reply(id, { protocolVersion: '0.1.0', name: NAME, version: VERSION, tools: TOOLS });
    case 'tools/execute':
      return execute(id, params);
    case 'shutdown':
      reply(id, { status: 'ok' });
      return setImmediate(() => process.exit(0));
    default:
      return error(id, -32601, `method not found: ${method}`);
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => { if (line.length !== 0) handle(line); });
rl.on('close', () => process.exit(0)); // EOF on stdin: the core went away
