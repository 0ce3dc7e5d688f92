import { SluiceError } from '@app/contracts';

/**
 * The one scan of JSON text before it is parsed, for bodies and for `params` in a query string.
 * It finds what JSON.parse would choke on or take in silence and Sluice must not: nesting deeper
 * than a limit (a parser recursing that deep overflows its stack), numbers a double does not hold
 * exactly, and keys given twice in one object. JSON.parse rounds the first
 * (`9007199254740993` → 9007199254740992, `0.12345678901234567891` → 0.12345678901234568), so a
 * parameter would be bound to a value nobody sent; of the second it keeps the last, where a proxy
 * or an audit log in front of Sluice may read the first (`{"statement":"select 1","statement":…}`).
 */

/** `[sign]digits` with no leading or trailing zeros and the exponent of its last digit. */
function canonical(text: string): string {
  const m = /^(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!m) return text;
  let digits = (m[2] ?? '') + (m[3] ?? '');
  let exponent = Number(m[4] ?? 0) - (m[3] ?? '').length;
  digits = digits.replace(/^0+/, '');
  if (digits === '') return '0';
  const trailing = digits.length - digits.replace(/0+$/, '').length;
  digits = digits.slice(0, digits.length - trailing);
  exponent += trailing;
  return `${m[1]}${digits}e${exponent}`;
}

/** Whether a JSON number literal reads back from a double as the same decimal value. */
export function isExactNumber(literal: string): boolean {
  const value = Number(literal);
  return Number.isFinite(value) && canonical(String(value)) === canonical(literal);
}

const NUMBER = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const QUOTE = 34;
const BACKSLASH = 92;

/** Keys seen in an open object (undefined: an array), and whether the next string is a key. */
interface Frame {
  keys: Set<string> | undefined;
  keyNext: boolean;
}

/** The key a string literal of JSON text spells (escapes decoded), or undefined if it is not one. */
function keyOf(literal: string): string | undefined {
  if (!literal.includes('\\')) return literal.slice(1, -1);
  try {
    return JSON.parse(literal) as string;
  } catch {
    return undefined; // not valid JSON: the parser says so
  }
}

function numberProblem(literal: string): string | undefined {
  // Up to 15 significant digits and no exponent always round-trip: skip the work.
  if (literal.length <= 15 && !/[eE]/.test(literal)) return undefined;
  if (isExactNumber(literal)) return undefined;
  return (
    `the JSON number ${literal.slice(0, 64)} has more precision or range than a double holds ` +
    'and would be changed: send it as a string (cast it in the statement, e.g. {x}::numeric)'
  );
}

/** A problem found in JSON text: its error code and what to tell the client. */
interface Problem {
  code: 'INVALID_REQUEST' | 'LIMIT_EXCEEDED';
  message: string;
}

function scan(json: string, maxDepth: number): Problem | undefined {
  const frames: Frame[] = [];
  let frame: Frame | undefined;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c === QUOTE) {
      const start = i;
      for (i++; i < json.length; i++) {
        const d = json.charCodeAt(i);
        if (d === BACKSLASH) i++;
        else if (d === QUOTE) break;
      }
      if (frame?.keys && frame.keyNext) {
        const key = keyOf(json.slice(start, i + 1));
        if (key === undefined) return undefined;
        const message =
          key === '__proto__'
            ? 'the JSON key "__proto__" is not accepted'
            : frame.keys.has(key)
              ? `the JSON key "${key.slice(0, 64)}" is given twice`
              : undefined;
        if (message) return { code: 'INVALID_REQUEST', message };
        frame.keys.add(key);
        frame.keyNext = false;
      }
    } else if (c === 123 || c === 91) {
      // { or [
      if (frame) frames.push(frame);
      if (frames.length >= maxDepth) {
        return { code: 'LIMIT_EXCEEDED', message: `JSON nested deeper than ${maxDepth} levels` };
      }
      frame = { keys: c === 123 ? new Set() : undefined, keyNext: true };
    } else if (c === 125 || c === 93) {
      // } or ]
      frame = frames.pop();
    } else if (c === 44) {
      // , : in an object, a key comes next
      if (frame) frame.keyNext = true;
    } else if (c === 45 || (c >= 48 && c <= 57)) {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(json);
      if (!m) continue;
      const message = numberProblem(m[0]);
      if (message) return { code: 'INVALID_REQUEST', message };
      i += m[0].length - 1;
    }
  }
  return undefined;
}

/**
 * Why JSON text must be refused although JSON.parse would take it, or undefined. Text that is not
 * JSON at all passes: the parser refuses it after.
 */
export function jsonTextProblem(json: string): string | undefined {
  return scan(json, Infinity)?.message;
}

/**
 * The error to answer JSON text with before it is parsed: nested deeper than `maxDepth` (413), or
 * a problem of jsonTextProblem's (400); undefined for text the parser may have.
 */
export function jsonTextError(json: string, maxDepth: number): SluiceError | undefined {
  const problem = scan(json, maxDepth);
  return problem && new SluiceError(problem.code, problem.message);
}
