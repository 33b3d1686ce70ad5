//! Grafana dashboards as the tests read them: their panels and the PromQL of each, with the
//! template variables set as an operator's selection sets them.

use std::path::Path;

/// Every panel of a Grafana dashboard, rows' nested panels (and the old `rows` layout) included.
pub fn panels(dashboard: &serde_json::Value) -> Vec<serde_json::Value> {
    fn walk(list: &serde_json::Value, out: &mut Vec<serde_json::Value>) {
        for p in list.as_array().into_iter().flatten() {
            out.push(p.clone());
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    for row in dashboard["rows"].as_array().into_iter().flatten() {
        walk(&row["panels"], &mut out);
    }
    out
}

pub fn dashboard(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The panel queries of one dashboard, as (panel title, PromQL with the dashboard's template
/// variables set as an operator's selection would set them).
pub fn queries(d: &serde_json::Value, vars: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in panels(d) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let Some(expr) = t["expr"].as_str() else {
                continue;
            };
            let mut e = expr.to_string();
            // Longest names first, so `$instance` is not taken for `$inst…`.
            let mut vars = vars.to_vec();
            vars.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
            for (k, v) in vars {
                e = e
                    .replace(&format!("${{{k}}}"), v)
                    .replace(&format!("${k}"), v);
            }
            assert!(!e.contains('$'), "a variable left in {e}");
            out.push((p["title"].as_str().unwrap_or("").to_string(), e));
        }
    }
    out
}
