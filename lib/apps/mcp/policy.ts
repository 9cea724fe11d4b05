/**
 * Which tools the proxy guards, and how: the defaults, the command line's flags, and the
 * config file's per-tool rules, resolved into one `ToolPolicy` per tool name.
 */

import { readFileSync } from 'node:fs';

export type OnDuplicate = 'raise' | 'block' | 'retry';
/** A result with `isError: true`: `'rerun'` records a failure (the next call runs again);
 * `'replay'` records it as the call's outcome (repeats within the window get it back). */
export type ErrorResults = 'rerun' | 'replay';
/** A client's cancel of a guarded call (its own timeout included): `'finish'` keeps it from
 * the server, so the call finishes and its result is recorded for the retry; `'forward'`
 * passes it on, and the outcome is then unknown, as after a crash. */
export type CancelPolicy = 'finish' | 'forward';

export interface ToolAnnotations {
  readOnlyHint?: boolean;
  idempotentHint?: boolean;
  destructiveHint?: boolean;
}

/** What the proxy does with one tool's calls. */
export interface ToolPolicy {
  /** Guard the tool's calls (false: pass them through untouched). */
  guard: boolean;
  /** Why `guard` is what it is, for `--log`. */
  reason: string;
  windowMs: number;
  onDuplicate: OnDuplicate;
  errorResults: ErrorResults;
  /** How long a duplicate waits for the call in flight (`onDuplicate: 'block'`). */
  waitMs: number;
  /** How long a claim lives without renewal (the proxy renews it while the call runs). */
  leaseMs: number;
  cancel: CancelPolicy;
  /** Where in the arguments the call's idempotency key sits, if the tool carries one there. */
  keyPath?: string[];
  /** Whether a client's tool call id in `_meta` (`claudecode/toolUseId`) is part of the call's identity (`--tool-call-id`). */
  toolCallId: boolean;
}

/** One rule of the config file's `tools` section. */
interface ToolRule {
  guard?: boolean;
  window?: number;
  onDuplicate?: OnDuplicate;
  isError?: ErrorResults;
  wait?: number;
  lease?: number;
  cancel?: CancelPolicy;
  keyPath?: string[];
  toolCallId?: boolean;
}

export interface ProxyConfig {
  /** The upstream server's identity in keys and names (default: its name and command). */
  server?: string;
  defaults: Required<Omit<ToolRule, 'guard' | 'keyPath'>>;
  /** Rules in file order; an exact name wins over globs, then the first matching glob. */
  rules: Array<{ pattern: string; match: (tool: string) => boolean; rule: ToolRule }>;
}

export const DEFAULTS = {
  window: 10 * 60_000,
  onDuplicate: 'block' as OnDuplicate,
  isError: 'rerun' as ErrorResults,
  wait: 10 * 60_000,
  lease: 30_000,
  cancel: 'finish' as CancelPolicy,
  toolCallId: false,
};

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `"10m"`, `"30s"`, `"1.5h"`, `"500ms"`, `"2d"` (a bare number is seconds) → milliseconds. */
export function parseDuration(text: string, what: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (m === null) {
    throw new ConfigError(`${what} must be a duration such as 30s, 10m, 2h or 1d, not ${JSON.stringify(text)}`);
  }
  const ms = Number(m[1]) * UNITS[m[2] ?? 's'];
  if (!(ms > 0) || !Number.isFinite(ms)) throw new ConfigError(`${what} must be more than zero, not ${JSON.stringify(text)}`);
  return Math.round(ms);
}

/** A bad flag or config file: the message says what was wrong and where. */
export class ConfigError extends Error {}

function globToRegExp(glob: string): RegExp {
  const body = glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
  return new RegExp(`^${body}$`);
}

const RULE_FIELDS = new Set(['guard', 'window', 'onDuplicate', 'isError', 'wait', 'lease', 'cancel', 'keyPath', 'toolCallId']);
const TOP_FIELDS = new Set(['server', 'window', 'onDuplicate', 'isError', 'wait', 'lease', 'cancel', 'toolCallId', 'tools']);

function readRule(raw: unknown, where: string, fields: Set<string>): ToolRule & { server?: string; tools?: unknown } {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new ConfigError(`${where} must be an object`);
  const o = raw as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!fields.has(k)) throw new ConfigError(`${where}: unknown field "${k}"; the fields are ${[...fields].join(', ')}`);
  }
  const rule: ToolRule & { server?: string; tools?: unknown } = {};
  if (o.guard !== undefined) {
    if (typeof o.guard !== 'boolean') throw new ConfigError(`${where}.guard must be true or false`);
    rule.guard = o.guard;
  }
  if (o.toolCallId !== undefined) {
    if (typeof o.toolCallId !== 'boolean') throw new ConfigError(`${where}.toolCallId must be true or false`);
    rule.toolCallId = o.toolCallId;
  }
  for (const f of ['window', 'wait', 'lease'] as const) {
    if (o[f] === undefined) continue;
    const v = o[f];
    if (typeof v === 'number' && v > 0 && Number.isFinite(v)) rule[f] = v * 1000;
    else if (typeof v === 'string') rule[f] = parseDuration(v, `${where}.${f}`);
    else throw new ConfigError(`${where}.${f} must be a duration such as "10m" (or a number of seconds)`);
  }
  if (o.onDuplicate !== undefined) {
    if (o.onDuplicate !== 'block' && o.onDuplicate !== 'raise' && o.onDuplicate !== 'retry') {
      throw new ConfigError(`${where}.onDuplicate must be "block", "raise" or "retry", not ${JSON.stringify(o.onDuplicate)}`);
    }
    rule.onDuplicate = o.onDuplicate;
  }
  if (o.isError !== undefined) {
    if (o.isError !== 'rerun' && o.isError !== 'replay') {
      throw new ConfigError(`${where}.isError must be "rerun" or "replay", not ${JSON.stringify(o.isError)}`);
    }
    rule.isError = o.isError;
  }
  if (o.cancel !== undefined) {
    if (o.cancel !== 'finish' && o.cancel !== 'forward') {
      throw new ConfigError(`${where}.cancel must be "finish" or "forward", not ${JSON.stringify(o.cancel)}`);
    }
    rule.cancel = o.cancel;
  }
  if (o.keyPath !== undefined) {
    const k = o.keyPath;
    if (!Array.isArray(k) || k.length === 0 || !k.every((p) => typeof p === 'string' && p.length > 0)) {
      throw new ConfigError(
        `${where}.keyPath must be a list of property names, such as ["meta", "idempotency-key"] ` +
          `(where the key sits in the tool's arguments), not ${JSON.stringify(k)}`,
      );
    }
    rule.keyPath = k as string[];
  }
  if (o.server !== undefined) {
    if (typeof o.server !== 'string' || o.server.length === 0) throw new ConfigError(`${where}.server must be a non-empty string`);
    rule.server = o.server;
  }
  if (o.tools !== undefined) rule.tools = o.tools;
  return rule;
}

/** The command line's settings, then the config file's (its top level overrides the flags'
 * defaults only where the flags were not given). */
export function loadConfig(flags: { window?: number; file?: string; toolCallId?: boolean }): ProxyConfig {
  let top: ReturnType<typeof readRule> = {};
  if (flags.file !== undefined) {
    let text: string;
    try {
      text = readFileSync(flags.file, 'utf8');
    } catch (err) {
      throw new ConfigError(`cannot read the config file ${flags.file}: ${(err as Error).message}`);
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (err) {
      throw new ConfigError(`the config file ${flags.file} is not JSON: ${(err as Error).message}`);
    }
    top = readRule(raw, flags.file, TOP_FIELDS);
  }
  const rules: ProxyConfig['rules'] = [];
  if (top.tools !== undefined) {
    if (top.tools === null || typeof top.tools !== 'object' || Array.isArray(top.tools)) {
      throw new ConfigError(`${flags.file}: "tools" must be an object of tool name (or glob) to rule`);
    }
    for (const [pattern, raw] of Object.entries(top.tools as Record<string, unknown>)) {
      const rule = readRule(raw, `${flags.file}: tools["${pattern}"]`, RULE_FIELDS);
      const re = globToRegExp(pattern);
      rules.push({ pattern, match: (tool) => re.test(tool), rule });
    }
  }
  return {
    server: top.server,
    defaults: {
      window: flags.window ?? top.window ?? DEFAULTS.window,
      onDuplicate: top.onDuplicate ?? DEFAULTS.onDuplicate,
      isError: top.isError ?? DEFAULTS.isError,
      wait: top.wait ?? DEFAULTS.wait,
      lease: top.lease ?? DEFAULTS.lease,
      cancel: top.cancel ?? DEFAULTS.cancel,
      toolCallId: flags.toolCallId || (top.toolCallId ?? DEFAULTS.toolCallId),
    },
    rules,
  };
}

function ruleFor(config: ProxyConfig, tool: string): { pattern: string; rule: ToolRule } | undefined {
  return config.rules.find((r) => r.pattern === tool) ?? config.rules.find((r) => r.match(tool));
}

/** Whether a config rule says whether the tool is guarded (then its annotations do not matter). */
export function guardedByRule(config: ProxyConfig, tool: string): boolean {
  return ruleFor(config, tool)?.rule.guard !== undefined;
}

/**
 * The policy for one tool. Without a rule that says `guard`, the tool's annotations decide:
 * - `readOnlyHint: true`: passed through (reading twice changes nothing; a fresh answer is better);
 * - `idempotentHint: true`: passed through (the server says a repeat has no further effect);
 * - anything else, unannotated tools included: guarded (MCP's defaults for a tool without
 *   annotations are readOnlyHint false, destructiveHint true, idempotentHint false).
 */
export function policyFor(config: ProxyConfig, tool: string, annotations: ToolAnnotations | undefined): ToolPolicy {
  const found = ruleFor(config, tool);
  const rule = found?.rule ?? {};
  let guard: boolean;
  let reason: string;
  if (rule.guard !== undefined) {
    guard = rule.guard;
    reason = `config rule "${found!.pattern}"`;
  } else if (annotations?.readOnlyHint === true) {
    guard = false;
    reason = 'readOnlyHint';
  } else if (annotations?.idempotentHint === true) {
    guard = false;
    reason = 'idempotentHint';
  } else {
    guard = true;
    reason = annotations === undefined ? 'unannotated' : 'may have side effects';
  }
  const d = config.defaults;
  return {
    guard,
    reason,
    windowMs: rule.window ?? d.window,
    onDuplicate: rule.onDuplicate ?? d.onDuplicate,
    errorResults: rule.isError ?? d.isError,
    waitMs: rule.wait ?? d.wait,
    leaseMs: rule.lease ?? d.lease,
    cancel: rule.cancel ?? d.cancel,
    toolCallId: rule.toolCallId ?? d.toolCallId,
    ...(rule.keyPath === undefined ? {} : { keyPath: rule.keyPath }),
  };
}
