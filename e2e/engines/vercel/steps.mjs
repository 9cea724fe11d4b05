// The steps of vercel.test.mjs's workflows; their side effects are in effects.mjs, which only
// step bodies use (the workflow bundle, which runs the workflows, must not load Node modules).
import { charge, chargeCard, chargeOnce, freeze } from './effects.mjs';

export async function chargeStep(label) {
  'use step';
  const r = await chargeCard(label);
  // After the side effect and its record, before the workflow records the step.
  if (process.env.DIE === 'after-record') freeze('recorded');
  return r;
}

export async function controlStep(label) {
  'use step';
  const r = charge(label);
  if (process.env.DIE === 'control') freeze('charged control');
  return r;
}

export async function onceStep(label, i) {
  'use step';
  return chargeOnce(label, i);
}

export async function twiceStep(label) {
  'use step';
  return [await chargeOnce(label, 0), await chargeOnce(label, 1)];
}
