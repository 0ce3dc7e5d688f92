import { ValidationError, ValidationPipeOptions } from '@nestjs/common';
import { plainToInstance } from 'class-transformer';
import { validate } from 'class-validator';
import { SluiceError } from '@app/contracts';
import { acceptedAs } from '@app/http-contracts';

function messages(errors: ValidationError[], path = ''): string[] {
  return errors.flatMap((e) => {
    const at = path ? `${path}.${e.property}` : e.property;
    const own = Object.values(e.constraints ?? {}).map((m) =>
      m.startsWith('property ')
        ? m.replace(/^property (\S+) should not exist$/, 'unknown field $1')
        : m,
    );
    return [...own, ...messages(e.children ?? [], at)];
  });
}

/** The one validation setup: unknown fields rejected, no implicit type conversion. */
export const VALIDATION_OPTIONS: ValidationPipeOptions = {
  whitelist: true,
  forbidNonWhitelisted: true,
  forbidUnknownValues: true,
  transform: true,
  validateCustomDecorators: false,
  exceptionFactory: (errors) => new SluiceError('INVALID_REQUEST', messages(errors).join('; ')),
};

/**
 * class-transformer drops fields named after object internals without a word, so that no
 * whitelist ever sees them: they are refused here like any other unknown field.
 */
export function refuseHiddenFields(plain: object): void {
  const hidden = ['__proto__', 'constructor', 'prototype'].find((key) => Object.hasOwn(plain, key));
  if (hidden !== undefined) throw new SluiceError('INVALID_REQUEST', `unknown field ${hidden}`);
}

/** Validates a plain object against a DTO class as the global pipe would. */
export async function validateAs<T extends object>(cls: new () => T, plain: unknown): Promise<T> {
  if (typeof plain !== 'object' || plain === null || Array.isArray(plain)) {
    throw new SluiceError('INVALID_REQUEST', 'request must be a JSON object');
  }
  refuseHiddenFields(plain);
  // Accepted as it is by its fields' own tests: class-validator would find nothing.
  if (acceptedAs(cls, plain)) return Object.assign(new cls(), plain);
  const instance = plainToInstance(cls, plain);
  const errors = await validate(instance, {
    whitelist: true,
    forbidNonWhitelisted: true,
    forbidUnknownValues: true,
  });
  if (errors.length > 0) throw new SluiceError('INVALID_REQUEST', messages(errors).join('; '));
  return instance;
}
