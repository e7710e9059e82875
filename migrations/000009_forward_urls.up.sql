-- The forwarding targets as the client wrote them, when it gave a URL (sb://, http:// or
-- https:// host/path): descriptions echo that form, as the service does, while forward_to and
-- forward_dead_lettered_to keep the target's entity path, which forwarding follows. '' when the
-- client gave a bare name (or the entity predates this column): descriptions then write
-- sb://{the request's host}/{path}. A constant default changes only the catalogue.
ALTER TABLE entities
    ADD COLUMN forward_to_url text NOT NULL DEFAULT '',
    ADD COLUMN forward_dead_lettered_to_url text NOT NULL DEFAULT '';
