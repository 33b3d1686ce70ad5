use super::*;
use crate::bridge::export::Status;

fn scrape(m: &BridgeMetrics) -> String {
    let r = m.route(&Method::GET, "/metrics");
    let body = http_body_util::BodyExt::collect(r.into_body());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let bytes = rt.block_on(body).unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn condition(kind: &'static str, status: Status) -> Condition {
    Condition {
        kind,
        status,
        reason: "R".into(),
        message: "m".into(),
    }
}

#[test]
fn export_conditions_are_series_until_the_export_goes() {
    let m = BridgeMetrics::new();
    assert!(!scrape(&m).contains(CONDITION), "no family without exports");
    let web: Key = ("shop".into(), "web".into());
    let odd: Key = ("shop".into(), "a\"b\\c".into());
    m.conditions(
        &web,
        &[
            condition("Valid", Status::True),
            condition("Ready", Status::False),
        ],
    );
    m.conditions(&odd, &[condition("Valid", Status::Unknown)]);
    let text = scrape(&m);
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(CONDITION)).collect();
    assert_eq!(
        lines,
        [
            "# HELP clusterset_dns_bridge_export_condition 1 for each condition the bridge wrote on a ServiceExport, at its status (an export that is not ready: condition=\"Ready\", status!=\"True\").",
            "# TYPE clusterset_dns_bridge_export_condition gauge",
            r#"clusterset_dns_bridge_export_condition{namespace="shop",serviceexport="a\"b\\c",condition="Valid",status="Unknown"} 1"#,
            r#"clusterset_dns_bridge_export_condition{namespace="shop",serviceexport="web",condition="Valid",status="True"} 1"#,
            r#"clusterset_dns_bridge_export_condition{namespace="shop",serviceexport="web",condition="Ready",status="False"} 1"#,
        ]
    );
    // A condition that changed replaces the series; an export gone takes its series away.
    m.conditions(&web, &[condition("Valid", Status::False)]);
    m.conditions(&odd, &[]);
    let text = scrape(&m);
    let series: Vec<&str> = text.lines().filter(|l| l.starts_with(CONDITION)).collect();
    assert_eq!(
        series,
        [
            r#"clusterset_dns_bridge_export_condition{namespace="shop",serviceexport="web",condition="Valid",status="False"} 1"#
        ]
    );
}
