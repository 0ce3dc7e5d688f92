import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional, ApiPropertyOptions } from '@nestjs/swagger';
import {
  IsBoolean,
  IsIn,
  IsInt,
  IsNotEmpty,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
  ValidateIf,
} from 'class-validator';

/**
 * The fields of request DTOs, each declared once: one decorator gives a field both its checks
 * (class-validator, whose messages are the 400 answers) and its OpenAPI schema (@nestjs/swagger),
 * from the same limits, so the two cannot drift apart. ExecuteQueryPipe reads the field types of
 * a GET from the checks these put in class-validator's metadata.
 */

/**
 * Whether a field may be left out, and whether `null` then counts as left out (`absent-or-null`,
 * class-validator's IsOptional) or is refused like any value of the wrong type (`absent`).
 */
type Presence = 'required' | 'absent' | 'absent-or-null';

/** What OpenAPI says of a field besides its type and limits. */
interface FieldDoc {
  description?: string;
  example?: unknown;
  default?: unknown;
}

interface Field extends FieldDoc {
  presence?: Presence;
}

function presence(field: Field): PropertyDecorator[] {
  switch (field.presence ?? 'required') {
    case 'required':
      return [];
    case 'absent':
      return [ValidateIf((_: object, value: unknown) => value !== undefined)];
    case 'absent-or-null':
      return [IsOptional()];
  }
}

/**
 * One field: its OpenAPI schema, then its checks in the order they are written (they run, and
 * their messages come, in that order: applied last to first, as stacked decorators are).
 */
function field(
  field: Field,
  schema: ApiPropertyOptions,
  checks: PropertyDecorator[],
): PropertyDecorator {
  const { description, example, default: byDefault } = field;
  const documented = { description, example, default: byDefault, ...schema };
  const shown = Object.fromEntries(
    Object.entries(documented).filter(([, value]) => value !== undefined),
  ) as ApiPropertyOptions;
  const required = (field.presence ?? 'required') === 'required';
  return applyDecorators(
    required ? ApiProperty(shown) : ApiPropertyOptional(shown),
    ...[...presence(field), ...checks].reverse(),
  );
}

/**
 * A string: at least `minLength` (or one character, `notEmpty`), at most `maxLength`, matching
 * `pattern` when given (its message the 400 answer's).
 */
export function TextField(
  options: Field & {
    minLength?: number;
    notEmpty?: boolean;
    maxLength?: number;
    pattern?: { regex: RegExp; message: string };
  },
): PropertyDecorator {
  const { minLength, notEmpty, maxLength, pattern } = options;
  return field(
    options,
    {
      type: 'string',
      minLength: minLength ?? (notEmpty ? 1 : undefined),
      maxLength,
      pattern: pattern?.regex.source,
    },
    [
      IsString(),
      ...(minLength !== undefined ? [MinLength(minLength)] : []),
      ...(notEmpty ? [IsNotEmpty()] : []),
      ...(maxLength !== undefined ? [MaxLength(maxLength)] : []),
      ...(pattern ? [Matches(pattern.regex, { message: pattern.message })] : []),
    ],
  );
}

/** A whole number from `min` to `max`. */
export function IntegerField(options: Field & { min: number; max: number }): PropertyDecorator {
  const { min, max } = options;
  return field(options, { type: 'integer', minimum: min, maximum: max }, [
    IsInt(),
    Min(min),
    Max(max),
  ]);
}

/** One of a closed set of strings. */
export function ChoiceField(values: readonly string[], options: Field = {}): PropertyDecorator {
  return field(options, { type: 'string', enum: [...values] }, [IsIn(values)]);
}

/** `true` or `false`. */
export function FlagField(options: Field = {}): PropertyDecorator {
  return field(options, { type: 'boolean' }, [IsBoolean()]);
}

/** A JSON object of any keys. */
export function ObjectField(options: Field = {}): PropertyDecorator {
  return field(options, { type: 'object', additionalProperties: true }, [IsObject()]);
}
