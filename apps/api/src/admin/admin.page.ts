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
  .bar { display: flex; gap: 1.5rem; align-items: center; margin-bottom: .75rem; }
`;

const SCRIPT = `
(() => {
  'use strict';
  const FINAL = ['succeeded', 'failed', 'cancelled'];
  const $ = (id) => document.getElementById(id);
  let timer;

  // Earlier versions kept a token here: it goes.
  sessionStorage.removeItem('sluice.admin.token');
  // A body that is not the status envelope (a proxy's page): show the HTTP status instead.
  const reasonOf = async (res) => {
    try { const body = await res.json(); return body.status.reason; } catch { return res.status + ' ' + res.statusText; }
  };
  const elapsed = (ms) => {
    const s = Math.floor(ms / 1000);
    if (s < 60) return (ms / 1000).toFixed(1) + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
    return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  };
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
    $('login').hidden = signedIn;
    $('view').hidden = !signedIn;
    $('signout').hidden = !signedIn;
    $('dashboard').hidden = !(signedIn && session.admin && document.body.dataset.queueDashboard);
    me = signedIn ? session.username : undefined;
    if (signedIn) {
      $('who').textContent = 'signed in as ' + session.username + (session.admin ? ' (administrator)' : ' (not an administrator: your own queries only)');
      refresh();
      timer = setInterval(refresh, 1000);
    } else {
      $('who').textContent = '';
    }
  }

  // The cookie goes with every same-origin request under /admin; nothing else is needed.
  async function api(method, path) {
    const res = await fetch(path, { method, credentials: 'same-origin' });
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
    const all = $('show-finished').checked;
    const rows = list.filter((q) => all || !FINAL.includes(q.state));
    const body = $('queries').tBodies[0];
    body.replaceChildren();
    for (const q of rows) {
      const tr = document.createElement('tr');
      tr.dataset.queryId = q.query_id;
      tr.dataset.state = q.state;
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
      cell(tr, elapsed(q.elapsed_ms), 'num');
      // Made by the worker, and of those sent (a query nobody reads makes rows all the same).
      const made = q.rows_produced ?? q.rows;
      cell(tr, made === q.rows ? String(made) : made + ' (' + q.rows + ' sent)', 'num');
      const result = cell(tr, '', 'kept');
      if (q.result_url && q.owner === me) {
        const link = document.createElement('a');
        link.className = 'result';
        link.href = '/admin/api/queries/' + encodeURIComponent(q.query_id) + '/result';
        link.textContent = q.result_kept_until
          ? 'kept until ' + new Date(q.result_kept_until).toLocaleTimeString()
          : 'kept';
        result.appendChild(link);
      } else if (q.result_url) {
        result.textContent = q.result_kept_until
          ? 'kept until ' + new Date(q.result_kept_until).toLocaleTimeString()
          : 'kept';
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
  $('show-finished').addEventListener('change', refresh);
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
  <div class="bar">
    <label><input id="show-finished" type="checkbox"> show finished queries</label>
    <span id="updated" class="muted"></span>
  </div>
  <table id="queries">
    <thead><tr><th>Query</th><th>Owner</th><th>State</th><th>Lane</th><th>Elapsed</th><th>Rows made</th><th class="kept">Kept result</th><th>Database</th><th>Statement</th><th></th></tr></thead>
    <tbody></tbody>
  </table>
  <p id="empty" class="muted">No queued or running queries.</p>
  <p id="error" class="error" role="alert"></p>
</main>
<script>${SCRIPT}</script>
</body>
</html>
`;
