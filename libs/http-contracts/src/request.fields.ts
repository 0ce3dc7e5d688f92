import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional, ApiPropertyOptions } from '@nestjs/swagger';
import {
  getMetadataStorage,
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
 * What a field's checks accept, as one test that allocates nothing: true only for a value that
 * passes every check class-validator runs for the field (false may still pass: it decides then).
 */
type Accepts = (value: unknown) => boolean;

/** A field's test, and how many validation metadata its decorators gave class-validator. */
interface Acceptance {
  accepts: Accepts;
  metadata: number;
}

/** The fields' tests of each DTO class, declared with the fields themselves. */
const ACCEPTANCE = new Map<object, Map<string, Acceptance>>();

function withPresence(field: Field, accepts: Accepts): Accepts {
  switch (field.presence ?? 'required') {
    case 'required':
      return accepts;
    case 'absent':
      return (value) => value === undefined || accepts(value);
    case 'absent-or-null':
      return (value) => value === undefined || value === null || accepts(value);
  }
}

/**
 * One field: its OpenAPI schema, then its checks in the order they are written (they run, and
 * their messages come, in that order: applied last to first, as stacked decorators are), and the
 * test that accepts what they accept (acceptedAs).
 */
function field(
  field: Field,
  schema: ApiPropertyOptions,
  checks: PropertyDecorator[],
  accepts: Accepts,
): PropertyDecorator {
  const { description, example, default: byDefault } = field;
  const documented = { description, example, default: byDefault, ...schema };
  const shown = Object.fromEntries(
    Object.entries(documented).filter(([, value]) => value !== undefined),
  ) as ApiPropertyOptions;
  const required = (field.presence ?? 'required') === 'required';
  const validations = [...presence(field), ...checks];
  const decorate = applyDecorators(
    required ? ApiProperty(shown) : ApiPropertyOptional(shown),
    ...validations.reverse(),
  );
  return (target: object, key: string | symbol) => {
    decorate(target, key);
    const fields = ACCEPTANCE.get(target.constructor) ?? new Map<string, Acceptance>();
    ACCEPTANCE.set(target.constructor, fields);
    fields.set(String(key), {
      accepts: withPresence(field, accepts),
      metadata: validations.length,
    });
  };
}

/**
 * The fields' tests of `cls`, or none when class-validator holds a check of it that no field
 * declared here made (a decorator of its own, an inherited field): its checks alone then decide.
 */
function acceptanceOf(cls: object): Map<string, Acceptance> | undefined {
  const fields = ACCEPTANCE.get(cls);
  if (!fields) return undefined;
  const counts = new Map<string, number>();
  const metadata = getMetadataStorage().getTargetValidationMetadatas(
    cls as new () => object,
    '',
    true,
    false,
  );
  for (const m of metadata) counts.set(m.propertyName, (counts.get(m.propertyName) ?? 0) + 1);
  for (const [name, count] of counts) {
    if (fields.get(name)?.metadata !== count) return undefined;
  }
  return fields;
}

const CHECKED = new Map<object, Map<string, Acceptance> | null>();

/**
 * Whether `plain` is a valid request of the DTO `cls` by the tests declared with its fields: true
 * only when class-validator (with whitelist and forbidNonWhitelisted) would find no error, so that
 * a valid request needs none of its work; false when it may find one, which it then says.
 */
export function acceptedAs(cls: object, plain: object): boolean {
  let fields = CHECKED.get(cls);
  if (fields === undefined) {
    fields = acceptanceOf(cls) ?? null;
    CHECKED.set(cls, fields);
  }
  if (fields === null) return false;
  for (const key in plain) {
    if (!Object.hasOwn(plain, key) || !fields.has(key)) return false;
  }
  for (const [key, { accepts }] of fields) {
    if (!accepts((plain as Record<string, unknown>)[key])) return false;
  }
  return true;
}

/** Whether every UTF-16 unit of `text` is one character to validator.js's isLength. */
function plainUnits(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) >= 0xd800) return false;
  return true;
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
    (value) =>
      typeof value === 'string' &&
      (minLength === undefined || (value.length >= minLength && plainUnits(value))) &&
      (!notEmpty || value !== '') &&
      (maxLength === undefined || value.length <= maxLength) &&
      (!pattern || (!pattern.regex.global && !pattern.regex.sticky && pattern.regex.test(value))),
  );
}

/** A whole number from `min` to `max`. */
export function IntegerField(options: Field & { min: number; max: number }): PropertyDecorator {
  const { min, max } = options;
  return field(
    options,
    { type: 'integer', minimum: min, maximum: max },
    [IsInt(), Min(min), Max(max)],
    (value) => Number.isInteger(value) && (value as number) >= min && (value as number) <= max,
  );
}

/** One of a closed set of strings. */
export function ChoiceField(values: readonly string[], options: Field = {}): PropertyDecorator {
  return field(options, { type: 'string', enum: [...values] }, [IsIn(values)], (value) =>
    values.includes(value as string),
  );
}

/** `true` or `false`. */
export function FlagField(options: Field = {}): PropertyDecorator {
  return field(options, { type: 'boolean' }, [IsBoolean()], (value) => typeof value === 'boolean');
}

/** A JSON object of any keys. */
export function ObjectField(options: Field = {}): PropertyDecorator {
  return field(
    options,
    { type: 'object', additionalProperties: true },
    [IsObject()],
    (value) => typeof value === 'object' && value !== null && !Array.isArray(value),
  );
}
