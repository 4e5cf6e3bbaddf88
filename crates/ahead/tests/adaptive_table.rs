//! Issue 18's must-show for the simulator, row by row: adaptive at most 1.03x the fastest
//! causal policy's modelled time on every pattern of the table, on every modelled device, with
//! a computing and an I/O-bound reader; its waste at most 2% of what it reads or the fastest
//! policy's share; and no policy more than 0.5% below the oracle. The table itself:
//! `cargo run --release -p ahead --example adaptive_table`.

#[path = "common/table.rs"]
mod table;

#[test]
fn adaptive_loses_to_no_policy_and_no_policy_beats_the_oracle_on_any_row() {
    let rows = table::rows();
    assert_eq!(
        rows.len(),
        table::PATTERNS.len() * ahead::DeviceModel::PRESETS.len() * table::COMPUTE_NS.len()
    );
    let failures: Vec<String> = rows.iter().flat_map(table::shortfalls).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
