-- The authenticator pattern (README, "Role isolation"): statements run over a login role with no
-- rights of its own that becomes the user's role per statement.
CREATE ROLE sluice_authenticator LOGIN NOINHERIT PASSWORD 'authenticator';
CREATE ROLE sluice_admin NOLOGIN;
GRANT sluice_admin TO sluice_authenticator;
GRANT ALL ON DATABASE sluice TO sluice_admin;
GRANT ALL ON SCHEMA public TO sluice_admin;
