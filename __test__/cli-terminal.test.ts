// Issue 21 item 3: text from records (keys chosen by outside callers, names, scopes, error
// messages that are a tool's output) reaches the terminal with its control characters
// escaped, through the real CLI; --json stays exact.

import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';

import { ROOT, lib, lineFrom, runNode, tempDir } from './helpers';
import { connect, logShows } from './mcp-helpers';

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

// Issue 36 finding 9: Unicode's bidirectional controls (U+202A-U+202E, U+2066-U+2069,
// U+200E, U+200F, U+061C) and the other characters a terminal shows as nothing (zero-width
// ones, soft hyphens, tags, spaces other than the space, line separators) are escaped too:
// a key holding U+202E showed the operator a reordered key or status (Trojan Source), and
// two keys that differ only by a zero-width space looked the same. They are written
// `\u{202e}`; a key is shown in a form that `--key` takes back (the record's key, or the
// key as shown), so what the operator sees can be pasted to find the same record.
describe('the CLI escapes bidirectional controls and invisible characters (issue 36 finding 9)', () => {
  /** Raw, any of them: bidi controls, zero-width characters, BOM, soft hyphen, NBSP, line separators, a tag. */
  const RAW_INVISIBLE = /[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u200b-\u200d\u2060\ufeff\u00ad\u00a0\u2028\u2029]|\u{e0041}/u;
  const KEYS = {
    rlo: 'invoice-\u202egpj.exe',
    zwsp: 'pay\u200bment-1',
    plain: 'payment-1',
    isolate: 'iso\u2066late\u2069d',
    others: 'x\u00ad\ufeff\u00a0\u2028\u{e0041}\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u2067\u2068\u200c\u200d\u2060y',
    // A key whose text is another key's escaped form, and that other key.
    literal: 'lit\\u{200b}eral',
    hidden: 'lit\u200beral',
  };
  const SHOWN = {
    rlo: 'invoice-\\u{202e}gpj.exe',
    zwsp: 'pay\\u{200b}ment-1',
    plain: 'payment-1',
    isolate: 'iso\\u{2066}late\\u{2069}d',
    others: 'x\\u{ad}\\u{feff}\\u{a0}\\u{2028}\\u{e0041}\\u{200e}\\u{200f}\\u{61c}\\u{202a}\\u{202b}\\u{202c}\\u{202d}\\u{2067}\\u{2068}\\u{200c}\\u{200d}\\u{2060}y',
    literal: 'lit\\\\u{200b}eral',
    hidden: 'lit\\u{200b}eral',
  };
  let bidiDb: string;
  const run = (...args: string[]) => runNode([CLI, '--db', bidiDb, ...args]);

  beforeAll(async () => {
    const folder = join(tempDir(), 'store\u202e');
    mkdirSync(folder);
    bidiDb = join(folder, 'bidi.db');
    const store = new lib.SqliteStore({ path: bidiDb });
    for (const [which, key] of Object.entries(KEYS)) {
      const c = await store.acquire({ key, name: `charge\u202e${which}`, fingerprint: 'fp', leaseMs: 60_000, force: false, meta: { scope: `thread\u2067${which}` } });
      if (!c.acquired) throw new Error('not acquired');
      if (which === 'rlo') await store.fail({ key, token: c.token, error: { name: 'Error', message: 'declined\u202e ko: ok' } });
      else await store.complete({ key, token: c.token, resultJson: which === 'isolate' ? JSON.stringify({ s: 'a\u2066b\u{e0041}' }) : '1' });
    }
    await store.close();
  });

  it('inspect: the table shows every key, name and scope with them escaped', async () => {
    const r = await run('inspect');
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(RAW_INVISIBLE);
    for (const [which, shown] of Object.entries(SHOWN)) {
      expect(r.stdout).toContain(shown);
      expect(r.stdout).toContain(`charge\\u{202e}${which}`);
      expect(r.stdout).toContain(`thread\\u{2067}${which}`);
    }
  });

  it('inspect --key: a key as shown finds its record, which it shows escaped, its error too', async () => {
    for (const which of ['rlo', 'zwsp', 'plain', 'isolate', 'others', 'literal'] as const) {
      const r = await run('inspect', '--key', SHOWN[which]);
      expect({ which, code: r.code, stderr: r.stderr }).toEqual({ which, code: 0, stderr: '' });
      expect(r.stdout).not.toMatch(RAW_INVISIBLE);
      expect(r.stdout).toMatch(new RegExp(`^key +${SHOWN[which].replace(/[\\^$.*+?()[\]{}|]/g, '\\$&')}$`, 'm'));
      const json = JSON.parse((await run('inspect', '--key', SHOWN[which], '--json')).stdout);
      expect(json.key).toBe(KEYS[which]);
    }
    expect((await run('inspect', '--key', SHOWN.rlo)).stdout).toContain('Error: declined\\u{202e} ko: ok');
    // A result is JSON: they are JSON escapes there (a character past U+FFFF as its two halves).
    expect((await run('inspect', '--key', SHOWN.isolate)).stdout).toContain('"s": "a\\u2066b\\udb40\\udc41"');
    // A start of a key as shown, cut inside an escape too.
    expect(JSON.parse((await run('inspect', '--key', 'invoice-\\u{20', '--json')).stdout).key).toBe(KEYS.rlo);
    // The key itself still finds it.
    expect(JSON.parse((await run('inspect', '--key', KEYS.isolate, '--json')).stdout).key).toBe(KEYS.isolate);
  });

  it('inspect --key: a text that is one key and another key as shown is ambiguous, both listed apart', async () => {
    const r = await run('inspect', '--key', SHOWN.hidden);
    expect(r.code).toBe(1);
    expect(r.stderr).not.toMatch(RAW_INVISIBLE);
    expect(r.stderr).toMatch(/ambiguous/);
    expect(r.stderr).toContain(`  ${SHOWN.hidden}  charge\\u{202e}hidden`);
    expect(r.stderr).toContain(`  ${SHOWN.literal}  charge\\u{202e}literal`);
  });

  it('a missing key is named escaped; clear --key with a key as shown deletes that record', async () => {
    const missing = await run('inspect', '--key', 'nope\u202e');
    expect(missing.code).toBe(1);
    expect(missing.stderr).not.toMatch(RAW_INVISIBLE);
    expect(missing.stderr).toContain('no record with key nope\\u{202e}');
    expect(missing.stderr).toContain('store\\u{202e}');
    const cleared = await run('clear', '--key', SHOWN.zwsp);
    expect(cleared.code).toBe(0);
    expect(cleared.stdout).toBe(`Deleted the record ${SHOWN.zwsp}.\n`);
    const store = new lib.SqliteStore({ path: bidiDb });
    try {
      expect(await store.get(KEYS.zwsp)).toBeNull();
      expect(await store.get(KEYS.plain)).not.toBeNull();
    } finally {
      await store.close();
    }
  });

  it('stats names the store escaped', async () => {
    const r = await run('stats');
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(RAW_INVISIBLE);
    expect(r.stdout).toContain('store\\u{202e}');
  });

  it('inspect --follow prints a settle with them escaped', async () => {
    const path = join(tempDir(), 'follow-bidi.db');
    const store = new lib.SqliteStore({ path });
    await store.ready();
    const child = spawn(process.execPath, [CLI, '--db', path, 'inspect', '--follow'], { cwd: ROOT });
    try {
      await new Promise<void>((done, fail) => {
        let stderr = '';
        child.stderr!.on('data', (d) => {
          stderr += d;
          if (/Following/.test(stderr)) done();
        });
        child.on('close', (code) => fail(new Error(`follower exited (${code}): ${stderr}`)));
      });
      const op = lib.idempotent(
        async function op() {
          throw new Error('status: \u202edeliaf');
        },
        { store, name: 'op\u2066', key: () => 'k\u200b1' },
      );
      await op().catch(() => {});
      const line = await lineFrom(child, /failed/);
      expect(line).not.toMatch(RAW_INVISIBLE);
      expect(line).toContain('op\\u{2066}');
      expect(line).toContain('Error: status: \\u{202e}deliaf');
      expect(line).toContain('k\\u{200b}1');
    } finally {
      child.kill('SIGINT');
      await store.close();
    }
  });

  it("the MCP proxy's log escapes them in a tool's name", async () => {
    const p = await connect({ flags: ['--db', join(tempDir(), 'mcp.db')], env: { COUNT_LOG: join(tempDir(), 'count.log') } });
    try {
      await p.client.callTool({ name: 'act\u202e', arguments: { id: 'x' } }).catch(() => {});
      await logShows(p, /counting\/act\\u\{202e\}/);
      expect(p.stderr()).not.toMatch(RAW_INVISIBLE);
    } finally {
      await p.close();
    }
  });
});
