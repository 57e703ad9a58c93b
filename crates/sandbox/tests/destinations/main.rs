//! The fake VAN, Action Network and BigQuery, rule by rule over raw HTTP, so what is checked
//! is the wire: statuses, error bodies, headers, and what each fake recorded.

mod action_network;
mod action_network_listing;
mod bigquery;
mod bigquery_rows;
mod common;
mod faults;
mod van;
mod van_export;
mod van_export_faults;
