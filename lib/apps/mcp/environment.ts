/**
 * What the proxy takes from its environment rather than its command line: anything secret.
 * A process's arguments are world-readable (`ps`, /proc/<pid>/cmdline); its environment is
 * its owner's alone. `idempotentMcpServers` (idempotent-tools/claude-agent-sdk) starts the
 * proxy this way, and so can any client config (its `env` block):
 * - `IDEMPOTENT_TOOLS_MCP_REDIS_URL`, `IDEMPOTENT_TOOLS_MCP_POSTGRES_URL`: the proxy's store
 *   (a URL with its password), over the library's `IDEMPOTENT_TOOLS_REDIS_URL` and
 *   `IDEMPOTENT_TOOLS_POSTGRES_URL`, which it also reads;
 * - `IDEMPOTENT_TOOLS_MCP_URL`: the upstream server's URL (a token in its query), for `--url`;
 * - `IDEMPOTENT_TOOLS_MCP_HEADERS`: a JSON object of headers sent with every request to it
 *   (`{"Authorization": "Bearer ..."}`), as `--header` does.
 * Variables that begin with `IDEMPOTENT_TOOLS_MCP_` are the proxy's own: the server it runs
 * does not get them. (The names: lib/integrations/mcp-proxy-env.ts.)
 */

import { MCP_HEADERS, MCP_PROXY_OWN } from '../library.js';

export { MCP_HEADERS, MCP_POSTGRES_URL, MCP_REDIS_URL, MCP_URL } from '../library.js';

/** A header's name, as HTTP allows it (a token). */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** A variable's value, unless it is unset or empty. */
export function given(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

/** `IDEMPOTENT_TOOLS_MCP_HEADERS`, read; a message that names it for anything but a JSON object of strings. */
export function headersFromEnvironment(env: NodeJS.ProcessEnv, fail: (message: string) => never): Record<string, string> {
  const text = given(env, MCP_HEADERS);
  if (text === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    fail(`${MCP_HEADERS} must be a JSON object of header names to values, such as {"Authorization": "Bearer <token>"}`);
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(parsed as Record<string, unknown>)) {
    if (!HEADER_NAME.test(name)) fail(`${MCP_HEADERS}: ${JSON.stringify(name)} is not a header name`);
    if (typeof value !== 'string') fail(`${MCP_HEADERS}: "${name}" must be a string, not ${value === null ? 'null' : typeof value}`);
    headers[name] = value;
  }
  return headers;
}

/** `base` with `over` on top; header names compare without case, so an override replaces its header whatever its case. */
export function withHeaders(base: Record<string, string>, over: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  const overridden = new Set(Object.keys(over).map((n) => n.toLowerCase()));
  for (const [name, value] of Object.entries(base)) if (!overridden.has(name.toLowerCase())) out[name] = value;
  return { ...out, ...over };
}

/** The environment the upstream server runs with: the proxy's, without the proxy's own variables. */
export function upstreamEnvironment(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) if (value !== undefined && !name.startsWith(MCP_PROXY_OWN)) out[name] = value;
  return out;
}
