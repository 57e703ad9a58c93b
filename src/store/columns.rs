//! The column lists several statements select, as macros so that the statements built
//! with them are literals (an export's stream borrows its statement).

/// The columns of a [`ChainRow`](crate::model::chain::ChainRow), selected `FROM ledger`. A
/// macro, so that the statements built with it are literals.
macro_rules! chain_columns {
    () => {
        "seq, organization_id, lead_id, phone_number, opted_out, occurred_at, recorded_at,
         source, event_ref, superseded, account_id, tag_id, reason, hash"
    };
}

pub(crate) use chain_columns;

/// Selected `FROM ledger`; `push` and `echo_of` come from the push queue. A macro, so that
/// the statements built with it are literals (an export's stream borrows its statement).
macro_rules! ledger_columns {
    () => {
        "seq, organization_id, lead_id, phone_number, opted_out, occurred_at, recorded_at,
         source, event_ref, superseded, account_id,
         (SELECT p.state FROM pushes AS p WHERE p.seq = ledger.seq) AS push,
         (SELECT p.seq FROM pushes AS p WHERE p.echo_ref = ledger.event_ref
            AND p.organization_id = ledger.organization_id AND p.phone_number = ledger.phone_number
            AND p.account_id = ledger.account_id
          ORDER BY p.seq LIMIT 1) AS echo_of"
    };
}

pub(crate) use ledger_columns;
