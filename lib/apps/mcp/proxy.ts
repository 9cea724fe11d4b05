/**
 * The proxy: a client-facing peer and a server-facing peer that forward everything to
 * each other, with `tools/call` going through the retry guard. Also owns the lifecycle:
 * the client leaving closes the server; the server dying answers what is in flight with
 * a clear error and ends the proxy.
 */

import { createHash } from 'node:crypto';

import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ResultSchema } from '@modelcontextprotocol/sdk/types.js';

import { ErrorCode, McpError, Peer, WireError, forward, relayed, type Extra, type Forwardable } from './forward.js';
import { OutcomeUnknown, RetryGuard, type CallParams, type CallToolResult, type Server } from './guard.js';
import { type ProxyConfig, type ToolAnnotations, guardedByRule, policyFor } from './policy.js';
import { sendGuarded } from './send.js';
import { GUARD_ERROR, eitherSignal, guardErrorOf, keyId, type Store } from '../library.js';

/** Pages of the server's tool list the proxy reads at most to find a tool's annotations. */
const MAX_TOOL_PAGES = 1000;
/** Tools whose annotations the proxy keeps at most. */
const MAX_TOOLS = 10_000;

/** The code of the guard's own errors (lib/integrations/mcp-call.ts, shared with idempotent-tools/mcp-server). */
export { GUARD_ERROR };

export interface ProxyOptions {
  config: ProxyConfig;
  store: Store;
  /** The upstream server as the user gave it (`npx some-server --flag`, or a URL): for messages. */
  upstreamDescription: string;
  /** The upstream server's identity in keys, unless the config names it: a digest of its
   * command, arguments, working directory and environment, or of its URL and headers. */
  upstreamId: string;
  /** `--log`: one line per `tools/call` on stderr. */
  log?: (line: string) => void;
  /** What must reach stderr whatever `--log` says (the server going away); escaped there. */
  print?: (line: string) => void;
}

export class McpProxy {
  readonly client = new Peer();
  readonly server = new Peer();
  private readonly guard: RetryGuard;
  private readonly tools = new Map<string, ToolAnnotations | undefined>();
  private toolsComplete = false;
  private serverInfo: { name?: string } | undefined;
  private upstreamTransport: Transport | undefined;
  /** Set once the upstream server is gone: why, for every request still to answer. */
  private gone: string | undefined;
  private closing = false;
  /** The work of every request being handled (a call's record is written by its end). */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Of those, the guarded calls sent to the server (not the duplicates waiting for one). */
  private readonly sentCalls = new Set<Promise<unknown>>();
  /** Aborted when the client leaves (closes stdin) or the proxy shuts down: every wait for a call in flight ends. */
  private readonly leaving = new AbortController();
  private goneError!: (err: WireError) => void;
  /** Rejects once the server is gone, so that every request still waiting is answered. */
  private readonly whenGone = new Promise<never>((_, reject) => (this.goneError = reject));

  private finished!: (code: number) => void;
  /** Resolves with the exit code once the proxy has shut down. */
  readonly done = new Promise<number>((resolve) => (this.finished = resolve));

  constructor(private readonly options: ProxyOptions) {
    this.guard = new RetryGuard(options.store, () => this.identity(), (name, id) =>
      this.log(`waiting   ${name}  ${id}  (the same call is in flight)`),
    );
    this.client.fallbackRequestHandler = (request, extra) =>
      this.fromClient({ method: request.method, params: request.params }, extra);
    this.client.fallbackNotificationHandler = async (n) => {
      // The SDK starts a request's handler two microtasks after reading it, a
      // notification's one after: one more turn keeps them in the order they came
      // (`notifications/initialized` after `initialize`).
      await null;
      await this.server.notification(n).catch(() => {});
    };
    this.server.fallbackRequestHandler = (request, extra) =>
      this.wire(() => forward(this.client, { method: request.method, params: request.params }, extra.signal));
    this.server.fallbackNotificationHandler = async (n) => {
      await null; // in order with requests, as above
      if (n.method === 'notifications/tools/list_changed') this.forgetTools();
      await this.client.notification(n).catch(() => {});
    };
    this.whenGone.catch(() => {}); // raced by every request; never unhandled on its own
    // Progress travels under the client's own token, untouched, through the fallbacks
    // above. The SDK's own routing (a token per hop, dropped when the response arrives)
    // would lose progress sent just before a result: the SDK dispatches a notification a
    // microtask after reading it, but settles a response at once.
    this.server.removeNotificationHandler('notifications/progress');
    this.client.removeNotificationHandler('notifications/progress');
    // Out-of-band trouble (an unparsable line, a response to nothing): worth a line in --log.
    this.server.onerror = (e) => this.log(`server side: ${e.message}`);
    this.client.onerror = (e) => this.log(`client side: ${e.message}`);
    this.server.onclose = () => this.upstreamClosed();
    this.client.onclose = () => void this.finish();
  }

  /** Connects to the upstream server first (spawning it), then serves the client. */
  async start(upstream: Transport, downstream: Transport): Promise<void> {
    this.upstreamTransport = upstream;
    await this.server.connect(upstream);
    await this.client.connect(downstream);
  }

  private log(line: string) {
    this.options.log?.(`idempotent-tools mcp: ${line}`);
  }

  private identity(): Server {
    const label = this.options.config.server ?? this.serverInfo?.name ?? this.options.upstreamDescription.split(' ')[0];
    // A config's `server` is a name to share records under on purpose; without it, every
    // configuration of the server is a server of its own.
    const id = this.options.config.server === undefined ? this.options.upstreamId : this.options.config.server;
    return { id, label };
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.inFlight.add(p);
    const settle = () => void this.inFlight.delete(p);
    p.then(settle, settle);
    return p;
  }

  /** Runs a forwarding step; whatever it throws goes back to the asker as a JSON-RPC error
   * with a message that says what happened. */
  private async wire<T>(step: () => Promise<T>): Promise<T> {
    if (this.gone !== undefined) throw new WireError(ErrorCode.ConnectionClosed, this.gone);
    try {
      // A duplicate waiting for a call in flight elsewhere is answered too when the server goes.
      return await Promise.race([this.track(step()), this.whenGone]);
    } catch (err) {
      if (err instanceof WireError) throw err;
      if (this.gone !== undefined && err instanceof McpError && err.code === ErrorCode.ConnectionClosed) {
        throw new WireError(ErrorCode.ConnectionClosed, this.gone);
      }
      if (err instanceof McpError) throw relayed(err);
      if (err instanceof OutcomeUnknown) {
        throw new WireError(GUARD_ERROR, `idempotent-tools mcp: ${err.message}`, { 'idempotent-tools': 'OUTCOME_UNKNOWN' });
      }
      // A bad idempotency key; the package's errors (StoreError, KeyMismatchError, InFlightTimeoutError, ...).
      const guardError = guardErrorOf(err, 'idempotent-tools mcp');
      if (guardError !== undefined) throw new WireError(guardError.code, guardError.message, guardError.data);
      if (err instanceof TypeError || err instanceof RangeError) {
        throw new WireError(ErrorCode.InvalidParams, err.message);
      }
      throw new WireError(ErrorCode.InternalError, `idempotent-tools mcp: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  private async fromClient(request: Forwardable, extra: Extra) {
    return this.wire(async () => {
      if (request.method === 'tools/call') return this.callTool(request, extra);
      const result = await forward(this.server, request, extra.signal);
      if (request.method === 'initialize') this.initialized(result);
      if (request.method === 'tools/list') this.learnTools(result);
      return result;
    });
  }

  private initialized(result: Record<string, unknown>) {
    this.serverInfo = (result.serverInfo ?? {}) as { name?: string };
    // The server's tools are now guarded: SEP-3182's capability says so to the client.
    const capabilities = result.capabilities as { tools?: unknown } | undefined;
    if (capabilities !== null && typeof capabilities === 'object' && capabilities.tools !== null && typeof capabilities.tools === 'object') {
      capabilities.tools = { ...(capabilities.tools as Record<string, unknown>), idempotency: {} };
    }
    const version = result.protocolVersion;
    if (typeof version === 'string') this.upstreamTransport?.setProtocolVersion?.(version);
  }

  private learnTools(result: Record<string, unknown>) {
    if (!Array.isArray(result.tools)) return;
    for (const tool of result.tools as Array<{ name?: unknown; annotations?: ToolAnnotations }>) {
      // Past MAX_TOOLS names a tool's annotations are not kept (a server that lists tools
      // without end would fill memory); its call asks the server again, and fails.
      if (typeof tool?.name === 'string' && (this.tools.size < MAX_TOOLS || this.tools.has(tool.name))) this.tools.set(tool.name, tool.annotations);
    }
  }

  private forgetTools() {
    this.tools.clear();
    this.toolsComplete = false;
  }

  /** A tool's annotations; asks the server for its list when the client has not (or the
   * list changed since). The walk over its pages ends whatever the server answers: a
   * cursor given twice, more than MAX_TOOL_PAGES pages or MAX_TOOLS tools fail the call
   * (unsent: whether it is safe to guard is not known). */
  private async annotations(name: string): Promise<ToolAnnotations | undefined> {
    if (!this.tools.has(name) && !this.toolsComplete) {
      const broken = (what: string) =>
        new WireError(
          ErrorCode.InternalError,
          `idempotent-tools mcp: the MCP server's tools/list ${what}: a broken or hostile server would keep the proxy reading ` +
            `its tool list forever, so it stopped, and the call of ${JSON.stringify(name)} was not sent (whether it is safe to guard ` +
            'is not known). Fix the server, or say in a config rule whether the tool is guarded ({"tools": {"<name>": {"guard": true}}})',
        );
      // Digests of the cursors given so far: a cursor may be long, its digest is not.
      const given = new Set<string>();
      let cursor: string | undefined;
      let pages = 0;
      do {
        if (pages === MAX_TOOL_PAGES) throw broken(`went on for more than ${MAX_TOOL_PAGES} pages`);
        // Not cut short by the client's cancel: whether the tool is guarded decides what
        // a cancel means for its call, so a call that reached the proxy is decided the same
        // way whenever its client gives up.
        const page = await this.server.request(
          { method: 'tools/list', params: cursor === undefined ? {} : { cursor } },
          ResultSchema,
        );
        pages++;
        this.learnTools(page);
        if (this.tools.size >= MAX_TOOLS && !this.tools.has(name)) throw broken(`listed more than ${MAX_TOOLS} tools without ${JSON.stringify(name)}`);
        cursor = typeof page.nextCursor === 'string' ? page.nextCursor : undefined;
        if (cursor !== undefined) {
          const digest = createHash('sha256').update(cursor).digest('base64');
          if (given.has(digest)) throw broken(`repeated a cursor (${JSON.stringify(cursor.length > 64 ? `${cursor.slice(0, 64)}…` : cursor)}) after ${pages} pages`);
          given.add(digest);
        }
      } while (cursor !== undefined);
      this.toolsComplete = true;
    }
    return this.tools.get(name);
  }

  private async callTool(request: Forwardable, extra: Extra): Promise<CallToolResult> {
    const params = (request.params ?? {}) as unknown as CallParams;
    if (typeof params.name !== 'string') {
      throw new WireError(ErrorCode.InvalidParams, 'idempotent-tools mcp: tools/call needs params.name, the tool\'s name');
    }
    const started = performance.now();
    // A rule that says whether the tool is guarded needs no annotations: the server's list is not read.
    const annotations = guardedByRule(this.options.config, params.name) ? undefined : await this.annotations(params.name);
    const policy = policyFor(this.options.config, params.name, annotations);
    const label = `${this.identity().label}/${params.name}`;
    const ms = () => `${Math.round(performance.now() - started)}ms`;
    if (!policy.guard) {
      // Nothing is recorded: a cancel goes on to the server as it would without the proxy.
      try {
        const result = (await forward(this.server, request, extra.signal)) as CallToolResult;
        this.log(`passed    ${label}  (${policy.reason})  ${ms()}`);
        return result;
      } catch (err) {
        this.log(`error     ${label}  ${err instanceof Error ? err.message : String(err)}  ${ms()}`);
        throw err;
      }
    }
    const forwardCancel = policy.cancel === 'forward';
    // The SDK sends no answer to a request its client cancelled: the client gave up. What
    // the proxy does is for the record, and so for the retry.
    const onCancel = () =>
      this.log(
        `cancelled ${label}  by the client: ` +
          (forwardCancel
            ? 'forwarded to the server ("cancel": "forward")'
            : 'not forwarded; the call goes on, and its result is recorded for the retry'),
      );
    extra.signal.addEventListener('abort', onCancel, { once: true });
    // Set once the guard runs the call here: from then on, its whole guarded call (the
    // record written after the answer included) is what a shutdown waits for.
    let guarded: Promise<unknown> | undefined;
    const sent = (): Promise<CallToolResult> => {
      if (guarded !== undefined) {
        const whole = guarded;
        this.sentCalls.add(whole);
        const settle = () => void this.sentCalls.delete(whole);
        whole.then(settle, settle);
      }
      return sendGuarded({
        server: this.server,
        request,
        signal: extra.signal,
        cancel: policy.cancel,
        label,
        leaseMs: policy.leaseMs,
        serverGone: () => this.gone !== undefined || this.closing,
      });
    };
    let outcome;
    // A duplicate of a call in flight waits for it only while its client is there for the answer.
    const waiting = eitherSignal([extra.signal, this.leaving.signal]);
    try {
      // `sent` runs only after the guard has claimed the key in the store, so after this.
      const whole = this.guard.call(params, policy, sent, waiting.signal);
      guarded = whole;
      outcome = await whole;
    } catch (err) {
      if (err instanceof OutcomeUnknown) this.log(`unknown   ${label}  ${err.message}  ${ms()}`);
      else if ((err as { code?: unknown } | null)?.code === 'WAIT_ABANDONED') {
        this.log(`stopped   ${label}  waiting for the same call in flight: its client ${extra.signal.aborted ? 'cancelled' : 'left'}; that call goes on  ${ms()}`);
      } else this.log(`error     ${label}  ${err instanceof Error ? err.message : String(err)}  ${ms()}`);
      throw err;
    } finally {
      waiting.release();
      extra.signal.removeEventListener('abort', onCancel);
    }
    const what = outcome.outcome === 'failed' ? 'isError  ' : outcome.outcome.padEnd(9);
    const notes = [
      outcome.outcome === 'failed' ? '(recorded as failed: a retry runs again)' : '',
      extra.signal.aborted ? '(its client had cancelled: no answer sent; the retry gets this result)' : '',
    ].filter((n) => n.length > 0);
    // The log names the record by its keyed id (`inspect --key kid_…` finds it): a key
    // derived from the arguments could be reversed by whoever reads the log.
    const id = this.options.log === undefined ? '' : await keyId(this.options.store, outcome.key).catch(() => 'kid_?');
    this.log(`${what} ${label}  ${id}  ${ms()}${notes.map((n) => `  ${n}`).join('')}`);
    return outcome.result;
  }

  private upstreamClosed() {
    if (this.closing) return;
    this.gone =
      `idempotent-tools mcp: the MCP server (${this.options.upstreamDescription}) exited or closed its connection; ` +
      'a call it was running may or may not have taken effect (see its stderr in the client\'s log). ' +
      'Restart the server to go on.';
    (this.options.print ?? ((line: string) => process.stderr.write(`${line}\n`)))(this.gone);
    this.goneError(new WireError(ErrorCode.ConnectionClosed, this.gone));
    void this.shutdown(1);
  }

  /**
   * The client closed its end (stdin): as MCP's stdio shutdown asks, finish the calls in
   * flight (their answers still go out, their records are written), then close.
   */
  async finish(): Promise<void> {
    // Calls that wait for another call in flight stop: nobody will read their answers.
    this.leaving.abort(new Error('the client closed its end'));
    while (this.inFlight.size > 0 && !this.closing) await Promise.allSettled([...this.inFlight]);
    await this.shutdown(0);
  }

  /** Closes both ends and the store, once. */
  async shutdown(code: number): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.leaving.abort(new Error('the proxy is shutting down'));
    // In-flight calls end when the server goes (their outcome unknown: each leaves its
    // record pending); wait for them so that no record is left half-written.
    await this.server.close().catch(() => {});
    // Calls that were running end at once when the server goes (their records stay
    // pending: the outcome is unknown); a duplicate still waiting for a call, here or in
    // another proxy, waits for a record that nothing here will settle now: not worth a hang.
    await Promise.race([Promise.allSettled([...this.sentCalls]), new Promise((r) => setTimeout(r, 5000).unref())]);
    // Their answers are written in the turn after they settle: let them out first.
    await new Promise((resolve) => setImmediate(resolve));
    await this.client.close().catch(() => {});
    await this.options.store.close().catch(() => {});
    this.finished(code);
  }
}
