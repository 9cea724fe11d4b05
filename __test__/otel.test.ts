// idempotent-tools/otel: outcomes land on the active span, seen through the in-memory exporter.

import { createRequire } from 'node:module';
import { join } from 'node:path';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';

import { ROOT, lib, tempDb } from './helpers';

const require = createRequire(import.meta.url);
const otel: typeof import('../dist/otel.js') = require(join(ROOT, 'dist', 'otel.js'));

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(provider);
const tracer = trace.getTracer('otel-test');

const store = new lib.SqliteStore({ path: tempDb() });
const stop = otel.instrumentIdempotency();
afterAll(async () => {
  stop();
  await store.close();
  await provider.shutdown();
});
beforeEach(() => exporter.reset());

/** Runs `work` inside a new active span and returns that span as exported. */
async function inSpan(name: string, work: () => Promise<unknown>) {
  await tracer.startActiveSpan(name, async (span) => {
    try {
      await work();
    } catch {
      // the test looks at the span
    } finally {
      span.end();
    }
  });
  const spans = exporter.getFinishedSpans().filter((s) => s.name === name);
  expect(spans).toHaveLength(1);
  return spans[0];
}

describe('idempotent-tools/otel', () => {
  const refund = lib.idempotent(async function refund(order: string) {
    if (order === 'bad') throw new Error('bank said no');
    return { refunded: order };
  }, { store });

  it('an executed call: key, outcome and attempts on the span, and an event', async () => {
    const span = await inSpan('first', () => refund('o-1'));
    // A derived key is carried as its keyed id (issue 21 item 2), never as the key.
    expect(span.attributes).toMatchObject({
      'idempotency.key': await lib.keyId(store, refund.keyFor('o-1')),
      'idempotency.outcome': 'executed',
      'idempotency.attempts': 1,
      'idempotency.name': 'refund',
    });
    expect(span.events.map((e) => e.name)).toEqual(['idempotency.executed']);
  });

  it('a replay says replayed', async () => {
    await refund('o-2');
    const span = await inSpan('again', () => refund('o-2'));
    expect(span.attributes['idempotency.outcome']).toBe('replayed');
    expect(span.events[0].attributes).toMatchObject({ 'idempotency.key': await lib.keyId(store, refund.keyFor('o-2')), 'idempotency.attempts': 1 });
    expect(JSON.stringify([span.attributes, span.events])).not.toContain(refund.keyFor('o-2'));
  });

  it('a failure says failed, with the error type on the event', async () => {
    const span = await inSpan('failing', () => refund('bad'));
    expect(span.attributes['idempotency.outcome']).toBe('failed');
    expect(span.events[0].name).toBe('idempotency.failed');
    expect(span.events[0].attributes?.['exception.type']).toBe('Error');
  });

  it('a take-over after a dead owner: both events, the attributes tell the last outcome and the attempt', async () => {
    const key = refund.keyFor('o-3');
    // A claim whose owner is gone: one millisecond of lease, never renewed.
    const owner = await store.acquire({ key, name: 'refund', fingerprint: (await fingerprintOf(key)) ?? '', leaseMs: 1, force: false });
    expect(owner.acquired).toBe(true);
    const span = await inSpan('takeover', async () => {
      // Until the dead owner's lease has run out, the call is refused as in flight.
      for (;;) {
        try {
          return await refund('o-3');
        } catch (err) {
          if (!(err instanceof lib.DuplicateInFlightError)) throw err;
        }
      }
    });
    const names = span.events.map((e) => e.name).filter((n) => n !== 'idempotency.in-flight');
    expect(names).toEqual(['idempotency.taken-over', 'idempotency.executed']);
    expect(span.attributes).toMatchObject({ 'idempotency.outcome': 'executed', 'idempotency.attempts': 2 });
  });

  it('no active span: calls run as before; after stop(), spans stay clean', async () => {
    await expect(refund('o-4')).resolves.toEqual({ refunded: 'o-4' });
    stop();
    try {
      const span = await inSpan('unobserved', () => refund('o-5'));
      expect(span.attributes['idempotency.outcome']).toBeUndefined();
      expect(span.events).toHaveLength(0);
    } finally {
      otel.instrumentIdempotency();
    }
  });
});

/** The fingerprint a call of refund('o-3') carries: read from a record it made in a scratch store. */
async function fingerprintOf(key: string): Promise<string | undefined> {
  const scratch = new lib.SqliteStore({ path: tempDb() });
  try {
    const probe = lib.idempotent(async function refund(order: string) {
      return { refunded: order };
    }, { store: scratch });
    await probe('o-3');
    return (await scratch.get(key))?.fingerprint;
  } finally {
    await scratch.close();
  }
}
