//! What `doctor` reads of the table on PostgreSQL: how the server plans the band
//! query, and the inserted-at column's distinct values, a page at a time.

use super::*;

impl PostgresStore {
    pub(super) fn plan_band(&mut self) -> Result<QueryPlan, StoreError> {
        let p = self
            .prepared
            .as_ref()
            .expect("inspect() runs before any query");
        let sql = format!("EXPLAIN {}", p.first_page_sql);
        let now = Utc::now();
        let format = self.format();
        let (from, to) = (
            format.encode(now - chrono::Duration::days(7)),
            format.encode(now - chrono::Duration::days(1)),
        );
        let pending = self.table.pending.clone();
        let limit: i64 = 200;
        let detail: Vec<String> = self
            .client
            .query(&sql, &[&Bound(&from), &Bound(&to), &pending, &limit])
            .map_err(pg("explaining the band query"))?
            .iter()
            .map(|r| r.get::<_, String>(0).trim().to_string())
            .collect();
        let bare = p.inserted_at.trim_matches('"').to_string();
        let uses_index = detail
            .iter()
            .any(|line| line.starts_with("Index Cond:") && line.contains(&bare));
        let create_index = (!uses_index).then(|| {
            format!(
                "CREATE INDEX CONCURRENTLY {} ON {} ({});",
                quote(&index_name(&self.table.name, &bare)),
                p.table,
                p.inserted_at
            )
        });
        Ok(QueryPlan {
            uses_index,
            detail: detail.join("; "),
            create_index,
        })
    }

    pub(super) fn read_inserted_at(
        &mut self,
        after: Option<&Scalar>,
        limit: usize,
    ) -> Result<Vec<Scalar>, StoreError> {
        // Whole records, one per distinct value: the store reads a value only through
        // a record (its format's decoding of the column's type).
        let ins = self.prepared().inserted_at.clone();
        let limit = limit as i64;
        match after {
            None => self.query_records(
                &format!(
                    "WHERE t.{ins} IS NOT NULL AND t.ctid IN (SELECT DISTINCT ON (t2.{ins}) t2.ctid FROM {table} t2 WHERE t2.{ins} IS NOT NULL ORDER BY t2.{ins} LIMIT $1) ORDER BY t.{ins}",
                    table = self.prepared().table
                ),
                &[&limit],
            ),
            Some(after) => self.query_records(
                &format!(
                    "WHERE t.{ins} > $2 AND t.ctid IN (SELECT DISTINCT ON (t2.{ins}) t2.ctid FROM {table} t2 WHERE t2.{ins} > $2 ORDER BY t2.{ins} LIMIT $1) ORDER BY t.{ins}",
                    table = self.prepared().table
                ),
                &[&limit, &Bound(after)],
            ),
        }
        .map(|records| records.iter().map(Record::inserted_at).collect())
    }
}
