import { DynamicModule, Global, Module } from '@nestjs/common';
import { SluiceConfig } from './sluice.config';

/** Injection token of the validated SluiceConfig. */
export const SLUICE_CONFIG = Symbol('SLUICE_CONFIG');

/** Provides the configuration that main.ts validated before Nest started. */
@Global()
@Module({})
export class ConfigModule {
  static forRoot(config: SluiceConfig): DynamicModule {
    return {
      module: ConfigModule,
      providers: [{ provide: SLUICE_CONFIG, useValue: config }],
      exports: [SLUICE_CONFIG],
    };
  }
}
