// The fault proxy (stress/faults/proxy.js) against a tiny echo server: each fault does what
// it says, and nothing else. Every wait is on an event (bytes seen, a socket closed), never
// on a time.

import { createRequire } from 'node:module';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { ROOT } from '../helpers';

const require = createRequire(import.meta.url);
const { FaultProxy, createRandom } = require(join(ROOT, 'stress', 'faults', 'proxy.js'));

/** An echo server that also says "bye" when its client half-closes, and counts what it got. */
interface Echo {
  port: number;
  received: Buffer[];
  ended: number;
  resets: number;
  sockets: Socket[];
  server: Server;
  /** Resolves once the server has received `n` bytes in all. */
  gotBytes(n: number): Promise<void>;
  /** Resolves once a client's half-close (FIN) reached it. */
  gotEnd(): Promise<void>;
  gotReset(): Promise<void>;
}

function until(check: () => boolean, subscribe: (wake: () => void) => void): Promise<void> {
  return new Promise((resolve) => {
    if (check()) return resolve();
    subscribe(() => {
      if (check()) resolve();
    });
  });
}

async function startEcho(): Promise<Echo> {
  const wakers = new Set<() => void>();
  const wake = () => {
    for (const w of wakers) w();
  };
  const echo: Echo = {
    port: 0,
    received: [],
    ended: 0,
    resets: 0,
    sockets: [],
    server: createServer({ allowHalfOpen: true }, (socket) => {
      echo.sockets.push(socket);
      socket.on('data', (d) => {
        echo.received.push(d);
        socket.write(d);
        wake();
      });
      socket.on('end', () => {
        echo.ended++;
        socket.end('bye');
        wake();
      });
      socket.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code === 'ECONNRESET') echo.resets++;
        wake();
      });
    }),
    gotBytes: (n) => until(() => Buffer.concat(echo.received).length >= n, (w) => wakers.add(w)),
    gotEnd: () => until(() => echo.ended > 0, (w) => wakers.add(w)),
    gotReset: () => until(() => echo.resets > 0, (w) => wakers.add(w)),
  };
  await new Promise<void>((r) => echo.server.listen(0, '127.0.0.1', r));
  echo.port = (echo.server.address() as { port: number }).port;
  return echo;
}

/** A client of the proxy that keeps what it reads, and how it ended. */
class Client {
  chunks: Buffer[] = [];
  ended = false;
  error: NodeJS.ErrnoException | undefined;
  closed: Promise<void>;
  private wakers = new Set<() => void>();
  socket: Socket;

  constructor(port: number) {
    this.socket = createConnection({ port, host: '127.0.0.1', allowHalfOpen: true });
    this.socket.on('data', (d) => {
      this.chunks.push(d);
      this.wake();
    });
    this.socket.on('end', () => {
      this.ended = true;
      this.wake();
    });
    this.socket.on('error', (err) => {
      this.error = err;
      this.wake();
    });
    this.closed = new Promise((r) => this.socket.once('close', () => r()));
  }

  private wake() {
    for (const w of this.wakers) w();
  }

  get text(): string {
    return Buffer.concat(this.chunks).toString();
  }

  connected(): Promise<void> {
    return new Promise((r) => (this.socket.connecting ? this.socket.once('connect', () => r()) : r()));
  }

  got(text: string): Promise<void> {
    return until(() => this.text.includes(text), (w) => this.wakers.add(w));
  }

  gotEnd(): Promise<void> {
    return until(() => this.ended, (w) => this.wakers.add(w));
  }
}

let echo: Echo;
const proxies: { close(): Promise<void> }[] = [];
beforeAll(async () => {
  echo = await startEcho();
});
afterEach(async () => {
  await Promise.all(proxies.splice(0).map((p) => p.close()));
  echo.received.length = 0;
  echo.ended = 0;
  echo.resets = 0;
});
afterAll(async () => {
  for (const s of echo.sockets) s.destroy();
  await new Promise((r) => echo.server.close(r));
});

async function proxy(seed = 7) {
  const p = await FaultProxy.start({ target: { host: '127.0.0.1', port: echo.port }, seed });
  proxies.push(p);
  return p;
}

/** Resolves once the proxy has received `text` from the given side (its tap saw it). */
function proxySaw(conn: any, dir: 'up' | 'down', text: string): Promise<void> {
  let seen = '';
  return new Promise((resolve) => conn.onChunk(dir, (chunk: Buffer) => {
    seen += chunk.toString();
    if (seen.includes(text)) setImmediate(resolve); // after the proxy's own handler ran
  }));
}

async function firstConnection(p: any): Promise<any> {
  return new Promise((resolve) => p.onConnection((conn: any) => resolve(conn)));
}

describe('FaultProxy', () => {
  it('forwards both ways when no fault is set, and fills %PORT% in a url', async () => {
    const p = await proxy();
    expect(p.url('redis://127.0.0.1:%PORT%/0')).toBe(`redis://127.0.0.1:${p.port}/0`);
    const c = new Client(p.port);
    c.socket.write('hello');
    await c.got('hello');
    expect(p.connections).toHaveLength(1);
    expect(p.connections[0].forwarded).toEqual({ up: 5, down: 5 });
    c.socket.end();
    await c.gotEnd(); // the echo server's "bye" and FIN come back through
    expect(c.text).toBe('hellobye');
    await c.closed;
  });

  it('refuses a target that is not on loopback', async () => {
    await expect(FaultProxy.start({ target: { host: '10.0.0.1', port: 1 } })).rejects.toThrow(/loopback/);
  });

  it('stall: nothing moves either way until resume()', async () => {
    const p = await proxy();
    const connected = firstConnection(p);
    const c = new Client(p.port);
    const conn = await connected;
    conn.stall();
    const seen = proxySaw(conn, 'up', 'ping');
    c.socket.write('ping');
    await seen;
    expect(conn.forwarded).toEqual({ up: 0, down: 0 });
    expect(echo.received).toHaveLength(0);
    conn.resume();
    await c.got('ping');
    expect(conn.forwarded).toEqual({ up: 4, down: 4 });
  });

  it('hold(down): the server gets the request, the client no reply until release(down)', async () => {
    const p = await proxy();
    const connected = firstConnection(p);
    const c = new Client(p.port);
    const conn = await connected;
    conn.hold('down');
    const replied = proxySaw(conn, 'down', 'ping');
    c.socket.write('ping');
    await echo.gotBytes(4);
    await replied; // the echo reached the proxy, and stays there
    expect(conn.forwarded).toEqual({ up: 4, down: 0 });
    expect(c.chunks).toHaveLength(0);
    c.socket.write('pong'); // the other direction still flows
    await echo.gotBytes(8);
    conn.release('down');
    await c.got('pingpong');
  });

  it('reset: both sides see ECONNRESET', async () => {
    const p = await proxy();
    const c = new Client(p.port);
    c.socket.write('x');
    await c.got('x');
    p.connections[0].reset();
    await c.closed;
    await echo.gotReset();
    expect(c.error?.code).toBe('ECONNRESET');
    expect(c.ended).toBe(false);
  });

  it('halfClose(down): the client gets a FIN, its requests still reach the server', async () => {
    const p = await proxy();
    const c = new Client(p.port);
    await c.connected();
    await until(() => p.connections.length === 1, (w) => p.onConnection(w));
    p.connections[0].halfClose('down');
    await c.gotEnd();
    c.socket.write('late');
    await echo.gotBytes(4);
    expect(c.text).toBe('');
  });

  it('halfClose(up): the server gets a FIN and its answer still reaches the client', async () => {
    const p = await proxy();
    const c = new Client(p.port);
    c.socket.write('a');
    await c.got('a');
    p.connections[0].halfClose('up');
    await echo.gotEnd();
    await c.got('bye');
  });

  it('split(1, 1): a reply arrives one byte per write, intact and in order', async () => {
    const p = await proxy();
    const connected = firstConnection(p);
    const c = new Client(p.port);
    const conn = await connected;
    conn.split(1, 1, 'down');
    const text = 'abcdefghijklmnopqrstuvwxyz0123456789';
    c.socket.write(text);
    await c.got(text);
    expect(c.text).toBe(text);
    expect(conn.writes.down).toBe(text.length);
    // The pieces go out on separate turns of the loop: the client reads at most two at a time.
    expect(c.chunks.length).toBeGreaterThanOrEqual(text.length / 2);
  });

  it('split(1, 8): piece sizes come from the seed, the same for the same seed', async () => {
    const sizes = async (seed: number) => {
      const p = await proxy(seed);
      const connected = firstConnection(p);
      const c = new Client(p.port);
      const conn = await connected;
      conn.split(1, 8, 'down');
      const text = 'x'.repeat(200);
      c.socket.write(text);
      await c.got(text);
      return conn.writes.down;
    };
    const [a, b] = [await sizes(11), await sizes(11)];
    expect(a).toBe(b);
    expect(a).toBeGreaterThanOrEqual(200 / 8);
    expect(a).toBeLessThan(200);
  });

  for (const k of [0, 1, 3, 9]) {
    it(`cutAfter(${k}, down): the client gets exactly ${k} bytes of the reply, then the connection is gone`, async () => {
      const p = await proxy();
      const connected = firstConnection(p);
      const c = new Client(p.port);
      const conn = await connected;
      conn.cutAfter(k, 'down');
      c.socket.write('0123456789');
      // Linux: a client that had not read the k bytes when the RST came reads them, then
      // the end of the stream; one with nothing to read gets ECONNRESET.
      await Promise.race([c.closed, c.gotEnd()]);
      expect(c.text).toBe('0123456789'.slice(0, k));
      if (k === 0) expect(c.error?.code).toBe('ECONNRESET');
      expect(conn.forwarded.down).toBe(k);
      await conn.closed;
      await echo.gotReset();
    });
  }

  it('cutAfter(k, up): the server gets exactly k bytes, then a reset', async () => {
    const p = await proxy();
    const connected = firstConnection(p);
    const c = new Client(p.port);
    const conn = await connected;
    conn.cutAfter(3, 'up');
    c.socket.write('abcdef');
    await c.closed;
    await echo.gotReset();
    expect(Buffer.concat(echo.received).toString()).toBe('abc');
  });

  it('jitter: chunks are delayed but arrive intact and in order', async () => {
    const p = await proxy();
    const connected = firstConnection(p);
    const c = new Client(p.port);
    const conn = await connected;
    conn.jitter(0, 5).split(1, 8);
    let sent = '';
    for (let i = 0; i < 20; i++) {
      const part = `<${i}>`;
      sent += part;
      c.socket.write(part);
    }
    await c.got(sent);
    expect(c.text).toBe(sent);
    expect(conn.faults).toEqual(['jitter 0..5ms both', 'split 1..8 both']);
  });

  it('refuse: new connections are reset at once, until refuse(false)', async () => {
    const p = await proxy();
    p.refuse();
    const c = new Client(p.port);
    await c.closed;
    expect(c.error?.code).toBe('ECONNRESET');
    expect(p.accepted).toBe(0);
    p.refuse(false);
    const d = new Client(p.port);
    d.socket.write('ok');
    await d.got('ok');
  });

  it('onConnection runs (awaited) before any byte flows', async () => {
    const p = await proxy();
    let letGo!: () => void;
    const gate = new Promise<void>((r) => (letGo = r));
    let scripted!: (conn: any) => void;
    const script = new Promise<any>((r) => (scripted = r));
    p.onConnection(async (conn: any) => {
      scripted(conn);
      await gate;
    });
    const c = new Client(p.port);
    await new Promise((r) => c.socket.write('early', r)); // in the proxy's socket buffer
    const conn = await script;
    expect(conn.forwarded.up).toBe(0);
    expect(echo.received).toHaveLength(0);
    letGo();
    await c.got('early');
  });

  it('all.hold(down) holds live and future connections; all.release(down) lets both go', async () => {
    const p = await proxy();
    const a = new Client(p.port);
    a.socket.write('a');
    await a.got('a');
    p.all.hold('down');
    const gotB = new Promise<any>((r) => p.onConnection(r));
    const b = new Client(p.port);
    const connB = await gotB;
    const repliedB = proxySaw(connB, 'down', 'b');
    const repliedA = proxySaw(p.connections[0], 'down', 'A');
    a.socket.write('A');
    b.socket.write('b');
    await Promise.all([repliedA, repliedB]);
    expect(connB.faults).toEqual(['hold down']);
    expect([a.text, b.text]).toEqual(['a', '']);
    p.all.release('down');
    await Promise.all([a.got('aA'), b.got('b')]);
    const c = new Client(p.port); // no standing hold any more
    c.socket.write('c');
    await c.got('c');
  });

  it('a target that refuses connections: the client is reset, not left hanging', async () => {
    const closedServer = createServer();
    await new Promise<void>((r) => closedServer.listen(0, '127.0.0.1', r));
    const port = (closedServer.address() as { port: number }).port;
    await new Promise((r) => closedServer.close(r));
    const p = await FaultProxy.start({ target: { host: '127.0.0.1', port }, seed: 1 });
    proxies.push(p);
    const c = new Client(p.port);
    await c.closed;
    expect(c.error?.code).toBe('ECONNRESET');
  });

  it('the PRNG: the same seed gives the same sequence, another seed another', () => {
    const draw = (seed: number) => Array.from({ length: 8 }, createRandom(seed).next);
    expect(draw(42)).toEqual(draw(42));
    expect(draw(42)).not.toEqual(draw(43));
    const r = createRandom(5);
    for (let i = 0; i < 1000; i++) {
      const n = r.int(1, 8);
      expect(n >= 1 && n <= 8).toBe(true);
    }
  });
});
