//! Confirmed (secret reference, destination) pairs.

use switchyard_core::UnixMillis;
use switchyard_core::binding::Binding;
use switchyard_store::Store;

use crate::fixture::{T0, state_file};

const OPENAI: &str = "https://api.openai.com:443";

#[tokio::test]
async fn confirmed_pairs_read_back_after_a_restart() {
    let (_dir, path) = state_file();
    let store = Store::open(&path).await.unwrap();
    assert_eq!(store.bindings().await.unwrap(), vec![], "a new state file confirms nothing");
    let pairs = [Binding::new("env:OPENAI_API_KEY", OPENAI), Binding::new("keychain:a/b", OPENAI)];
    store.confirm_bindings(&pairs, T0).await.unwrap();
    store.close().await;

    let store = Store::open(&path).await.unwrap();
    assert_eq!(store.bindings().await.unwrap(), pairs.to_vec());
    store.close().await;
}

#[tokio::test]
async fn confirming_a_pair_again_keeps_one_row_and_its_first_time() {
    let (_dir, path) = state_file();
    let store = Store::open(&path).await.unwrap();
    let pair = [Binding::new("env:K", OPENAI)];
    store.confirm_bindings(&pair, T0).await.unwrap();
    store.confirm_bindings(&pair, UnixMillis(T0.0 + 1_000)).await.unwrap();
    assert_eq!(store.bindings().await.unwrap(), pair.to_vec());
    store.close().await;

    let times = confirmation_times(&path).await;
    assert_eq!(times, vec![i64::try_from(T0.0).unwrap()]);
}

#[tokio::test]
async fn a_reference_confirmed_for_one_host_is_not_confirmed_for_another() {
    let (_dir, path) = state_file();
    let store = Store::open(&path).await.unwrap();
    store.confirm_bindings(&[Binding::new("env:K", OPENAI)], T0).await.unwrap();
    let all = store.bindings().await.unwrap();
    assert!(!all.contains(&Binding::new("env:K", "https://collector.example:443")));
    store.close().await;
}

/// The confirmation times as stored, read through a second connection.
async fn confirmation_times(path: &std::path::Path) -> Vec<i64> {
    use sqlx::Connection as _;
    let mut conn =
        sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    let rows: Vec<(i64,)> = sqlx::query_as("SELECT confirmed_at FROM secret_bindings")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    rows.into_iter().map(|(t,)| t).collect()
}

#[tokio::test]
async fn confirmed_destinations_read_back_after_a_restart_beside_the_pairs() {
    let (_dir, path) = state_file();
    let store = Store::open(&path).await.unwrap();
    let local = Binding::destination_only("http://127.0.0.1:11434");
    let pair = Binding::new("env:K", OPENAI);
    store.confirm_bindings(&[local.clone(), pair.clone()], T0).await.unwrap();
    store.confirm_bindings(std::slice::from_ref(&local), UnixMillis(T0.0 + 1_000)).await.unwrap();
    store.close().await;

    let store = Store::open(&path).await.unwrap();
    assert_eq!(store.bindings().await.unwrap(), vec![pair, local]);
    store.close().await;
}
