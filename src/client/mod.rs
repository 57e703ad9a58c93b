//! The typed client of the service's v3 and v2.1 APIs: tokens, rate limit, retries, paging.
