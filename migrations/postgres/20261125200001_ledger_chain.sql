-- The ledger's hash chain and what each entry stands on (issue 16).
--
-- `hash`: hex SHA-256 over the previous entry's hash and the entry's own fields, in the
-- canonical encoding documented in `src/chain.rs` and the README. Appenders compute it
-- while they hold the `ledger_head` lock, which now also keeps the last entry's hash, so
-- the chain follows seq order across replicas at no extra round trip.
--
-- `evidence`: kept with `reconcile` entries (`{"requestedAt","lead"}`, the lead as
-- fetched) and `local` ones (`{"actor"}`); a `webhook` entry's evidence is its stored
-- delivery (outbox.dedup_key = ledger.event_ref).
ALTER TABLE ledger ADD COLUMN hash TEXT;
ALTER TABLE ledger ADD COLUMN evidence JSONB;
ALTER TABLE ledger_head ADD COLUMN hash TEXT NOT NULL DEFAULT repeat('0', 64);

-- The canonical encoding in SQL, as the README states it: for this migration, and for
-- anyone checking the chain from psql.
CREATE FUNCTION ledger_entry_hash(prev TEXT, e ledger) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$
    SELECT encode(sha256(convert_to(
        '[' || to_json(prev)::text
        || ',' || e.seq::text
        || ',' || to_json(e.organization_id)::text
        || ',' || COALESCE(to_json(e.lead_id)::text, 'null')
        || ',' || to_json(e.phone_number)::text
        || ',' || CASE WHEN e.opted_out THEN 'true' ELSE 'false' END
        || ',' || to_json(to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text
        || ',' || to_json(to_char(e.recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text
        || ',' || to_json(e.source)::text
        || ',' || to_json(e.event_ref)::text
        || ',' || CASE WHEN e.superseded THEN 'true' ELSE 'false' END
        || ',' || COALESCE(to_json(e.tag_id)::text, 'null')
        || ',' || COALESCE(to_json(e.reason)::text, 'null')
        || ']', 'UTF8')), 'hex')
$$;

-- The entries recorded before the chain: hashed here, in seq order, once (the migrator's
-- lock), the append-only trigger set aside for this one sanctioned update. The ALTER TABLE
-- locks the ledger until the commit, so no replica appends meanwhile.
ALTER TABLE ledger DISABLE TRIGGER ledger_is_append_only_update;
-- The hashes are computed in seq order into arrays, then written by one UPDATE (an UPDATE
-- per entry costs five times as much).
DO $$
DECLARE
    prev TEXT := repeat('0', 64);
    entry ledger;
    seqs BIGINT[] := '{}';
    hashes TEXT[] := '{}';
BEGIN
    FOR entry IN SELECT * FROM ledger ORDER BY seq LOOP
        prev := ledger_entry_hash(prev, entry);
        seqs := seqs || entry.seq;
        hashes := hashes || prev;
    END LOOP;
    UPDATE ledger SET hash = k.hash
    FROM unnest(seqs, hashes) AS k (seq, hash) WHERE ledger.seq = k.seq;
    UPDATE ledger_head SET hash = prev;
END
$$;
ALTER TABLE ledger ENABLE TRIGGER ledger_is_append_only_update;

-- From now on every entry has one: a replica of an older version, which appends without,
-- fails its apply (the delivery stays pending for an upgraded replica) instead of breaking
-- the chain.
ALTER TABLE ledger ALTER COLUMN hash SET NOT NULL;
