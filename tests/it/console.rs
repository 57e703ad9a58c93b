//! The console over plain HTTP: sessions, CSRF, headers, evidence download.
