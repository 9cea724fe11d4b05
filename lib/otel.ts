/**
 * `idempotent-tools/otel`: each call's outcome on the active OpenTelemetry span
 * (integrations/otel.ts).
 */

export { instrumentIdempotency } from './integrations/otel.js';
