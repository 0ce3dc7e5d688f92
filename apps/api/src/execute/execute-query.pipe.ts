import { Injectable, PipeTransform } from '@nestjs/common';
import { ExecuteRequestDto } from '@app/http-contracts';
import { validateAs } from '../http/validation';
import { optionsFromQuery } from './query-options';

/** GET /v1/execute: the query string is the request. */
@Injectable()
export class ExecuteQueryPipe implements PipeTransform<
  Record<string, unknown>,
  Promise<ExecuteRequestDto>
> {
  transform(query: Record<string, unknown>): Promise<ExecuteRequestDto> {
    return validateAs(ExecuteRequestDto, optionsFromQuery(query ?? {}));
  }
}
