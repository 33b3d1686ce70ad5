//! The differential test's world: a small deterministic generator of a varied cluster set
//! (services in several namespaces, ClusterSetIP and headless, IPv4 and IPv6 slices over three
//! clusters, long labels, not-ready endpoints), changed in rounds, and written to the API server
//! as YAML.

#[allow(unused_imports)]
use super::*;

// ---- a small deterministic generator ----

pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub(super) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub(super) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

#[derive(Debug, Clone)]
pub(super) struct Port {
    pub(super) name: Option<String>,
    pub(super) protocol: &'static str,
    pub(super) port: u16,
}

#[derive(Debug, Clone)]
pub(super) struct Endpoint {
    pub(super) ip: IpAddr,
    pub(super) hostname: Option<String>,
    pub(super) ready: Option<bool>,
}

#[derive(Debug, Clone)]
pub(super) struct Slice {
    pub(super) name: String,
    pub(super) cluster: String,
    pub(super) v6: bool,
    pub(super) ports: Vec<Port>,
    pub(super) endpoints: Vec<Endpoint>,
}

#[derive(Debug, Clone)]
pub(super) struct Service {
    pub(super) ns: String,
    pub(super) name: String,
    pub(super) headless: bool,
    pub(super) ips: Vec<IpAddr>,
    pub(super) ports: Vec<Port>,
    pub(super) slices: Vec<Slice>,
}

pub(super) const NAMESPACES: [&str; 4] = [
    "shop",
    "data",
    "batch",
    "a-namespace-with-a-rather-long-name",
];
pub(super) const CLUSTERS: [&str; 3] = ["east", "west", "c3"];

pub(super) struct World {
    pub(super) rng: Rng,
    pub(super) next_ip: u32,
    pub(super) next_id: u32,
    pub(super) services: BTreeMap<(String, String), Service>,
}

impl World {
    pub(super) fn new(seed: u64) -> World {
        World {
            rng: Rng(seed | 1),
            next_ip: 1,
            next_id: 0,
            services: BTreeMap::new(),
        }
    }

    pub(super) fn v4(&mut self) -> IpAddr {
        self.next_ip += 1;
        let n = self.next_ip;
        IpAddr::V4(Ipv4Addr::new(
            10,
            100 + (n >> 16) as u8,
            (n >> 8) as u8,
            n as u8,
        ))
    }

    pub(super) fn v6(&mut self) -> IpAddr {
        self.next_ip += 1;
        IpAddr::V6(Ipv6Addr::new(
            0xfd00,
            0x100,
            0,
            0,
            0,
            0,
            (self.next_ip >> 16) as u16,
            self.next_ip as u16,
        ))
    }

    pub(super) fn ports(&mut self) -> Vec<Port> {
        let r = &mut self.rng;
        match r.below(6) {
            // One unnamed port.
            0 => vec![Port {
                name: None,
                protocol: "TCP",
                port: 8080,
            }],
            // TCP and UDP on the same number (port names are unique per slice, as in kube-dns).
            1 => vec![
                Port {
                    name: Some("dns".into()),
                    protocol: "UDP",
                    port: 53,
                },
                Port {
                    name: Some("dns-tcp".into()),
                    protocol: "TCP",
                    port: 53,
                },
            ],
            // Two named ports.
            2 => vec![
                Port {
                    name: Some("http".into()),
                    protocol: "TCP",
                    port: 80,
                },
                Port {
                    name: Some("metrics".into()),
                    protocol: "TCP",
                    port: 9100,
                },
            ],
            // No ports at all.
            3 => vec![],
            _ => vec![Port {
                name: Some("http".into()),
                protocol: "TCP",
                port: 80,
            }],
        }
    }

    pub(super) fn endpoints(&mut self, v6: bool, hostnames: bool) -> Vec<Endpoint> {
        let n = 1 + self.rng.below(4);
        (0..n)
            .map(|i| {
                let ip = if v6 { self.v6() } else { self.v4() };
                let ready = match self.rng.below(8) {
                    0 => Some(false),
                    1 => Some(true),
                    _ => None,
                };
                Endpoint {
                    ip,
                    hostname: hostnames.then(|| format!("pod-{i}")),
                    ready,
                }
            })
            .collect()
    }

    pub(super) fn service(&mut self) -> Service {
        self.next_id += 1;
        let id = self.next_id;
        let ns = self.rng.pick(&NAMESPACES).to_string();
        let name = if self.rng.chance(8) {
            // A 63-octet label.
            format!("long-{id:04}-{}", "x".repeat(63 - 10))
        } else {
            format!("svc-{id}")
        };
        let headless = self.rng.chance(45);
        let ports = self.ports();
        let ips = if headless {
            vec![]
        } else {
            match self.rng.below(5) {
                0 => vec![self.v6()],
                1 => vec![self.v4(), self.v6()],
                2 => vec![], // Submariner-style: no clusterset IP
                _ => vec![self.v4()],
            }
        };
        let mut slices = Vec::new();
        let clusters = 1 + self.rng.below(3) as usize;
        let hostnames = headless && self.rng.chance(50);
        for c in CLUSTERS.iter().take(clusters) {
            let v6 = self.rng.chance(20);
            let endpoints = self.endpoints(v6, hostnames);
            slices.push(Slice {
                name: format!("{name}-{c}-{}", if v6 { "v6" } else { "v4" }),
                cluster: c.to_string(),
                v6,
                ports: ports.clone(),
                endpoints,
            });
        }
        Service {
            ns,
            name,
            headless,
            ips,
            ports,
            slices,
        }
    }

    pub(super) fn add(&mut self, n: usize) {
        for _ in 0..n {
            let s = self.service();
            self.services.insert((s.ns.clone(), s.name.clone()), s);
        }
    }

    /// Changes some services (endpoints replaced, ready flipped, ports changed) and deletes some;
    /// returns the deleted ones.
    pub(super) fn churn(&mut self, updates: usize, deletes: usize) -> Vec<Service> {
        let keys: Vec<(String, String)> = self.services.keys().cloned().collect();
        for _ in 0..updates {
            let k = self.rng.pick(&keys).clone();
            let mut s = self.services[&k].clone();
            match self.rng.below(4) {
                0 => {
                    let hostnames = s
                        .slices
                        .iter()
                        .any(|sl| sl.endpoints.iter().any(|e| e.hostname.is_some()));
                    for i in 0..s.slices.len() {
                        let v6 = s.slices[i].v6;
                        s.slices[i].endpoints = self.endpoints(v6, hostnames);
                    }
                }
                1 => {
                    for sl in &mut s.slices {
                        for e in &mut sl.endpoints {
                            e.ready = Some(e.ready == Some(false));
                        }
                    }
                }
                2 => {
                    s.ports = self.ports();
                    for sl in &mut s.slices {
                        sl.ports = s.ports.clone();
                    }
                }
                _ => {
                    if !s.headless {
                        s.ips = vec![self.v4()];
                    }
                }
            }
            self.services.insert(k, s);
        }
        let mut gone = Vec::new();
        for _ in 0..deletes {
            let keys: Vec<(String, String)> = self.services.keys().cloned().collect();
            if let Some(k) = keys.get(self.rng.below(keys.len() as u64) as usize) {
                gone.push(self.services.remove(k).unwrap());
            }
        }
        gone
    }
}

pub(super) fn port_yaml(p: &Port) -> String {
    match &p.name {
        Some(n) => format!("{{name: {n}, protocol: {}, port: {}}}", p.protocol, p.port),
        None => format!("{{protocol: {}, port: {}}}", p.protocol, p.port),
    }
}

pub(super) fn yaml(s: &Service) -> String {
    let ports: Vec<String> = s.ports.iter().map(port_yaml).collect();
    let ips: Vec<String> = s.ips.iter().map(|i| format!("\"{i}\"")).collect();
    let mut out = format!(
        "---\napiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceImport\nmetadata: {{name: {}, namespace: {}}}\n\
         spec: {{type: {}, ips: [{}], ports: [{}]}}\n",
        s.name,
        s.ns,
        if s.headless {
            "Headless"
        } else {
            "ClusterSetIP"
        },
        ips.join(", "),
        ports.join(", ")
    );
    for sl in &s.slices {
        let ports: Vec<String> = sl.ports.iter().map(port_yaml).collect();
        out.push_str(&format!(
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {}\n  namespace: {}\n  labels: {{multicluster.kubernetes.io/service-name: {}, multicluster.kubernetes.io/source-cluster: {}}}\n\
             addressType: {}\nports: [{}]\nendpoints:\n",
            sl.name,
            s.ns,
            s.name,
            sl.cluster,
            if sl.v6 { "IPv6" } else { "IPv4" },
            ports.join(", ")
        ));
        for e in &sl.endpoints {
            out.push_str(&format!("- addresses: [\"{}\"]\n", e.ip));
            if let Some(h) = &e.hostname {
                out.push_str(&format!("  hostname: {h}\n"));
            }
            if let Some(r) = e.ready {
                out.push_str(&format!("  conditions: {{ready: {r}}}\n"));
            }
        }
        if sl.endpoints.is_empty() {
            out.push_str("[]\n");
        }
    }
    out
}

pub(super) fn delete(k: &Cluster, s: &Service) {
    let mut args = vec![
        "delete".to_string(),
        "-n".into(),
        s.ns.clone(),
        "--wait=false".into(),
    ];
    args.push(format!("serviceimports.multicluster.x-k8s.io/{}", s.name));
    for sl in &s.slices {
        args.push(format!("endpointslices.discovery.k8s.io/{}", sl.name));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert!(k.kubectl_ok(&args), "kubectl {args:?}");
}

// ---- the query corpus ----
