/**
 * Which upstream server a proxy guards, as the keys see it: everything that configures it.
 * Two copies of one server run with another environment (another account's token) or in
 * another folder (`server-filesystem .`) are two servers, and must never share a record;
 * a restarted proxy of the same configuration is the same server, and must. The identity
 * is a SHA-256 digest, so no record ever holds a token from the environment.
 */

import { createHash } from 'node:crypto';

/**
 * Variables a shell or a launcher sets per process or per session, which configure no
 * server: covering them would make a restarted proxy another server (and re-run its
 * calls). `PWD` is the working directory, which the identity covers itself. The
 * proxy's own `IDEMPOTENT_TOOLS_*` variables choose its store, not the server.
 */
const NOT_CONFIGURATION = new Set(['_', 'PWD', 'OLDPWD', 'SHLVL']);
const OWN_PREFIX = 'IDEMPOTENT_TOOLS_';

export interface CommandUpstream {
  command: string;
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
}

export interface UrlUpstream {
  url: string;
  headers: Record<string, string>;
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Sorted, so that the order a launcher lists variables or headers in changes nothing. */
function sortedEntries(record: Record<string, string | undefined>, keep: (name: string) => boolean): Array<[string, string]> {
  return Object.entries(record)
    .filter((e): e is [string, string] => e[1] !== undefined && keep(e[0]))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** A command's identity: command, arguments, working directory and environment. */
export function commandIdentity(u: CommandUpstream): string {
  const env = sortedEntries(u.env, (name) => !NOT_CONFIGURATION.has(name) && !name.startsWith(OWN_PREFIX));
  return `cmd:${sha256(JSON.stringify(['command', u.command, u.args, u.cwd, env]))}`;
}

/** A URL's identity: the URL and the headers sent with every request (names case-folded). */
export function urlIdentity(u: UrlUpstream): string {
  const headers = sortedEntries(
    Object.fromEntries(Object.entries(u.headers).map(([k, v]) => [k.toLowerCase(), v])),
    () => true,
  );
  return `url:${sha256(JSON.stringify(['url', u.url, headers]))}`;
}
