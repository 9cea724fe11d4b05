'use strict';
// How a tool is wrapped with @node-idempotency/core, for every store's scenario: it is
// built for HTTP requests, so a tool call becomes a request whose idempotency key is a
// hash of the tool's name and arguments (one definition, so every store measures the
// same wrapper).

const { createHash } = require('node:crypto');

/** The key a wrapped call is stored under. */
const keyOf = (name, args) => createHash('sha256').update(name).update(JSON.stringify([args])).digest('hex');

/** Wraps `fn` (a tool) with an @node-idempotency/core `Idempotency` instance. */
function nodeIdempotencyWrap(idem, name, fn) {
  return async (args) => {
    const key = keyOf(name, args);
    const req = { method: 'POST', path: `/${name}`, headers: { 'idempotency-key': key }, body: args };
    const hit = await idem.onRequest(req);
    if (hit) return hit.body;
    const result = await fn(args);
    await idem.onResponse(req, { body: result });
    return result;
  };
}

module.exports = { keyOf, nodeIdempotencyWrap };
