export * from './pg.login';
export * from './credential.key';
export * from './application.names';
export * from './login.role';
export * from './login-role.provisioner';
export * from './credential.seal';
export * from './pg.session';
export * from './password.request';
