// Issue 21 item 3: text from records (keys chosen by outside callers, names, scopes, error
// messages that are a tool's output) reaches the terminal with its control characters
// escaped, through the real CLI; --json stays exact.

import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';

import { ROOT, lib, lineFrom, runNode, tempDir } from './helpers';

const CLI = join(ROOT, 'dist', 'cli.js');

/** Clear the screen, write the clipboard (OSC 52, BEL-terminated), a C1 CSI, DEL, a carriage return. */
const CLEAR = '\x1b[2J';
const OSC52 = '\x1b]52;c;cm0gLXJmIH4=\x07';
const C1 = '\u009b31m';
const EVIL = `${CLEAR}${OSC52}${C1}\x7f\r`;

/** Any control character a terminal acts on; only the line breaks the CLI itself writes are allowed. */
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;
/** How the evil text looks once escaped: visible, and every byte accounted for. */
const SHOWN = '\\x1b[2J\\x1b]52;c;cm0gLXJmIH4=\\x07\\x9b31m\\x7f\\r';

let dir: string;
let db: string;
const key = (what: string) => `${what}-${EVIL}`;

beforeAll(async () => {
  dir = join(tempDir(), `folder${CLEAR}`); // the store's path is printed too
  mkdirSync(dir);
  db = join(dir, 'store.db');
  const store = new lib.SqliteStore({ path: db });
  const meta = { scope: `thread${EVIL}`, toolCallId: `call${EVIL}`, framework: `fw${EVIL}`, argsPreview: `{"a":"${EVIL}"}` };
  const done = await store.acquire({ key: key('done'), name: `charge${EVIL}`, fingerprint: 'fp', leaseMs: 60_000, force: false, meta });
  if (!done.acquired) throw new Error('not acquired');
  await store.complete({ key: key('done'), token: done.token, resultJson: JSON.stringify({ note: `paid${EVIL}` }), durationMs: 5 });
  const bad = await store.acquire({ key: key('bad'), name: `charge${EVIL}`, fingerprint: 'fp', leaseMs: 60_000, force: false, meta });
  if (!bad.acquired) throw new Error('not acquired');
  await store.fail({ key: key('bad'), token: bad.token, error: { name: `Error${EVIL}`, message: `card declined${EVIL}` } });
  for (const which of ['dup-1', 'dup-2']) {
    const c = await store.acquire({ key: key(which), name: `charge${EVIL}`, fingerprint: 'fp', leaseMs: 60_000, force: false });
    if (c.acquired) await store.complete({ key: key(which), token: c.token, resultJson: '1' });
  }
  await store.acquire({ key: key('stuck'), name: `charge${EVIL}`, fingerprint: 'fp', leaseMs: 600_000, force: false, meta });
  await store.close();
});

const cli = (...args: string[]) => runNode([CLI, '--db', db, ...args]);

function escaped(text: string): void {
  expect(text).not.toMatch(RAW_CONTROL);
}

describe('the CLI escapes control characters in its text output (issue 21 item 3)', () => {
  // Before: every one of these printed ESC, OSC 52, BEL and C1 raw.
  it('inspect: the table', async () => {
    const r = await cli('inspect');
    expect(r.code).toBe(0);
    escaped(r.stdout);
    expect(r.stdout).toContain(`done-${SHOWN}`);
    expect(r.stdout).toContain(`charge${SHOWN}`);
    expect(r.stdout).toContain(`thread${SHOWN}`);
    expect(r.stdout.trim().split('\n')).toHaveLength(6); // a header and five rows, however the keys look
  });

  it('inspect --key: one record in full, its error and result too', async () => {
    for (const which of ['done', 'bad']) {
      const r = await cli('inspect', '--key', `${which}-`);
      expect(r.code).toBe(0);
      escaped(r.stdout);
      expect(r.stdout).toContain(`${which}-${SHOWN}`);
      expect(r.stdout).toContain(`call${SHOWN}`);
      expect(r.stdout).toContain(`fw${SHOWN}`);
    }
    expect((await cli('inspect', '--key', 'bad-')).stdout).toContain(`Error${SHOWN}: card declined${SHOWN}`);
    // The result is JSON, which escapes C0 itself; C1 and DEL are escaped the JSON way.
    const shown = (await cli('inspect', '--key', 'done-')).stdout;
    expect(shown).toContain('"note": "paid\\u001b[2J\\u001b]52;c;cm0gLXJmIH4=\\u0007\\u009b31m\\u007f\\r"');
  });

  it('inspect --key: a missing or ambiguous key is refused on stderr, escaped', async () => {
    const missing = await cli('inspect', '--key', `nope${OSC52}`);
    expect(missing.code).toBe(1);
    escaped(missing.stderr);
    expect(missing.stderr).toContain('nope\\x1b]52;c;');
    const ambiguous = await cli('inspect', '--key', 'dup-');
    expect(ambiguous.code).toBe(1);
    escaped(ambiguous.stderr);
    expect(ambiguous.stderr).toContain(`dup-1-${SHOWN}  charge${SHOWN}  completed`);
    expect(ambiguous.stderr).toContain(`dup-2-${SHOWN}  charge${SHOWN}  completed`);
  });

  it('stats, clear --key and release --key name the store and the key escaped', async () => {
    const stats = await cli('stats');
    expect(stats.code).toBe(0);
    escaped(stats.stdout);
    expect(stats.stdout).toContain('folder\\x1b[2J');

    const refused = await cli('release', '--key', 'done-');
    expect(refused.code).toBe(1);
    escaped(refused.stderr);
    expect(refused.stderr).toContain(`done-${SHOWN} is completed`);

    const released = await cli('release', '--key', 'stuck-');
    expect(released.code).toBe(0);
    escaped(released.stdout);
    expect(released.stdout).toContain(`Released stuck-${SHOWN}`);

    const cleared = await cli('clear', '--key', 'stuck-');
    expect(cleared.code).toBe(0);
    escaped(cleared.stdout);
    expect(cleared.stdout).toContain(`Deleted the record stuck-${SHOWN}`);
  });

  it('--json stays exact', async () => {
    const r = await cli('inspect', '--json');
    const records = JSON.parse(r.stdout) as Array<{ key: string; name: string; meta: { scope: string } }>;
    expect(records.map((x) => x.key)).toEqual(expect.arrayContaining([key('bad'), key('done'), key('dup-1'), key('dup-2')]));
    const done = records.find((x) => x.key === key('done'))!;
    expect(done.name).toBe(`charge${EVIL}`);
    expect(done.meta.scope).toBe(`thread${EVIL}`);
    const one = JSON.parse((await cli('inspect', '--key', 'bad-', '--json')).stdout);
    expect(one.error.message).toBe(`card declined${EVIL}`);
  });

  it('inspect --follow prints each settle escaped, on one line', async () => {
    const path = join(tempDir(), 'follow.db');
    const store = new lib.SqliteStore({ path });
    await store.ready();
    const child = spawn(process.execPath, [CLI, '--db', path, 'inspect', '--follow'], { cwd: ROOT });
    try {
      let stderr = '';
      await new Promise<void>((done, fail) => {
        child.stderr!.on('data', (d) => {
          stderr += d;
          if (/Following/.test(stderr)) done();
        });
        child.on('close', (code) => fail(new Error(`follower exited (${code}): ${stderr}`)));
      });
      escaped(stderr);
      const op = lib.idempotent(
        async function op() {
          throw new Error(`tool said${EVIL}\nline two`);
        },
        { store, name: `op${EVIL}`, key: () => `k${EVIL}` },
      );
      await op().catch(() => {});
      const line = await lineFrom(child, /failed/);
      escaped(line);
      expect(line).toContain(`op${SHOWN}`);
      expect(line).toContain(`Error: tool said${SHOWN}\\nline two`);
      expect(line).toContain(`k${SHOWN}`);
    } finally {
      child.kill('SIGINT');
      await store.close();
    }
  });

  it('ui names the store escaped', async () => {
    const child = spawn(process.execPath, [CLI, '--db', db, 'ui'], { cwd: ROOT });
    try {
      let stdout = '';
      await new Promise<void>((done, fail) => {
        child.stdout!.on('data', (d) => {
          stdout += d;
          if (/Ctrl-C/.test(stdout)) done();
        });
        child.on('close', (code) => fail(new Error(`ui exited (${code})`)));
      });
      escaped(stdout);
      expect(stdout).toContain('folder\\x1b[2J');
    } finally {
      child.kill('SIGINT');
    }
  });
});
