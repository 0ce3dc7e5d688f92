import { ArgumentMetadata, Injectable, ValidationPipe } from '@nestjs/common';
import { acceptedAs } from '@app/http-contracts';
import { VALIDATION_OPTIONS, refuseHiddenFields } from './validation';

/**
 * The global pipe: Nest's ValidationPipe, which also refuses fields class-transformer drops. A
 * request its DTO's fields accept as they are (acceptedAs: most requests) becomes the DTO without
 * class-transformer's copy and class-validator's errors made for every field and then dropped;
 * any other goes through both, whose messages are the 400 answer.
 */
@Injectable()
export class StrictValidationPipe extends ValidationPipe {
  constructor() {
    super(VALIDATION_OPTIONS);
  }

  override transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    const checked = metadata.type === 'body' || metadata.type === 'query';
    if (checked && typeof value === 'object' && value !== null) {
      refuseHiddenFields(value);
      const { metatype } = metadata;
      if (metatype && !Array.isArray(value) && acceptedAs(metatype, value)) {
        // What ValidationPipe does to a value before it validates it, done to this one too.
        this.closeArrayGaps(value);
        this.stripProtoKeys(value);
        return Promise.resolve(Object.assign(new metatype() as object, value));
      }
    }
    return super.transform(value, metadata) as Promise<unknown>;
  }
}
