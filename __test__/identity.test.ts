// lib/integrations/identity.ts: what tells a call's ids apart (issue 36). The rules the
// helpers share, on the shapes providers send.

import { createRequire } from 'node:module';

import { describe, expect, it } from 'vitest';

import { ROOT } from './helpers';

const require = createRequire(import.meta.url);
const identity: typeof import('../dist/integrations/identity.js') = require(`${ROOT}/dist/integrations/identity.js`);

describe('call ids', () => {
  it('numbered ids (which restart with every request) are told from random ones, however they end', () => {
    for (const id of ['call_0', 'call_12', 'toolu_01', 'c1', '0', 'call-3', 'tool_call_3', 'fc_1']) expect([id, identity.isNumberedCallId(id)]).toEqual([id, true]);
    // Random ids: OpenAI's (which may end in digits: the identity harness found one), Mistral's nine characters, Anthropic's.
    for (const id of ['call_TeXfCuyYyDMeCINwBtDSUL16', 'call_Qx7Vb2kLm9PzR4tN8sWc1eYd', 'D681PevKs', 'toolu_01A09q90qw90lq917835lq9', 'tooluse_kZJMlvQmRJ6eAyJE5GIl7Q']) {
      expect([id, identity.isNumberedCallId(id)]).toEqual([id, false]);
    }
  });

  it('ids unique across every conversation (no scope needed) have 16 or more random characters after their prefix', () => {
    for (const id of ['toolu_01A09q90qw90lq917835lq9', 'toolu_vrtx_01A09q90qw90lq917835lq9', 'tooluse_kZJMlvQmRJ6eAyJE5GIl7Q', 'call_Qx7Vb2kLm9PzR4tN8sWc1eYd', '3f2a6c1e-8b7d-4c5e-9f0a-1b2c3d4e5f60']) {
      expect([id, identity.isUniqueCallId(id)]).toEqual([id, true]);
    }
    for (const id of ['toolu_01', 'call_0', 'D681PevKs', 'c1']) expect([id, identity.isUniqueCallId(id)]).toEqual([id, false]);
  });
});
