-- Sending from inside an application's own transaction (README "Sending from SQL").
--
-- The functions in schema sbgate check what can be known at call time (the entity, its status,
-- sessions, sizes, the properties) and write the message to sbgate.outbox, a staging table, in
-- the caller's transaction: rolled back, the row never existed; committed, a NOTIFY on channel
-- sbgate_outbox wakes the gateways, and one of them relays the row through the same send path as
-- an HTTP send (duplicate detection, TTL caps, quota, topic rules and actions, auto-forwarding),
-- deleting it in the transaction that inserts the message, so a crash mid-relay neither loses
-- nor doubles it.
--
-- Security: the functions are SECURITY DEFINER with a fixed search_path, and nothing in them
-- builds SQL from their arguments. Only the role sbgate_sender may call them; it gets no
-- privilege on any table, so a caller reaches sbgate's tables through these functions only.

CREATE SCHEMA sbgate;
REVOKE ALL ON SCHEMA sbgate FROM PUBLIC;

-- Messages committed by applications and not yet relayed, in call order. Columns hold the
-- message as parsed at call time; user_props is a JSON object of string, number and boolean
-- values (numbers with no fraction are integers). A row the relay could not deliver stays with
-- last_error set: retried at retry_at, or never again when retry_at is 'infinity' (the entity
-- was deleted, or a rule the relay checks refused it); it is listed in sbgate.undelivered.
CREATE TABLE sbgate.outbox (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    path                text NOT NULL,
    body                bytea NOT NULL,
    message_id          text NOT NULL,
    correlation_id      text,
    session_id          text,
    reply_to_session_id text,
    label               text,
    to_addr             text,
    reply_to            text,
    partition_key       text,
    via_partition_key   text,
    content_type        text,
    ttl_seconds         double precision, -- as sent; NULL: none given
    scheduled_at        timestamptz,
    user_props          jsonb,
    staged_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempts            integer NOT NULL DEFAULT 0,
    retry_at            timestamptz,
    last_error          text
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_cost_delay = 0);

-- Rows the relay gave up on or is waiting to retry, for the operator.
CREATE INDEX outbox_retry ON sbgate.outbox (retry_at) WHERE retry_at IS NOT NULL;

CREATE VIEW sbgate.undelivered AS
SELECT id, path, message_id, session_id, label, staged_at, attempts,
       CASE WHEN retry_at = 'infinity' THEN NULL ELSE retry_at END AS retry_at, last_error
FROM sbgate.outbox WHERE last_error IS NOT NULL;

-- refuse raises a refusal with a Service Bus message. SQLSTATEs: SB400 bad request, SB403 the
-- entity's status or quota forbids it, SB404 no such entity or message, SB413 too large.
CREATE FUNCTION sbgate.refuse(code text, message text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message;
END $$;

-- shorten keeps hostile input short before it is echoed in an error (as handlers' truncate).
CREATE FUNCTION sbgate.shorten(s text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN octet_length(s) > 200 THEN left(s, 200) || '…' ELSE s END
$$;

-- sendable returns the entity at path if a message can be sent to it, else refuses as an HTTP
-- send would.
CREATE FUNCTION sbgate.sendable(p_path text) RETURNS entities LANGUAGE plpgsql AS $$
DECLARE
    e entities;
BEGIN
    IF p_path IS NULL THEN
        PERFORM sbgate.refuse('SB400', 'The entity path is NULL.');
    END IF;
    SELECT * INTO e FROM entities WHERE path_key = lower(p_path);
    IF NOT FOUND THEN
        PERFORM sbgate.refuse('SB404', format('The messaging entity ''%s'' could not be found.', sbgate.shorten(p_path)));
    END IF;
    IF e.kind = 3 THEN
        PERFORM sbgate.refuse('SB400', format('Messages cannot be sent to subscription ''%s''; send them to its topic.', e.path));
    END IF;
    IF e.status IN ('Disabled', 'SendDisabled') THEN
        PERFORM sbgate.refuse('SB403', format('SubCode=40301. The messaging entity ''%s'' is disabled for sending (status %s).', e.path, e.status));
    END IF;
    RETURN e;
END $$;

-- json_text reads a broker property as handlers' jsonText does: a string's text, a number's or
-- boolean's literal, '' for null; NULL for anything else.
CREATE FUNCTION sbgate.json_text(v jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE jsonb_typeof(v)
        WHEN 'string' THEN v #>> '{}'
        WHEN 'number' THEN v #>> '{}'
        WHEN 'boolean' THEN v #>> '{}'
        WHEN 'null' THEN ''
    END
$$;

-- stage checks one message for entity e and writes it to the outbox; it returns its MessageId.
-- prefix is '' for a single send and 'Message n of the batch: ' in a batch. The checks and their
-- wording follow an HTTP batch send (handlers/messages.go parseBatch, handlers/props.go
-- parseBrokerProperties, store/send.go prepareMessage).
CREATE FUNCTION sbgate.stage(e entities, p_body bytea, p_msg jsonb, prefix text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    kv record;
    k text;
    s text;
    seen text[] := '{}';
    seen_keys text[] := '{}';
    bp jsonb;
    up jsonb;
    top_ct text;
    mid text; cid text; sid text; rts text; lb text; ta text; rt text; pk text; vpk text; ct text;
    ttl double precision;
    span text[];
    sched timestamptz;
    size bigint;
    limit_bytes bigint;
    nprops int := 0;
    -- Names a receive could not return as a header (handlers/props.go reservedPropertyName);
    -- keep in step with it.
    reserved text[] := ARRAY['authorization', 'servicebusauthorization', 'brokerproperties',
        'servicebussupplementaryauthorization', 'servicebusdlqsupplementaryauthorization',
        'content-type', 'content-length', 'transfer-encoding', 'host', 'connection', 'keep-alive',
        'proxy-connection', 'te', 'trailer', 'upgrade', 'expect', 'proxy-authorization',
        'user-agent', 'accept', 'accept-charset', 'accept-encoding', 'traceparent', 'tracestate',
        'location', 'deadletterreason', 'deadlettererrordescription', 'content-encoding'];
BEGIN
    IF p_body IS NULL THEN
        PERFORM sbgate.refuse('SB400', prefix || 'The message body is NULL.');
    END IF;
    p_msg := coalesce(p_msg, '{}');
    IF jsonb_typeof(p_msg) <> 'object' THEN
        PERFORM sbgate.refuse('SB400', prefix || 'The message is not a JSON object with BrokerProperties, UserProperties and ContentType.');
    END IF;
    FOR kv IN SELECT key, value FROM jsonb_each(p_msg) LOOP
        CASE kv.key
        WHEN 'BrokerProperties' THEN bp := kv.value;
        WHEN 'UserProperties' THEN up := kv.value;
        WHEN 'ContentType' THEN
            top_ct := sbgate.json_text(kv.value);
            IF top_ct IS NULL OR jsonb_typeof(kv.value) <> 'string' AND jsonb_typeof(kv.value) <> 'null' THEN
                PERFORM sbgate.refuse('SB400', prefix || 'ContentType must be a string.');
            END IF;
        ELSE
            -- A key the function does not read would be dropped without a word.
            PERFORM sbgate.refuse('SB400', prefix || format('''%s'' is not a field of a message: give BrokerProperties, UserProperties and ContentType (the body is an argument of its own).', sbgate.shorten(kv.key)));
        END CASE;
    END LOOP;

    IF bp IS NOT NULL AND jsonb_typeof(bp) <> 'null' THEN
        IF jsonb_typeof(bp) <> 'object' THEN
            PERFORM sbgate.refuse('SB400', prefix || 'BrokerProperties is not a JSON object.');
        END IF;
        FOR kv IN SELECT key, value FROM jsonb_each(bp) ORDER BY key COLLATE "C" LOOP
            k := lower(kv.key);
            IF k = 'timetolivetimespan' THEN
                k := 'timetolive';
            END IF;
            IF k NOT IN ('messageid', 'correlationid', 'sessionid', 'replytosessionid', 'label', 'to', 'replyto',
                    'partitionkey', 'viapartitionkey', 'contenttype', 'timetolive', 'scheduledenqueuetimeutc') THEN
                CONTINUE; -- read-only and unknown properties are ignored, as the service does
            END IF;
            IF k = ANY (seen) THEN
                PERFORM sbgate.refuse('SB400', prefix || format('BrokerProperties gives the same property more than once: ''%s'' and ''%s''.',
                    sbgate.shorten(seen_keys[array_position(seen, k)]), sbgate.shorten(kv.key)));
            END IF;
            seen := seen || k;
            seen_keys := seen_keys || kv.key;
            s := sbgate.json_text(kv.value);
            IF lower(kv.key) = 'timetolivetimespan' THEN
                IF jsonb_typeof(kv.value) <> 'string' THEN
                    PERFORM sbgate.refuse('SB400', prefix || 'BrokerProperties.TimeToLiveTimeSpan must be a string.');
                END IF;
                span := regexp_match(btrim(s), '^(?:(\d+)\.)?(\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,7}))?$');
                IF span IS NULL OR span[2]::int > 23 OR span[3]::int > 59 OR span[4]::int > 59 THEN
                    PERFORM sbgate.refuse('SB400', prefix || 'BrokerProperties.TimeToLiveTimeSpan must be a positive [d.]hh:mm:ss[.fffffff] time span.');
                END IF;
                ttl := coalesce(span[1]::double precision, 0) * 86400 + span[2]::int * 3600 + span[3]::int * 60 + span[4]::int
                    + coalesce(('0.' || span[5])::double precision, 0);
                IF ttl <= 0 THEN
                    PERFORM sbgate.refuse('SB400', prefix || 'BrokerProperties.TimeToLiveTimeSpan must be a positive [d.]hh:mm:ss[.fffffff] time span.');
                END IF;
                CONTINUE;
            END IF;
            IF s IS NULL THEN
                IF k = 'timetolive' THEN
                    PERFORM sbgate.refuse('SB400', prefix || 'BrokerProperties.TimeToLive must be a number of seconds.');
                ELSIF k = 'scheduledenqueuetimeutc' THEN
                    PERFORM sbgate.refuse('SB400', prefix || 'BrokerProperties.ScheduledEnqueueTimeUtc must be a date string.');
                END IF;
                PERFORM sbgate.refuse('SB400', prefix || format('BrokerProperties.%s must be a string.', sbgate.shorten(kv.key)));
            END IF;
            CASE k
            WHEN 'messageid' THEN mid := s;
            WHEN 'correlationid' THEN cid := s;
            WHEN 'sessionid' THEN sid := s;
            WHEN 'replytosessionid' THEN rts := s;
            WHEN 'label' THEN lb := s;
            WHEN 'to' THEN ta := s;
            WHEN 'replyto' THEN rt := s;
            WHEN 'partitionkey' THEN pk := s;
            WHEN 'viapartitionkey' THEN vpk := s;
            WHEN 'contenttype' THEN ct := s;
            WHEN 'timetolive' THEN
                IF s = '' THEN
                    PERFORM sbgate.refuse('SB400', prefix || 'BrokerProperties.TimeToLive must be a number of seconds.');
                END IF;
                BEGIN
                    ttl := s::double precision;
                EXCEPTION WHEN invalid_text_representation THEN
                    ttl := NULL;
                END;
                IF ttl IS NULL OR ttl = 'NaN' OR ttl <= 0 THEN
                    PERFORM sbgate.refuse('SB400', prefix || 'BrokerProperties.TimeToLive must be a positive number of seconds.');
                END IF;
            WHEN 'scheduledenqueuetimeutc' THEN
                IF jsonb_typeof(kv.value) NOT IN ('string', 'null') THEN
                    PERFORM sbgate.refuse('SB400', prefix || 'BrokerProperties.ScheduledEnqueueTimeUtc must be a date string.');
                END IF;
                IF s <> '' THEN
                    BEGIN
                        -- PostgreSQL reads both forms the service accepts: RFC 1123 and ISO 8601.
                        sched := s::timestamptz;
                    EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR invalid_text_representation THEN
                        PERFORM sbgate.refuse('SB400', prefix || format('BrokerProperties.ScheduledEnqueueTimeUtc ''%s'' is not an RFC 1123 or ISO 8601 date.', sbgate.shorten(s)));
                    END;
                END IF;
            END CASE;
        END LOOP;
    END IF;
    IF top_ct IS NOT NULL AND top_ct <> '' THEN
        IF ct IS NOT NULL AND ct <> '' AND ct <> top_ct THEN
            PERFORM sbgate.refuse('SB400', prefix || 'ContentType and BrokerProperties.ContentType differ.');
        END IF;
        ct := top_ct;
    END IF;
    IF ct ~ '[\x01-\x08\x0a-\x1f\x7f]' THEN
        PERFORM sbgate.refuse('SB400', prefix || 'BrokerProperties.ContentType contains control characters, which cannot be sent in a Content-Type header.');
    END IF;

    IF up IS NOT NULL AND jsonb_typeof(up) <> 'null' THEN
        IF jsonb_typeof(up) <> 'object' THEN
            PERFORM sbgate.refuse('SB400', prefix || 'UserProperties is not a JSON object.');
        END IF;
        seen := '{}';
        seen_keys := '{}';
        FOR kv IN SELECT key, value FROM jsonb_each(up) ORDER BY key COLLATE "C" LOOP
            nprops := nprops + 1;
            IF lower(kv.key) = ANY (seen) THEN
                PERFORM sbgate.refuse('SB400', prefix || format('the user properties ''%s'' and ''%s'' differ only in case; they would be one HTTP header.',
                    sbgate.shorten(least(kv.key COLLATE "C", seen_keys[array_position(seen, lower(kv.key))])),
                    sbgate.shorten(greatest(kv.key COLLATE "C", seen_keys[array_position(seen, lower(kv.key))]))));
            END IF;
            seen := seen || lower(kv.key);
            seen_keys := seen_keys || kv.key;
            IF kv.key = '' OR lower(kv.key) = ANY (reserved) OR lower(kv.key) LIKE 'x-ms-%'
                    OR kv.key ~ '[^\x21-\x7e]' OR kv.key ~ '[()<>@,;:\\"/\[\]?={}]' THEN
                PERFORM sbgate.refuse('SB400', prefix || format('''%s'' cannot be a user property name.', sbgate.shorten(kv.key)));
            END IF;
            IF jsonb_typeof(kv.value) NOT IN ('string', 'number', 'boolean') THEN
                PERFORM sbgate.refuse('SB400', prefix || format('user property ''%s'' must be a string, number or boolean.', sbgate.shorten(kv.key)));
            END IF;
            IF jsonb_typeof(kv.value) = 'string' AND (kv.value #>> '{}') ~ '[\x01-\x08\x0a-\x1f\x7f]' THEN
                PERFORM sbgate.refuse('SB400', prefix || format('user property ''%s'' contains control characters, which cannot be sent in an HTTP header.', sbgate.shorten(kv.key)));
            END IF;
        END LOOP;
        IF nprops > 1000 THEN
            PERFORM sbgate.refuse('SB400', prefix || 'A message may carry at most 1000 application properties.');
        END IF;
        IF nprops = 0 THEN
            up := NULL;
        END IF;
    ELSE
        up := NULL;
    END IF;

    -- store/send.go prepareMessage
    IF octet_length(mid) > 0 AND length(mid) > 128 THEN
        PERFORM sbgate.refuse('SB400', prefix || 'The MessageId is longer than 128 characters.');
    END IF;
    IF length(sid) > 128 THEN
        PERFORM sbgate.refuse('SB400', prefix || 'The SessionId is longer than 128 characters.');
    END IF;
    IF coalesce(pk, '') <> '' AND coalesce(sid, '') <> '' AND pk <> sid THEN
        PERFORM sbgate.refuse('SB400', prefix || format('The PartitionKey ''%s'' must be equal to the SessionId ''%s''.', sbgate.shorten(pk), sbgate.shorten(sid)));
    END IF;
    IF e.requires_session AND coalesce(sid, '') = '' THEN
        PERFORM sbgate.refuse('SB400', prefix || format('The SessionId was not set on a message, and it cannot be sent to the entity ''%s''. Entities that have session support enabled can only receive messages that have the SessionId set to a valid value.', e.path));
    END IF;
    IF coalesce(mid, '') = '' THEN
        mid := replace(gen_random_uuid()::text, '-', ''); -- 32 hex digits, the form the service generates
    END IF;

    -- The size as store/send.go messageSize counts it; user properties count as their JSON
    -- text, which is within a few bytes per property of the store's encoding (the relay checks
    -- the exact figure again).
    size := octet_length(p_body) + coalesce(octet_length(up::text), 0)
        + octet_length(mid) + coalesce(octet_length(cid), 0) + coalesce(octet_length(sid), 0)
        + coalesce(octet_length(rts), 0) + coalesce(octet_length(lb), 0) + coalesce(octet_length(ta), 0)
        + coalesce(octet_length(rt), 0) + coalesce(octet_length(coalesce(NULLIF(pk, ''), sid)), 0)
        + coalesce(octet_length(vpk), 0) + coalesce(octet_length(ct), 0);
    limit_bytes := e.max_message_size_kb * 1024;
    IF size > limit_bytes THEN
        PERFORM sbgate.refuse('SB413', format('The message (size %s bytes) exceeds the limit of %s bytes allowed on entity ''%s''.', size, limit_bytes, e.path));
    END IF;

    INSERT INTO sbgate.outbox (path, body, message_id, correlation_id, session_id, reply_to_session_id, label,
        to_addr, reply_to, partition_key, via_partition_key, content_type, ttl_seconds, scheduled_at, user_props)
    VALUES (e.path, p_body, mid, NULLIF(cid, ''), NULLIF(sid, ''), NULLIF(rts, ''), NULLIF(lb, ''), NULLIF(ta, ''),
        NULLIF(rt, ''), NULLIF(pk, ''), NULLIF(vpk, ''), NULLIF(ct, ''), ttl, sched, up);
    RETURN mid;
END $$;

-- send sends one message in the caller's transaction and returns its MessageId (the one given,
-- or a new one). See the README for message's shape and the refusals.
CREATE FUNCTION sbgate.send(path text, body bytea, message jsonb DEFAULT '{}') RETURNS text
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    RETURN sbgate.stage(sbgate.sendable(path), body, message, '');
END $$;

-- send_batch sends bodies[i] with messages[i] (NULL or shorter: no properties) in the caller's
-- transaction, all or none, and returns their MessageIds in order.
CREATE FUNCTION sbgate.send_batch(path text, bodies bytea[], messages jsonb[] DEFAULT NULL) RETURNS text[]
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    e entities;
    n int := coalesce(cardinality(bodies), 0);
    ids text[] := '{}';
BEGIN
    e := sbgate.sendable(path);
    IF n = 0 THEN
        PERFORM sbgate.refuse('SB400', 'The batch contains no messages.');
    END IF;
    IF n > 4500 THEN
        PERFORM sbgate.refuse('SB400', 'A batch may contain at most 4500 messages.');
    END IF;
    IF coalesce(cardinality(messages), 0) > n THEN
        PERFORM sbgate.refuse('SB400', format('The batch has %s bodies but %s messages.', n, cardinality(messages)));
    END IF;
    FOR i IN 1 .. n LOOP
        ids := ids || sbgate.stage(e, bodies[i], messages[i], format('Message %s of the batch: ', i));
    END LOOP;
    RETURN ids;
END $$;

-- cancel_scheduled cancels, in the caller's transaction, the scheduled messages with MessageId
-- message_id sent to path that are not yet due: those still in the outbox and those relayed
-- (in a topic, every subscription's copy). It refuses (SB404) when there was none.
CREATE FUNCTION sbgate.cancel_scheduled(path text, message_id text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    e entities;
    staged int;
    relayed int;
BEGIN
    SELECT * INTO e FROM entities WHERE path_key = lower(cancel_scheduled.path) AND kind <> 3;
    IF NOT FOUND THEN
        PERFORM sbgate.refuse('SB404', format('The messaging entity ''%s'' could not be found.', sbgate.shorten(cancel_scheduled.path)));
    END IF;
    DELETE FROM sbgate.outbox o WHERE lower(o.path) = e.path_key AND o.message_id = cancel_scheduled.message_id
        AND o.scheduled_at > now() AND o.last_error IS NULL;
    GET DIAGNOSTICS staged = ROW_COUNT;
    WITH removed AS (
        DELETE FROM messages m
        WHERE m.entity_id IN (SELECT id FROM entities WHERE id = e.id OR parent_id = e.id)
            AND m.message_id = cancel_scheduled.message_id AND m.state = 0 AND m.lock_token IS NULL
            AND m.visible_at > now()
        RETURNING m.entity_id, m.size
    ), counted AS (
        INSERT INTO entity_count_deltas (entity_id, main, dead, bytes)
        SELECT entity_id, -count(*), 0, -sum(size) FROM removed GROUP BY entity_id
    )
    SELECT count(*) INTO relayed FROM removed;
    IF staged + relayed = 0 THEN
        PERFORM sbgate.refuse('SB404', format('No scheduled message with MessageId ''%s'' is waiting in ''%s''.',
            sbgate.shorten(cancel_scheduled.message_id), e.path));
    END IF;
END $$;

-- The functions run as their owner with a search_path fixed to sbgate's tables: a caller's
-- search_path or temporary objects cannot redirect them.
-- The doorbell. A NOTIFY in every sending transaction would serialise their commits (PostgreSQL
-- holds one database-wide lock from a notifying transaction's pre-commit to the end of its
-- commit, so they lose group commit: 185 against 1,340 messages/s at 16 clients, measured with
-- sbgate bench). So a transaction that staged messages notifies only when no relay is polling:
-- a relay that has work polls the outbox every few milliseconds and holds advisory lock
-- (7367, 1) while it does; the check runs at commit (a deferred trigger), so a relay that stops
-- polling between the call and the commit is still told. A relay stops polling only after a
-- pass found nothing, and then relays once more.
CREATE FUNCTION sbgate.ring() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    IF current_setting('sbgate.rung', true) IS DISTINCT FROM 'yes' THEN
        PERFORM set_config('sbgate.rung', 'yes', true);
        IF pg_try_advisory_lock_shared(7367, 1) THEN
            PERFORM pg_advisory_unlock_shared(7367, 1);
            PERFORM pg_notify('sbgate_outbox', '');
        END IF;
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER ring AFTER INSERT ON sbgate.outbox DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION sbgate.ring();

-- The tables' schema is read from where entities lives, not current_schema(): a role named sbgate
-- (the default) now finds schema sbgate first through "$user".
DO $$
DECLARE
    f text;
    home text := (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.oid = 'entities'::regclass);
BEGIN
    FOREACH f IN ARRAY ARRAY['sbgate.refuse(text, text)', 'sbgate.shorten(text)', 'sbgate.sendable(text)',
            'sbgate.json_text(jsonb)', 'sbgate.stage(entities, bytea, jsonb, text)', 'sbgate.send(text, bytea, jsonb)',
            'sbgate.send_batch(text, bytea[], jsonb[])', 'sbgate.cancel_scheduled(text, text)', 'sbgate.ring()'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, home);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END $$;

-- The role applications are granted (GRANT sbgate_sender TO app). Creating it needs CREATEROLE;
-- without it the role must be created by an administrator, and the grants below are made by
-- this migration when it exists.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sbgate_sender') THEN
        BEGIN
            CREATE ROLE sbgate_sender NOLOGIN;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE WARNING 'sbgate: cannot create role sbgate_sender; create it and grant it USAGE on schema sbgate and EXECUTE on sbgate.send, sbgate.send_batch, sbgate.cancel_scheduled and SELECT on sbgate.undelivered';
            RETURN;
        END;
    END IF;
    GRANT USAGE ON SCHEMA sbgate TO sbgate_sender;
    GRANT EXECUTE ON FUNCTION sbgate.send(text, bytea, jsonb), sbgate.send_batch(text, bytea[], jsonb[]),
        sbgate.cancel_scheduled(text, text) TO sbgate_sender;
    GRANT SELECT ON sbgate.undelivered TO sbgate_sender;
END $$;
