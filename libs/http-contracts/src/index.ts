export * from './execute-request.dto';
export * from './login.dto';
export * from './admin-session.dto';
export * from './user.dto';
export * from './request.fields';
