function isDigitAt(text: string, at: number): boolean {
  const c = text.charCodeAt(at);
  return c >= 48 && c <= 57;
}

/**
 * Where the year that starts a date's or timestamp's text ends, at its first '-' (4 digits, more
 * after 9999), when the text has DateStyle ISO's shape (`Y…Y-MM-DD…`: another '-' 3 places on);
 * -1 when it has not (infinity, or another DateStyle: `28.11.2026`, `11/28/2026`, `11-28-2026`).
 * A statement can change DateStyle for itself (`set_config('DateStyle', 'German', true)`). Reads
 * the month's and day's places only for that '-': a reader that parses them checks their digits.
 */
export function isoYearEnd(text: string): number {
  let y = 0;
  while (isDigitAt(text, y)) y++;
  return y >= 4 && text.charCodeAt(y) === 45 && text.charCodeAt(y + 3) === 45 ? y : -1;
}
