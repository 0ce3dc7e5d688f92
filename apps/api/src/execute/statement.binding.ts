import { SluiceError } from '@app/contracts';
import {
  BoundStatement,
  InvalidParameterError,
  MissingParameterError,
  bindPlaceholders,
} from '@app/sql';

/**
 * Binds a statement's `{name}` placeholders to its params; a missing or unusable value is the
 * client's error (400), with the error code the API documents for it.
 */
export function bindStatement(
  statement: string,
  params: Record<string, unknown> | undefined,
): BoundStatement {
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
