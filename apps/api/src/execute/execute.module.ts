import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { ExecuteController } from './execute.controller';
import { ExecuteService } from './execute.service';

@Module({
  imports: [AuthModule],
  controllers: [ExecuteController],
  providers: [ExecuteService],
})
export class ExecuteModule {}
