import { SluiceError } from '@app/contracts';
import {
  BoundStatement,
  InvalidParameterError,
  MissingParameterError,
  bindPlaceholders,
} from '@app/sql';

/**
 * A UTF-16 surrogate with no pair: a JSON escape such as `\ud800` makes one. It is no character,
 * and would reach PostgreSQL as U+FFFD, a statement or value nobody sent.
 */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

const loneSurrogate = (where: string) =>
  new SluiceError(
    'INVALID_REQUEST',
    `${where} holds a lone UTF-16 surrogate (an escape such as \\ud800 without its pair), which is no character`,
  );

/**
 * Binds a statement's `{name}` placeholders to its params; a missing or unusable value is the
 * client's error (400), with the error code the API documents for it, and so is text that is not
 * made of characters.
 */
export function bindStatement(
  statement: string,
  params: Record<string, unknown> | undefined,
): BoundStatement {
  const bound = bind(statement, params);
  if (LONE_SURROGATE.test(bound.text)) throw loneSurrogate('the statement');
  bound.values.forEach((value, i) => {
    if (value !== null && LONE_SURROGATE.test(value)) {
      throw loneSurrogate(`the value of parameter {${bound.names[i]}}`);
    }
  });
  return bound;
}

function bind(statement: string, params: Record<string, unknown> | undefined): BoundStatement {
  try {
    return bindPlaceholders(statement, params);
  } catch (err) {
    if (err instanceof MissingParameterError) {
      throw new SluiceError('MISSING_PARAMETER', `no value for parameter {${err.parameter}}`);
    }
    if (err instanceof InvalidParameterError) {
      throw new SluiceError('INVALID_REQUEST', err.message);
    }
    throw err;
  }
}
