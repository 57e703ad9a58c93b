-- The ledger's hash chain and what each entry stands on (issue 16).
--
-- `hash`: hex SHA-256 over the previous entry's hash and the entry's own fields, in the
-- canonical encoding documented in `src/chain.rs` and the README; written with the entry,
-- in the same transaction. SQLite has no SHA-256 of its own, so the entries recorded before
-- this migration get theirs from the Rust step that runs right after the migrations
-- (`store::sqlite::chain::fill_missing_hashes`, in seq order, in batches).
--
-- `evidence`: JSON kept with `reconcile` entries (`{"requestedAt","lead"}`, the lead as
-- fetched) and `local` ones (`{"actor"}`); a `webhook` entry's evidence is its stored
-- delivery (outbox.dedup_key = ledger.event_ref).
ALTER TABLE ledger ADD COLUMN hash TEXT;
ALTER TABLE ledger ADD COLUMN evidence TEXT;

-- Finds the entries still without a hash at once, however long the ledger.
CREATE INDEX ledger_unhashed ON ledger (seq) WHERE hash IS NULL;

-- The one sanctioned change of a recorded entry: writing the hash of an entry that has
-- none, every other column unchanged. Everything else stays refused.
DROP TRIGGER ledger_is_append_only_update;
CREATE TRIGGER ledger_is_append_only_update BEFORE UPDATE ON ledger
WHEN NOT (OLD.hash IS NULL AND NEW.hash IS NOT NULL
          AND NEW.seq IS OLD.seq AND NEW.organization_id IS OLD.organization_id
          AND NEW.lead_id IS OLD.lead_id AND NEW.phone_number IS OLD.phone_number
          AND NEW.opted_out IS OLD.opted_out AND NEW.occurred_at IS OLD.occurred_at
          AND NEW.recorded_at IS OLD.recorded_at AND NEW.source IS OLD.source
          AND NEW.event_ref IS OLD.event_ref AND NEW.superseded IS OLD.superseded
          AND NEW.tag_id IS OLD.tag_id AND NEW.reason IS OLD.reason
          AND NEW.evidence IS OLD.evidence)
BEGIN SELECT RAISE(ABORT, 'the consent ledger is append-only'); END;
