'use strict';
// Servers a fault run owns, so the nemesis can kill and restart them without touching
// the shared 127.0.0.1:6379: a redis-server on a free loopback port, in a folder of its
// own, with `appendonly yes` and `appendfsync always` (every acknowledged write is on disk
// before its reply). `restart({ lose: true })` deletes the data before starting again: a
// server without persistence, whose restart forgets every record (a new epoch for the
// checker). The binary is `redis-server`, or IDT_REDIS_SERVER (Valkey's, say).

const { spawn, spawnSync } = require('node:child_process');
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

/** One inline command; resolves with the raw reply's first line. */
function redisCommand(port, command) {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ port, host: '127.0.0.1' });
    let reply = '';
    socket.setTimeout(2000, () => socket.destroy(new Error('redis did not answer within 2 s')));
    socket.on('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (d) => {
      reply += d;
      if (reply.includes('\r\n')) {
        socket.end();
        resolve(reply.trim());
      }
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

module.exports = { RedisProcess, freePort, redisCommand };
