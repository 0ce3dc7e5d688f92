/** The role-changing commands a statement may not be. */
export type RoleChange =
  'SET ROLE' | 'RESET ROLE' | 'SET SESSION AUTHORIZATION' | 'RESET SESSION AUTHORIZATION';

const WORDS_NEEDED = 3;

/**
 * The role-changing command a statement is, judged from its first words the way PostgreSQL's
 * grammar reads them: `SET [SESSION | LOCAL] ROLE`, `SET [SESSION | LOCAL] SESSION AUTHORIZATION`,
 * the generic `SET role = …` / `SET session_authorization TO …` (names compared case-insensitively,
 * quoted or not, as GUC names are), and their `RESET` forms. Leading blanks, comments and empty
 * statements (`;`) are skipped. A target spelled with Unicode escapes (`U&"…"`) counts as a role
 * change: it cannot be read cheaply and nobody needs it. Undefined for any other statement.
 */
export function roleChangeOf(statement: string): RoleChange | undefined {
  const words = leadingWords(statement, WORDS_NEEDED + 1);
  const [command, ...rest] = words;
  // Keywords are never quoted: `"set" role` is an identifier (and a syntax error).
  if (command?.startsWith(QUOTED)) return undefined;
  if (command === 'set') return setTarget(rest);
  if (command === 'reset') return resetTarget(rest);
  return undefined;
}

function setTarget(words: string[]): RoleChange | undefined {
  const scoped = words[0] === 'local' || (words[0] === 'session' && words[1] !== 'authorization');
  return resetTarget(scoped ? words.slice(1) : words, 'SET');
}

function resetTarget(words: string[], verb: 'SET' | 'RESET' = 'RESET'): RoleChange | undefined {
  const [first, second] = words;
  if (first === 'role' || first === UNREADABLE) return `${verb} ROLE`;
  if (first === 'session_authorization' || (first === 'session' && second === 'authorization')) {
    return `${verb} SESSION AUTHORIZATION`;
  }
  return undefined;
}

/** Stands for a word that cannot be read plainly (a Unicode-escaped identifier). */
const UNREADABLE = '\u0000unreadable';
/** Marks the first word when it was a quoted identifier. */
const QUOTED = '\u0000"';

/** Up to `count` leading words, lower-cased; quoted identifiers unquoted. */
function leadingWords(sql: string, count: number): string[] {
  const words: string[] = [];
  const len = sql.length;
  let i = 0;
  while (i < len && words.length < count) {
    const c = sql[i];
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f' || c === '\v') {
      i++;
    } else if (c === ';' && words.length === 0) {
      // Empty statements before the first word are dropped by the parser.
      i++;
    } else if (c === '-' && sql[i + 1] === '-') {
      while (i < len && sql[i] !== '\n' && sql[i] !== '\r') i++;
    } else if (c === '/' && sql[i + 1] === '*') {
      i = blockCommentEnd(sql, i + 2);
    } else if (c === '"') {
      const end = quotedEnd(sql, i + 1);
      const word = sql
        .slice(i + 1, end - 1)
        .replace(/""/g, '"')
        .toLowerCase();
      words.push(words.length === 0 ? QUOTED + word : word);
      i = end;
    } else if ((c === 'U' || c === 'u') && sql[i + 1] === '&' && sql[i + 2] === '"') {
      words.push(UNREADABLE);
      i = quotedEnd(sql, i + 3);
    } else if (isWordChar(c)) {
      let j = i + 1;
      while (j < len && (isWordChar(sql[j]) || isDigit(sql[j]) || sql[j] === '$')) j++;
      words.push(sql.slice(i, j).toLowerCase());
      i = j;
    } else {
      // Any other token (`=`, `(`, a literal) ends the words that matter.
      break;
    }
  }
  return words;
}

function blockCommentEnd(sql: string, from: number): number {
  let depth = 1;
  let i = from;
  while (i < sql.length) {
    if (sql[i] === '/' && sql[i + 1] === '*') {
      depth++;
      i += 2;
    } else if (sql[i] === '*' && sql[i + 1] === '/') {
      i += 2;
      if (--depth === 0) return i;
    } else {
      i++;
    }
  }
  return sql.length;
}

/** Index just past the closing quote of an identifier whose text starts at `from`. */
function quotedEnd(sql: string, from: number): number {
  let i = from;
  while (i < sql.length) {
    if (sql[i] === '"') {
      if (sql[i + 1] !== '"') return i + 1;
      i += 2;
    } else {
      i++;
    }
  }
  return sql.length;
}

function isWordChar(c: string): boolean {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_' || c > '\u007f';
}

function isDigit(c: string): boolean {
  return c >= '0' && c <= '9';
}
