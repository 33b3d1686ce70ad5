//! Metric families built at scrape time, for the collectors whose values live elsewhere (the
//! serving workers' counters, the XDP sockets'): registered like every other metric, so all of
//! them reach `/metrics` through the `prometheus` crate's registry and text encoder.

use std::collections::HashMap;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, LabelPair, MetricFamily, MetricType};

/// What one family is: its name, help and label names, for [`prometheus::core::Collector::desc`].
pub struct Shape {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: MetricType,
    pub labels: &'static [&'static str],
}

impl Shape {
    pub fn desc(&self) -> Desc {
        Desc::new(
            self.name.into(),
            self.help.into(),
            self.labels.iter().map(|l| l.to_string()).collect(),
            HashMap::new(),
        )
        .expect("a valid metric name and labels")
    }
}

/// A collector of the families `shapes` describe, built by `collect` at every scrape.
pub struct ScrapeCollector<F> {
    descs: Vec<Desc>,
    collect: F,
}

impl<F: Fn() -> Vec<MetricFamily> + Send + Sync> ScrapeCollector<F> {
    pub fn new(shapes: &[&Shape], collect: F) -> Self {
        ScrapeCollector {
            descs: shapes.iter().map(|s| s.desc()).collect(),
            collect,
        }
    }
}

impl<F: Fn() -> Vec<MetricFamily> + Send + Sync> Collector for ScrapeCollector<F> {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        (self.collect)()
    }
}

/// One family's series, added one by one; the label values go in the order of the shape's
/// label names.
pub struct Family<'s> {
    shape: &'s Shape,
    metrics: Vec<proto::Metric>,
}

impl<'s> Family<'s> {
    pub fn new(shape: &'s Shape) -> Self {
        Family {
            shape,
            metrics: Vec::new(),
        }
    }

    fn metric(&self, values: &[&str]) -> proto::Metric {
        debug_assert_eq!(values.len(), self.shape.labels.len(), "{}", self.shape.name);
        let labels = self
            .shape
            .labels
            .iter()
            .zip(values)
            .map(|(name, value)| {
                let mut l = LabelPair::default();
                l.set_name(name.to_string());
                l.set_value(value.to_string());
                l
            })
            .collect();
        proto::Metric::from_label(labels)
    }

    pub fn counter(&mut self, values: &[&str], n: u64) {
        let mut c = proto::Counter::default();
        c.set_value(n as f64);
        let mut m = self.metric(values);
        m.set_counter(c);
        self.metrics.push(m);
    }

    pub fn gauge(&mut self, values: &[&str], v: f64) {
        let mut g = proto::Gauge::default();
        g.set_value(v);
        let mut m = self.metric(values);
        m.set_gauge(g);
        self.metrics.push(m);
    }

    /// A histogram series from non-cumulative bucket `counts` (one per bound, then +Inf).
    pub fn histogram(&mut self, values: &[&str], bounds: &[f64], counts: &[u64], sum: f64) {
        let mut cumulative = 0;
        let buckets = bounds
            .iter()
            .zip(counts)
            .map(|(&bound, &c)| {
                cumulative += c;
                let mut b = proto::Bucket::default();
                b.set_upper_bound(bound);
                b.set_cumulative_count(cumulative);
                b
            })
            .collect();
        cumulative += counts[bounds.len()];
        let mut h = proto::Histogram::default();
        h.set_bucket(buckets);
        h.set_sample_count(cumulative);
        h.set_sample_sum(sum);
        let mut m = self.metric(values);
        m.set_histogram(h);
        self.metrics.push(m);
    }

    pub fn done(self) -> MetricFamily {
        let mut f = MetricFamily::default();
        f.set_name(self.shape.name.into());
        f.set_help(self.shape.help.into());
        f.set_field_type(self.shape.kind);
        f.set_metric(self.metrics);
        f
    }
}
