/**
 * `idempotent-tools/otel`: puts each call's idempotency outcome on the active
 * OpenTelemetry span. It listens on the `idempotent-tools:call` diagnostics channel
 * (lib/events.ts), so wrapped functions need no change; `@opentelemetry/api` is an
 * optional peer dependency, loaded only by this module.
 *
 * On the span that is active when a wrapped call settles (the caller's span):
 * - attributes `idempotency.key`, `idempotency.outcome` (the event type: executed,
 *   replayed, failed, taken-over, in-flight, lease-lost, key-mismatch, store-error),
 *   `idempotency.attempts` (when known) and `idempotency.name`; a later call under the
 *   same span overwrites them, so they describe its last call;
 * - one span event per outcome, named `idempotency.<outcome>`, with the same attributes
 *   and `idempotency.duration_ms`: every call under the span is there.
 */

import diagnostics_channel from 'node:diagnostics_channel';

import { type Attributes, trace } from '@opentelemetry/api';

import { CHANNEL_NAME, type IdempotencyEvent } from '../core/events.js';

function attributesOf(e: IdempotencyEvent): Attributes {
  const a: Attributes = { 'idempotency.key': e.key, 'idempotency.outcome': e.type, 'idempotency.name': e.name };
  if (e.attempts !== undefined) a['idempotency.attempts'] = e.attempts;
  return a;
}

function onEvent(message: unknown): void {
  const span = trace.getActiveSpan();
  if (span === undefined || !span.isRecording()) return;
  const e = message as IdempotencyEvent;
  const attributes = attributesOf(e);
  span.setAttributes(attributes);
  const extra: Attributes = { 'idempotency.duration_ms': e.durationMs };
  if (e.error instanceof Error) extra['exception.type'] = e.error.name;
  span.addEvent(`idempotency.${e.type}`, { ...attributes, ...extra });
}

let subscribed = false;

/**
 * Starts putting idempotency outcomes on active spans; returns a function that stops
 * it. Calling it again while active does nothing more (one attribute set per event).
 */
export function instrumentIdempotency(): () => void {
  if (!subscribed) {
    diagnostics_channel.subscribe(CHANNEL_NAME, onEvent);
    subscribed = true;
  }
  return () => {
    if (subscribed) {
      diagnostics_channel.unsubscribe(CHANNEL_NAME, onEvent);
      subscribed = false;
    }
  };
}
