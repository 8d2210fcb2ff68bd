//! Integration tests: one binary, against the real local stack (redis-server and MiniStack).

mod ballot;
mod buckets;
mod buckets_waitlist;
mod cancel_and_wait;
mod cancel_and_wait_faults;
mod cluster;
mod concurrency;
mod contract_docs;
mod failover;
mod fair_open;
mod faults;
mod fixtures;
mod grab_script;
mod helpers;
mod late_ses;
mod live;
mod logs;
mod mail;
mod partial_loss;
mod reconcile;
mod red_packets;
mod routes;
mod runner;
mod sold_out;
mod template;
mod warm_fleet;
