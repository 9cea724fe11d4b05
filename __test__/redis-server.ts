/**
 * A real redis-server for the tests, on a free loopback port, that a test can kill and
 * restart. When the binary is missing, REDIS_URL is used instead (and the tests that must
 * stop the server fail, saying why); in CI a missing Redis is a failure, never a skip.
 */

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createConnection, createServer } from 'node:net';

/** The server binary: `redis-server`, or another RESP server such as Valkey's
 * `valkey-server` named by IDT_REDIS_SERVER (.ci/valkey.sh runs the suites that way). */
export const SERVER_BIN = process.env.IDT_REDIS_SERVER || 'redis-server';

export function hasRedisBinary(): boolean {
  return spawnSync(SERVER_BIN, ['--version']).status === 0;
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

/** Sends one inline command and resolves with the raw reply (for readiness and admin). */
export function redisCommand(port: number, command: string, host = '127.0.0.1'): Promise<string> {
  return new Promise((done, fail) => {
    const socket = createConnection({ port, host });
    let reply = '';
    socket.setTimeout(2000, () => socket.destroy(new Error('redis did not answer')));
    socket.on('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (d) => {
      reply += d;
      if (reply.endsWith('\r\n')) {
        socket.end();
        done(reply.trim());
      }
    });
    socket.on('error', fail);
  });
}

export class RedisServer {
  private child: ChildProcess | undefined;
  private constructor(
    readonly port: number,
    private readonly extraArgs: string[],
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  static async start(extraArgs: string[] = []): Promise<RedisServer> {
    if (!hasRedisBinary()) {
      throw new Error('redis-server is not on the PATH: install it (apt-get install redis-server); the Redis tests need a server they can stop and restart');
    }
    const server = new RedisServer(await freePort(), extraArgs);
    await server.launch();
    return server;
  }

  private async launch(): Promise<void> {
    const child = spawn(
      SERVER_BIN,
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...this.extraArgs],
      { stdio: 'ignore' },
    );
    this.child = child;
    const exited = new Promise<never>((_, fail) =>
      child.once('exit', (code) => fail(new Error(`redis-server exited with ${code} at start`))),
    );
    // Ready when it answers; the loop ends on the first answer or on the child's exit.
    const ready = (async () => {
      for (;;) {
        try {
          const reply = await redisCommand(this.port, 'PING');
          if (/PONG|NOAUTH/.test(reply)) return;
        } catch {
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    })();
    await Promise.race([ready, exited]);
    exited.catch(() => {});
  }

  /** Kills the server (SIGKILL: no goodbye to its clients) and waits for it to be gone. */
  async kill(): Promise<void> {
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    child.kill('SIGCONT'); // a paused server dies only once it runs again
    await gone;
    this.child = undefined;
  }

  /** Stops the server's process (SIGSTOP): it keeps its connections and answers nothing. */
  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  /** Lets a paused server run again (SIGCONT). */
  resume(): void {
    this.child?.kill('SIGCONT');
  }

  async restart(): Promise<void> {
    await this.kill();
    await this.launch();
  }
}

let shared: Promise<{ url: string; stop: () => Promise<void> }> | undefined;

/** One server for a whole test file: an own redis-server when possible, else REDIS_URL. */
export function sharedRedis(): Promise<{ url: string; stop: () => Promise<void> }> {
  shared ??= (async () => {
    if (hasRedisBinary()) {
      const server = await RedisServer.start();
      return { url: server.url, stop: () => server.kill() };
    }
    const url = process.env.REDIS_URL;
    if (!url) throw new Error('no redis-server on the PATH and no REDIS_URL: the Redis tests cannot run');
    return { url, stop: async () => {} };
  })();
  return shared;
}

let prefixes = 0;
/** A prefix no other test uses, so tests sharing a server never see each other's records. */
export function uniquePrefix(): string {
  return `it-test:${process.pid}:${Date.now()}:${++prefixes}:`;
}

/**
 * The commands a client sent so far (RESP arrays of bulk strings), taken off `state.buf`:
 * what a fake Redis server in a test reads.
 */
export function commands(state: { buf: Buffer }): string[][] {
  const out: string[][] = [];
  for (;;) {
    const b = state.buf;
    let at = 0;
    const line = () => {
      const end = b.indexOf('\r\n', at);
      if (end < 0) return undefined;
      const text = b.subarray(at, end).toString('latin1');
      at = end + 2;
      return text;
    };
    const head = line();
    if (head === undefined || head[0] !== '*') return out;
    const args: string[] = [];
    for (let i = 0; i < Number(head.slice(1)); i++) {
      const len = line();
      if (len === undefined) return out;
      const n = Number(len.slice(1));
      if (b.length < at + n + 2) return out;
      args.push(b.subarray(at, at + n).toString('latin1'));
      at += n + 2;
    }
    out.push(args);
    state.buf = b.subarray(at);
  }
}

/** A section of INFO, read whole (a bulk reply may come in several chunks). */
export function redisInfo(port: number, section: string): Promise<string> {
  return new Promise((done, fail) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    let reply = Buffer.alloc(0);
    socket.setTimeout(2000, () => socket.destroy(new Error('redis did not answer')));
    socket.on('connect', () => socket.write(`INFO ${section}\r\n`));
    socket.on('data', (d) => {
      reply = Buffer.concat([reply, d]);
      const head = reply.indexOf('\r\n');
      const length = Number(reply.subarray(1, head).toString());
      if (head > 0 && reply.length >= head + 2 + length + 2) {
        socket.end();
        done(reply.subarray(head + 2, head + 2 + length).toString());
      }
    });
    socket.on('error', fail);
  });
}

/**
 * Calls of each command so far on the server at `port` (INFO commandstats), or another of
 * its counts (`failed_calls`: answered with an error, NOSCRIPT among them).
 */
export async function commandCalls(port: number): Promise<(name: string, count?: 'calls' | 'failed_calls') => number> {
  const stats = await redisInfo(port, 'commandstats');
  return (name, count = 'calls') => Number(new RegExp(`cmdstat_${name}:(?:[^\\r\\n]*,)?${count}=(\\d+)`).exec(stats)?.[1] ?? 0);
}

/**
 * Makes new calls (`call(i)` for i = 0, 1, ...) until one settles without the settle script
 * (no PEXPIRETIME on the server at `port`); returns how many it made. RedisStore's loop
 * transport settles a new call in one command (`SET ... IFEQ`, or on Redis 7 a small
 * script) only once it holds the server's clock, read on a round trip under 10 ms, and has
 * probed IFEQ (src/redis_store/on_loop/one_command.rs). One warm-up call did both on a
 * quiet host; on a loaded one (CI) it did neither, and tests that counted or cut the next
 * settle saw the probe or a NOSCRIPT instead.
 */
export async function untilOneCommandSettle(port: number, call: (i: number) => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const before = (await commandCalls(port))('pexpiretime');
    await call(i);
    if ((await commandCalls(port))('pexpiretime') === before) return i + 1;
  }
  throw new Error('the one-command settle never engaged in 200 calls');
}
