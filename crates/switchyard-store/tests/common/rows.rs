//! Every row of every table of a state file, as text: what "nothing was lost" is checked
//! against. Read through a connection of its own, read-only, so looking changes nothing.

use std::collections::BTreeMap;
use std::path::Path;

use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{AssertSqlSafe, Row, SqlitePool};

/// Table name → its column names and its rows (each value `quote()`d, rows sorted).
pub(crate) type Rows = BTreeMap<String, (Vec<String>, Vec<String>)>;

pub(crate) async fn connect(path: &Path) -> SqlitePool {
    let options = SqliteConnectOptions::new().filename(path).read_only(true);
    SqlitePoolOptions::new().max_connections(1).connect_with(options).await.expect("opens")
}

/// Every table's rows.
pub(crate) async fn rows(path: &Path) -> Rows {
    let pool = connect(path).await;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
         ORDER BY name",
    )
    .fetch_all(&pool)
    .await
    .expect("lists tables");
    let mut all = Rows::new();
    for table in tables {
        let columns: Vec<String> = sqlx::query_scalar("SELECT name FROM pragma_table_info(?)")
            .bind(&table)
            .fetch_all(&pool)
            .await
            .expect("lists columns");
        let found = select(&pool, &table, &columns).await;
        all.insert(table, (columns, found));
    }
    pool.close().await;
    all
}

/// `columns` of `table`'s rows, sorted.
pub(crate) async fn select(pool: &SqlitePool, table: &str, columns: &[String]) -> Vec<String> {
    let quoted: Vec<String> = columns.iter().map(|c| format!("quote(\"{c}\")")).collect();
    let query = format!("SELECT {} AS row FROM \"{table}\"", quoted.join(" || ',' || "));
    // Table and column names come from the file's own schema, not from input.
    let mut found: Vec<String> = sqlx::query(AssertSqlSafe(query))
        .fetch_all(pool)
        .await
        .expect("reads rows")
        .iter()
        .map(|row| row.get::<String, _>("row"))
        .collect();
    found.sort();
    found
}

/// Asserts that the file at `path` still holds every row of `before`, in the columns `before`
/// had (a migration may add tables and columns, never take any away).
pub(crate) async fn assert_kept(before: &Rows, path: &Path) {
    let pool = connect(path).await;
    for (table, (columns, rows)) in before {
        if table == "_sqlx_migrations" {
            continue;
        }
        let now = select(&pool, table, columns).await;
        assert_eq!(&now, rows, "{}: table {table} lost or changed rows", path.display());
    }
    let applied: Vec<i64> = sqlx::query_scalar("SELECT version FROM _sqlx_migrations")
        .fetch_all(&pool)
        .await
        .expect("reads migrations");
    let (_, before_applied) = &before["_sqlx_migrations"];
    assert!(applied.len() >= before_applied.len(), "{}: migrations went missing", path.display());
    pool.close().await;
}

/// The fixture: the state file of the release before backups, with rows in every table.
pub(crate) fn previous_release(dir: &Path) -> std::path::PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/previous-release.db");
    let path = dir.join("switchyard.db");
    std::fs::copy(&fixture, &path).expect("copies the fixture");
    path
}
