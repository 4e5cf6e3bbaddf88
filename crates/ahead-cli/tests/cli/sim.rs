//! `ahead sim`: the paper's figures and a pattern's table, as text and JSON.

use super::*;

#[test]
fn sim_paper_json_top_level_metrics_are_the_papers() {
    let out = ahead(&["sim", "--paper", "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let figs = v["figures"].as_array().unwrap();
    assert_eq!(figs.len(), 7);
    let fig4 = &figs[0];
    assert_eq!(fig4["figure"], 4);
    let r267 = fig4["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["policy"] == "linux-2.6.7")
        .unwrap();
    assert_eq!(r267["pages_read"], 29535);
    assert_eq!(r267["wasted_pages"], 15);
    assert_eq!(r267["read_requests"], 987);
    for key in [
        "pages_requested",
        "pages_read",
        "wasted_pages",
        "read_requests",
        "avg_request_pages",
        "sync_requests",
        "async_requests",
        "hit_pages",
        "thrashed_pages",
        "stall_ms",
        "modeled_ms",
    ] {
        assert!(r267.get(key).is_some(), "missing {key}");
        assert!(
            r267["faithful"].get(key).is_some(),
            "missing faithful {key}"
        );
    }
}

#[test]
fn sim_pattern_table_and_json() {
    let out = ahead(&[
        "sim",
        "--pattern",
        "seq:size=4m,bs=16k",
        "--policy",
        "linux-ondemand,none",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("linux-ondemand") && text.contains("none"),
        "{text}"
    );
    let out = ahead(&[
        "sim",
        "--pattern",
        "seq:size=4m,bs=16k",
        "--policy",
        "none",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["results"][0]["policy"], "none");
    assert_eq!(v["results"][0]["read_requests"], 256);
    assert_eq!(v["results"][0]["pages_read"], 1024);
}
