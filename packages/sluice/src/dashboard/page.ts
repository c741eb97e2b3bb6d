// The dashboard page: one self-contained HTML document (inline CSS and script, no CDN, works
// offline) that draws snapshots from `<base>/events` with plain SVG.

const STYLE = `
:root { --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; --muted: #57606a; --line: #d0d7de; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328; background: #f6f8fa; }
header { display: flex; align-items: baseline; gap: 16px; padding: 12px 20px; background: #fff; border-bottom: 1px solid var(--line); }
header h1 { font-size: 18px; margin: 0; }
#status { color: var(--muted); }
#status.live { color: var(--ok); }
main { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 16px; padding: 16px 20px; align-items: start; }
.wide { grid-column: span 2; }
@media (max-width: 1100px) { main { grid-template-columns: minmax(0, 1fr); } .wide { grid-column: auto; } }
section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 12px 14px; }
section h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); margin: 0 0 8px; }
.tiles { display: flex; gap: 24px; }
.tile b { display: block; font-size: 28px; font-variant-numeric: tabular-nums; }
.tile span { color: var(--muted); }
table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { text-align: right; padding: 3px 6px; border-bottom: 1px solid #eaeef2; white-space: nowrap; }
th:first-child, td:first-child, .l, td.key { text-align: left; }
td.key { max-width: 260px; overflow: hidden; text-overflow: ellipsis; font-family: ui-monospace, monospace; }
.allowed { color: var(--ok); } .denied { color: var(--bad); }
.badge { display: inline-block; padding: 0 8px; border-radius: 10px; color: #fff; font-size: 12px; }
.up { background: var(--ok); } .down { background: var(--bad); } .unknown { background: var(--muted); }
.closed { background: var(--ok); } .half-open { background: var(--warn); } .open { background: var(--bad); }
.chart { margin-bottom: 10px; } .chart svg { width: 100%; height: auto; display: block; }
.chart .title { display: flex; justify-content: space-between; color: var(--muted); }
.empty, .idle { color: var(--muted); font-style: italic; }
tr.flagged td { color: var(--bad); font-weight: 600; }
.note { color: var(--muted); font-weight: normal; text-transform: none; letter-spacing: 0; }
`

// Runs in the browser. Builds DOM with textContent only: keys are user input and never become HTML.
const SCRIPT = `
const BASE = document.body.dataset.base;
const $ = (id) => document.getElementById(id);
const pct = (x) => (x * 100).toFixed(1) + '%';
const ms = (x) => x == null ? '–' : x < 1 ? x.toFixed(3) + ' ms' : x.toFixed(1) + ' ms';
const lasting = (x) => x < 1000 ? x + ' ms' : x < 120000 ? Math.round(x / 1000) + ' s' : x < 7200000 ? Math.round(x / 60000) + ' min' : (x / 3600000).toFixed(1) + ' h';
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
function fill(tbody, rows, empty, cols) {
  tbody.replaceChildren(...(rows.length ? rows : [el('tr', {}, el('td', { class: 'empty', colspan: cols }, empty))]));
}
const SVG = 'http://www.w3.org/2000/svg';
function svgEl(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}
// Where the time axis is labelled: seconds before now, oldest first.
function axisTicks(n) {
  const step = n >= 60 ? 15 : Math.max(1, Math.round(n / 4));
  const ticks = [];
  for (let t = n; t > 0; t -= step) ticks.push(t);
  return ticks;
}
function chart(p) {
  const w = 600, h = 90, n = p.series.allowed.length;
  // A line that is zero all along carries nothing but its colour, and a red line at zero reads as
  // failure: only series with a decision are drawn, and an idle chart says so in neutral grey.
  const drawn = [['denied', '#cf222e'], ['allowed', '#1a7f37']].filter(([name]) => p.series[name].some((v) => v > 0));
  const max = Math.max(1, ...p.series.allowed, ...p.series.denied);
  const x = (i) => (n > 1 ? i * w / (n - 1) : w);
  const svg = svgEl('svg', { viewBox: '0 0 ' + w + ' ' + (h + 16) });
  for (const frac of [0, 0.5, 1]) {
    const y = h - frac * h;
    svg.append(svgEl('line', { x1: 0, x2: w, y1: y, y2: y, stroke: '#eaeef2' }));
  }
  // The series' last point is the last whole second; its first is n seconds before now.
  const ticks = axisTicks(n).map((t) => [x(n - t), '-' + t + ' s']).concat([[w, 'now']]);
  ticks.forEach(([tx, text], i) => {
    svg.append(svgEl('line', { x1: tx, x2: tx, y1: 0, y2: h, stroke: '#f3f4f6' }));
    const anchor = i === 0 ? 'start' : i === ticks.length - 1 ? 'end' : 'middle';
    const label = svgEl('text', { class: 'axis', x: tx, y: h + 13, 'font-size': 11, fill: '#57606a', 'text-anchor': anchor });
    label.textContent = text;
    svg.append(label);
  });
  // Denied first, so allowed is drawn over it where both are equal.
  for (const [name, color] of drawn) {
    const pts = p.series[name].map((v, i) => x(i).toFixed(1) + ',' + (h - v / max * h).toFixed(1));
    svg.append(svgEl('polyline', { class: name, points: pts.join(' '), fill: 'none', stroke: color, 'stroke-width': 2, 'vector-effect': 'non-scaling-stroke' }));
  }
  let legend;
  if (drawn.length === 0) legend = el('span', { class: 'idle' }, 'no traffic · last ' + n + ' s');
  else {
    const label = svgEl('text', { x: 2, y: 11, 'font-size': 11, fill: '#57606a' });
    label.textContent = 'max ' + max + '/s';
    svg.append(label);
    const names = drawn.map(([name]) => name);
    legend = el('span', {}, el('span', { class: 'allowed' }, '— allowed '),
      names.includes('denied') ? el('span', { class: 'denied' }, '— denied') : 'none denied',
      ' · last ' + n + ' s');
  }
  const wrap = el('div', { class: 'chart', 'data-policy': p.policy }, el('div', { class: 'title' }, el('b', {}, p.policy), legend));
  wrap.append(svg);
  return wrap;
}
// Below this many keys the top 1% is a single key, and a percentile of a handful says nothing.
const PERCENTILE_MIN_KEYS = 100;
function keyShare(t) {
  if (t.distinctKeys >= PERCENTILE_MIN_KEYS)
    return t.policy + ': top 1% of ~' + t.distinctKeys + ' keys send ' + (t.topOnePercentShare == null ? '?' : pct(t.topOnePercentShare));
  const busiest = t.keys[0];
  if (busiest == null) return t.policy + ': ' + t.total + ' requests';
  if (t.distinctKeys <= 1 && t.keys.length <= 1) return t.policy + ': one key sends all';
  return t.policy + ': the busiest of ~' + Math.max(t.distinctKeys, t.keys.length) + ' keys sends ' + pct(busiest.count / t.total);
}
// A zero in red reads as failure: the denied colour is for counts above zero.
const red = (n) => (n > 0 ? 'denied' : '');
function render(s) {
  let allowed = 0, denied = 0, allowedRate = 0, deniedRate = 0;
  for (const p of [...s.policies, s.otherPolicies]) { allowed += p.totals.allowed; denied += p.totals.denied; allowedRate += p.perSecond.allowed; deniedRate += p.perSecond.denied; }
  $('share').textContent = pct(s.deniedShare10s);
  $('total-allowed').textContent = allowed;
  $('total-denied').textContent = denied;
  $('total-denied').className = red(denied);
  $('rate').textContent = allowedRate + ' / ' + deniedRate;
  fill($('policies'), s.policies.map((p) => el('tr', { 'data-policy': p.policy },
    el('td', {}, p.policy),
    el('td', { class: 'allowed-rate allowed' }, p.perSecond.allowed),
    el('td', { class: 'denied-rate ' + red(p.perSecond.denied) }, p.perSecond.denied),
    el('td', { class: 'share' }, pct(p.deniedShare10s)),
    el('td', { class: 'allowed-total' }, p.totals.allowed),
    el('td', { class: 'denied-total' }, p.totals.denied),
    el('td', { class: 'degraded-total' }, p.totals.degraded))), 'no decisions yet', 7);
  const o = s.otherPolicies;
  if (o.count > 0 || o.dropped > 0) $('policies').append(el('tr', { class: 'others' },
    el('td', {}, o.count + ' more' + (o.dropped > 0 ? ', ' + o.dropped + ' dropped' : '')),
    el('td', { class: 'allowed' }, o.perSecond.allowed), el('td', { class: red(o.perSecond.denied) }, o.perSecond.denied), el('td', {}, ''),
    el('td', {}, o.totals.allowed), el('td', {}, o.totals.denied), el('td', {}, o.totals.degraded)));
  $('charts').replaceChildren(...s.policies.map(chart));
  fill($('stores'), s.stores.map((st) => el('tr', { 'data-store': st.store },
    el('td', {}, st.store),
    el('td', {}, el('span', { class: 'badge ' + (st.up == null ? 'unknown' : st.up ? 'up' : 'down') }, st.up == null ? 'not reported' : st.up ? 'up' : 'down')),
    el('td', {}, el('span', { class: 'badge ' + (st.circuit ?? 'unknown') }, st.circuit ?? 'not reported')),
    el('td', { class: 'p50' }, ms(st.p50Ms)),
    el('td', { class: 'p99' }, ms(st.p99Ms)),
    el('td', { class: 'errors' }, st.errors))), 'no store activity yet', 6);
  $('regions-section').hidden = s.regions.length === 0;
  fill($('regions'), s.regions.map((r) => el('tr', { 'data-region': r.region },
    el('td', {}, r.region + (r.local ? ' (local)' : '')),
    el('td', {}, el('span', { class: 'badge ' + (r.stale ? 'down' : 'up') }, r.stale ? 'stale' : 'fresh')),
    el('td', { class: 'age' }, r.lastSyncAgeMs == null ? 'never' : ms(r.lastSyncAgeMs)))), 'no regions', 3);
  const lists = s.lists || [];
  $('lists-section').hidden = lists.length === 0;
  const listCell = (l) => l == null ? '–' : [l.keys + ' keys', l.ips + ' ranges'].join(', ') +
    (l.shown.keys.length + l.shown.ips.length ? ': ' + l.shown.keys.concat(l.shown.ips).join(' ') +
      (l.shown.keys.length + l.shown.ips.length < l.keys + l.ips ? ' …' : '') : '');
  fill($('lists'), lists.map((p) => el('tr', { 'data-policy': p.policy },
    el('td', {}, p.policy), el('td', { class: 'deny l' }, listCell(p.deny)),
    el('td', { class: 'allow l' }, listCell(p.allow)))), 'no lists', 3);
  const limited = s.topDenied.flatMap((t) => t.keys.map((k) => ({ ...k, policy: t.policy, total: t.total })))
    .sort((a, b) => b.count - a.count).slice(0, 10);
  fill($('top'), limited.map((k) => el('tr', {},
    el('td', {}, k.policy), el('td', { class: 'key', title: k.key }, k.fingerprint ?? k.key),
    el('td', { class: 'count' }, k.count + (k.maxError ? ' ±' + k.maxError : '')),
    el('td', {}, pct(k.count / Math.max(1, k.total))))), 'nobody is being limited', 4);
  $('top1').textContent = s.topAdmitted.filter((t) => t.total > 0).map(keyShare).join(' · ') || '–';
  fill($('spikes'), s.spikes.map((sp) => el('tr', {},
    el('td', {}, new Date(sp.at).toLocaleTimeString()), el('td', { class: 'l' }, sp.policy),
    el('td', { class: 'key', title: sp.key ?? '' }, sp.scope === 'key' ? sp.fingerprint ?? sp.key : '(whole policy)'),
    el('td', {}, sp.rate.toFixed(0) + '/s'), el('td', {}, sp.ratio.toFixed(1) + '×'))), 'no spikes', 5);
  fill($('near-limit'), (s.nearLimit ?? []).map((n) => el('tr', {},
    el('td', {}, new Date(n.at).toLocaleTimeString()), el('td', { class: 'l' }, n.policy),
    el('td', { class: 'key', title: n.key }, n.key),
    el('td', {}, n.remaining + ' / ' + n.limit), el('td', {}, Math.ceil(Math.max(0, n.resetAt - s.at) / 1000) + ' s'))), 'no key near its limit', 5);
  renderAbuse(s.abuse);
  $('overrides-section').hidden = !s.overrides || s.overrides.length === 0;
  fill($('overrides'), (s.overrides ?? []).map((o) => el('tr', { 'data-override': o.policy + ' ' + o.key },
    el('td', {}, o.policy), el('td', { class: 'key', title: o.key }, o.key),
    el('td', {}, o.unlimited ? 'unlimited' : o.blocked ? 'blocked' : [o.limit != null ? 'limit ' + o.limit : '', o.windowMs != null ? 'window ' + ms(o.windowMs) : '', o.burst != null ? 'burst ' + o.burst : ''].filter(Boolean).join(', ')),
    el('td', {}, o.expiresAt == null ? 'never' : new Date(o.expiresAt).toLocaleString()),
    el('td', {}, o.reason ?? ''))), 'no overrides', 5);
  renderPenalised(s.penalised ?? []);
  $('updated').textContent = new Date(s.at).toLocaleTimeString();
}
function renderPenalised(list) {
  fill($('penalised'), list.map((p) => el('tr', { 'data-policy': p.policy },
    el('td', { class: 'l' }, p.policy), el('td', { class: 'key', title: p.fingerprint ?? p.key }, p.fingerprint ?? p.key),
    el('td', { class: 'level' }, p.level), el('td', { class: 'block' }, lasting(p.blockMs)),
    el('td', { class: 'until' }, new Date(p.until).toLocaleTimeString()))), 'no key under a penalty', 5);
}
const PATTERN = { identitiesPerAddress: 'identities per address', addressesPerIdentity: 'addresses per identity' };
function renderAbuse(a) {
  if (a == null) {
    for (const id of ['abuse-addresses', 'abuse-identities', 'abuse-alerts']) fill($(id), [], 'abuse patterns are off', 5);
    return;
  }
  const minutes = (a.windowMs / 60000).toFixed(a.windowMs % 60000 ? 1 : 0) + ' min';
  $('abuse-addresses-note').textContent = 'alert at ≥ ' + a.thresholds.identitiesPerAddress + ' in ' + minutes;
  $('abuse-identities-note').textContent = 'alert at ≥ ' + a.thresholds.addressesPerIdentity + ' in ' + minutes;
  const row = (e, ...cells) => el('tr', { class: e.flagged ? 'flagged' : '', 'data-key': e.fingerprint ?? e.key },
    el('td', { class: 'key', title: e.fingerprint ?? e.key }, e.fingerprint ?? e.key), ...cells);
  fill($('abuse-addresses'), a.identitiesPerAddress.map((e) => row(e,
    el('td', { class: 'distinct' }, e.distinct), el('td', { class: 'decisions' }, e.decisions), el('td', { class: 'denied-count' }, e.denied))),
    'no address with several identities', 4);
  fill($('abuse-identities'), a.addressesPerIdentity.map((e) => row(e,
    el('td', { class: 'distinct' }, e.distinct), el('td', { class: 'networks' }, e.networks ?? '–'),
    el('td', { class: 'decisions' }, e.decisions), el('td', { class: 'denied-count' }, e.denied))),
    'no identity on several addresses', 5);
  fill($('abuse-alerts'), a.alerts.map((al) => el('tr', { 'data-pattern': al.pattern },
    el('td', {}, new Date(al.at).toLocaleTimeString()), el('td', { class: 'l' }, PATTERN[al.pattern] ?? al.pattern),
    el('td', { class: 'key', title: al.fingerprint ?? al.key }, al.fingerprint ?? al.key),
    el('td', {}, al.distinct + ' ≥ ' + al.threshold))), 'no abuse alerts', 4);
}
// The page's own query (a dashboard token, when one is set) goes on to the stream.
const source = new EventSource(BASE + '/events' + location.search);
source.onopen = () => { $('status').textContent = 'live'; $('status').className = 'live'; };
source.onerror = () => { $('status').textContent = 'reconnecting…'; $('status').className = ''; };
source.onmessage = (e) => render(JSON.parse(e.data));
`

/** The page for a dashboard mounted at `base` (already validated as a plain path). */
export function dashboardPage(base: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sluice dashboard</title>
<style>${STYLE}</style>
</head>
<body data-base="${base}">
<header><h1>Sluice</h1><span id="status">connecting…</span><span>updated <span id="updated">–</span></span></header>
<main>
<section>
  <h2>Now</h2>
  <div class="tiles">
    <div class="tile"><b id="share">–</b><span>429 share, last 10 s</span></div>
    <div class="tile"><b id="rate">–</b><span>allowed / denied per s</span></div>
    <div class="tile"><b id="total-allowed" class="allowed">–</b><span>allowed total</span></div>
    <div class="tile"><b id="total-denied">–</b><span>denied total</span></div>
  </div>
</section>
<section class="wide">
  <h2>Policies</h2>
  <table><thead><tr><th>policy</th><th>allowed/s</th><th>denied/s</th><th>429 share</th><th>allowed</th><th>denied</th><th>degraded</th></tr></thead>
  <tbody id="policies"></tbody></table>
</section>
<section class="wide">
  <h2>Decisions per second</h2>
  <div id="charts"></div>
</section>
<section>
  <h2>Stores</h2>
  <table><thead><tr><th>store</th><th>up</th><th>circuit</th><th>p50</th><th>p99</th><th>errors</th></tr></thead>
  <tbody id="stores"></tbody></table>
</section>
<section id="regions-section" hidden>
  <h2>Regions</h2>
  <table><thead><tr><th>region</th><th>totals</th><th>last sync</th></tr></thead>
  <tbody id="regions"></tbody></table>
</section>
<section id="overrides-section" hidden>
  <h2>Per-key overrides in force</h2>
  <table><thead><tr><th>policy</th><th>key</th><th>override</th><th>ends</th><th>reason</th></tr></thead>
  <tbody id="overrides"></tbody></table>
</section>
<section id="lists-section" hidden>
  <h2>Allow and deny lists</h2>
  <table><thead><tr><th>policy</th><th class="l">deny</th><th class="l">allow</th></tr></thead>
  <tbody id="lists"></tbody></table>
</section>
<section>
  <h2>Top limited keys (last minute)</h2>
  <table><thead><tr><th>policy</th><th class="l">key</th><th>denied</th><th>share</th></tr></thead>
  <tbody id="top"></tbody></table>
  <p id="top1" class="empty">–</p>
</section>
<section class="wide">
  <h2>Recent spikes</h2>
  <table><thead><tr><th>when</th><th class="l">policy</th><th class="l">key</th><th>rate</th><th>vs baseline</th></tr></thead>
  <tbody id="spikes"></tbody></table>
</section>
<section class="wide">
  <h2>Penalised keys</h2>
  <table><thead><tr><th class="l">policy</th><th class="l">key</th><th>level</th><th>block</th><th>until</th></tr></thead>
  <tbody id="penalised"></tbody></table>
</section>
<section class="wide">
  <h2>Near-limit keys</h2>
  <table><thead><tr><th>crossed</th><th class="l">policy</th><th class="l">key</th><th>left</th><th>resets in</th></tr></thead>
  <tbody id="near-limit"></tbody></table>
</section>
<section class="wide">
  <h2>Abuse alerts</h2>
  <table><thead><tr><th>when</th><th class="l">pattern</th><th class="l">key</th><th>count</th></tr></thead>
  <tbody id="abuse-alerts"></tbody></table>
</section>
<section>
  <h2>Many identities per address <span id="abuse-addresses-note" class="note"></span></h2>
  <table><thead><tr><th class="l">address</th><th>identities</th><th>decisions</th><th>denied</th></tr></thead>
  <tbody id="abuse-addresses"></tbody></table>
</section>
<section class="wide">
  <h2>Many addresses per identity <span id="abuse-identities-note" class="note"></span></h2>
  <table><thead><tr><th class="l">identity</th><th>addresses</th><th>networks</th><th>decisions</th><th>denied</th></tr></thead>
  <tbody id="abuse-identities"></tbody></table>
</section>
</main>
<script>${SCRIPT}</script>
</body>
</html>
`
}
