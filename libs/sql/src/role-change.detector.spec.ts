import { roleChangeOf } from './role-change.detector';

describe('roleChangeOf', () => {
  it.each([
    ['SET ROLE postgres', 'SET ROLE'],
    ['set role none', 'SET ROLE'],
    ['SET LOCAL ROLE postgres', 'SET ROLE'],
    ['SET SESSION ROLE postgres', 'SET ROLE'],
    ['set role = postgres', 'SET ROLE'],
    ["SET role TO 'postgres'", 'SET ROLE'],
    ['SET "role" = x', 'SET ROLE'],
    ['SET "ROLE" = x', 'SET ROLE'],
    ['SET role=x', 'SET ROLE'],
    ['  \n\t SET\nROLE x', 'SET ROLE'],
    ['-- comment\nSET ROLE x', 'SET ROLE'],
    ['/* a /* nested */ comment */ SET /* here */ LOCAL /**/ ROLE x', 'SET ROLE'],
    ['; ;SET ROLE x', 'SET ROLE'],
    ['SET U&"\\0072ole" TO x', 'SET ROLE'],
    ['SET LOCAL U&"r\\006Fle" TO x', 'SET ROLE'],
    ['RESET ROLE', 'RESET ROLE'],
    ['reset "role"', 'RESET ROLE'],
    ['SET SESSION AUTHORIZATION postgres', 'SET SESSION AUTHORIZATION'],
    ['set session authorization default', 'SET SESSION AUTHORIZATION'],
    ['SET LOCAL SESSION AUTHORIZATION x', 'SET SESSION AUTHORIZATION'],
    ['SET SESSION SESSION AUTHORIZATION x', 'SET SESSION AUTHORIZATION'],
    ['SET session_authorization = x', 'SET SESSION AUTHORIZATION'],
    ['SET LOCAL "session_authorization" TO x', 'SET SESSION AUTHORIZATION'],
    ['RESET SESSION AUTHORIZATION', 'RESET SESSION AUTHORIZATION'],
    ['reset session_authorization', 'RESET SESSION AUTHORIZATION'],
  ])('finds the role change in %j', (sql, change) => {
    expect(roleChangeOf(sql)).toBe(change);
  });

  it.each([
    'select 1',
    "select set_config('role', 'x', true)",
    'SET search_path = public',
    'SET LOCAL statement_timeout = 1000',
    'SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY',
    'SET TIME ZONE UTC',
    'RESET ALL',
    'RESET search_path',
    'SET roles = 1',
    'SET rolex TO 1',
    "select 'SET ROLE x'",
    '"set" role',
    '-- SET ROLE x\nselect 1',
    '/* SET ROLE x */ select 1',
    'SETROLE x',
    'with x as (select 1) select * from x',
    '',
    '   ',
    ';',
    '/* unterminated',
    'SET',
    'RESET',
  ])('lets %j through', (sql) => {
    expect(roleChangeOf(sql)).toBeUndefined();
  });
});
