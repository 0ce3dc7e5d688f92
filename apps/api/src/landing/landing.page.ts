import { createHash } from 'node:crypto';

// What a browser sees at /: where to go next. One static page, no data and no credential; its
// only script writes the page's own address into the commands (as text, never as HTML).

const STYLE = `
  :root { font: 15px/1.5 system-ui, sans-serif; color: #1d2330; background: #f6f7f9; }
  body { margin: 0 auto; max-width: 44rem; padding: 1.5rem 1.25rem; }
  h1 { margin: 0 0 .25rem; } h2 { font-size: 1.05rem; margin: 1.5rem 0 .5rem; }
  a { color: #1f5fbf; }
  code, pre { font-family: ui-monospace, monospace; background: #eceff3; border-radius: 4px; }
  code { padding: .05rem .3rem; } pre { padding: .6rem .8rem; overflow-x: auto; }
  .muted { color: #6b7385; }
`;

const SCRIPT = `document.querySelectorAll('.origin').forEach((e) => { e.textContent = location.origin; });`;

function sha256(text: string): string {
  return `'sha256-${createHash('sha256').update(text).digest('base64')}'`;
}

/** The landing page for browsers at /. */
export const LANDING_PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sluice</title>
<style>${STYLE}</style>
</head>
<body>
<h1>Sluice</h1>
<p class="muted">SQL over HTTP for PostgreSQL. This address serves the API; here is where to go from a browser.</p>
<h2>In the browser</h2>
<ul>
<li><a href="/admin">/admin</a>: the query view, queued and running queries (administrators sign in there)</li>
<li><a href="/docs">/docs</a>: the HTTP API, browsable, with <a href="/openapi.json">/openapi.json</a> its OpenAPI description</li>
</ul>
<h2>From a terminal</h2>
<p>The <code>sluice</code> command, from a checkout of Sluice (<code>npx sluice help</code> lists every command):</p>
<pre>npx sluice login --url <span class="origin">http://127.0.0.1:8080</span> --user admin
npx sluice query "select 1"</pre>
<p>Or with curl: <code>POST /v1/login</code> for a token, then <code>POST /v1/execute</code> with
<code>{"statement":"…"}</code> and the token as <code>Authorization: Bearer …</code>.</p>
<h2>Documentation</h2>
<p>In the checkout: <code>README.md</code> (quick start), <code>docs/api.md</code> (the HTTP API and its error codes),
<code>docs/cli.md</code> (the <code>sluice</code> command) and <code>docs/architecture.md</code> (for operators: processes, configuration).</p>
<script>${SCRIPT}</script>
</body>
</html>
`;

/** Nothing but the page's own style and script, and links to its own origin. */
export const LANDING_PAGE_CSP = [
  "default-src 'none'",
  `script-src ${sha256(SCRIPT)}`,
  `style-src ${sha256(STYLE)}`,
  "form-action 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');
