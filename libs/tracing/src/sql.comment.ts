/**
 * The statement with a sqlcommenter comment (google.github.io/sqlcommenter) holding `fields`,
 * keys sorted, values URL-encoded and quoted. On a line of its own, after the statement: a
 * statement that ends in a `--` comment cannot swallow it. A value is always a traceparent or
 * tracestate, never anything of the user's.
 */
export function withSqlComment(statement: string, fields: Record<string, string>): string {
  const pairs = Object.keys(fields)
    .sort()
    .map((key) => `${encodeURIComponent(key)}='${sqlcommenterValue(fields[key])}'`);
  if (!pairs.length) return statement;
  return `${statement}\n/*${pairs.join(',')}*/`;
}

/** URL-encoded, then a quote escaped as sqlcommenter asks; an asterisk too: nothing ends the comment early. */
function sqlcommenterValue(value: string): string {
  return encodeURIComponent(value).replace(/'/g, "\\'").replace(/\*/g, '%2A');
}
