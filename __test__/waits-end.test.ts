// A wait for another call ends when its own request is cancelled or its client leaves
// (issue 36, finding 6). A duplicate of a call in flight ('block') waited by polling the
// store until pollTimeoutMs, whatever became of the request it was waiting for: 300 copies
// of a slow call, cancelled, kept the store busy for ten minutes, for answers nobody read.
//
// The core's wait takes an AbortSignal from the helpers (an internal option, WAIT_SIGNAL):
// when it fires, the wait ends at once (not at its next poll), its timer and its
// subscriptions are released, and the call throws an AbortError; the call it waited for
// goes on. Here on every store (both Redis transports), and through the framework helpers
// that see their framework's abort signal (shared.ts).

import { createRequire } from 'node:module';

import { afterAll, describe, expect, it } from 'vitest';

import { ROOT, lib, tempDb } from './helpers';
import { sharedRedis, uniquePrefix } from './redis-server';
import { countingRequests } from './store-requests';
import { eachStore } from './stores';

const require = createRequire(import.meta.url);
const claude: typeof import('../dist/integrations/claude-agent-sdk.js') = require(`${ROOT}/dist/integrations/claude-agent-sdk.js`);
const aiSdk: typeof import('../dist/integrations/ai-sdk.js') = require(`${ROOT}/dist/integrations/ai-sdk.js`);

const { idempotent } = lib;
/** The helpers' option (lib/core/options.ts): a function of the call's arguments that gives its request's signal. */
const WAIT_SIGNAL = Symbol.for('idempotent-tools.waitSignal');
const HOUR = 3_600_000;
/** The claims of the calls under test (not the store's own records, such as the key-id secret that events need). */
const ofPay = (request: { name?: string }) => request?.name === 'pay';
const WAITERS = 300;

const redis = await sharedRedis();
afterAll(() => redis.stop());

/** The timers this process holds (setTimeout/setInterval): a wait that ended has cleared its own. */
const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

function gate() {
  let open!: () => void;
  let started!: () => void;
  return {
    opened: new Promise<void>((r) => (open = r)),
    started: new Promise<void>((r) => (started = r)),
    open: () => open(),
    start: () => started(),
  };
}

/** Resolves once every promise has settled, with how each ended. */
const settled = <T>(promises: Promise<T>[]) => Promise.allSettled(promises);

for (const [storeName, open] of eachStore(redis.url, uniquePrefix)) {
  describe(`a 'block' wait and its request's signal: ${storeName}`, () => {
    it(`${WAITERS} waiters whose requests are cancelled end at once with an AbortError, ask the store nothing more, and hold no timer; the first call completes once`, async () => {
      const [raw] = open(1);
      const { store, count } = countingRequests(raw);
      const g = gate();
      let runs = 0;
      // One function, wrapped twice: the first call's wrapper, and the duplicates' (which wait).
      async function pay(order: string, _signal?: AbortSignal) {
        runs += 1;
        g.start();
        await g.opened;
        return { order, run: runs };
      }
      const first = idempotent(pay, { store, payload: (order) => order })('o-1');
      await g.started;
      // Polled once an hour: only the signal can end these waits within the test.
      const waiterOptions = {
        store,
        payload: (order: string) => order,
        onDuplicate: 'block' as const,
        pollIntervalMs: HOUR,
        pollTimeoutMs: 2 * HOUR,
        [WAIT_SIGNAL]: (_order: string, signal?: AbortSignal) => signal,
        // 'in-flight': the waiter found the call in flight, and starts waiting in the same turn.
        onEvent: (e: { type: string }) => void (e.type === 'in-flight' && (waiting += 1)),
      };
      let waiting = 0;
      const waiter = idempotent(pay, waiterOptions);
      const controllers = Array.from({ length: WAITERS }, () => new AbortController());
      const waits = controllers.map((c) => waiter('o-1', c.signal));
      // Every waiter asked the store once and is waiting (it holds a timer of its own).
      await until(() => waiting === WAITERS, `${WAITERS} waiters to find the call in flight`);
      const timersWaiting = timers();
      for (const c of controllers) c.abort();
      const ended = await settled(waits);
      for (const e of ended) {
        expect(e.status).toBe('rejected');
        expect((e as PromiseRejectedResult).reason).toMatchObject({ name: 'AbortError', code: 'WAIT_ABANDONED' });
      }
      expect((ended[0] as PromiseRejectedResult).reason.message).toMatch(/stopped waiting.*goes on/);
      // Each waiter's timer is gone with its wait.
      expect(timersWaiting - timers()).toBeGreaterThanOrEqual(WAITERS);
      const asked = count('acquire', ofPay);
      expect(asked).toBe(1 + WAITERS);
      g.open();
      expect(await first).toEqual({ order: 'o-1', run: 1 });
      // Its settle wakes every waiter of this store object that is still there: none asks again.
      expect(count('acquire', ofPay)).toBe(asked);
      expect(runs).toBe(1);
      // A retry now gets the recorded result.
      expect(await waiter('o-1', new AbortController().signal)).toEqual({ order: 'o-1', run: 1 });
      expect(runs).toBe(1);
      await raw.close();
    });

    it('a waiter whose signal has already fired does not wait; a waiter whose request is not cancelled still gets the result', async () => {
      const [raw] = open(1);
      const { store } = countingRequests(raw);
      const g = gate();
      let runs = 0;
      async function ship(order: string, _signal?: AbortSignal) {
        runs += 1;
        g.start();
        await g.opened;
        return `shipped ${order}`;
      }
      const options = { store, payload: (order: string) => order, onDuplicate: 'block' as const, pollIntervalMs: HOUR, pollTimeoutMs: 2 * HOUR, [WAIT_SIGNAL]: (_o: string, s?: AbortSignal) => s };
      const wrapped = idempotent(ship, options);
      const first = wrapped('o-2', new AbortController().signal);
      await g.started;
      const gone = AbortSignal.abort();
      await expect(wrapped('o-2', gone)).rejects.toMatchObject({ name: 'AbortError', code: 'WAIT_ABANDONED' });
      const stays = wrapped('o-2', new AbortController().signal);
      g.open();
      expect(await first).toBe('shipped o-2');
      expect(await stays).toBe('shipped o-2');
      expect(runs).toBe(1);
      await raw.close();
    });
  });
}

describe("the framework helpers end a wait on their framework's abort signal", () => {
  it('Claude Agent SDK tools (extra.signal): a re-run of a call in flight whose request is aborted stops waiting; the first run completes once', async () => {
    const raw = new lib.SqliteStore({ path: tempDb() });
    const { store, count } = countingRequests(raw);
    const g = gate();
    let charges = 0;
    const [guarded] = claude.idempotentTools(
      [
        {
          name: 'send_payment',
          handler: async () => {
            charges += 1;
            g.start();
            await g.opened;
            return { content: [{ type: 'text', text: `charged (${charges})` }] };
          },
        },
      ],
      { store },
    );
    const extra = (signal: AbortSignal) => ({ _meta: { 'claudecode/toolUseId': 'toolu_01A09q90qw90lq917835lq9' }, signal });
    const first = guarded.handler({ orderId: 'o-1' }, extra(new AbortController().signal));
    await g.started;
    const controllers = Array.from({ length: 50 }, () => new AbortController());
    const reruns = controllers.map((c) => guarded.handler({ orderId: 'o-1' }, extra(c.signal)));
    await until(() => count('acquire') >= 51, 'the re-runs to find the call in flight');
    for (const c of controllers) c.abort();
    for (const e of await settled(reruns)) expect((e as PromiseRejectedResult).reason).toMatchObject({ name: 'AbortError' });
    const asked = count('acquire');
    g.open();
    expect(await first).toEqual({ content: [{ type: 'text', text: 'charged (1)' }] });
    expect(count('acquire')).toBe(asked);
    expect(charges).toBe(1);
    await raw.close();
  });

  it('AI SDK tools (options.abortSignal, one signal for the calls of a step): the same, and no MaxListenersExceededWarning however many wait on it', async () => {
    const raw = new lib.SqliteStore({ path: tempDb() });
    const { store, count } = countingRequests(raw);
    const g = gate();
    let charges = 0;
    const execute = aiSdk.idempotentTool(
      async function sendPayment(input: { orderId: string }) {
        charges += 1;
        g.start();
        await g.opened;
        return { receipt: `r-${input.orderId}-${charges}` };
      },
      { store, scope: 'chat-1', onEvent: (e) => void (e.type === 'in-flight' && (waiting += 1)) },
    );
    let waiting = 0;
    const options = (abortSignal: AbortSignal) => ({ toolCallId: 'call_Qx7Vb2kLm9PzR4tN8sWc1eYd', messages: [{ role: 'user', content: 'pay o-1' }], abortSignal });
    const first = execute({ orderId: 'o-1' }, options(new AbortController().signal));
    await g.started;
    const warnings: Error[] = [];
    const onWarning = (w: Error) => void warnings.push(w);
    process.on('warning', onWarning);
    // The AI SDK gives every tool call of a step the one abortSignal of the generation.
    const step = new AbortController();
    const reruns = Array.from({ length: 50 }, () => execute({ orderId: 'o-1' }, options(step.signal)));
    await until(() => waiting === 50, 'the re-runs to wait for the call in flight');
    step.abort();
    for (const e of await settled(reruns)) expect((e as PromiseRejectedResult).reason).toMatchObject({ name: 'AbortError' });
    const asked = count('acquire', (r: { name?: string }) => r?.name === 'sendPayment');
    g.open();
    expect(await first).toEqual({ receipt: 'r-o-1-1' });
    await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
    process.off('warning', onWarning);
    expect(warnings.map((w) => w.name)).not.toContain('MaxListenersExceededWarning');
    expect(count('acquire', (r: { name?: string }) => r?.name === 'sendPayment')).toBe(asked);
    expect(charges).toBe(1);
    await raw.close();
  });
});

describe('idempotentCanUseTool (Claude Agent SDK): a second ask waiting for the first ask\'s human', () => {
  it('stops when the runtime aborts it (options.signal); the human is asked once, and a later ask gets the answer', async () => {
    const raw = new lib.SqliteStore({ path: tempDb() });
    const { store, count } = countingRequests(raw);
    const g = gate();
    let asks = 0;
    const canUseTool = claude.idempotentCanUseTool(async (_name: string, input: Record<string, unknown>) => {
      asks += 1;
      g.start();
      await g.opened;
      return { behavior: 'allow' as const, updatedInput: input };
    }, { store });
    const ask = (signal: AbortSignal) => canUseTool('mcp__pay__send_payment', { orderId: 'o-1' }, { signal, toolUseID: 'toolu_09A09q90qw90lq917835lq9' });
    const first = ask(new AbortController().signal);
    await g.started;
    const controller = new AbortController();
    const second = ask(controller.signal);
    const ofAsk = (r: { name?: string }) => r?.name === 'claude-agent-sdk:canUseTool';
    await until(() => count('acquire', ofAsk) === 2, 'the second ask to find the first in flight');
    controller.abort();
    await expect(second).rejects.toMatchObject({ name: 'AbortError', code: 'WAIT_ABANDONED' });
    const asked = count('acquire', ofAsk);
    g.open();
    expect(await first).toEqual({ behavior: 'allow', updatedInput: { orderId: 'o-1' } });
    expect(count('acquire', ofAsk)).toBe(asked);
    expect(await ask(new AbortController().signal)).toEqual({ behavior: 'allow', updatedInput: { orderId: 'o-1' } });
    expect(asks).toBe(1);
    await raw.close();
  });
});

/** Waits until `condition()` holds: synchronisation on something the test can observe. */
async function until(condition: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
