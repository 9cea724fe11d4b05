// The inspector page: plain JavaScript, no build step. Every value from a record is put
// into the page as text (textContent), never as HTML, and shown as the CLI shows it:
// control characters, bidirectional controls (which would reorder the text around them,
// in a cell too) and other invisible characters as visible escapes, marked (`visible`).

const token = document.querySelector('meta[name="inspector-token"]').content;
const $ = (selector) => document.querySelector(selector);
const REFRESH_MS = 2000;
const expanded = new Set();
// The list comes without results; Details fetches its record whole (once per state of it).
const details = new Map();
let shown = null;
const stateOf = (r) => `${r.status}|${r.updatedAt}|${r.attempts}`;

// What lib/core/shown-text.ts escapes, the same way: C0, DEL and C1 as \n, \r, \t or \xNN;
// format characters (bidi controls, zero-width ones, BOM, soft hyphen, tags), the other
// default-ignorable ones, spaces other than the space, line and paragraph separators,
// lone surrogates and unassigned code points as \u{202e}; a backslash as two. A key shown
// so is what the Key filter (and the CLI's --key) takes back.
const INVISIBLE = '\\p{Cc}\\p{Cf}\\p{Cs}\\p{Cn}\\p{Zl}\\p{Zp}\\p{Zs}\\p{Default_Ignorable_Code_Point}';
const ESCAPED = new RegExp(`(?! )[\\\\${INVISIBLE}]`, 'gu');
const ESCAPED_IN_JSON = new RegExp(`(?![ \\n])[${INVISIBLE}]`, 'gu');

function escape(c) {
  if (c === '\\') return '\\\\';
  if (c === '\n') return '\\n';
  if (c === '\r') return '\\r';
  if (c === '\t') return '\\t';
  const code = c.codePointAt(0);
  return code <= 0x9f ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
}

/** `text` as the page shows it, as a string (for titles and dialogs). */
const asShown = (text) => String(text ?? '').replace(ESCAPED, escape);

/** JSON text (a result) with the invisible characters as JSON escapes, so it stays JSON. */
const asShownJson = (text) =>
  text.replace(ESCAPED_IN_JSON, (c) => [...Array(c.length).keys()].map((i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join(''));

/**
 * `text` as the page shows it, as nodes: its plain runs as text, each escape in a marked
 * span (so that it reads as a character the text holds). `max`: at most that many shown
 * characters, then `…` (never inside an escape).
 */
function visible(text, max = Infinity) {
  const nodes = [];
  let used = 0;
  let at = 0;
  const str = String(text ?? '');
  const add = (piece, marked) => {
    const text = marked ? escape(piece) : piece;
    if (used + text.length > max) {
      if (!marked) nodes.push(document.createTextNode(text.slice(0, max - used)));
      nodes.push(document.createTextNode('…'));
      return false;
    }
    used += text.length;
    if (marked) nodes.push(el('span', { class: 'esc', title: `U+${piece.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}` }, text));
    else nodes.push(document.createTextNode(text));
    return true;
  };
  for (const m of str.matchAll(ESCAPED)) {
    if (m.index > at && !add(str.slice(at, m.index), false)) return nodes;
    // A backslash is shown doubled, not marked: it is a character to see, not a hidden one.
    if (m[0] === '\\' ? !add('\\\\', false) : !add(m[0], true)) return nodes;
    at = m.index + m[0].length;
  }
  if (at < str.length) add(str.slice(at), false);
  return nodes;
}

async function loadDetails(r) {
  const state = stateOf(r);
  if (details.get(r.key)?.state === state) return;
  details.set(r.key, { state, record: null });
  try {
    const { record } = await api(`api/record?key=${encodeURIComponent(r.key)}`);
    details.set(r.key, { state, record });
  } catch (err) {
    details.set(r.key, { state, record: null, error: err.message });
  }
  if (shown) renderRecords(shown);
}

async function api(path, init = {}) {
  const res = await fetch(path, { ...init, headers: { 'x-inspector-token': token, ...(init.headers || {}) } });
  const body = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
  if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
  return body;
}

function filterParams() {
  const params = new URLSearchParams();
  for (const [k, v] of new FormData($('#filters'))) if (String(v).trim() !== '') params.set(k, String(v).trim());
  return params;
}

function age(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

const took = (ms) => (ms == null ? '' : ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`);

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') node.className = v;
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c ?? '')));
  return node;
}

function leaseCell(r, now) {
  if (r.status !== 'pending' || r.leaseExpiresAt == null) return el('td');
  const left = r.leaseExpiresAt - now;
  // The record cannot say whether its owner is alive (a killed one leaves its claim as it
  // was): only until when the claim holds.
  const title = `held until ${new Date(r.leaseExpiresAt).toISOString()}: a running owner renews it before then; if its owner stopped, the next call after that takes it over`;
  if (left > 0) return el('td', { title, class: 'lease' }, `held, ${age(left)} left`);
  return el('td', { title, class: 'lease lease-dead' }, `stuck: ran out ${age(-left)} ago, owner not heard from since`);
}

function confirmAction(text, detail) {
  const dialog = $('#confirm');
  $('#confirm-text').textContent = text;
  $('#confirm-detail').textContent = detail;
  dialog.returnValue = '';
  dialog.showModal();
  return new Promise((done) => dialog.addEventListener('close', () => done(dialog.returnValue === 'ok'), { once: true }));
}

async function act(kind, r) {
  const text = kind === 'release'
    ? `Release the pending record of "${asShown(r.name)}"? The next call with this key takes it over and asks its reconcile option whether the side effect happened; without reconcile, it runs again.`
    : `Delete the record of "${asShown(r.name)}"? The next call with this key runs it again.`;
  const detail = kind === 'release'
    ? `If its owner is still running, its result will be refused. Key: ${asShown(r.key)}`
    : `Key: ${asShown(r.key)}`;
  if (!(await confirmAction(text, detail))) return;
  let failure = '';
  try {
    await api(`api/${kind}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key: r.key }) });
  } catch (err) {
    failure = err.message;
  }
  await refresh();
  // A failed action's message stays until the next action; a refresh does not hide it.
  showError(failure);
  if (failure) $('#error').dataset.sticky = '1';
  else delete $('#error').dataset.sticky;
}

function showError(message) {
  $('#error').hidden = message === '';
  // A server's message may quote a key.
  $('#error').textContent = asShown(message);
}

/** An approval decision's record shows its decision (its name is approval:<decision>:<tool>), any other its status. */
function statusLabel(r) {
  const m = /^approval:(approved|edited|rejected|turn):/.exec(r.name);
  return m === null ? r.status : m[1] === 'turn' ? 'bound' : m[1];
}

function detailRow(listed) {
  const loaded = details.get(listed.key);
  if (loaded?.state !== stateOf(listed)) loadDetails(listed);
  const r = loaded?.record ?? listed;
  const meta = r.meta || {};
  // Each value as shown, isolated from its label (class v).
  const lines = [
    ['key', r.key],
    ['keyed id', r.keyId ?? listed.keyId],
    ['created', new Date(r.createdAt).toISOString()],
    ['updated', new Date(r.updatedAt).toISOString()],
    ['expires', r.expiresAt == null ? 'never' : new Date(r.expiresAt).toISOString()],
    ['framework', meta.framework], ['project', meta.project || r.namespace], ['scope', meta.scope], ['tool call', meta.toolCallId],
    ['arguments', meta.argsPreview],
    ['error', r.error ? `${r.error.name}: ${r.error.message}` : undefined],
    ['result', r.status === 'completed' && !r.error
      ? (loaded?.error ? `(not loaded: ${loaded.error})` : !loaded?.record ? 'loading…' : r.result === undefined ? 'undefined' : { json: asShownJson(JSON.stringify(r.result, null, 2)) })
      : undefined],
  ].filter(([, v]) => v !== undefined && v !== null && v !== '');
  const pre = el('pre', {});
  lines.forEach(([k, v], i) => {
    pre.append(`${i === 0 ? '' : '\n'}${k.padEnd(10)} `, el('span', { class: 'v' }, ...(typeof v === 'object' ? [v.json] : visible(v))));
  });
  return el('tr', { class: 'detail', dataset: { detailOf: r.key } }, el('td', { colspan: '10' }, pre));
}

function renderRecords({ records, matched, where, now }) {
  shown = { records, matched, where, now };
  $('#where').replaceChildren(...visible(where));
  $('#count').textContent = matched > records.length ? `${records.length} of ${matched}` : `${records.length}`;
  const body = $('#records tbody');
  const rows = [];
  for (const r of records) {
    const short = asShown(r.key).length > 20 ? visible(r.key, 16) : visible(r.key);
    const actions = el('td', { class: 'actions' },
      el('button', { type: 'button', class: 'details', onclick: () => { expanded.has(r.key) ? expanded.delete(r.key) : expanded.add(r.key); renderRecords({ records, matched, where, now }); } }, 'Details'));
    if (r.status === 'pending') actions.append(el('button', { type: 'button', class: 'release danger', onclick: () => act('release', r) }, 'Release'));
    actions.append(el('button', { type: 'button', class: 'clear danger', onclick: () => act('clear', r) }, 'Clear'));
    // The keyed id under the key: the name events, traces and `mcp --log` give the record.
    const id = r.keyId ? el('span', { class: 'kid' }, r.keyId) : '';
    rows.push(el('tr', { dataset: { key: r.key, status: r.status, keyId: r.keyId ?? '' } },
      el('td', { class: 'key', title: r.keyId ? `${asShown(r.key)}\nkeyed id: ${r.keyId}` : asShown(r.key) }, ...short, id),
      el('td', {}, ...visible(r.name)),
      el('td', {}, el('span', { class: `status ${statusLabel(r)}` }, statusLabel(r))),
      el('td', {}, ...visible(r.meta?.scope)),
      el('td', {}, ...visible(r.meta?.toolCallId)),
      el('td', {}, r.attempts),
      el('td', { title: new Date(r.updatedAt).toISOString() }, `${age(now - r.updatedAt)} ago`),
      el('td', {}, took(r.durationMs)),
      leaseCell(r, now),
      actions));
    if (expanded.has(r.key)) rows.push(detailRow(r));
  }
  if (records.length === 0) rows.push(el('tr', { class: 'empty' }, el('td', { colspan: '10', class: 'muted' }, 'No records match.')));
  body.replaceChildren(...rows);
}

const SVG = 'http://www.w3.org/2000/svg';
const KINDS = ['executed', 'replayed', 'failed', 'takenOver'];

function renderTimeline(t) {
  $('#timeline-range').textContent = `${new Date(t.from).toLocaleTimeString()} – ${new Date(t.to).toLocaleTimeString()}`;
  $('#taken-label').textContent = t.live ? 'taken over' : 're-run (attempt > 1)';
  $('#timeline-note').textContent = t.live
    ? `Executed and failed come from the records; replayed and taken over are this process's calls since ${new Date(t.liveSince).toLocaleTimeString()}.`
    : 'From the records: each key shows its latest state only. Replays leave no record, so they are counted only when the page runs inside your application (serveInspector from idempotent-tools/ui).';
  const rows = t.tools.map((tool) => {
    const n = tool.counts.executed.length;
    const totals = Array.from({ length: n }, (_, i) => KINDS.reduce((s, k) => s + tool.counts[k][i], 0));
    const max = Math.max(1, ...totals);
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('viewBox', `0 0 ${n * 10} 28`);
    svg.setAttribute('preserveAspectRatio', 'none');
    for (let i = 0; i < n; i++) {
      let y = 28;
      for (const k of KINDS) {
        const c = tool.counts[k][i];
        if (c === 0) continue;
        const h = (c / max) * 26;
        y -= h;
        const rect = document.createElementNS(SVG, 'rect');
        rect.setAttribute('x', String(i * 10 + 1));
        rect.setAttribute('y', String(y));
        rect.setAttribute('width', '8');
        rect.setAttribute('height', String(h));
        rect.setAttribute('class', k);
        const title = document.createElementNS(SVG, 'title');
        title.textContent = `${c} ${k === 'takenOver' ? (t.live ? 'taken over' : 're-run') : k}, ${new Date(t.from + i * t.bucketMs).toLocaleTimeString()}`;
        rect.append(title);
        svg.append(rect);
      }
    }
    return el('div', { class: 'tl-row', dataset: { tool: tool.name } }, el('span', { class: 'tl-name', title: asShown(tool.name) }, ...visible(tool.name)), svg);
  });
  $('#timeline').replaceChildren(...(rows.length ? rows : [el('p', { class: 'muted small' }, 'No calls in this window.')]));
}

let inFlight = false;
async function refresh() {
  if (inFlight) return;
  inFlight = true;
  try {
    const params = filterParams();
    const [records, timeline] = await Promise.all([api(`api/records?${params}`), api(`api/timeline?${params}`)]);
    renderRecords(records);
    renderTimeline(timeline);
    if (!$('#error').dataset.sticky) showError('');
    document.body.dataset.loaded = String(Date.now());
  } catch (err) {
    showError(err.message);
  } finally {
    inFlight = false;
  }
}

// The filters live in the address too (beside the token), so a reload or a shared link
// shows the same records: /?token=…&scope=thread-7&name=refund
const FILTERS = ['name', 'status', 'scope', 'key', 'since', 'limit'];
const start = new URLSearchParams(location.search);
for (const k of FILTERS) if (start.has(k)) $('#filters').elements.namedItem(k).value = start.get(k);

function keepInAddress() {
  const params = new URLSearchParams({ token });
  const form = new FormData($('#filters'));
  for (const k of FILTERS) params.set(k, String(form.get(k) ?? ''));
  history.replaceState(null, '', `?${params}`);
}

$('#filters').addEventListener('submit', () => keepInAddress());
$('#filters').addEventListener('change', () => keepInAddress());
$('#filters').addEventListener('submit', (e) => {
  e.preventDefault();
  refresh();
});
$('#filters').addEventListener('change', () => refresh());
refresh();
setInterval(refresh, REFRESH_MS);
