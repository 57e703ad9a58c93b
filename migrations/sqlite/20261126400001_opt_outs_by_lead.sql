-- Opt-out entries by lead: a message new to the mirror is counted as sent after an opt-out
-- of its lead (`outreach_sync_messages_after_optout_total`) without reading the whole
-- ledger. Only opt-outs: the first import's other entries pay nothing for it.
CREATE INDEX ledger_opt_outs_by_lead ON ledger (lead_id) WHERE opted_out AND lead_id IS NOT NULL;
