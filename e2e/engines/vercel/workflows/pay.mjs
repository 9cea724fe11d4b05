// The workflows of vercel.test.mjs (built by `workflow build`).
import { chargeStep, controlStep, onceStep, twiceStep } from '../steps.mjs';

export async function payFlow(id) {
  'use workflow';
  return [await chargeStep(`pkg-${id}`), await controlStep(`control-${id}`)];
}

export async function manyFlow(id) {
  'use workflow';
  const out = [await onceStep(`first-${id}`, 0), await twiceStep(`second-${id}`)];
  for (let i = 0; i < 2; i++) out.push(await onceStep(`loop-${id}`, i));
  return out;
}
