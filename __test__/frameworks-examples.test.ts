// The offline framework examples run, and each charges exactly once.

import { describe, expect, it } from 'vitest';

import { join } from 'node:path';

import { runNode, tempDir } from './helpers';

describe('framework examples', () => {
  for (const framework of ['langgraph', 'langchain', 'ai-sdk', 'openai-agents', 'mastra', 'claude-agent-sdk', 'mcp-server']) {
    it(`examples/${framework} runs offline and charges once`, async () => {
      const r = await runNode([`examples/${framework}/index.mjs`]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/charges: 1\n/);
      expect(r.stdout).toMatch(/replayed/);
      // An event's scope is an object ({ chat, turn }, { thread, ... }): an example prints its parts.
      expect(r.stdout).not.toContain('[object Object]');
    });
  }

  // The README's framework sections, as files (scripts/check-readme.js checks that each README
  // block is its file). They use the default store: a fresh file here, so the first run charges.
  // The OpenAI Agents and Mastra ones need Node 22: .ci/node22-e2e.sh runs them.
  for (const framework of ['langchain', 'ai-sdk', 'claude-agent-sdk']) {
    it(`examples/${framework}/quickstart.mjs (the README's section) charges once, then replays`, async () => {
      const env = { IDEMPOTENT_TOOLS_DB: join(tempDir(), 'store.db') };
      const first = await runNode([`examples/${framework}/quickstart.mjs`], { env });
      expect(first.stderr).toBe('');
      expect(first.code).toBe(0);
      expect(first.stdout).toBe('Paid. charged 1 time(s)\n');
      const again = await runNode([`examples/${framework}/quickstart.mjs`], { env });
      expect(again.stdout).toBe('Paid. charged 0 time(s)\n');
    });
  }

  it('examples/approvals: approve, reject and edit, each turn run again and approved; only approved payments run, once', async () => {
    const r = await runNode(['examples/approvals/index.mjs']);
    expect(r.code).toBe(0);
    // The one thing on stderr: the ApprovalMismatchError warning for the developer (case 3).
    expect(r.stderr.split('\n').filter((l) => l !== '' && !l.includes('--trace-warnings'))).toEqual([expect.stringMatching(/IdempotentToolsWarning: .*is approved for other arguments/)]);
    expect(r.stdout).toMatch(/payments: \[100\] \(want \[100\]\)\n[^]*payments: \[\] \(want \[\]\)\n[^]*payments: \[50\] \(want \[50\]\)\n/);
    expect(r.stdout).toMatch(/event: refused/);
  });

  it('examples/langgraph/confirm-act.mjs: confirm, act, confirm, act; each transfer once', async () => {
    const r = await runNode(['examples/langgraph/confirm-act.mjs']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/transfers so far: 1\n[^]*transfers so far: 2\n/);
    expect(r.stdout).toMatch(/transfers: 2\n/);
  });
});
