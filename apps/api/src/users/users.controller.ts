import {
  Body,
  Controller,
  Delete,
  Get,
  HttpCode,
  Param,
  Patch,
  Post,
  UseGuards,
} from '@nestjs/common';
import {
  ApiBasicAuth,
  ApiBearerAuth,
  ApiBody,
  ApiCreatedResponse,
  ApiOkResponse,
  ApiParam,
  ApiResponse,
  ApiTags,
} from '@nestjs/swagger';
import { okStatus } from '@app/contracts';
import {
  CREATE_USER_EXAMPLES,
  CreateUserDto,
  EXAMPLE_USER_NAME,
  StatusResponseDto,
  UPDATE_USER_EXAMPLES,
  UpdateUserDto,
  UserListDto,
  UserResponseDto,
} from '@app/http-contracts';
import { UserAdminService } from '@app/users';
import { AdminGuard } from '../auth/admin.guard';
import { AuthUser } from '../auth/auth-user';
import { CredentialsGuard } from '../auth/credentials.guard';
import { CurrentUser } from '../auth/current-user.decorator';
import { ServiceUsersGuard } from './service-users.guard';

const ENVELOPE = {
  description: 'Error envelope `{status:{reason, sql_state, vendor_code}}`.',
};

/** User management, for administrators only; absent with database users. */
@ApiTags('users')
@ApiBearerAuth()
@ApiBasicAuth()
@ApiResponse({ status: 400, ...ENVELOPE })
@ApiResponse({ status: 401, ...ENVELOPE })
@ApiResponse({ status: 403, ...ENVELOPE })
@ApiResponse({
  status: 404,
  description:
    'No such user; or database users (SLUICE_AUTH=database), which are PostgreSQL roles.',
})
@Controller('v1/users')
@UseGuards(ServiceUsersGuard, CredentialsGuard, AdminGuard)
export class UsersController {
  constructor(private readonly users: UserAdminService) {}

  @Post()
  @HttpCode(201)
  @ApiBody({ type: CreateUserDto, examples: CREATE_USER_EXAMPLES })
  @ApiCreatedResponse({ type: UserResponseDto })
  @ApiResponse({ status: 409, description: 'A user of that name exists (-311).' })
  async create(@Body() body: CreateUserDto): Promise<UserResponseDto> {
    return { ...(await this.users.create(body)), status: okStatus() };
  }

  @Get()
  @ApiOkResponse({ type: UserListDto })
  async list(): Promise<UserListDto> {
    return { users: await this.users.list(), status: okStatus() };
  }

  @Get(':name')
  @ApiOkResponse({ type: UserResponseDto })
  async get(@Param('name') name: string): Promise<UserResponseDto> {
    return { ...(await this.users.get(name)), status: okStatus() };
  }

  @Patch(':name')
  @ApiParam({ name: 'name', example: EXAMPLE_USER_NAME })
  @ApiBody({ type: UpdateUserDto, examples: UPDATE_USER_EXAMPLES })
  @ApiOkResponse({ type: UserResponseDto })
  async update(
    @Param('name') name: string,
    @Body() body: UpdateUserDto,
    @CurrentUser() actor: AuthUser,
  ): Promise<UserResponseDto> {
    return { ...(await this.users.update(name, body, actor.username)), status: okStatus() };
  }

  @Delete(':name')
  @HttpCode(200)
  @ApiOkResponse({ type: StatusResponseDto })
  async remove(
    @Param('name') name: string,
    @CurrentUser() actor: AuthUser,
  ): Promise<StatusResponseDto> {
    await this.users.remove(name, actor.username);
    return { status: okStatus('deleted') };
  }
}
