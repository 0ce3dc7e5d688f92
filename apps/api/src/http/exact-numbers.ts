/**
 * JSON numbers that a double does not hold exactly. JSON.parse would round them silently
 * (`9007199254740993` → 9007199254740992, `0.12345678901234567891` → 0.12345678901234568), and a
 * parameter would then be bound to a value nobody sent.
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

/** The first number literal of JSON text that a double does not hold exactly, or undefined. */
export function inexactNumber(json: string): string | undefined {
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (inString) {
      if (c === 92)
        i++; // backslash: skip the escaped character
      else if (c === 34) inString = false;
    } else if (c === 34) {
      inString = true;
    } else if (c === 45 || (c >= 48 && c <= 57)) {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(json);
      if (!m) continue;
      // Up to 15 significant digits and a small exponent always round-trip: skip the work.
      if (m[0].length > 15 && !isExactNumber(m[0])) return m[0];
      if (m[0].length <= 15 && /[eE]/.test(m[0]) && !isExactNumber(m[0])) return m[0];
      i += m[0].length - 1;
    }
  }
  return undefined;
}

export function inexactNumberReason(literal: string): string {
  return (
    `the JSON number ${literal.slice(0, 64)} has more precision or range than a double holds ` +
    'and would be changed: send it as a string (cast it in the statement, e.g. {x}::numeric)'
  );
}
