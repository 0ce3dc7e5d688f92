-- Role isolation (README): DATABASE_URL is a control login that may create roles and cancel
-- statements; Sluice makes one login role per user role from it. PostgreSQL 16+ syntax.
CREATE ROLE sluice_control LOGIN CREATEROLE PASSWORD 'control';
GRANT pg_signal_backend TO sluice_control;
CREATE ROLE sluice_admin NOLOGIN;
GRANT sluice_admin TO sluice_control WITH ADMIN OPTION, INHERIT FALSE, SET FALSE;
GRANT ALL ON DATABASE sluice TO sluice_admin;
GRANT ALL ON SCHEMA public TO sluice_admin;
