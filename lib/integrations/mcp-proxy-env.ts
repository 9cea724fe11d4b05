/**
 * The environment variables the MCP proxy (`idempotent-tools mcp`) reads for what must not
 * be on its command line (a process's arguments are world-readable in `ps`; its environment
 * is its owner's alone): its store's URL, the upstream server's URL and headers. Named here
 * because two sides use them: `idempotentMcpServers` (claude-agent-sdk.ts) sets them, and the
 * proxy (`apps/mcp/environment.ts`, through `apps/library.ts`) reads them and keeps every
 * variable with the `MCP_PROXY_OWN` prefix from the server it runs.
 */

/** The proxy's Redis store (a URL with its password); over the library's `IDEMPOTENT_TOOLS_REDIS_URL`. */
export const MCP_REDIS_URL = 'IDEMPOTENT_TOOLS_MCP_REDIS_URL';
/** The proxy's Postgres store; over the library's `IDEMPOTENT_TOOLS_POSTGRES_URL`. */
export const MCP_POSTGRES_URL = 'IDEMPOTENT_TOOLS_MCP_POSTGRES_URL';
/** The upstream server's URL, for `--url` (it may hold a token in its query). */
export const MCP_URL = 'IDEMPOTENT_TOOLS_MCP_URL';
/** A JSON object of headers sent with every request to the upstream URL, as `--header` does. */
export const MCP_HEADERS = 'IDEMPOTENT_TOOLS_MCP_HEADERS';
/**
 * Who the proxy's calls belong to (a conversation, a user, a tenant), as canonical JSON: part
 * of the upstream server's identity in keys, so that two users' proxies of one server
 * configuration on one store never share a record. `idempotentMcpServers` sets it from its `scope`.
 */
export const MCP_SCOPE = 'IDEMPOTENT_TOOLS_MCP_SCOPE';
/** What every variable of the proxy's own begins with: the server it runs does not get them. */
export const MCP_PROXY_OWN = 'IDEMPOTENT_TOOLS_MCP_';
