// The two-line setup, shown on a card charge: the agent retries the tool call with the
// same idempotency key, and the card is charged once.
//
//   npm run demo
//
// Runs against a fresh SQLite file in a temp folder; exits non-zero if the side effect
// ran more than once or the second call did not replay.

const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');
const { idempotent, SqliteStore, currentKey } = require('idempotent-tools');

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-demo-'));
  const store = new SqliteStore({ path: join(dir, 'store.db') });
  const charges = []; // the "payment provider": every charge that really happened
  const outcomes = [];

  const chargeCard = idempotent(
    async function chargeCard(customer, amountCents) {
      // currentKey() is the call's idempotency key: hand it to the provider too, so
      // even a crash between charging and recording cannot charge twice.
      const charge = { id: `ch_${charges.length + 1}`, customer, amountCents, idempotencyKey: currentKey() };
      charges.push(charge);
      return charge;
    },
    { store, onEvent: (e) => outcomes.push(e.type) },
  );

  const first = await chargeCard.withKey('order-42')('cus_ada', 1999);
  console.log('first call :', outcomes.at(-1), first);
  const second = await chargeCard.withKey('order-42')('cus_ada', 1999); // the agent's retry
  console.log('second call:', outcomes.at(-1), second);
  console.log(`the card was charged ${charges.length} time(s); store: ${store.path}`);

  await store.close();
  rmSync(dir, { recursive: true, force: true });

  const ok = charges.length === 1 && outcomes.join(',') === 'executed,replayed' && second.id === first.id;
  if (!ok) {
    console.error('FAIL: expected one charge, then a replay of it');
    process.exit(1);
  }
  console.log('OK: charged once, the retry replayed the stored result');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
