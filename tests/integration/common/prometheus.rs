//! A real Prometheus server (Debian's `prometheus`) on loopback, scraping what a test names,
//! and its query API.

use std::net::SocketAddr;
use std::process::{Command, Stdio};

use super::http_get;

/// A Prometheus server on loopback, killed on drop.
pub struct Prometheus {
    child: std::process::Child,
    pub api: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Scrapes `target` every second as job `clusterset-dns`.
    pub fn start(target: SocketAddr) -> Prometheus {
        Self::with_scrape_configs(&format!(
            "  - job_name: clusterset-dns\n    static_configs:\n      - targets: ['{target}']\n"
        ))
    }

    /// Runs with these `scrape_configs` entries (YAML, indented two spaces), scraping and
    /// evaluating every second.
    pub fn with_scrape_configs(scrape_configs: &str) -> Prometheus {
        Self::with_rules(scrape_configs, None)
    }

    /// [`Prometheus::with_scrape_configs`], evaluating the rules file `rules` (its text) too.
    pub fn with_rules(scrape_configs: &str, rules: Option<&str>) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        let mut text = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n{scrape_configs}"
        );
        if let Some(rules) = rules {
            let file = dir.path().join("rules.yml");
            std::fs::write(&file, rules).unwrap();
            text += &format!("rule_files: ['{}']\n", file.display());
        }
        std::fs::write(&config, text).unwrap();
        let api: SocketAddr = format!("127.0.0.1:{}", super::k8s::free_port())
            .parse()
            .unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={api}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus runs (apt-get install prometheus)");
        Prometheus {
            child,
            api,
            _dir: dir,
        }
    }

    /// The result vector of an instant PromQL query; `None` when the query fails.
    pub async fn results(&self, promql: &str) -> Option<Vec<serde_json::Value>> {
        let mut q = String::new();
        for b in promql.bytes() {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                q.push(b as char);
            } else {
                q.push_str(&format!("%{b:02X}"));
            }
        }
        let (status, body) = http_get(self.api, &format!("/api/v1/query?query={q}")).await?;
        if status != 200 {
            return None;
        }
        let body = body.trim();
        // The body may come chunked; the JSON object is between the outer braces.
        let json = &body[body.find('{')?..=body.rfind('}')?];
        let v: serde_json::Value = serde_json::from_str(json).ok()?;
        v["data"]["result"].as_array().cloned()
    }

    /// The value of an instant PromQL query with one result, if there is exactly one.
    pub async fn value(&self, promql: &str) -> Option<f64> {
        let result = self.results(promql).await?;
        if result.len() != 1 {
            return None;
        }
        result[0]["value"][1].as_str()?.parse().ok()
    }

    /// Whether `promql` gives at least one series with a number (not NaN): what a panel needs
    /// to show data.
    pub async fn has_data(&self, promql: &str) -> bool {
        self.results(promql).await.is_some_and(|r| {
            r.iter().any(|s| {
                s["value"][1]
                    .as_str()
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(|v| !v.is_nan())
            })
        })
    }

    /// Polls until `promql` evaluates to `want` (30 s at most); returns the last value seen.
    pub async fn wait_for(&self, promql: &str, want: f64) -> Option<f64> {
        let last = std::cell::Cell::new(None);
        super::eventually(30, || async {
            last.set(self.value(promql).await);
            last.get() == Some(want)
        })
        .await;
        last.get()
    }
}
