'use strict';
// Servers a fault run owns, so the nemesis can kill and restart them without touching
// the shared 127.0.0.1:6379: a redis-server on a free loopback port, in a folder of its
// own, with `appendonly yes` and `appendfsync always` (every acknowledged write is on disk
// before its reply). `restart({ lose: true })` deletes the data before starting again: a
// server without persistence, whose restart forgets every record (a new epoch for the
// checker). The binary is `redis-server`, or IDT_REDIS_SERVER (Valkey's, say).

const { execFile, spawn, spawnSync } = require('node:child_process');
const { mkdtempSync, rmSync } = require('node:fs');
const net = require('node:net');
const { tmpdir } = require('node:os');
const { join } = require('node:path');

const SERVER_BIN = process.env.IDT_REDIS_SERVER || 'redis-server';

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * One inline command; resolves with the raw reply's first line, or with `whole` the whole
 * reply (a bulk string's text: CLUSTER INFO).
 */
function redisCommand(port, command, { whole = false } = {}) {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ port, host: '127.0.0.1' });
    let reply = '';
    socket.setTimeout(2000, () => socket.destroy(new Error('redis did not answer within 2 s')));
    socket.on('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (d) => {
      reply += d;
      if (!reply.includes('\r\n')) return;
      const bulk = whole ? /^\$(\d+)\r\n/.exec(reply) : null;
      if (bulk && Buffer.byteLength(reply) < bulk[0].length + Number(bulk[1]) + 2) return; // more to come
      socket.end();
      resolve(whole ? reply : reply.trim());
    });
    socket.on('error', reject);
  });
}

class RedisProcess {
  constructor(port, dir) {
    this.port = port;
    this.dir = dir;
    this.child = undefined;
  }

  static async start() {
    if (spawnSync(SERVER_BIN, ['--version']).status !== 0) {
      throw new Error(`${SERVER_BIN} is not on the PATH: install it (apt-get install redis-server); the fault run starts its own server`);
    }
    const server = new RedisProcess(await freePort(), mkdtempSync(join(tmpdir(), 'idempotent-tools-faults-redis-')));
    await server.launch();
    return server;
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`;
  }

  async launch() {
    const child = spawn(
      SERVER_BIN,
      ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '', '--appendonly', 'yes', '--appendfsync', 'always'],
      { stdio: 'ignore' },
    );
    this.child = child;
    const exited = new Promise((_, reject) => child.once('exit', (code) => reject(new Error(`${SERVER_BIN} exited with ${code} at start`))));
    exited.catch(() => {});
    const ready = (async () => {
      for (;;) {
        try {
          if (/PONG/.test(await redisCommand(this.port, 'PING'))) return;
        } catch {
          // not listening yet
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await Promise.race([ready, exited]);
  }

  /** SIGKILL (no goodbye to clients); resolves once the process is gone. */
  async kill() {
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
    this.child = undefined;
  }

  /** Kills and starts again on the same port; `lose`: with its data deleted first. */
  async restart({ lose = false, between = async () => {} } = {}) {
    await this.kill();
    if (lose) {
      rmSync(this.dir, { recursive: true, force: true });
      this.dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-faults-redis-'));
    }
    await between();
    await this.launch();
  }

  async stop() {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * A free port for a cluster node whose bus port (the port + 10000) is free too: Redis
 * refuses a port above 55535 for a cluster node.
 */
async function freeNodePort() {
  for (;;) {
    const port = await freePort();
    if (port > 55535) continue;
    const bus = await new Promise((resolve) => {
      const server = net.createServer();
      server.once('error', () => resolve(false));
      server.listen(port + 10000, '127.0.0.1', () => server.close(() => resolve(true)));
    });
    if (bus) return port;
  }
}

/**
 * A Redis Cluster a fault run owns: three primaries (no replicas: a failover's async
 * replication may lose an acknowledged write, which would be the cluster's doing, not
 * ours), each with `appendfsync always`. Each node announces `announce(i)`'s port, a fault
 * proxy's, so every connection a client opens to a node, the ones found through `CLUSTER
 * SLOTS` and redirects included, goes through the nemesis; the nodes' own bus is direct.
 * `restart()` kills one node and starts it again with its data and its cluster config (the
 * nodes in turn); meanwhile its slots refuse, the others serve
 * (`cluster-require-full-coverage no`).
 */
class RedisCluster {
  constructor(ports, dir, announce) {
    this.nodes = ports.map((port) => ({ port, child: undefined }));
    this.dir = dir;
    this.announce = announce;
    this.restarts = 0;
  }

  /** `announce(i)`: the port node i tells clients to use; `ports`: the nodes' own. */
  static async start(ports, announce) {
    if (spawnSync(SERVER_BIN, ['--version']).status !== 0) {
      throw new Error(`${SERVER_BIN} is not on the PATH: install it (apt-get install redis-server); the fault run starts its own cluster`);
    }
    const cluster = new RedisCluster(ports, mkdtempSync(join(tmpdir(), 'idempotent-tools-faults-cluster-')), announce);
    await Promise.all(cluster.nodes.map((_, i) => cluster.launch(i)));
    // Not spawnSync: redis-cli reaches the nodes through the proxies, which run on this
    // process's event loop.
    await new Promise((resolve, reject) => {
      execFile('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], { timeout: 60_000 }, (err, stdout, stderr) =>
        err ? reject(new Error(`redis-cli --cluster create failed (${err.message}): ${stdout}${stderr}`)) : resolve());
    });
    await cluster.waitUntilOk();
    return cluster;
  }

  static freeNodePort() {
    return freeNodePort();
  }

  /** The seed URL (one node, through its proxy; the client finds the rest). */
  get url() {
    return `redis://127.0.0.1:${this.announce(0)}`;
  }

  async launch(i) {
    const { port } = this.nodes[i];
    const child = spawn(
      SERVER_BIN,
      [
        '--port', String(port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '',
        '--appendonly', 'yes', '--appendfsync', 'always', '--appendfilename', `appendonly-${port}.aof`,
        '--appenddirname', `aof-${port}`,
        '--cluster-enabled', 'yes', '--cluster-config-file', join(this.dir, `nodes-${port}.conf`),
        '--cluster-node-timeout', '1000', '--cluster-require-full-coverage', 'no',
        '--cluster-announce-ip', '127.0.0.1', '--cluster-announce-port', String(this.announce(i)),
        '--cluster-announce-bus-port', String(port + 10000),
      ],
      { stdio: 'ignore' },
    );
    this.nodes[i].child = child;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${SERVER_BIN} (cluster node on ${port}) exited with ${child.exitCode} at start`);
      try {
        if (/PONG/.test(await redisCommand(port, 'PING'))) return;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Until every node says cluster_state:ok (each asked directly, not through a proxy). */
  async waitUntilOk(timeoutMs = 30_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const states = await Promise.all(this.nodes.map((n) => redisCommand(n.port, 'CLUSTER INFO', { whole: true }).catch(() => '')));
      if (states.every((s) => s.includes('cluster_state:ok'))) return;
      if (Date.now() > deadline) throw new Error(`the fault run's cluster did not become ok: ${states.join(' | ')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async kill(i) {
    const child = this.nodes[i].child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
    this.nodes[i].child = undefined;
  }

  /** SIGKILLs the next node in turn and starts it again with its data. */
  async restart() {
    const i = this.restarts++ % this.nodes.length;
    await this.kill(i);
    await this.launch(i);
  }

  async stop() {
    for (let i = 0; i < this.nodes.length; i++) await this.kill(i);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

module.exports = { RedisCluster, RedisProcess, freePort, redisCommand };
