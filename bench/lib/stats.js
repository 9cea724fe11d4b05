'use strict';
/** Small numeric and formatting helpers shared by the scenarios. */

function quantile(values, q) {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

const median = (values) => quantile(values, 0.5);

function fmtNum(x, digits = 3) {
  if (x === null || x === undefined || Number.isNaN(x)) return '-';
  if (!Number.isFinite(x)) return String(x);
  if (Number.isInteger(x)) return x.toLocaleString('en-US');
  const a = Math.abs(x);
  if (a >= 1000) return Math.round(x).toLocaleString('en-US');
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  return x.toFixed(a >= 1 ? 2 : digits);
}

const fmtRatio = (r) => (r === null || r === undefined || Number.isNaN(r) ? '-' : `${r.toFixed(2)}x`);

/** A plain-text table (for the console) from a header row and rows of strings. */
function textTable(header, rows) {
  const all = [header, ...rows].map((r) => r.map((c) => String(c)));
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  const line = (r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(all[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...all.slice(1).map(line)].join('\n');
}

/** The same table as GitHub markdown. */
function mdTable(header, rows) {
  const esc = (c) => String(c).replace(/\|/g, '\\|');
  return [
    `| ${header.map(esc).join(' | ')} |`,
    `| ${header.map((_, i) => (i === 0 ? '---' : '---:')).join(' | ')} |`,
    ...rows.map((r) => `| ${r.map(esc).join(' | ')} |`),
  ].join('\n');
}

module.exports = { quantile, median, fmtNum, fmtRatio, textTable, mdTable };
