'use strict';
// The nemesis of a campaign: picks faults at random (seeded) and undoes each within a
// bound, on three tracks at once:
// - the workers: SIGKILL one (a replacement starts), or SIGSTOP one for 1.5-3 times the
//   longest lease and then SIGCONT it (its lease runs out while it is stopped);
// - the operator (every store): clears one key now and then, mostly one whose call is
//   running (its record deleted: an epoch of that key, see checker.js);
// - the store (network stores only): the fault proxy on the store's connections (stall,
//   hold one direction, reset, half-close, split replies, cut a reply after k bytes,
//   jitter, refuse new connections; on a cluster, any node's); the Redis server (on a
//   cluster, one node in turn) killed and restarted with its
//   append-only file (`appendfsync always`: nothing acknowledged is lost) or without its
//   data (a server without persistence: an `epoch` line, records are forgotten); the
//   Postgres backends of the workers terminated (pg_terminate_backend, found by the
//   application_name every worker's URL carries).
// Every fault is written to the ledger (`fault`, `kill`, `stop`, `cont`, `epoch`).

const { now } = require('./ledger');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The store faults each store can have, with weights. */
function storeFaults(store) {
  const proxy = {
    stall: 2, 'hold-down': 3, 'hold-up': 1, reset: 3, 'half-close-down': 1, 'half-close-up': 1,
    split: 2, 'cut-reply': 3, jitter: 1, refuse: 1,
  };
  switch (store) {
    case 'redis':
    case 'redis-tokio':
      return { ...proxy, 'restart-aof': 1, 'restart-lossy': 0.3 };
    case 'redis-cluster':
      // A node restarted with its data; no lossy restart (a node that forgets its data
      // forgets its cluster config too, and leaves the cluster).
      return { ...proxy, 'restart-aof': 1 };
    case 'postgres':
      return { ...proxy, 'terminate-backends': 2 };
    default:
      return {};
  }
}

function weighted(random, table) {
  const entries = Object.entries(table);
  let x = random.next() * entries.reduce((s, [, w]) => s + w, 0);
  for (const [name, w] of entries) {
    x -= w;
    if (x < 0) return name;
  }
  return entries[entries.length - 1][0];
}

class Nemesis {
  /**
   * @param {object} o
   * @param {ReturnType<import('./proxy').createRandom>} o.random
   * @param {import('./ledger').Ledger} o.ledger
   * @param {{ running(): object[], kill(w: object): Promise<void>, stop(w: object): void, cont(w: object): void }} o.workers
   * @param {string} o.store
   * @param {number} o.leaseMaxMs
   * @param {import('./proxy').FaultProxy} [o.proxy]
   * @param {import('./servers').RedisProcess} [o.redis]
   * @param {{ adminUrl: string, application: string }} [o.postgres]
   * @param {boolean} [o.processFaults] default true
   * @param {(random: object) => Promise<{ key: string, n: number | string }>} [o.clearKey] the operator's clear of one key (campaign.js); none: no operator track
   * @param {Record<string, number>} [o.weights] store faults' weights that replace the defaults (--weight)
   */
  constructor(o) {
    Object.assign(this, { processFaults: true, ...o });
    this.weights = { ...storeFaults(o.store), ...o.weights };
    this.undo = new Set(); // what calm() must still undo
    this.counts = {};
  }

  note(what, extra = {}) {
    this.counts[what] = (this.counts[what] ?? 0) + 1;
    this.ledger.write({ ev: 'fault', what, ...extra });
  }

  /** Runs both tracks until `until` (ledger time), then undoes whatever is still on. */
  async run(until) {
    const tracks = [];
    if (this.processFaults) tracks.push(this.processTrack(until));
    if (this.clearKey !== undefined) tracks.push(this.operatorTrack(until));
    if (Object.keys(this.weights).length > 0) tracks.push(this.storeTrack(until));
    await Promise.all(tracks);
    await this.calm();
  }

  /** Undoes every standing fault: resumes stopped workers, lets the proxy flow again. */
  async calm() {
    for (const f of [...this.undo]) await f();
    this.undo.clear();
  }

  async processTrack(until) {
    const r = this.random;
    while (now() < until - 500) {
      await sleep(r.int(300, 1200));
      if (now() >= until - 500) break;
      // Only workers that have started calling: killing one still loading tests nothing.
      const ready = this.workers.running().filter((w) => w.ready && !w.stopped);
      if (ready.length === 0) continue;
      const victim = r.pick(ready);
      if (r.chance(0.4)) {
        this.counts.kill = (this.counts.kill ?? 0) + 1;
        await this.workers.kill(victim);
      } else {
        this.counts.stop = (this.counts.stop ?? 0) + 1;
        const pauseMs = Math.round(this.leaseMaxMs * (1.5 + r.next() * 1.5));
        this.workers.stop(victim);
        const cont = async () => {
          this.undo.delete(cont);
          this.workers.cont(victim);
        };
        this.undo.add(cont);
        await sleep(pauseMs);
        await cont();
      }
    }
  }

  /** An operator clears a key now and then (`clear-key`): mostly one whose call is running. */
  async operatorTrack(until) {
    const r = this.random;
    while (now() < until - 500) {
      await sleep(r.int(200, 1000));
      if (now() >= until - 500) break;
      const { key, n } = await this.clearKey(r);
      this.note('clear-key', { key, n });
    }
  }

  async storeTrack(until) {
    const r = this.random;
    while (now() < until - 500) {
      await sleep(r.int(200, 800));
      if (now() >= until - 500) break;
      await this.storeFault(weighted(r, this.weights));
    }
  }

  /** A while, in ms: `lo`..`hi` times the longest lease. */
  span(lo, hi) {
    return Math.round(this.leaseMaxMs * (lo + this.random.next() * (hi - lo)));
  }

  /** Keeps a fault on for `ms`, undone then (or by calm(), if the run ends first). */
  async during(ms, on, off) {
    on();
    const undo = async () => {
      this.undo.delete(undo);
      off();
    };
    this.undo.add(undo);
    await sleep(ms);
    await undo();
  }

  async storeFault(what) {
    const r = this.random;
    const proxy = this.proxy;
    const conns = proxy ? proxy.connections : [];
    const some = () => (conns.length > 0 ? r.pick(conns) : undefined);
    switch (what) {
      case 'stall': {
        const conn = some();
        if (!conn) return;
        const ms = this.span(0.5, 3);
        this.note(what, { conn: conn.id, ms });
        return this.during(ms, () => conn.stall(), () => conn.resume());
      }
      case 'hold-down':
      case 'hold-up': {
        const dir = what === 'hold-down' ? 'down' : 'up';
        const ms = this.span(0.5, 3);
        // One connection, or every one (a stalled network, not one stalled socket).
        if (r.chance(0.3)) {
          this.note(what, { conn: 'all', ms });
          return this.during(ms, () => proxy.all.hold(dir), () => proxy.all.release(dir));
        }
        const conn = some();
        if (!conn) return;
        this.note(what, { conn: conn.id, ms });
        return this.during(ms, () => conn.hold(dir), () => conn.release(dir));
      }
      case 'reset': {
        const conn = some();
        if (!conn) return;
        this.note(what, { conn: conn.id });
        conn.reset();
        return;
      }
      case 'half-close-down':
      case 'half-close-up': {
        const conn = some();
        if (!conn) return;
        this.note(what, { conn: conn.id });
        conn.halfClose(what === 'half-close-down' ? 'down' : 'up');
        return;
      }
      case 'split': {
        const ms = this.span(0.5, 2);
        this.note(what, { ms });
        return this.during(ms, () => proxy.all.split(1, 8, 'both'), () => proxy.all.unsplit('both'));
      }
      case 'jitter': {
        const ms = this.span(0.5, 2);
        this.note(what, { ms });
        return this.during(ms, () => proxy.all.jitter(0, 30, 'both'), () => proxy.all.unjitter('both'));
      }
      case 'refuse': {
        const ms = this.span(0.3, 1.5);
        this.note(what, { ms });
        return this.during(ms, () => proxy.refuse(true), () => proxy.refuse(false));
      }
      case 'cut-reply': {
        // The next request that goes up on a connection: its reply is cut after k bytes.
        const conn = some();
        if (!conn) return;
        const k = r.int(0, 24);
        this.note(what, { conn: conn.id, k });
        let armed = true;
        conn.onChunk('up', () => {
          if (!armed) return;
          armed = false;
          conn.cutAfter(k, 'down');
        });
        return;
      }
      case 'restart-aof':
        this.note(what);
        return this.redis.restart();
      case 'restart-lossy':
        this.note(what);
        return this.redis.restart({ lose: true, between: async () => this.ledger.write({ ev: 'epoch', why: 'redis restarted without its data' }) });
      case 'terminate-backends': {
        const one = r.chance(0.5);
        const n = await terminateBackends(this.postgres, one ? (pids) => r.pick(pids) : undefined);
        this.note(what, { one, n });
        return;
      }
      default:
        throw new Error(`unknown fault ${what}`);
    }
  }
}

/**
 * pg_terminate_backend on the backends whose application_name starts with `application`:
 * every one, or one picked by `pick` (seeded).
 */
async function terminateBackends({ adminUrl, application }, pick) {
  const { Client } = require('pg');
  const client = new Client({ connectionString: adminUrl });
  client.on('error', () => {});
  await client.connect();
  try {
    const found = await client.query(
      'SELECT pid FROM pg_stat_activity WHERE application_name LIKE $1 AND pid <> pg_backend_pid() ORDER BY pid',
      [`${application.replace(/[\\%_]/g, '\\$&')}%`],
    );
    const pids = found.rows.map((row) => row.pid);
    const chosen = pick === undefined ? pids : pids.length > 0 ? [pick(pids)] : [];
    if (chosen.length === 0) return 0;
    const r = await client.query('SELECT count(*)::int AS n FROM unnest($1::int[]) AS p WHERE pg_terminate_backend(p)', [chosen]);
    return r.rows[0].n;
  } finally {
    await client.end().catch(() => {});
  }
}

module.exports = { Nemesis, storeFaults, terminateBackends };
