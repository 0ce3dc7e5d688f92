// Hand-written parsers of PostgreSQL's text output against the kept libraries that do the same:
// array text (`{…}`) → postgres-array, bytea text (`\x…`, escape) → postgres-bytea. In process,
// no database: each case decodes BENCH_VALUES values (1,000,000 by default) as PostgreSQL prints
// them, BENCH_RUNS times per implementation, alternating, and the best time is reported: CPU time
// of the process (user + system), which other load on a shared machine disturbs far less than
// wall time, and which only ever adds to.
//
//   node bench/pg-text-libraries.mjs
//
// `hand-written` is a copy of what libs/formats and libs/sql had before issue 12 (helpers inlined), kept
// here so the comparison can be re-run; `sluice` is what dist/ has now (`npm run build` first).
// Figures and the choice they led to: PG-TEXT.md.
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { envInt, hardTimeLimit, requireDist, yieldToTimers } from './lib/env.mjs';

const require = createRequire(import.meta.url);
const postgresArray = require('postgres-array');
const postgresBytea = require('postgres-bytea');
const formats = requireDist('libs/formats/src/pg-text.decoder.js');
const jsonValues = requireDist('libs/sql/src/json-value.encoder.js');

const VALUES = envInt('BENCH_VALUES', 1_000_000);
const RUNS = envInt('BENCH_RUNS', 5);
// About 4 min with the defaults (48 s a run of a million values); twice that, and 2 min to spare.
hardTimeLimit(Math.ceil((RUNS * VALUES) / 1e6) * 100_000 + 120_000);

// ---- hand-written, before issue 12 (libs/formats/src/pg-text.decoder.ts) ----

function handParseArray(text, delimiter = ',') {
  let i = text.charCodeAt(0) === 91 ? text.indexOf('=') + 1 : 0;
  const delim = delimiter.charCodeAt(0);
  const root = [];
  const stack = [];
  let current = root;
  i++;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 123) {
      const inner = [];
      current.push(inner);
      stack.push(current);
      current = inner;
      i++;
    } else if (c === 125) {
      const outer = stack.pop();
      if (outer === undefined) break;
      current = outer;
      i++;
    } else if (c === delim || c === 32) {
      i++;
    } else if (c === 34) {
      let value = '';
      let from = ++i;
      for (;;) {
        const q = text.charCodeAt(i);
        if (q === 34) break;
        if (q === 92) {
          value += text.substring(from, i);
          from = ++i;
        }
        i++;
        if (i > text.length) throw new Error('unterminated quoted array element');
      }
      current.push(value + text.substring(from, i));
      i++;
    } else {
      let value = '';
      let from = i;
      let escaped = false;
      for (;;) {
        const u = text.charCodeAt(i);
        if (u === delim || u === 125 || Number.isNaN(u)) break;
        if (u === 92) {
          value += text.substring(from, i);
          from = ++i;
          escaped = true;
        }
        i++;
      }
      value += text.substring(from, i);
      const isNull = !escaped && value.length === 4 && value.toUpperCase() === 'NULL';
      current.push(isNull ? null : value);
    }
  }
  return root;
}

function flatten(array) {
  for (const e of array) if (Array.isArray(e)) return array.flat(Infinity);
  return array;
}

function handDecodeBytea(text) {
  if (text.charCodeAt(0) === 92 && text.charCodeAt(1) === 120) {
    return Buffer.from(text.substring(2), 'hex');
  }
  const out = Buffer.allocUnsafe(text.length);
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 92) {
      out[n++] = c;
    } else if (text.charCodeAt(i + 1) === 92) {
      out[n++] = 92;
      i++;
    } else {
      out[n++] =
        ((text.charCodeAt(i + 1) - 48) << 6) |
        ((text.charCodeAt(i + 2) - 48) << 3) |
        (text.charCodeAt(i + 3) - 48);
      i += 3;
    }
  }
  return out.subarray(0, n);
}

// ---- hand-written, before issue 12 (libs/sql/src/json-value.encoder.ts, braces only) ----

function handEncodeArrayText(text, element, delim) {
  const n = text.length;
  if (n === 0) return '[]';
  let i = text.charCodeAt(0) === 91 ? text.indexOf('=') + 1 : 0;
  let out = '';
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 123) {
      out += '[';
      i++;
    } else if (c === 125) {
      out += ']';
      i++;
    } else if (c === delim) {
      out += ',';
      i++;
    } else if (c === 34) {
      let value = '';
      let start = i + 1;
      let j = start;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d === 34) break;
        if (d === 92) {
          value += text.slice(start, j);
          start = j + 1;
          j += 2;
        } else {
          j++;
        }
      }
      value += text.slice(start, j);
      out += element(value);
      i = j + 1;
    } else {
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d === delim || d === 125) break;
        j++;
      }
      const value = text.slice(i, j);
      out += value === 'NULL' ? 'null' : element(value);
      i = j;
    }
  }
  return out;
}

// postgres-array's parse(text, element) then the nested lists joined into JSON text.
function joinJson(array) {
  let out = '[';
  for (let k = 0; k < array.length; k++) {
    if (k > 0) out += ',';
    const e = array[k];
    out += e === null ? 'null' : typeof e === 'string' ? e : joinJson(e);
  }
  return out + ']';
}

// postgres-array's parse(text) (no transform: parse() then makes no parser per call), each
// element encoded while the lists are joined.
function encodeJoin(array, element) {
  let out = '[';
  for (let k = 0; k < array.length; k++) {
    if (k > 0) out += ',';
    const e = array[k];
    out += e === null ? 'null' : typeof e === 'string' ? element(e) : encodeJoin(e, element);
  }
  return out + ']';
}

// ---- inputs, as PostgreSQL prints them ----

function ints(i) {
  return `{${i},${-i * 7},${i * 131},NULL,${i % 1000}}`;
}
function texts(i) {
  return `{abc${i},"with space","quo\\"te ${i}",héllo,NULL,"a,b"}`;
}
function nested(i) {
  return `{{${i},${i + 1},${i + 2}},{${i + 3},NULL,${i + 5}}}`;
}
function hex(i) {
  return '\\x' + (i.toString(16).padStart(8, '0') + 'deadbeef').repeat(2);
}
function escape(i) {
  return `ab\\000\\\\c${i}\\377\\012xyz`;
}

const encodeString = (t) => JSON.stringify(t);
// The encoders write each value into a page of the column (libs/formats' writeBytea).
const page = Buffer.alloc(1024);
// A type lookup that knows one array type (the element types are built in).
const arrayOf = (elem) => (oid) =>
  oid === 1007 || oid === 1009 ? { oid, typtype: 'b', elem, baseType: 0, delim: ',' } : undefined;
const encodeRaw = (t) => t;

const cases = [
  [
    'array int → elements',
    ints,
    {
      'hand-written': (t) => flatten(handParseArray(t)),
      'postgres-array': (t) => flatten(postgresArray.parse(t)),
      sluice: (t) => formats.flattenArray(formats.parseArray(t)),
    },
  ],
  [
    'array text → elements',
    texts,
    {
      'hand-written': (t) => flatten(handParseArray(t)),
      'postgres-array': (t) => flatten(postgresArray.parse(t)),
      sluice: (t) => formats.flattenArray(formats.parseArray(t)),
    },
  ],
  [
    'array 2-D int → elements',
    nested,
    {
      'hand-written': (t) => flatten(handParseArray(t)),
      'postgres-array': (t) => flatten(postgresArray.parse(t)),
      sluice: (t) => formats.flattenArray(formats.parseArray(t)),
    },
  ],
  [
    'array int → JSON',
    ints,
    {
      'hand-written': (t) => handEncodeArrayText(t, encodeRaw, 44),
      'postgres-array': (t) => joinJson(postgresArray.parse(t, encodeRaw)),
      'postgres-array, then encode': (t) => encodeJoin(postgresArray.parse(t), encodeRaw),
      sluice: jsonValues.jsonValueEncoder(1007, arrayOf(23)),
    },
  ],
  [
    'array text → JSON',
    texts,
    {
      'hand-written': (t) => handEncodeArrayText(t, encodeString, 44),
      'postgres-array': (t) => joinJson(postgresArray.parse(t, encodeString)),
      'postgres-array, then encode': (t) => encodeJoin(postgresArray.parse(t), encodeString),
      sluice: jsonValues.jsonValueEncoder(1009, arrayOf(25)),
    },
  ],
  [
    'array 2-D int → JSON',
    nested,
    {
      'hand-written': (t) => handEncodeArrayText(t, encodeRaw, 44),
      'postgres-array': (t) => joinJson(postgresArray.parse(t, encodeRaw)),
      'postgres-array, then encode': (t) => encodeJoin(postgresArray.parse(t), encodeRaw),
      sluice: jsonValues.jsonValueEncoder(1007, arrayOf(23)),
    },
  ],
  [
    'bytea hex',
    hex,
    {
      'hand-written': handDecodeBytea,
      'postgres-bytea': (t) => postgresBytea(t),
      sluice: formats.decodeBytea,
    },
  ],
  [
    'bytea hex → page buffer',
    hex,
    {
      'hand-written': (t) => handDecodeBytea(t).copy(page, 0),
      'postgres-bytea': (t) => postgresBytea(t).copy(page, 0),
      sluice: (t) => formats.writeBytea(page, t, 0),
    },
  ],
  [
    'bytea escape → page buffer',
    escape,
    {
      'hand-written': (t) => handDecodeBytea(t).copy(page, 0),
      'postgres-bytea': (t) => postgresBytea(t).copy(page, 0),
      sluice: (t) => formats.writeBytea(page, t, 0),
    },
  ],
  [
    'bytea escape',
    escape,
    {
      'hand-written': handDecodeBytea,
      'postgres-bytea': (t) => postgresBytea(t),
      sluice: formats.decodeBytea,
    },
  ],
];

function same(a, b) {
  return (
    JSON.stringify(a, (_k, v) =>
      Buffer.isBuffer(v) || v?.type === 'Buffer' ? Buffer.from(v).toString('hex') : v,
    ) ===
    JSON.stringify(b, (_k, v) =>
      Buffer.isBuffer(v) || v?.type === 'Buffer' ? Buffer.from(v).toString('hex') : v,
    )
  );
}

console.log(`# ${VALUES} values per case, best of ${RUNS} runs per implementation`);
console.log(
  `# ${cpus().length} × ${cpus()[0].model}, Node ${process.version}, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
console.log('');
console.log('| case | implementation | CPU ms | values/s | vs hand-written |');
console.log('|---|---|---:|---:|---:|');
for (const [name, make, impls] of cases) {
  await yieldToTimers();
  const inputs = Array.from({ length: VALUES }, (_v, i) => make(i));
  const names = Object.keys(impls).filter((k) => impls[k] !== undefined);
  // Every implementation must agree before its time counts.
  for (const input of inputs.slice(0, 1000)) {
    const want = impls['hand-written'](input);
    for (const k of names) {
      if (typeof want === 'number') continue; // writes into `page`: checked by the cases above
      if (!same(impls[k](input), want)) {
        throw new Error(`${name}: ${k} differs on ${input}: ${JSON.stringify(impls[k](input))}`);
      }
    }
  }
  const best = Object.fromEntries(names.map((k) => [k, Infinity]));
  let sink = 0;
  for (let run = 0; run < RUNS; run++) {
    for (const k of names) {
      // The decoding is synchronous: the hard limit's timer can fire only here.
      await yieldToTimers();
      const f = impls[k];
      const t0 = process.cpuUsage();
      for (let i = 0; i < inputs.length; i++) {
        const out = f(inputs[i]);
        sink += typeof out === 'number' ? out : out.length;
      }
      const used = process.cpuUsage(t0);
      const ms = (used.user + used.system) / 1000;
      if (ms < best[k]) best[k] = ms;
    }
  }
  if (sink === 0) throw new Error('nothing decoded');
  for (const k of names) {
    const ratio = best[k] / best['hand-written'];
    console.log(
      `| ${name} | ${k} | ${best[k].toFixed(0)} | ${Math.round((VALUES / best[k]) * 1000).toLocaleString('en-US')} | ${ratio.toFixed(2)}× |`,
    );
  }
}
