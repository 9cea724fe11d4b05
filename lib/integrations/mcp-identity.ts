/**
 * Which MCP server a proxy guards (and, for `idempotent-tools/mcp-server` on stdio, which
 * server a call reached), as the keys see it: everything that configures it.
 * Two copies of one server run with another environment (another account's token) or in
 * another folder (`server-filesystem .`) are two servers, and must never share a record;
 * a restarted proxy of the same configuration is the same server, and must. The identity
 * is a SHA-256 digest, so no record ever holds a token from the environment.
 */

import { createHash } from 'node:crypto';

/**
 * Variables a shell, a terminal, a login session or an editor sets per process, window or
 * session (a PID, a socket path, a session id), which configure no server: covering them
 * would make the same server another one after a restart or in another window (and re-run
 * its calls). `PWD` is the working directory, which the identity covers itself.
 */
const NOT_CONFIGURATION = new Set([
  '_', 'PWD', 'OLDPWD', 'SHLVL', 'CLAUDECODE',
  'TERM_SESSION_ID', 'ITERM_SESSION_ID', 'WINDOWID', 'KITTY_WINDOW_ID', 'WT_SESSION', 'TMUX_PANE', 'SECURITYSESSIONID',
  'XDG_SESSION_ID', 'INVOCATION_ID', 'JOURNAL_STREAM', 'DBUS_SESSION_BUS_ADDRESS',
  'SSH_AUTH_SOCK', 'SSH_CLIENT', 'SSH_CONNECTION', 'SSH_TTY', 'GPG_TTY',
]);
/**
 * VS Code's launcher variables (its PID, its IPC sockets); Claude Code's and the Claude Agent
 * SDK's, which set a new session id, messaging socket and token in every MCP server's
 * environment per session (with them, a resumed session's proxy was another server, and
 * replayed nothing); the proxy's own, which choose its store.
 */
const NOT_CONFIGURATION_PREFIXES = ['VSCODE_', 'CLAUDE_CODE_', 'IDEMPOTENT_TOOLS_'];

export interface CommandUpstream {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string | undefined>;
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
  const env = sortedEntries(u.env, (name) => !NOT_CONFIGURATION.has(name) && !NOT_CONFIGURATION_PREFIXES.some((p) => name.startsWith(p)));
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
