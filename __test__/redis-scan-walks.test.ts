// Issue 36 finding 8: a walk over every record (listRecords, stats, clear, the CLI's
// inspect, stats and clear, the inspector page) SCANs the server until it answers cursor
// 0. A server that never does (the same cursor again and again, or a new one every time),
// or a proxy in front of a plain redis:// that answers so, kept the walk going forever,
// its memory growing. Each walk now ends in a StoreError that says what the server did.
//
// The fake server (a Node `net` server here) answers the handshake, TIME, DBSIZE and the
// reads of a walk as Redis does, and SCAN as no Redis would; the walk runs in a child
// process (or is the CLI). The fake counts the SCANs it answers: past OVERRUN it answers
// nothing more and closes every connection, so a walk that does not end by itself fails
// the test (its error is not the one expected) instead of running forever.

import { spawn } from 'node:child_process';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

import { ROOT, collect, runNode } from './helpers';
import { commands, uniquePrefix } from './redis-server';

const MB = 1024 * 1024;
const CLI = join(ROOT, 'dist', 'cli.js');

/** SCANs a fake answers before it gives up on the walk ending by itself. */
const OVERRUN = 30_000;

type Scan = 'same cursor' | 'new cursors, no keys' | 'new cursors, new keys';

const bulk = (s: string) => `$${Buffer.byteLength(s)}\r\n${s}\r\n`;

interface Fake {
  url: string;
  /** SCANs answered so far. */
  scans: () => number;
  /** Whether the walk went past OVERRUN SCANs (so the fake cut it off). */
  overrun: () => boolean;
  close: () => void;
}

/**
 * A server that answers a walk's commands as Redis does, except SCAN (`scan`), and DBSIZE
 * with `dbsize` (a RESP reply). Keys it lists are not records (GET finds none).
 */
async function fakeRedis(prefix: string, scan: Scan, dbsize = ':0\r\n'): Promise<Fake> {
  let scans = 0;
  let overrun = false;
  let junk = 0;
  const sockets = new Set<Socket>();
  const answer = (command: string[]): string => {
    switch (command[0].toUpperCase()) {
      case 'AUTH':
      case 'SELECT':
      case 'CLIENT':
        return '+OK\r\n';
      case 'PING':
        return '+PONG\r\n';
      case 'TIME':
        return `*2\r\n${bulk(String(Math.floor(Date.now() / 1000)))}${bulk('0')}`;
      case 'DBSIZE':
        return dbsize;
      case 'GET':
        return '$-1\r\n';
      case 'MGET':
        return `*${command.length - 1}\r\n${'$-1\r\n'.repeat(command.length - 1)}`;
      case 'PEXPIRETIME':
        return ':-2\r\n';
      case 'HGETALL':
        return '*0\r\n';
      case 'EXISTS':
        return ':0\r\n';
      case 'SCRIPT':
        return bulk('0'.repeat(40));
      case 'EVALSHA':
        return ':0\r\n';
      case 'SCAN': {
        scans++;
        if (scan === 'same cursor') return `*2\r\n${bulk('17')}*1\r\n${bulk(`${prefix}listed-again`)}`;
        const cursor = bulk(String(scans));
        if (scan === 'new cursors, no keys') return `*2\r\n${cursor}*0\r\n`;
        // 25 keys of 100 bytes, never seen before, each time.
        const keys = Array.from({ length: 25 }, () => bulk(`${prefix}${String(++junk).padStart(100 - prefix.length, '0')}`));
        return `*2\r\n${cursor}*${keys.length}\r\n${keys.join('')}`;
      }
      default:
        return `-ERR unknown command '${command[0]}'\r\n`;
    }
  };
  const server: Server = createServer((socket) => {
    if (overrun) return void socket.destroy();
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.setNoDelay(true);
    socket.on('error', () => {});
    const state = { buf: Buffer.alloc(0) };
    socket.on('data', (d) => {
      state.buf = Buffer.concat([state.buf, d]);
      let reply = '';
      for (const command of commands(state)) {
        reply += answer(command);
        if (scans > OVERRUN) {
          overrun = true;
          for (const s of sockets) s.destroy();
          return;
        }
      }
      if (reply !== '') socket.write(reply);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    url: `redis://127.0.0.1:${port}`,
    scans: () => scans,
    overrun: () => overrun,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

let fakes: Fake[] = [];
afterEach(() => {
  for (const f of fakes) f.close();
  fakes = [];
});

async function fake(scan: Scan, dbsize?: string): Promise<{ fake: Fake; prefix: string }> {
  const prefix = uniquePrefix();
  const f = await fakeRedis(prefix, scan, dbsize);
  fakes.push(f);
  return { fake: f, prefix };
}

/** What each kind of server makes a walk say. */
const SAYS: Record<Scan, RegExp> = {
  'same cursor': /SCAN repeated a cursor \(17\).*broken or hostile server, or a proxy in front of it/,
  'new cursors, no keys': /SCAN went on for \d+ steps.*broken or hostile server, or a proxy in front of it/,
  'new cursors, new keys': /SCAN went on for \d+ steps.*broken or hostile server, or a proxy in front of it/,
};

// Memory a walk may hold beyond what the process had: the keys it lists are not records,
// so it keeps none of them (before: it kept every key listed, 750,000 of them by the cut-off).
const MAX_GROWTH = 64 * MB;

const WALKS = ['listRecords', 'stats', 'clear'] as const;

/** SCAN steps a walk takes on a node, whatever its size (src/redis_store/walk.rs), and the keys per further step. */
const BASE_STEPS = 10_000;
const KEYS_PER_STEP = 50;
/** How many SCANs each kind of server gets before the walk stops: a repeated cursor at
 * once, ever-new ones past what a database of 0 keys (or of a size not told) takes. */
const STEPS: Record<Scan, number> = { 'same cursor': 2, 'new cursors, no keys': BASE_STEPS + 1, 'new cursors, new keys': BASE_STEPS + 1 };

const SERVERS: Array<[Scan, string | undefined]> = [
  ['same cursor', undefined],
  ['new cursors, no keys', ':0\r\n'],
  // DBSIZE refused (a proxy that does not pass it on): the walk still ends.
  ['new cursors, new keys', "-ERR unknown command 'DBSIZE'\r\n"],
];

describe.each(['loop', 'tokio'] as const)('a walk over a RedisStore (%s transport) whose server never ends its SCAN', (transport) => {
  describe.each(SERVERS)('%s', (scan, dbsize) => {
    it.each(WALKS)('%s ends in a StoreError that says so, its memory bounded', async (walk) => {
      const { fake: f, prefix } = await fake(scan, dbsize);
      const out = await runNode([join(ROOT, '__test__', 'fixtures', 'hostile-redis-walk.js'), JSON.stringify({ url: f.url, prefix, transport, walk })]);
      expect({ code: out.code, signal: out.signal, stderr: out.stderr }).toEqual({ code: 0, signal: null, stderr: '' });
      const r = JSON.parse(out.stdout.trim().split('\n').pop()!) as { outcome: { name?: string; message?: string }; rssBefore: number; peakRss: number };
      // Before: the walk went on until the fake cut it off, so its error was a lost connection.
      expect(f.overrun()).toBe(false);
      expect(r.outcome.name).toBe('StoreError');
      expect(r.outcome.message).toMatch(SAYS[scan]);
      expect(f.scans()).toBe(STEPS[scan]);
      expect(r.peakRss - r.rssBefore).toBeLessThan(MAX_GROWTH);
    });
  });

  it('a larger database (DBSIZE) allows more steps, and the error names its size', async () => {
    const { fake: f, prefix } = await fake('new cursors, no keys', ':250000\r\n');
    const out = await runNode([join(ROOT, '__test__', 'fixtures', 'hostile-redis-walk.js'), JSON.stringify({ url: f.url, prefix, transport, walk: 'listRecords' })]);
    const r = JSON.parse(out.stdout.trim().split('\n').pop()!) as { outcome: { name?: string; message?: string } };
    expect(r.outcome.name).toBe('StoreError');
    expect(r.outcome.message).toMatch(/SCAN went on for 15001 steps without finishing, more than a database of 250000 keys \(DBSIZE\) needs/);
    expect(f.scans()).toBe(BASE_STEPS + 250_000 / KEYS_PER_STEP + 1);
  });
});

describe('the CLI and the inspector page on such a server', () => {
  const cli = (url: string, prefix: string, ...args: string[]) => runNode([CLI, '--redis', url, '--prefix', prefix, ...args]);

  it.each(['inspect', 'inspect --key k', 'inspect --json', 'stats', 'clear --yes'])('%s: exit 1 with the StoreError on stderr', async (command) => {
    for (const [scan, dbsize] of SERVERS.slice(0, 2)) {
      const { fake: f, prefix } = await fake(scan, dbsize);
      const r = await cli(f.url, prefix, ...command.split(' '));
      expect(f.overrun()).toBe(false);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(SAYS[scan]);
      expect(r.stderr).not.toMatch(/unexpected error/);
    }
  });

  it('the page answers its records request with the error', async () => {
    for (const [scan, dbsize] of SERVERS.slice(0, 2)) {
      const { fake: f, prefix } = await fake(scan, dbsize);
      const child = spawn(process.execPath, [CLI, '--redis', f.url, '--prefix', prefix, 'ui'], { cwd: ROOT });
      const done = collect(child);
      try {
        const url = await new Promise<string>((resolve, fail) => {
          let stdout = '';
          child.stdout!.on('data', (d) => {
            stdout += d;
            const m = /http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]+/.exec(stdout);
            if (m) resolve(m[0]);
          });
          child.on('close', (code) => fail(new Error(`ui exited (${code}): ${stdout}`)));
        });
        const { origin, searchParams } = new URL(url);
        const res = await fetch(`${origin}/api/records`, { headers: { 'x-inspector-token': searchParams.get('token')! } });
        expect(f.overrun()).toBe(false);
        expect(res.status).toBe(500);
        expect(((await res.json()) as { error: string }).error).toMatch(SAYS[scan]);
      } finally {
        child.kill('SIGINT');
        await done;
      }
    }
  });
});
