import { ArgumentsHost, Catch, ExceptionFilter } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { toEnvelope } from './error.envelope';

/** The one global exception filter: every error leaves in the spec's status envelope. */
@Catch()
export class EnvelopeFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    const { httpStatus, headers, body } = toEnvelope(exception);
    if (reply.sent || reply.raw.headersSent) {
      reply.raw.destroy();
      return;
    }
    void reply.code(httpStatus).headers(headers).type('application/json; charset=utf-8').send(body);
  }
}
