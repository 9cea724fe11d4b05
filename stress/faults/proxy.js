'use strict';
// A TCP fault proxy: sits between a store's client and its server (Redis, Postgres) on
// loopback, forwards bytes both ways, and misbehaves on request, per connection and per
// direction. Plain `net`, no dependency. Only loopback targets: it is a test tool.
//
//   const { FaultProxy } = require('./stress/faults/proxy');
//   const proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port: 6379 }, seed: 42 });
//   proxy.port;                                   // where clients connect (127.0.0.1)
//   proxy.url('redis://127.0.0.1:%PORT%/0');      // %PORT% replaced by proxy.port
//   proxy.seed;                                   // print it: the same seed repeats a run
//   proxy.connections;                            // the live ones (FaultConnection[])
//   proxy.onConnection((conn) => conn.split());   // runs before any byte of a new one flows
//   proxy.all.hold('down');                       // every live and every future connection
//   proxy.all.release('down');                    // undoes it for both
//   proxy.refuse(true);                           // new connections are reset at once
//   await proxy.close();
//
// Directions: 'up' is client -> server, 'down' is server -> client, 'both' is both.
// A FaultConnection (conn.id counts from 1; conn.clientPort is the client's port, and
// conn.upstreamPort the proxy's own port towards the server, as the server sees it):
//   conn.stall() / conn.resume()        stop forwarding both ways / go on
//   conn.hold(dir) / conn.release(dir)  buffer one direction (FIN included); the other flows
//   conn.reset()                        destroy both sockets with an RST
//   conn.halfClose(dir)                 end that direction (a FIN to its receiver); later
//                                       bytes that way are read and dropped
//   conn.split(min = 1, max = 8, dir = 'both') / conn.unsplit(dir)
//                                       forward in pieces of min..max bytes (seeded sizes),
//                                       one write per piece, each after the last was flushed
//   conn.cutAfter(k, dir = 'down')      forward k more bytes that way, then reset; with
//                                       k = 0, reset when the next byte arrives that way.
//                                       (Linux: a receiver that had not read the k bytes
//                                       when the RST came reads them, then end-of-stream;
//                                       one with nothing left to read gets ECONNRESET)
//   conn.jitter(minMs, maxMs, dir = 'both') / conn.unjitter(dir)
//                                       delay each chunk by minMs..maxMs (seeded, in order)
//   conn.onChunk(dir, fn)               fn(buffer, conn) for each chunk as it arrives from
//                                       its sender, before any fault applies to it: a test
//                                       can script the next fault on what it sees (for
//                                       example cutAfter(k, 'down') once a claim goes up)
//   conn.forwarded, conn.writes         { up, down }: bytes delivered each way, and in
//                                       how many writes
//   conn.closed                         a promise, resolved once both sockets are closed
//   conn.faults                         the faults applied, in order (for a run's report)
// Every fault method returns the connection, so they chain. `proxy.all` has the same
// methods; each applies to the live connections and is replayed on each new one in order
// (release/resume/unsplit/unjitter drop the orders they undo; reset() on `all` resets the
// live connections only: for new ones that is `refuse`).
//
// Randomness: one seed per proxy (default: a random one, see proxy.seed); each connection
// draws from its own generator seeded by (seed, conn.id), so a connection's piece sizes
// and delays do not depend on how other connections interleave.

const net = require('node:net');
const { randomInt } = require('node:crypto');

const DIRECTIONS = ['up', 'down'];

/** A small seeded PRNG (mulberry32): the same seed gives the same sequence everywhere. */
function createRandom(seed) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    seed: seed >>> 0,
    /** A float in [0, 1). */
    next,
    /** An integer in [min, max], both included. */
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    /** One element of a non-empty array. */
    pick: (items) => items[Math.floor(next() * items.length)],
    /** True with probability p. */
    chance: (p) => next() < p,
  };
}

/** Mixes a seed and a number into a new 32-bit seed (for per-connection generators). */
function deriveSeed(seed, n) {
  let h = (seed ^ Math.imul(n + 0x9e3779b9, 0x85ebca6b)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d) >>> 0;
  h = Math.imul(h ^ (h >>> 15), 0x846ca68b) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

function directionsOf(dir) {
  if (dir === 'both') return DIRECTIONS;
  if (DIRECTIONS.includes(dir)) return [dir];
  throw new TypeError(`direction must be 'up' (client -> server), 'down' (server -> client) or 'both', not ${JSON.stringify(dir)}`);
}

function checkRange(name, min, max, lowest) {
  if (!Number.isInteger(min) || !Number.isInteger(max) || min < lowest || max < min) {
    throw new RangeError(`${name}: expected integers ${lowest} <= min <= max, got min ${min}, max ${max}`);
  }
}

const immediate = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** One direction of a connection: reads from `from`, forwards to `to`, applying the faults. */
class Pipe {
  constructor(conn, direction, from, to) {
    this.conn = conn;
    this.direction = direction;
    this.from = from;
    this.to = to;
    this.queue = [];
    this.holds = new Set(); // 'hold' and/or 'stall': forwarding waits while any is set
    this.split = null; // { min, max }
    this.jitter = null; // { min, max }
    this.cut = null; // bytes left before a reset, or null
    this.taps = [];
    this.sourceEnded = false;
    this.closedOut = false; // half-closed by a fault, or ended after the source's FIN
    this.running = false;
    this.forwarded = 0;
    this.writes = 0;
    from.on('data', (chunk) => {
      for (const tap of this.taps) tap(chunk, conn);
      if (this.closedOut) return; // half-closed: read and dropped
      this.queue.push(chunk);
      this.pump();
    });
    from.on('end', () => {
      this.sourceEnded = true;
      this.pump();
    });
  }

  /** Forwards what is queued, one chunk at a time, until the queue is empty or held. */
  async pump() {
    if (this.running) return;
    this.running = true;
    try {
      while (!this.conn.destroyed && !this.closedOut && this.holds.size === 0 && this.queue.length > 0) {
        const chunk = this.queue.shift();
        if (this.cut === 0) {
          this.conn.reset('cut');
          return;
        }
        if (this.jitter) {
          await sleep(this.conn.random.int(this.jitter.min, this.jitter.max));
          if (this.holds.size > 0 || this.conn.destroyed) {
            this.queue.unshift(chunk);
            continue;
          }
        }
        let rest = chunk;
        while (rest.length > 0 && !this.conn.destroyed && !this.closedOut) {
          if (this.holds.size > 0) {
            this.queue.unshift(rest); // held mid-chunk: the rest waits, in order
            break;
          }
          let size = this.split ? this.conn.random.int(this.split.min, this.split.max) : rest.length;
          if (this.cut !== null) size = Math.min(size, this.cut);
          const piece = rest.subarray(0, size);
          rest = rest.subarray(piece.length);
          await this.write(piece);
          if (this.cut !== null) {
            this.cut -= piece.length;
            if (this.cut === 0) {
              this.conn.reset('cut');
              return;
            }
          }
          // One piece per read on the other side, as far as we can make it: the next
          // piece goes out on a later turn of the event loop.
          if (this.split && rest.length > 0) await immediate();
        }
      }
      if (this.sourceEnded && this.queue.length === 0 && this.holds.size === 0 && !this.closedOut && !this.conn.destroyed) {
        this.closedOut = true;
        this.to.end();
      }
    } finally {
      this.running = false;
    }
  }

  write(piece) {
    return new Promise((resolve) => {
      if (this.to.destroyed) return resolve();
      this.forwarded += piece.length;
      this.writes++;
      this.to.write(piece, () => resolve());
    });
  }
}

class FaultConnection {
  constructor(proxy, id, client, upstream) {
    this.proxy = proxy;
    this.id = id;
    this.client = client;
    this.upstream = upstream;
    this.clientPort = client.remotePort;
    this.upstreamPort = undefined; // known once connected
    this.random = createRandom(deriveSeed(proxy.seed, id));
    this.destroyed = false;
    this.faults = [];
    this.pipes = { up: new Pipe(this, 'up', client, upstream), down: new Pipe(this, 'down', upstream, client) };
    let closes = 0;
    this.closed = new Promise((resolve) => {
      const one = () => {
        if (++closes === 2) {
          this.destroyed = true;
          resolve();
        }
      };
      client.once('close', one);
      upstream.once('close', one);
    });
    // A socket error on either side (the server reset us, the client vanished) is passed
    // on as an RST to the other side: the proxy never turns a reset into a clean close.
    client.on('error', () => this.reset('client error'));
    upstream.on('error', () => this.reset('upstream error'));
    upstream.once('connect', () => {
      this.upstreamPort = upstream.localPort;
    });
  }

  get forwarded() {
    return { up: this.pipes.up.forwarded, down: this.pipes.down.forwarded };
  }

  /** How many writes delivered those bytes, each way (a split reply is many writes). */
  get writes() {
    return { up: this.pipes.up.writes, down: this.pipes.down.writes };
  }

  note(fault) {
    this.faults.push(fault);
    return this;
  }

  stall() {
    for (const d of DIRECTIONS) this.pipes[d].holds.add('stall');
    return this.note('stall');
  }

  resume() {
    for (const d of DIRECTIONS) {
      this.pipes[d].holds.delete('stall');
      this.pipes[d].pump();
    }
    return this.note('resume');
  }

  hold(dir) {
    for (const d of directionsOf(dir)) this.pipes[d].holds.add('hold');
    return this.note(`hold ${dir}`);
  }

  release(dir) {
    for (const d of directionsOf(dir)) {
      this.pipes[d].holds.delete('hold');
      this.pipes[d].pump();
    }
    return this.note(`release ${dir}`);
  }

  reset(why = 'reset') {
    if (this.destroyed) return this;
    this.destroyed = true;
    this.faults.push(why);
    for (const socket of [this.client, this.upstream]) {
      if (socket.destroyed) continue;
      try {
        socket.resetAndDestroy();
      } catch {
        socket.destroy();
      }
    }
    return this;
  }

  halfClose(dir) {
    for (const d of directionsOf(dir)) {
      const pipe = this.pipes[d];
      if (pipe.closedOut) continue;
      pipe.closedOut = true;
      pipe.queue.length = 0;
      pipe.to.end();
    }
    return this.note(`halfClose ${dir}`);
  }

  split(min = 1, max = 8, dir = 'both') {
    checkRange('split', min, max, 1);
    for (const d of directionsOf(dir)) this.pipes[d].split = { min, max };
    return this.note(`split ${min}..${max} ${dir}`);
  }

  unsplit(dir = 'both') {
    for (const d of directionsOf(dir)) this.pipes[d].split = null;
    return this.note(`unsplit ${dir}`);
  }

  cutAfter(k, dir = 'down') {
    if (!Number.isInteger(k) || k < 0) throw new RangeError(`cutAfter: k must be an integer >= 0, got ${k}`);
    for (const d of directionsOf(dir)) {
      this.pipes[d].cut = k;
      this.pipes[d].pump();
    }
    return this.note(`cutAfter ${k} ${dir}`);
  }

  jitter(minMs, maxMs, dir = 'both') {
    checkRange('jitter', minMs, maxMs, 0);
    for (const d of directionsOf(dir)) this.pipes[d].jitter = { min: minMs, max: maxMs };
    return this.note(`jitter ${minMs}..${maxMs}ms ${dir}`);
  }

  unjitter(dir = 'both') {
    for (const d of directionsOf(dir)) this.pipes[d].jitter = null;
    return this.note(`unjitter ${dir}`);
  }

  onChunk(dir, fn) {
    for (const d of directionsOf(dir)) this.pipes[d].taps.push(fn);
    return this;
  }
}

/** What undoes what, for the standing orders of `proxy.all`. */
const UNDOES = {
  resume: (o) => o.method === 'stall',
  release: (o, [dir]) => o.method === 'hold' && (dir === 'both' || o.args[0] === dir || o.args[0] === 'both'),
  unsplit: (o) => o.method === 'split',
  unjitter: (o) => o.method === 'jitter',
};
const ALL_METHODS = ['stall', 'resume', 'hold', 'release', 'halfClose', 'split', 'unsplit', 'cutAfter', 'jitter', 'unjitter', 'onChunk'];

class FaultProxy {
  /**
   * Starts a proxy on 127.0.0.1 (a free port) forwarding to `target`.
   * @param {{ target: { host?: string, port: number }, seed?: number }} options
   */
  static async start({ target, seed } = {}) {
    if (!target || !Number.isInteger(target.port)) throw new TypeError('FaultProxy.start: target { host, port } is required');
    const host = target.host ?? '127.0.0.1';
    if (!['127.0.0.1', 'localhost', '::1'].includes(host)) {
      throw new Error(`FaultProxy: the target must be on loopback (127.0.0.1, ::1 or localhost), not ${host}: it is a test tool`);
    }
    const proxy = new FaultProxy({ host, port: target.port }, seed ?? randomInt(2 ** 31));
    await new Promise((resolve, reject) => {
      proxy.server.once('error', reject);
      proxy.server.listen(0, '127.0.0.1', resolve);
    });
    proxy.port = proxy.server.address().port;
    return proxy;
  }

  constructor(target, seed) {
    this.target = target;
    this.seed = seed >>> 0;
    this.random = createRandom(this.seed);
    this.port = 0;
    this.accepted = 0;
    this.live = new Set();
    this.scripts = [];
    this.orders = []; // standing orders of `all`: { method, args }
    this.refusing = false;
    this.server = net.createServer({ allowHalfOpen: true, noDelay: true, pauseOnConnect: true }, (client) => this.accept(client));
    this.all = {};
    for (const method of ALL_METHODS) {
      this.all[method] = (...args) => {
        const undoes = UNDOES[method];
        if (undoes) this.orders = this.orders.filter((o) => !undoes(o, args));
        else this.orders.push({ method, args });
        for (const conn of this.live) conn[method](...args);
        return this.all;
      };
    }
    this.all.reset = () => {
      for (const conn of this.live) conn.reset();
      return this.all;
    };
  }

  /** The live connections, oldest first. */
  get connections() {
    return [...this.live];
  }

  /** `template` with %PORT% replaced by this proxy's port. */
  url(template) {
    return template.replace(/%PORT%/g, String(this.port));
  }

  /** Runs `fn(conn)` for each new connection before any of its bytes flow (awaited). */
  onConnection(fn) {
    this.scripts.push(fn);
    return this;
  }

  /** While on, every new connection is reset at once (the server seems to refuse it). */
  refuse(on = true) {
    this.refusing = on;
    return this;
  }

  async accept(client) {
    client.on('error', () => {});
    if (this.refusing) {
      client.resetAndDestroy();
      return;
    }
    const id = ++this.accepted;
    const upstream = net.connect({ host: this.target.host, port: this.target.port, allowHalfOpen: true, noDelay: true });
    upstream.pause();
    const conn = new FaultConnection(this, id, client, upstream);
    this.live.add(conn);
    conn.closed.then(() => this.live.delete(conn));
    for (const { method, args } of this.orders) conn[method](...args);
    for (const script of this.scripts) await script(conn);
    if (conn.destroyed) return;
    client.resume();
    upstream.resume();
  }

  /** Stops listening and destroys every live connection (no RST: a plain close). */
  async close() {
    const closing = new Promise((resolve) => this.server.close(resolve));
    for (const conn of this.live) {
      conn.destroyed = true;
      conn.client.destroy();
      conn.upstream.destroy();
    }
    await Promise.all([...this.live].map((c) => c.closed));
    await closing;
  }
}

/**
 * Several proxies the nemesis treats as one (a Redis Cluster's nodes, each behind its own):
 * a fault on "a connection" picks among all of them; `all` and `refuse` reach every one.
 */
class ProxyGroup {
  constructor(proxies) {
    this.proxies = proxies;
    this.all = {};
    for (const method of [...ALL_METHODS, 'reset']) {
      this.all[method] = (...args) => {
        for (const p of proxies) p.all[method](...args);
        return this.all;
      };
    }
  }

  get connections() {
    return this.proxies.flatMap((p) => p.connections);
  }

  refuse(on = true) {
    for (const p of this.proxies) p.refuse(on);
    return this;
  }

  async close() {
    await Promise.all(this.proxies.map((p) => p.close()));
  }
}

module.exports = { FaultProxy, FaultConnection, ProxyGroup, createRandom, deriveSeed };
