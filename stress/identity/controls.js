'use strict';
// The controls: what a helper that guesses would do. Each keys a tool call by one thing the
// framework happens to pass, on the real core and the real store, and nothing else:
//
//   id    the tool call id alone (ids restart at call_0 every turn, and repeat across
//         conversations and callers)
//   args  the arguments alone (two calls that ask for the same thing, by two callers or in
//         two turns, are one)
//
// A driver run with `--control id|args` wraps its tool with `controlled()` instead of the
// helper under test; the checker must find violations. A checker that passes a control
// proves nothing.

const { createHash } = require('node:crypto');

const CONTROLS = ['id', 'args'];

function canonical(v) {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
}

/**
 * `fn(args, toolCallId)` guarded by a control: `(args, toolCallId) => Promise<result>`.
 * `idempotent`: the package's own (so storage, claims and replays are real).
 */
function controlled(control, fn, { idempotent, store, name }) {
  if (!CONTROLS.includes(control)) throw new Error(`control must be one of ${CONTROLS.join(', ')}, not ${JSON.stringify(control)}`);
  // The arguments are what the record's fingerprint covers; the id travels along unkeyed.
  const wrapped = idempotent(fn, { store, name, onDuplicate: 'block', payload: (args) => args });
  return (args, toolCallId) => {
    const part = control === 'id' ? String(toolCallId) : createHash('sha256').update(canonical(args)).digest('hex');
    return wrapped.withKey(`control-${control}|${name}|${part}`)(args, toolCallId);
  };
}

module.exports = { CONTROLS, controlled };
