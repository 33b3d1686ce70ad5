//! A compact byte form of [`Slice`] (and of a ServiceImport's part), kept by the sources' stores
//! and by the zone builder for services it holds back for room. A source must keep every slice it
//! watches so that a change to one object can be turned back into the whole service, but the
//! model's form (a `Vec` and a `String` per endpoint, about 110 bytes and two allocations each)
//! would make that copy larger than the zone itself. Packed, a slice is one allocation and
//! about 12 bytes per endpoint; it is unpacked only for the service being re-rendered.
//!
//! Layout (lengths and counts are LEB128 varints; "optional" lengths are stored plus one, with
//! zero for none):
//!
//! ```text
//! name_len name | cluster_len+1 cluster
//! port_count   { name_len+1 name  protocol(1)  port(2) }
//! endpoint_count { hostname_len+1 hostname  address_count { family(1: 4|6) octets(4|16) } }
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::model::{
    Endpoint, Locality, ObjectKind, Port, Protocol, Service, ServiceKey, ServiceType, Slice,
};

/// A service packed: its key, what its import (or what stands for one) says, its slices.
pub type PackedService = (ServiceKey, PackedImport, Vec<Packed>);

/// The service `key` as DNS sees it, from its packed import and slices.
pub fn service(key: ServiceKey, import: &PackedImport, slices: &[Packed]) -> Service {
    let (head, ips, ports) = import.unpack();
    Service {
        key,
        origin: head.origin,
        kind: head.kind,
        ips,
        ports,
        slices: slices.iter().map(Packed::unpack).collect(),
        locality: head.locality,
        slices_absent: head.slices_absent,
    }
}

/// What an import says besides its addresses and ports: two bytes packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportHead {
    pub origin: ObjectKind,
    pub kind: ServiceType,
    pub locality: Locality,
    pub slices_absent: bool,
}

impl ImportHead {
    /// `service`'s head.
    pub fn of(service: &Service) -> Self {
        ImportHead {
            origin: service.origin,
            kind: service.kind,
            locality: service.locality,
            slices_absent: service.slices_absent,
        }
    }

    /// Byte 0: bit 0 the type, bits 1-2 the locality, bit 3 `Absent`. Byte 1: the origin's
    /// index in [`ObjectKind::ALL`], a byte of its own so that every kind has room, whether or
    /// not it gives services (checked when the crate is compiled, below).
    fn bytes(self) -> [u8; 2] {
        let kind = match self.kind {
            ServiceType::ClusterSetIp => 0,
            ServiceType::Headless => 1,
        };
        let locality = match self.locality {
            Locality::Any => 0,
            Locality::PreferOwn => 1,
            Locality::OwnOnly => 2,
        };
        let origin = ObjectKind::ALL
            .iter()
            .position(|k| *k == self.origin)
            .unwrap_or(0);
        [
            kind | locality << 1 | u8::from(self.slices_absent) << 3,
            origin as u8,
        ]
    }

    fn from_bytes([b, origin]: [u8; 2]) -> Self {
        ImportHead {
            origin: ObjectKind::ALL
                .get(usize::from(origin))
                .copied()
                .unwrap_or(ObjectKind::ALL[0]),
            kind: match b & 1 {
                0 => ServiceType::ClusterSetIp,
                _ => ServiceType::Headless,
            },
            locality: match (b >> 1) & 3 {
                0 => Locality::Any,
                1 => Locality::PreferOwn,
                _ => Locality::OwnOnly,
            },
            slices_absent: b & 0x08 != 0,
        }
    }
}

// The origin's byte holds the index of any kind.
const _: () = assert!(ObjectKind::ALL.len() <= 256);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed(Box<[u8]>);

fn varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn text(out: &mut Vec<u8>, s: &str) {
    varint(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

fn optional(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => varint(out, 0),
        Some(s) => {
            varint(out, s.len() + 1);
            out.extend_from_slice(s.as_bytes());
        }
    }
}

fn ports(out: &mut Vec<u8>, ports: &[Port]) {
    varint(out, ports.len());
    for p in ports {
        optional(out, p.name.as_deref());
        out.push(match p.protocol {
            Protocol::Tcp => 0,
            Protocol::Udp => 1,
            Protocol::Sctp => 2,
        });
        out.extend_from_slice(&p.port.to_be_bytes());
    }
}

fn addresses(out: &mut Vec<u8>, addresses: &[IpAddr]) {
    varint(out, addresses.len());
    for a in addresses {
        match a {
            IpAddr::V4(v4) => {
                out.push(4);
                out.extend_from_slice(&v4.octets());
            }
            IpAddr::V6(v6) => {
                out.push(6);
                out.extend_from_slice(&v6.octets());
            }
        }
    }
}

/// Reads what [`Packed::new`] and [`PackedImport::new`] wrote. The bytes are only ever our own, so running past the end
/// would be a bug in this file, not bad input.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }

    fn byte(&mut self) -> u8 {
        self.take(1)[0]
    }

    fn varint(&mut self) -> usize {
        let (mut n, mut shift) = (0usize, 0);
        loop {
            let b = self.byte();
            n |= ((b & 0x7F) as usize) << shift;
            if b & 0x80 == 0 {
                return n;
            }
            shift += 7;
        }
    }

    fn text(&mut self) -> String {
        let n = self.varint();
        String::from_utf8_lossy(self.take(n)).into_owned()
    }

    fn optional(&mut self) -> Option<String> {
        match self.varint() {
            0 => None,
            n => Some(String::from_utf8_lossy(self.take(n - 1)).into_owned()),
        }
    }

    fn ports(&mut self) -> Vec<Port> {
        (0..self.varint())
            .map(|_| {
                let name = self.optional();
                let protocol = match self.byte() {
                    0 => Protocol::Tcp,
                    1 => Protocol::Udp,
                    _ => Protocol::Sctp,
                };
                let port = u16::from_be_bytes([self.byte(), self.byte()]);
                Port {
                    name,
                    protocol,
                    port,
                }
            })
            .collect()
    }

    fn addresses(&mut self) -> Vec<IpAddr> {
        (0..self.varint())
            .map(|_| match self.byte() {
                4 => IpAddr::V4(Ipv4Addr::from(
                    <[u8; 4]>::try_from(self.take(4)).expect("4 octets"),
                )),
                _ => IpAddr::V6(Ipv6Addr::from(
                    <[u8; 16]>::try_from(self.take(16)).expect("16 octets"),
                )),
            })
            .collect()
    }
}

/// What a ServiceImport says (or what Linkerd's Services give in its place), packed the same
/// way: `head(1) ips ports` (see [`ImportHead`]); its key is where the store files it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedImport(Box<[u8]>);

impl PackedImport {
    pub fn new(head: ImportHead, ips: &[IpAddr], ports_: &[Port]) -> Self {
        let mut out = Vec::with_capacity(8 + ips.len() * 5 + ports_.len() * 8);
        out.extend_from_slice(&head.bytes());
        addresses(&mut out, ips);
        ports(&mut out, ports_);
        PackedImport(out.into_boxed_slice())
    }

    /// `(head, ips, ports)`.
    pub fn unpack(&self) -> (ImportHead, Vec<IpAddr>, Vec<Port>) {
        let mut r = Reader(&self.0);
        let head = ImportHead::from_bytes([r.byte(), r.byte()]);
        let ips = r.addresses();
        (head, ips, r.ports())
    }
}

impl Packed {
    pub fn new(slice: &Slice) -> Self {
        let mut out = Vec::with_capacity(16 + slice.endpoints.len() * 12);
        text(&mut out, &slice.name);
        optional(&mut out, slice.cluster.as_deref());
        ports(&mut out, &slice.ports);
        varint(&mut out, slice.endpoints.len());
        for e in &slice.endpoints {
            optional(&mut out, e.hostname.as_deref());
            addresses(&mut out, &e.addresses);
        }
        Packed(out.into_boxed_slice())
    }

    /// The slice's object name, without unpacking the rest.
    pub fn name(&self) -> &str {
        let mut r = Reader(&self.0);
        let n = r.varint();
        std::str::from_utf8(r.take(n)).unwrap_or("")
    }

    pub fn unpack(&self) -> Slice {
        let mut r = Reader(&self.0);
        let name = r.text();
        let cluster = r.optional();
        let ports = r.ports();
        let endpoints = (0..r.varint())
            .map(|_| {
                let hostname = r.optional();
                let addresses = r.addresses();
                Endpoint {
                    addresses,
                    hostname,
                }
            })
            .collect();
        Slice {
            name,
            cluster,
            ports,
            endpoints,
        }
    }

    /// Bytes held, for tests and estimates.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(s: Slice) {
        let p = Packed::new(&s);
        assert_eq!(p.name(), s.name);
        assert_eq!(p.unpack(), s);
    }

    #[test]
    fn every_shape_round_trips() {
        round_trip(Slice {
            name: String::new(),
            cluster: None,
            ports: vec![],
            endpoints: vec![],
        });
        let long = "x".repeat(300);
        for cluster in [None, Some(String::new()), Some("east.eu".into())] {
            round_trip(Slice {
                name: format!("web-{long}"),
                cluster,
                ports: vec![
                    Port {
                        name: None,
                        protocol: Protocol::Tcp,
                        port: 1,
                    },
                    Port {
                        name: Some("http".into()),
                        protocol: Protocol::Udp,
                        port: 65535,
                    },
                    Port {
                        name: Some(String::new()),
                        protocol: Protocol::Sctp,
                        port: 443,
                    },
                ],
                endpoints: (0..300u32)
                    .map(|i| Endpoint {
                        addresses: (0..i % 4)
                            .map(|k| {
                                if (i + k) % 2 == 0 {
                                    IpAddr::from([10, (i >> 8) as u8, i as u8, k as u8])
                                } else {
                                    IpAddr::from([0xfd00, 0, 0, 0, 0, 0, i as u16, k as u16])
                                }
                            })
                            .collect(),
                        hostname: match i % 3 {
                            0 => None,
                            1 => Some(format!("pod-{i}")),
                            _ => Some("h".repeat(63)),
                        },
                    })
                    .collect(),
            });
        }
    }

    #[test]
    fn imports_round_trip() {
        let ips: Vec<IpAddr> = vec![[10, 0, 0, 1].into(), "fd00::1".parse().unwrap()];
        let ports = [
            Port {
                name: Some("http".into()),
                protocol: Protocol::Tcp,
                port: 80,
            },
            Port {
                name: None,
                protocol: Protocol::Udp,
                port: 53,
            },
        ];
        for &origin in ObjectKind::ALL {
            for kind in [ServiceType::ClusterSetIp, ServiceType::Headless] {
                for locality in [Locality::Any, Locality::PreferOwn, Locality::OwnOnly] {
                    for slices_absent in [false, true] {
                        let head = ImportHead {
                            origin,
                            kind,
                            locality,
                            slices_absent,
                        };
                        for (ips, ports) in [(&ips[..], &ports[..]), (&[][..], &[][..])] {
                            let p = PackedImport::new(head, ips, ports);
                            assert_eq!(p.unpack(), (head, ips.to_vec(), ports.to_vec()));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn an_endpoint_costs_a_few_bytes() {
        let s = Slice {
            name: "web-east-abcde".into(),
            cluster: Some("east".into()),
            ports: vec![Port {
                name: Some("http".into()),
                protocol: Protocol::Tcp,
                port: 80,
            }],
            endpoints: (0..100u8)
                .map(|i| Endpoint {
                    addresses: vec![IpAddr::from([10, 0, 0, i])],
                    hostname: Some(format!("pod-{i}")),
                })
                .collect(),
        };
        let p = Packed::new(&s);
        assert!(p.len() < 100 * 14, "{} bytes", p.len());
        assert_eq!(p.unpack(), s);
    }
}
