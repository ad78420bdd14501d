//! The write-behind writer: batching and catching up after falling behind.

use std::sync::Arc;

use switchyard_core::resilience::{HealthRegistry, RegistryLimits};
use switchyard_store::{Persistence, PersistenceStatus};

use crate::fixture::{T0, attempt, key, registry, response, sorted, state_file};

#[tokio::test]
async fn a_burst_of_transitions_is_written_in_a_few_transactions() {
    let (_dir, path) = state_file();
    let registry = registry();
    let mut events = registry.subscribe();
    let persistence = Persistence::start(&path, &registry, T0).await;
    persistence.flush().await;
    let before = persistence.batches_written();

    // Nothing yields inside the burst, so the writer finds it all queued.
    for i in 0..2_500 {
        let model = format!("m{i}");
        attempt(&registry, &key("p", "k", &model), &response(404, None, T0), T0);
    }
    persistence.flush().await;

    let mut published = 0;
    while events.try_recv().is_ok() {
        published += 1;
    }
    let transactions = persistence.batches_written() - before;
    assert_eq!(published, 2_500);
    assert!((1..=3).contains(&transactions), "{published} events took {transactions} transactions");
    let stored = persistence.store().unwrap().load_health().await.unwrap();
    assert_eq!(stored.lockouts.len(), 2_500);
    persistence.shutdown().await;
}

#[tokio::test]
async fn a_writer_that_falls_behind_resyncs_from_the_registry() {
    let (_dir, path) = state_file();
    let registry = Arc::new(HealthRegistry::new(RegistryLimits {
        event_capacity: 4,
        ..RegistryLimits::default()
    }));
    let persistence = Persistence::start(&path, &registry, T0).await;
    persistence.flush().await;

    // A hundred transitions through a channel of four: the writer must lag.
    for i in 0..100 {
        let model = format!("m{i}");
        attempt(&registry, &key("p", "k", &model), &response(404, None, T0), T0);
    }
    persistence.flush().await;

    assert_eq!(persistence.status(), PersistenceStatus::Durable);
    let stored = persistence.store().unwrap().load_health().await.unwrap();
    assert_eq!(stored.lockouts.len(), 100);
    assert_eq!(sorted(stored), sorted(registry.records()));
    persistence.shutdown().await;
}
