import { ArgumentMetadata, Injectable, ValidationPipe } from '@nestjs/common';
import { VALIDATION_OPTIONS, refuseHiddenFields } from './validation';

/** The global pipe: Nest's ValidationPipe, which also refuses fields class-transformer drops. */
@Injectable()
export class StrictValidationPipe extends ValidationPipe {
  constructor() {
    super(VALIDATION_OPTIONS);
  }

  override transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    const checked = metadata.type === 'body' || metadata.type === 'query';
    if (checked && typeof value === 'object' && value !== null) refuseHiddenFields(value);
    return super.transform(value, metadata) as Promise<unknown>;
  }
}
