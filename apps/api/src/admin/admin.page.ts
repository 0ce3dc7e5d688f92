import { createHash } from 'node:crypto';

// The query view at /admin: one static page, embedded here so that the build carries it. It signs
// in through POST /admin/session, which sets an HttpOnly cookie scoped to /admin (the script never
// holds a credential, and the queue dashboard takes the same cookie), lists GET /admin/api/queries
// every second and cancels with DELETE /admin/api/queries/{id}. Every value is written with
// textContent, never as HTML.

const STYLE = `
  [hidden] { display: none !important; }
  :root { font: 14px/1.4 system-ui, sans-serif; color: #1d2330; background: #f6f7f9; }
  body { margin: 0; }
  header { display: flex; align-items: center; gap: 1rem; padding: .75rem 1.25rem; background: #1d2330; color: #fff; }
  header h1 { font-size: 1.1rem; margin: 0; flex: 1; }
  header a { color: #9cc3ff; }
  main, #login { padding: 1rem 1.25rem; }
  #login { max-width: 22rem; display: grid; gap: .5rem; }
  input[type=text], input[type=password] { padding: .4rem; border: 1px solid #b8bfcc; border-radius: 4px; }
  button { padding: .35rem .8rem; border-radius: 4px; border: 1px solid #7a8599; background: #fff; cursor: pointer; }
  button.cancel { border-color: #c0392b; color: #c0392b; }
  button:disabled { opacity: .5; cursor: default; }
  table { border-collapse: collapse; width: 100%; background: #fff; }
  th, td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid #e3e6eb; vertical-align: top; }
  th { background: #eceff3; font-weight: 600; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  td.sql { font-family: ui-monospace, monospace; max-width: 28rem; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
  .state { padding: .1rem .45rem; border-radius: 9px; background: #e3e6eb; }
  .state-queued { background: #fff1c2; } .state-running, .state-streaming { background: #cfe8ff; }
  .state-succeeded { background: #d4f3d9; } .state-failed { background: #ffd6d1; } .state-cancelled { background: #e6dcf5; }
  .muted { color: #6b7385; } .error { color: #c0392b; }
  .reason { color: #c0392b; margin-top: .2rem; max-width: 22rem; }
  table.no-kept .kept { display: none; }
  .bar { display: flex; gap: 1.5rem; align-items: center; margin-bottom: .75rem; flex-wrap: wrap; }
  tr[data-query-id] { cursor: pointer; }
  tr.selected { background: #eef5ff; }
  .phases { display: flex; width: 9rem; height: .7rem; background: #eceff3; border-radius: 3px; overflow: hidden; }
  .phase-queued { background: #f0c040; } .phase-running { background: #4a90d9; } .phase-streaming { background: #3aa76d; }
  #charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(16rem, 1fr)); gap: .75rem; margin-bottom: .75rem; }
  figure { margin: 0; background: #fff; border: 1px solid #e3e6eb; border-radius: 4px; padding: .4rem .6rem; }
  figcaption { font-weight: 600; font-size: .85rem; }
  figure svg { width: 100%; height: 5rem; display: block; }
  .legend { min-height: 1.2rem; }
  .legend span { margin-right: .6rem; font-size: .8rem; }
  #detail { background: #fff; border: 1px solid #b8bfcc; border-radius: 4px; padding: .6rem .9rem; margin-top: .75rem; }
  #detail pre { white-space: pre-wrap; word-break: break-word; background: #f6f7f9; padding: .5rem; }
  #detail dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: 0; }
  #detail dt { color: #6b7385; }
`;

const SCRIPT = `
(() => {
  'use strict';
  const FINAL = ['succeeded', 'failed', 'cancelled'];
  // Where a kept result's body is (GET /v1/queries' result_kept_in), as the Kept result column says.
  const KEPT_IN = { spool: 'the spool', redis: 'Redis' };
  const $ = (id) => document.getElementById(id);
  let timer;
  let statsTimer;

  // Earlier versions kept a token here: it goes.
  sessionStorage.removeItem('sluice.admin.token');
  // A body that is not the status envelope (a proxy's page): show the HTTP status instead.
  const reasonOf = async (res) => {
    try { const body = await res.json(); return body.status.reason; } catch { return res.status + ' ' + res.statusText; }
  };
  // Below a second in ms: a 20 ms query and a 90 ms one must not both read 0.0 s.
  const duration = (ms) => {
    if (ms < 1000) return Math.round(ms) + ' ms';
    const s = Math.floor(ms / 1000);
    if (s < 60) return (ms / 1000).toFixed(1) + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
    return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  };
  const time = (iso) => (iso ? new Date(iso).toLocaleTimeString() : '');
  const traceUrl = document.body.dataset.traceUrl;
  const COLORS = { succeeded: '#2e9e4f', failed: '#c0392b', cancelled: '#8e6bbf', rejected: '#d98b1f', accepted: '#7a8599',
    interactive: '#4a90d9', export: '#d98b1f', p50: '#4a90d9', p99: '#c0392b' };
  // A query's phases from the registry's times: queued until it started, running until its first
  // rows came back, streaming from then until it ended (or now).
  const phases = (q, now) => {
    const created = Date.parse(q.created_at);
    const started = q.started_at ? Date.parse(q.started_at) : undefined;
    const streaming = q.streaming_at ? Date.parse(q.streaming_at) : undefined;
    const end = q.finished_at ? Date.parse(q.finished_at) : now;
    const total = Math.max(1, end - created);
    const parts = [['queued', (started ?? end) - created]];
    if (started !== undefined) parts.push(['running', (streaming ?? end) - started]);
    if (started !== undefined && streaming !== undefined) parts.push(['streaming', end - streaming]);
    const bar = document.createElement('div');
    bar.className = 'phases';
    for (const [name, ms] of parts) {
      const part = document.createElement('div');
      part.className = 'phase phase-' + name;
      part.style.width = (100 * Math.max(0, ms) / total).toFixed(1) + '%';
      part.title = name + ' ' + duration(Math.max(0, ms));
      bar.appendChild(part);
    }
    return bar;
  };
  const phaseText = (q) => [...phases(q, Date.now()).children].map((part) => part.title).join(', ');
  const cell = (row, text, cls) => {
    const td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    row.appendChild(td);
    return td;
  };

  // Who is signed in: only the owner of a kept result gets its link.
  let me;

  // session: the answer of /admin/session, or null when nobody is signed in.
  function show(session) {
    const signedIn = !!session;
    clearInterval(timer);
    clearInterval(statsTimer);
    $('login').hidden = signedIn;
    $('view').hidden = !signedIn;
    $('signout').hidden = !signedIn;
    $('dashboard').hidden = !(signedIn && session.admin && document.body.dataset.queueDashboard);
    me = signedIn ? session.username : undefined;
    if (signedIn) {
      $('who').textContent = 'signed in as ' + session.username + (session.admin ? ' (administrator)' : ' (not an administrator: your own queries only)');
      refresh();
      timer = setInterval(refresh, 1000);
      $('charts').hidden = !session.admin;
      clearInterval(statsTimer);
      if (session.admin) { stats(); statsTimer = setInterval(stats, 5000); }
    } else {
      $('who').textContent = '';
    }
  }

  // The cookie goes with every same-origin request under /admin; nothing else is needed.
  async function api(method, path, signal) {
    const res = await fetch(path, { method, credentials: 'same-origin', signal });
    if (res.status === 401) {
      $('login-error').textContent = 'Your session ended: ' + (await reasonOf(res));
      show(null);
      throw new Error('signed out');
    }
    return res;
  }

  async function refresh() {
    let list;
    try {
      const res = await api('GET', '/admin/api/queries');
      if (!res.ok) { $('error').textContent = await reasonOf(res); return; }
      list = await res.json();
    } catch (err) {
      if (err.message !== 'signed out') $('error').textContent = 'Sluice is not answering: ' + err.message;
      return;
    }
    $('error').textContent = '';
    latest = list;
    const all = $('show-finished').checked;
    const owners = [...new Set(list.map((q) => q.owner))].sort();
    const userFilter = $('filter-user');
    const chosen = userFilter.value;
    userFilter.replaceChildren(new Option('every user', ''), ...owners.map((o) => new Option(o, o)));
    userFilter.value = owners.includes(chosen) ? chosen : '';
    const state = $('filter-state').value;
    const lane = $('filter-lane').value;
    const rows = list.filter((q) => (all || state || !FINAL.includes(q.state))
      && (!userFilter.value || q.owner === userFilter.value)
      && (!state || q.state === state)
      && (!lane || (q.lane || 'interactive') === lane));
    const now = Date.now();
    const body = $('queries').tBodies[0];
    body.replaceChildren();
    for (const q of rows) {
      const tr = document.createElement('tr');
      tr.dataset.queryId = q.query_id;
      tr.dataset.state = q.state;
      if (q.query_id === selected) tr.className = 'selected';
      tr.addEventListener('click', (event) => {
        if (event.target.closest('button, a')) return;
        selected = q.query_id;
        detail();
        for (const other of body.rows) other.classList.toggle('selected', other === tr);
      });
      cell(tr, q.query_id.slice(0, 8), 'muted').title = q.query_id;
      cell(tr, q.owner);
      const state = document.createElement('span');
      state.className = 'state state-' + q.state;
      state.textContent = q.state;
      const stateCell = cell(tr, '');
      stateCell.appendChild(state);
      // Where a queued query stands, and why a failed one failed, under its state: columns of
      // their own were empty for nearly every query, and the reason sat under no heading.
      if (q.queue_position !== null && q.queue_position !== undefined) {
        const position = document.createElement('span');
        position.className = 'position muted';
        position.textContent = ' ' + q.queue_position + ' ahead';
        stateCell.appendChild(position);
      }
      if (q.status && q.status.vendor_code !== 0) {
        const reason = document.createElement('div');
        reason.className = 'reason';
        reason.textContent = q.status.reason;
        stateCell.appendChild(reason);
      }
      cell(tr, q.lane || '');
      cell(tr, time(q.created_at), 'num').title = q.created_at;
      cell(tr, duration(q.elapsed_ms), 'num');
      cell(tr, '').appendChild(phases(q, now));
      // Made by the worker, and of those sent (a query nobody reads makes rows all the same).
      const made = q.rows_produced ?? q.rows;
      cell(tr, made === q.rows ? String(made) : made + ' (' + q.rows + ' sent)', 'num');
      const result = cell(tr, '', 'kept');
      // Where the body is, and until when: 'kept in the spool until 14:05:09'.
      const keptText = q.result_url
        ? 'kept' +
          (KEPT_IN[q.result_kept_in] ? ' in ' + KEPT_IN[q.result_kept_in] : '') +
          (q.result_kept_until
            ? ' until ' + new Date(q.result_kept_until).toLocaleTimeString()
            : '')
        : '';
      if (q.result_url && q.owner === me) {
        const link = document.createElement('a');
        link.className = 'result';
        link.href = '/admin/api/queries/' + encodeURIComponent(q.query_id) + '/result';
        link.textContent = keptText;
        result.appendChild(link);
      } else if (q.result_url) {
        result.textContent = keptText;
        result.className = 'kept muted';
      }
      cell(tr, q.database || 'default');
      cell(tr, q.statement, 'sql').title = q.statement;
      const actions = cell(tr, '');
      if (!FINAL.includes(q.state)) {
        const button = document.createElement('button');
        button.className = 'cancel';
        button.textContent = 'Cancel';
        button.addEventListener('click', () => cancel(q.query_id, button));
        actions.appendChild(button);
      }
      body.appendChild(tr);
    }
    // The Kept result column only while a query in view has one: it is empty for most.
    $('queries').classList.toggle('no-kept', !rows.some((q) => q.result_url));
    $('empty').hidden = rows.length > 0;
    $('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    detail();
  }

  // The query picked in the table, shown whole below it: the list gives each statement's first
  // 200 characters, so the query is read once by itself, its whole statement with it. What it
  // read stands in for the list's entry once the query is no longer among the newest the list
  // holds (on a busy service, seconds after it ended): the view stays until it is closed.
  let selected;
  let latest = [];
  /** Query id → the query as its own read gave it. */
  const opened = new Map();
  const reading = new Set();
  async function open(id) {
    if (reading.has(id)) return;
    reading.add(id);
    try {
      const res = await api('GET', '/admin/api/queries/' + encodeURIComponent(id), AbortSignal.timeout(10000));
      const info = res.ok ? await res.json() : undefined;
      // Read again at the next draw unless it came with its statement.
      if (info && typeof info.statement === 'string') opened.set(id, info);
    } catch {
      // Read again at the next draw.
    } finally {
      reading.delete(id);
    }
    if (selected === id) draw();
  }
  /** Shows the query picked, and reads it by itself where the list cannot stand in for that. */
  function detail() {
    draw();
    if (selected === undefined) return;
    const own = opened.get(selected);
    const listed = latest.some((x) => x.query_id === selected);
    // Once for its whole statement, and at each draw while it is open and out of the list (its
    // own read is then all that says how it goes on).
    if (!own || (!listed && !FINAL.includes(own.state))) open(selected);
  }
  function draw() {
    const own = opened.get(selected);
    const q = latest.find((x) => x.query_id === selected) ?? own;
    $('detail').hidden = !q;
    if (!q) return;
    $('detail-id').textContent = q.query_id;
    const statement = own ? own.statement : undefined;
    $('detail-statement').textContent = statement ?? q.statement;
    $('detail-statement').dataset.whole = statement === undefined ? 'false' : 'true';
    const facts = [
      ['state', q.state],
      ['owner', q.owner],
      ['lane', q.lane || 'interactive'],
      ['database', q.database || 'default'],
      ['format', q.format],
      ['created', q.created_at],
      ['queued for', duration(Math.max(0, (q.started_at ? Date.parse(q.started_at) : Date.now()) - Date.parse(q.created_at)))],
      ['started', q.started_at || '—'],
      ['streaming', q.streaming_at || '—'],
      ['finished', q.finished_at || '—'],
      ['duration', duration(q.elapsed_ms)],
      ['phases', phaseText(q)],
      ['rows', (q.rows_produced ?? q.rows) + ' made, ' + q.rows + ' sent'],
      ['bytes', (q.bytes_produced ?? q.bytes) + ' made, ' + q.bytes + ' sent'],
      ['status', q.status ? q.status.sql_state + ' (' + q.status.vendor_code + ') ' + q.status.reason : '—'],
      ['trace', q.trace_id || '—'],
    ];
    const list = $('detail-facts');
    list.replaceChildren();
    for (const [name, value] of facts) {
      const dt = document.createElement('dt');
      dt.textContent = name;
      const dd = document.createElement('dd');
      dd.textContent = value;
      if (name === 'trace' && q.trace_id && traceUrl) {
        const link = document.createElement('a');
        link.className = 'trace';
        link.href = traceUrl.replace('{trace_id}', encodeURIComponent(q.trace_id));
        link.rel = 'noreferrer';
        link.target = '_blank';
        link.textContent = 'open trace';
        dd.append(' ', link);
      }
      list.append(dt, dd);
    }
  }

  // A small line chart: one polyline per series over the window, its maximum as the scale.
  function chart(id, series, unit) {
    const svg = $(id);
    const W = 300, H = 80;
    const values = series.flatMap((s) => s.values.filter((v) => v !== null));
    const top = Math.max(1e-9, ...values);
    svg.replaceChildren();
    for (const s of series) {
      const n = s.values.length;
      const points = s.values.map((v, i) => v === null ? null
        : ((i / Math.max(1, n - 1)) * W).toFixed(1) + ',' + (H - 2 - (v / top) * (H - 6)).toFixed(1))
        .filter(Boolean).join(' ');
      const line = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
      line.setAttribute('points', points);
      line.setAttribute('fill', 'none');
      line.setAttribute('stroke', s.color);
      line.setAttribute('stroke-width', '1.5');
      line.dataset.series = s.name;
      svg.appendChild(line);
    }
    const legend = $(id + '-legend');
    legend.replaceChildren(...series.map((s) => {
      const item = document.createElement('span');
      const last = [...s.values].reverse().find((v) => v !== null);
      item.style.color = s.color;
      item.textContent = s.name + ' ' + (last === undefined ? '—' : (Math.round(last * 10) / 10) + unit);
      return item;
    }), Object.assign(document.createElement('span'), { className: 'muted', textContent: 'max ' + (Math.round(top * 10) / 10) + unit }));
  }

  async function stats() {
    let view;
    try {
      const res = await api('GET', '/admin/api/stats');
      if (!res.ok) return;
      view = await res.json();
    } catch { return; }
    const p = view.points;
    const lanes = ['interactive', 'export'];
    chart('chart-queue', lanes.map((lane) => ({ name: lane, color: COLORS[lane], values: p.map((x) => x.queued ? x.queued[lane] : null) })), '');
    chart('chart-rate', ['succeeded', 'failed', 'cancelled', 'rejected'].map((o) => ({ name: o, color: COLORS[o], values: p.map((x) => x.per_second[o]) })), '/s');
    chart('chart-latency', [['p50', 'p50_ms'], ['p99', 'p99_ms']].map(([name, key]) => ({ name, color: COLORS[name], values: p.map((x) => x[key]) })), ' ms');
    $('charts').dataset.drawn = 'true';
  }

  async function cancel(id, button) {
    button.disabled = true;
    button.textContent = 'Cancelling…';
    try {
      const res = await api('DELETE', '/admin/api/queries/' + encodeURIComponent(id));
      if (!res.ok) $('error').textContent = await reasonOf(res);
    } catch (err) {
      if (err.message !== 'signed out') $('error').textContent = err.message;
    }
    refresh();
  }

  $('login').addEventListener('submit', async (event) => {
    event.preventDefault();
    $('login-error').textContent = '';
    const res = await fetch('/admin/session', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: $('username').value, password: $('password').value }),
    });
    if (!res.ok) { $('login-error').textContent = await reasonOf(res); return; }
    $('password').value = '';
    show(await res.json());
  });
  $('signout').addEventListener('click', async () => {
    try {
      const res = await fetch('/admin/session', { method: 'DELETE', credentials: 'same-origin' });
      if (!res.ok) $('login-error').textContent = await reasonOf(res);
    } catch (err) {
      $('login-error').textContent = 'Sluice is not answering: ' + err.message;
    }
    show(null);
  });
  for (const id of ['show-finished', 'filter-user', 'filter-state', 'filter-lane']) $(id).addEventListener('change', refresh);
  $('detail-close').addEventListener('click', () => { selected = undefined; detail(); refresh(); });
  fetch('/admin/session', { credentials: 'same-origin' })
    .then((res) => (res.ok ? res.json() : null))
    .then(show, () => show(null));
})();
`;

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

/** Only this page's own script and style run; data comes from this origin only. */
export const ADMIN_PAGE_CSP = [
  "default-src 'none'",
  `script-src ${sha256(SCRIPT)}`,
  `style-src ${sha256(STYLE)}`,
  "connect-src 'self'",
  "img-src 'self' data:",
  "form-action 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** What the page shows depends on: said in attributes of its body, read by its script. */
export interface AdminPageOptions {
  /** Whether /admin/queues works here (cluster mode): no link to a page that cannot. */
  queueDashboard: boolean;
  /** SLUICE_TRACE_URL: a URL with {trace_id}, the link from a query to its trace. */
  traceUrl?: string;
}

const attribute = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function adminPageHtml(options: AdminPageOptions): string {
  const data = [
    options.queueDashboard ? ' data-queue-dashboard="true"' : '',
    options.traceUrl ? ` data-trace-url="${attribute(options.traceUrl)}"` : '',
  ].join('');
  return ADMIN_PAGE_HTML.replace('<body>', `<body${data}>`);
}

const ADMIN_PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sluice — queries</title>
<style>${STYLE}</style>
</head>
<body>
<header>
  <h1>Sluice — queued and running queries</h1>
  <span id="who"></span>
  <a id="dashboard" href="/admin/queues" hidden>queue dashboard</a>
  <button id="signout" type="button" hidden>Sign out</button>
</header>
<form id="login" hidden>
  <p>Sign in as an administrator to see and cancel everyone's queries.</p>
  <label>User name <input id="username" type="text" autocomplete="username" required></label>
  <label>Password <input id="password" type="password" autocomplete="current-password" required></label>
  <button id="signin" type="submit">Sign in</button>
  <p id="login-error" class="error" role="alert"></p>
</form>
<main id="view" hidden>
  <section id="charts" hidden>
    <figure><figcaption>Queued jobs per lane</figcaption><svg id="chart-queue" viewBox="0 0 300 80" preserveAspectRatio="none"></svg><div id="chart-queue-legend" class="legend"></div></figure>
    <figure><figcaption>Queries per second by outcome</figcaption><svg id="chart-rate" viewBox="0 0 300 80" preserveAspectRatio="none"></svg><div id="chart-rate-legend" class="legend"></div></figure>
    <figure><figcaption>Request latency p50 / p99</figcaption><svg id="chart-latency" viewBox="0 0 300 80" preserveAspectRatio="none"></svg><div id="chart-latency-legend" class="legend"></div></figure>
  </section>
  <div class="bar">
    <label><input id="show-finished" type="checkbox"> show finished queries</label>
    <label>User <select id="filter-user"><option value="">every user</option></select></label>
    <label>State <select id="filter-state"><option value="">any</option><option>queued</option><option>running</option><option>streaming</option><option>succeeded</option><option>failed</option><option>cancelled</option></select></label>
    <label>Lane <select id="filter-lane"><option value="">any</option><option>interactive</option><option>export</option></select></label>
    <span id="updated" class="muted"></span>
  </div>
  <table id="queries">
    <thead><tr><th>Query</th><th>Owner</th><th>State</th><th>Lane</th><th>Started</th><th>Duration</th><th title="queued (yellow), running (blue), streaming (green)">Phases</th><th>Rows made</th><th class="kept">Kept result</th><th>Database</th><th>Statement</th><th></th></tr></thead>
    <tbody></tbody>
  </table>
  <p id="empty" class="muted">No queued or running queries.</p>
  <p id="error" class="error" role="alert"></p>
  <section id="detail" hidden>
    <div class="bar"><strong>Query <span id="detail-id"></span></strong><button id="detail-close" type="button">Close</button></div>
    <pre id="detail-statement"></pre>
    <dl id="detail-facts"></dl>
  </section>
</main>
<script>${SCRIPT}</script>
</body>
</html>
`;
