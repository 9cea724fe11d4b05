// A fastmcp server (stdio) whose slow payment tool is guarded by idempotent-tools/mcp-server's
// idempotentTool, for e2e/node22/fastmcp-waits.mjs.
//   node fastmcp-slow.mjs <store.db> <charges.log>
// slow_payment writes "started <orderId>" to stderr, waits until <charges.log>.release exists,
// then appends "<orderId>" to charges.log. On stderr, for the test to read: "in-flight" and
// "executed" (the guard's events), and "ended <code> <claims>" for each guarded call that
// threw, with how many claims of the tool the store had been asked for so far.
import { appendFileSync, existsSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { FastMCP } from 'fastmcp';
import { z } from 'zod';
import { SqliteStore } from 'idempotent-tools';
import { idempotentTool } from 'idempotent-tools/mcp-server';

const [db, log] = process.argv.slice(2);
const sqlite = new SqliteStore({ path: db });
// The real store, its claims counted (a wait that went on polling would show as more).
let claims = 0;
const store = new Proxy(sqlite, {
  get(target, property) {
    const value = Reflect.get(target, property, target);
    if (typeof value !== 'function') return value;
    return (...args) => {
      if (property === 'acquire' && args[0]?.name === 'mcp-server/slow_payment') claims += 1;
      return value.apply(target, args);
    };
  },
});
const guarded = idempotentTool(async ({ orderId }) => {
  process.stderr.write(`started ${orderId}\n`);
  while (!existsSync(`${log}.release`)) await delay(10);
  appendFileSync(log, `${orderId}\n`);
  return `charged ${orderId}`;
}, {
  name: 'slow_payment',
  store,
  scope: 'the-local-user',
  onEvent: (e) => {
    if (e.type === 'in-flight' || e.type === 'executed') process.stderr.write(`${e.type} ${claims}\n`);
  },
});
const server = new FastMCP({ name: 'payments', version: '1.0.0' });
server.addTool({
  name: 'slow_payment',
  parameters: z.object({ orderId: z.string() }),
  execute: async (args, context) => {
    try {
      return await guarded(args, context);
    } catch (err) {
      process.stderr.write(`ended ${err?.code ?? err?.name} ${claims}\n`);
      throw err;
    }
  },
});
await server.start({ transportType: 'stdio' });
