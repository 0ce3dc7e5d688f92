import { Controller, Get, Header, Inject } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { SLUICE_CONFIG, SluiceConfig, isStandalone } from '@app/config';
import { ADMIN_PAGE_CSP, adminPageHtml } from './admin.page';

/**
 * The query view for administrators. The page itself is public static HTML: it signs in with
 * POST /admin/session (an HttpOnly cookie scoped to /admin) and every call it makes for data is
 * authenticated by that cookie.
 */
@ApiExcludeController()
@Controller('admin')
export class AdminPageController {
  private readonly html: string;

  constructor(@Inject(SLUICE_CONFIG) config: SluiceConfig) {
    this.html = adminPageHtml({
      // Standalone mode has no BullMQ queue: its dashboard could only answer with an error.
      queueDashboard: !isStandalone(config),
      traceUrl: config.traceUrl,
    });
  }

  @Get()
  @Header('content-type', 'text/html; charset=utf-8')
  @Header('content-security-policy', ADMIN_PAGE_CSP)
  @Header('cache-control', 'no-cache')
  @Header('x-content-type-options', 'nosniff')
  @Header('referrer-policy', 'no-referrer')
  page(): string {
    return this.html;
  }
}
