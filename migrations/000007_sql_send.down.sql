-- The role sbgate_sender is left: roles belong to the whole server, and applications may hold it.
DROP SCHEMA IF EXISTS sbgate CASCADE;
