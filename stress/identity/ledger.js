'use strict';
// The identity harness's ground truth: every side effect a guarded tool ran, and which
// delivery the harness was making when it ran. Deliveries are made one at a time, so the
// delivery in `current.json` is exact; a tool in another process (an MCP server the harness
// spawned) finds the folder in IDENTITY_LEDGER_DIR and appends to a file of its own.
//
// A side effect's line: {delivery, step?, toolCallId, args, receipt}. The receipt is new for every
// side effect and is what the tool returns: a caller that sees it saw that side effect's
// result, so the checker can say whose result reached whom.

const { appendFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, renameSync, writeFileSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');

const RECEIPT = /rcpt:\d+:\d+/g;

let counter = 0;

/** The folder side effects go to: the given one, or IDENTITY_LEDGER_DIR. */
function folder(dir) {
  const d = dir ?? process.env.IDENTITY_LEDGER_DIR;
  if (d === undefined || d === '') throw new Error('identity ledger: no folder (IDENTITY_LEDGER_DIR is not set)');
  return d;
}

/**
 * Records one side effect (call it where the tool does its work, and return the receipt in
 * the tool's result). `toolCallId`: the framework's id of the call as the tool saw it, if any.
 */
function recordSideEffect({ toolCallId = null, args }, dir) {
  const d = folder(dir);
  const current = JSON.parse(readFileSync(join(d, 'current.json'), 'utf8'));
  const receipt = `rcpt:${process.pid}:${++counter}`;
  const line = { delivery: current.delivery, ...(current.step === undefined ? {} : { step: current.step }), toolCallId, args, receipt };
  appendFileSync(join(d, `effects-${process.pid}.jsonl`), `${JSON.stringify(line)}\n`);
  return receipt;
}

/** The receipts in what a caller saw (a tool result, a model message, any JSON). */
function receiptsIn(value) {
  const text = typeof value === 'string' ? value : JSON.stringify(value) ?? '';
  return [...new Set(text.match(RECEIPT) ?? [])];
}

class Ledger {
  constructor(dir = mkdtempSync(join(tmpdir(), 'identity-ledger-'))) {
    this.dir = dir;
    this.setCurrent(null);
  }

  /**
   * The delivery being made now (null between deliveries), and, for a driver whose model
   * answers in several steps, the step whose calls run now (calls of one step run before
   * the model's next step).
   */
  setCurrent(delivery, step) {
    const file = join(this.dir, 'current.json');
    writeFileSync(`${file}.tmp`, JSON.stringify(step === undefined ? { delivery } : { delivery, step }));
    renameSync(`${file}.tmp`, file);
  }

  record(effect) {
    return recordSideEffect(effect, this.dir);
  }

  /** Every side effect recorded, by any process. */
  effects() {
    if (!existsSync(this.dir)) return [];
    return readdirSync(this.dir)
      .filter((f) => f.startsWith('effects-') && f.endsWith('.jsonl'))
      .flatMap((f) => readFileSync(join(this.dir, f), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)));
  }
}

module.exports = { Ledger, recordSideEffect, receiptsIn };
