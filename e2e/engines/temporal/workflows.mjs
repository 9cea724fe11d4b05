// The workflows of temporal.test.mjs (bundled by the Temporal worker; deterministic code only).
import { proxyActivities } from '@temporalio/workflow';

// Temporal retries an attempt 4 s after it started (start-to-close), at once after that.
const retry = { initialInterval: '50ms', backoffCoefficient: 1, maximumAttempts: 10 };
const { charge, controlCharge } = proxyActivities({ startToCloseTimeout: '4s', retry });
const { chargeOnce, chargeTwice } = proxyActivities({ startToCloseTimeout: '30s', retry });

export async function payFlow(id) {
  return [await charge(`pkg-${id}`), await controlCharge(`control-${id}`)];
}

export async function slowFlow(id) {
  return [await charge(`slow-pkg-${id}`), await controlCharge(`slow-control-${id}`)];
}

export async function manyFlow(id) {
  const out = [await chargeOnce(`first-${id}`, 0), await chargeTwice(`second-${id}`)];
  for (let i = 0; i < 2; i++) out.push(await chargeOnce(`loop-${id}`, i));
  return out;
}
