/**
 * A real Redis Cluster for the tests: 3 primaries and 3 replicas, each a `redis-server
 * --cluster-enabled yes` on a free loopback port, joined with `redis-cli --cluster create
 * --cluster-replicas 1`. A test can kill a primary (its replica takes over) and move a
 * slot from one primary to another (MOVED/ASK for the clients meanwhile).
 */

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';

import { SERVER_BIN, redisCommand } from './redis-server';

function listenable(port: number): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(port, '127.0.0.1', () => {
      const { port: got } = server.address() as { port: number };
      server.close(() => done(got));
    });
  });
}

/**
 * A free port for a cluster node, whose cluster bus (the port + 10000) is free too: Redis
 * refuses a port above 55535, and the kernel hands out ports up to 60999; two clusters
 * started at once (CI runs the Valkey suite beside npm test) must not take each other's bus.
 */
async function freePort(): Promise<number> {
  for (;;) {
    const port = await listenable(0);
    if (port > 55535) continue;
    try {
      await listenable(port + 10000);
      return port;
    } catch {
      // its bus port is taken: another
    }
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs redis-cli and returns its output; throws with its output when it fails. */
export function redisCli(args: string[]): string {
  const r = spawnSync('redis-cli', args, { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`redis-cli ${args.join(' ')} failed: ${r.stdout}${r.stderr}`);
  return r.stdout;
}

interface Node {
  port: number;
  child: ChildProcess | undefined;
}

export class RedisCluster {
  private constructor(
    readonly nodes: Node[],
    private readonly dir: string,
  ) {}

  /** The seed URL a store is given (any node will do; the client discovers the rest). */
  get url(): string {
    return `redis://127.0.0.1:${this.nodes[0]!.port}`;
  }

  static async start(): Promise<RedisCluster> {
    const dir = mkdtempSync(join(tmpdir(), 'idt-cluster-'));
    const nodes: Node[] = [];
    for (let i = 0; i < 6; i++) nodes.push({ port: await freePort(), child: undefined });
    const cluster = new RedisCluster(nodes, dir);
    await Promise.all(nodes.map((n) => cluster.launch(n)));
    redisCli(['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '1', '--cluster-yes']);
    await cluster.waitUntilOk();
    await cluster.waitUntilReplicasSynced();
    return cluster;
  }

  private async launch(node: Node): Promise<void> {
    const child = spawn(
      SERVER_BIN,
      [
        '--port', String(node.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
        '--cluster-enabled', 'yes', '--cluster-config-file', join(this.dir, `nodes-${node.port}.conf`),
        '--cluster-node-timeout', '1000', '--dir', this.dir,
        // Replicas sync at once (Redis 7 waits 5 s for more replicas before a diskless
        // sync by default): a replica that never synced does not take over its primary.
        '--repl-diskless-sync-delay', '0',
      ],
      { stdio: 'ignore' },
    );
    node.child = child;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`redis-server on ${node.port} exited with ${child.exitCode}`);
      try {
        if ((await redisCommand(node.port, 'PING')) === '+PONG') return;
      } catch {
        await sleep(20);
      }
    }
  }

  /** Until every live node reports cluster_state:ok and agrees on the slots. */
  async waitUntilOk(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const live = this.nodes.filter((n) => n.child !== undefined);
      const states = await Promise.all(
        live.map((n) => redisCommand(n.port, 'CLUSTER INFO').catch(() => '')),
      );
      if (states.every((s) => s.includes('cluster_state:ok'))) {
        try {
          redisCli(['--cluster', 'check', `127.0.0.1:${live[0]!.port}`]);
          return;
        } catch {
          // not converged yet
        }
      }
      if (Date.now() > deadline) throw new Error(`the cluster did not become ok: ${states.join(' | ')}`);
      await sleep(100);
    }
  }

  /** Until every replica has synced with its primary (only then can it take over). */
  async waitUntilReplicasSynced(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const live = this.nodes.filter((n) => n.child !== undefined);
      const infos = await Promise.all(live.map((n) => redisCommand(n.port, 'INFO replication').catch(() => '')));
      const replicas = infos.filter((i) => i.includes('role:slave'));
      if (replicas.length > 0 && replicas.every((i) => i.includes('master_link_status:up'))) return;
      if (Date.now() > deadline) throw new Error(`the replicas did not sync: ${infos.join(' | ')}`);
      await sleep(50);
    }
  }

  /** The ports of the current primaries. */
  primaries(): number[] {
    const out = redisCli(['-p', String(this.nodes.find((n) => n.child)!.port), 'CLUSTER', 'NODES']);
    return out
      .split('\n')
      .filter((l) => / master /.test(l.replace('myself,', ' ').replace(',', ' ')) && !l.includes('fail'))
      .map((l) => Number(/:(\d+)@/.exec(l)![1]));
  }

  /** The primary's port that serves `key`. */
  primaryOf(key: string): number {
    const slot = Number(redisCli(['-p', String(this.nodes.find((n) => n.child)!.port), 'CLUSTER', 'KEYSLOT', key]).trim());
    const nodes = redisCli(['-p', String(this.nodes.find((n) => n.child)!.port), 'CLUSTER', 'NODES']).split('\n');
    for (const l of nodes) {
      const parts = l.split(' ');
      if (!parts[2]?.includes('master') || parts[2].includes('fail')) continue;
      for (const range of parts.slice(8)) {
        const [a, b] = range.split('-').map(Number);
        if (slot >= a! && slot <= (b ?? a!)) return Number(/:(\d+)@/.exec(l)![1]);
      }
    }
    throw new Error(`no primary serves slot ${slot}`);
  }

  /** SIGKILLs the node on `port` (no goodbye to anyone). */
  async kill(port: number): Promise<void> {
    const node = this.nodes.find((n) => n.port === port)!;
    const child = node.child;
    if (!child) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
    node.child = undefined;
  }

  async stop(): Promise<void> {
    for (const n of this.nodes) await this.kill(n.port);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
