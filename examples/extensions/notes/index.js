// notes: an example dhara extension in Node (no npm packages) — one tool, `add_note`
// {path, text}, that appends "- text" to a Markdown file in the project.
//
// Unlike web-tools and file-stats, this extension writes the file itself, with node's `fs`.
// Two layers keep it honest:
//   1. dhara's tool-call gate: the tool requires filesystem:write, so the call's `path` input
//      is checked as a write (allowedPaths minus deniedPaths, after symlinks) before the call
//      reaches us; a path outside the project is denied and we never hear of it.
//   2. the OS sandbox (docs/security-model.md; `dhara doctor` shows what your machine
//      enforces): the process is confined (Landlock on Linux) to what its approved
//      capabilities allow, so a buggy or hostile `fs.writeFileSync('/elsewhere')` fails too.
//
// The protocol (summed up in ../README.md): newline-delimited JSON-RPC 2.0 on stdin/stdout,
// one object a line; logs go to stderr (dhara keeps them in ~/.dhara/logs/).
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');

const NAME = 'notes', VERSION = '0.1.0';

// What dhara shows the agent; `capabilities` is what one call needs approved.
const TOOLS = [
  {
    name: 'add_note',
    description: 'Append a note (one Markdown list item) to a file in the project, creating it if needed',
    capabilities: ['filesystem:write'],
    parameters: {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'the notes file, relative to the project, e.g. NOTES.md' },
        text: { type: 'string', description: 'the note' },
      },
      required: ['path', 'text'],
    },
  },
];

// A pipe write is synchronous on Linux, so each line leaves whole and in order.
const send = (msg) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...msg }) + '\n');
const text = (s, isError = false) => ({ content: [{ type: 'text', text: s }], ...(isError ? { isError: true } : {}) });

function addNote(input, context) {
  if (typeof input.path !== 'string' || input.path === '') return text('add_note needs a path', true);
  if (typeof input.text !== 'string' || input.text.trim() === '') return text('add_note needs some text', true);
  // Relative paths are relative to the session's working directory (dhara sends it).
  const target = path.resolve(context.cwd || process.cwd(), input.path);
  const line = `- ${input.text.replace(/\s*\n\s*/g, ' ').trim()}\n`;
  try {
    const existed = fs.existsSync(target);
    fs.appendFileSync(target, existed ? line : `# Notes\n\n${line}`);
    return { ...text(`added a note to ${input.path}`), metadata: { path: target, created: !existed } };
  } catch (e) {
    // EACCES here means the OS sandbox stopped us: report it, do not crash.
    return text(`could not write ${input.path}: ${e.message}`, true);
  }
}

function handle(msg) {
  if (msg === null || typeof msg !== 'object' || typeof msg.method !== 'string' || !('id' in msg))
    return; // notifications (tools/cancel) and responses need no answer; our calls are instant
  const params = msg.params || {};
  switch (msg.method) {
    case 'initialize':
      return send({ id: msg.id, result: { protocolVersion: '0.1.0', name: NAME, version: VERSION, tools: TOOLS } });
    case 'tools/execute':
      if (params.toolName !== 'add_note')
        return send({ id: msg.id, error: { code: -32601, message: `unknown tool: ${params.toolName}` } });
      return send({ id: msg.id, result: addNote(params.input || {}, params.context || {}) });
    case 'shutdown':
      send({ id: msg.id, result: { status: 'ok' } });
      return process.exit(0);
    default:
      return send({ id: msg.id, error: { code: -32601, message: `method not found: ${msg.method}` } });
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return send({ id: null, error: { code: -32700, message: 'parse error' } });
  }
  handle(msg);
});
rl.on('close', () => process.exit(0)); // dhara closed our stdin
