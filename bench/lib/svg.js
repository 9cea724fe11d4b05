'use strict';
/**
 * The ratio chart (hand-written SVG, no dependency): one horizontal bar per measured
 * ratio, oriented so that longer is better for idempotent-tools, with the goal marked.
 */

function esc(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** @param {{label: string, value: number, goal?: number, met?: boolean}[]} bars */
function ratioChart(bars, { title, subtitle }) {
  const rowH = 30;
  const labelW = 380;
  const plotW = 420;
  const top = 64;
  const bottom = 40;
  const right = 70;
  const width = labelW + plotW + right;
  const height = top + bars.length * rowH + bottom;
  const maxVal = Math.max(1.2, ...bars.flatMap((b) => [b.value, b.goal ?? 0]).filter(Number.isFinite));
  // log scale around 1: both "2x faster" and "2x slower" are the same length from 1
  const lo = Math.min(0.25, ...bars.map((b) => b.value).filter((v) => v > 0)) / 1.1;
  const hi = maxVal * 1.15;
  const x = (v) => labelW + ((Math.log(Math.max(v, lo)) - Math.log(lo)) / (Math.log(hi) - Math.log(lo))) * plotW;
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="-apple-system,Segoe UI,Helvetica,Arial,sans-serif" font-size="13">`);
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(`<text x="12" y="24" font-size="16" font-weight="600" fill="#1f2328">${esc(title)}</text>`);
  out.push(`<text x="12" y="44" fill="#57606a">${esc(subtitle)}</text>`);
  const ticks = [0.25, 0.5, 1, 2, 4, 8, 16, 32].filter((t) => t >= lo && t <= hi);
  for (const t of ticks) {
    const tx = x(t).toFixed(1);
    out.push(`<line x1="${tx}" y1="${top - 6}" x2="${tx}" y2="${top + bars.length * rowH}" stroke="${t === 1 ? '#8c959f' : '#eaeef2'}" stroke-width="1"/>`);
    out.push(`<text x="${tx}" y="${top + bars.length * rowH + 18}" text-anchor="middle" fill="#57606a">${t}x</text>`);
  }
  bars.forEach((b, i) => {
    const y = top + i * rowH;
    const ok = b.goal === undefined ? null : b.met;
    const color = ok === null ? '#8c959f' : ok ? '#2da44e' : '#cf222e';
    out.push(`<text x="${labelW - 10}" y="${y + rowH / 2 + 4}" text-anchor="end" fill="#1f2328">${esc(b.label)}</text>`);
    if (Number.isFinite(b.value)) {
      const x0 = x(lo);
      const x1 = x(b.value);
      out.push(`<rect x="${x0.toFixed(1)}" y="${y + 7}" width="${Math.max(1, x1 - x0).toFixed(1)}" height="${rowH - 14}" rx="2" fill="${color}" fill-opacity="0.85"/>`);
      out.push(`<text x="${(x1 + 6).toFixed(1)}" y="${y + rowH / 2 + 4}" fill="#1f2328">${b.value.toFixed(2)}x</text>`);
    } else {
      out.push(`<text x="${labelW + 6}" y="${y + rowH / 2 + 4}" fill="#57606a">not measured</text>`);
    }
    if (b.goal !== undefined) {
      const gx = x(b.goal).toFixed(1);
      out.push(`<line x1="${gx}" y1="${y + 3}" x2="${gx}" y2="${y + rowH - 3}" stroke="#1f2328" stroke-width="2" stroke-dasharray="3,2"/>`);
    }
  });
  const ly = height - 10;
  out.push(`<rect x="12" y="${ly - 10}" width="10" height="10" fill="#2da44e"/><text x="26" y="${ly}" fill="#57606a">goal met</text>`);
  out.push(`<rect x="100" y="${ly - 10}" width="10" height="10" fill="#cf222e"/><text x="114" y="${ly}" fill="#57606a">goal missed</text>`);
  out.push(`<rect x="206" y="${ly - 10}" width="10" height="10" fill="#8c959f"/><text x="220" y="${ly}" fill="#57606a">no goal</text>`);
  out.push(`<line x1="290" y1="${ly - 10}" x2="290" y2="${ly}" stroke="#1f2328" stroke-width="2" stroke-dasharray="3,2"/><text x="298" y="${ly}" fill="#57606a">goal (log scale; right of 1x = idempotent-tools ahead)</text>`);
  out.push('</svg>');
  return out.join('\n') + '\n';
}

module.exports = { ratioChart };
