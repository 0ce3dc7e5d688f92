import { Controller, Get, Header } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { ADMIN_PAGE_CSP, ADMIN_PAGE_HTML } from './admin.page';

/**
 * The query view for administrators. The page itself is public static HTML: it signs in with
 * POST /admin/session (an HttpOnly cookie scoped to /admin) and every call it makes for data is
 * authenticated by that cookie.
 */
@ApiExcludeController()
@Controller('admin')
export class AdminPageController {
  @Get()
  @Header('content-type', 'text/html; charset=utf-8')
  @Header('content-security-policy', ADMIN_PAGE_CSP)
  @Header('cache-control', 'no-cache')
  @Header('x-content-type-options', 'nosniff')
  @Header('referrer-policy', 'no-referrer')
  page(): string {
    return ADMIN_PAGE_HTML;
  }
}
