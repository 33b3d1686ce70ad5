//! Ethernet, IP and UDP framing for the XDP path: reading a query frame that the kernel handed
//! over before its own IP and UDP processing, and writing the answer frame. It checks what the
//! kernel's stack would have checked (lengths, fragments, header and UDP checksums, source
//! addresses nobody can be answered at), because on this path nothing else does.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub const ETH_LEN: usize = 14;
pub const IPV4_LEN: usize = 20;
pub const IPV6_LEN: usize = 40;
pub const UDP_LEN: usize = 8;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const PROTO_UDP: u8 = 17;
/// TTL / hop limit of answers (Linux's default).
const HOPS: u8 = 64;

/// Whom an answer goes to and from where: the query's addresses, swapped when written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// The query's source and destination MAC addresses.
    pub client_mac: [u8; 6],
    pub server_mac: [u8; 6],
    pub client: SocketAddr,
    pub server: SocketAddr,
}

impl Reply {
    /// Bytes of headers before the DNS message.
    pub fn header_len(&self) -> usize {
        ETH_LEN
            + UDP_LEN
            + if self.client.is_ipv4() {
                IPV4_LEN
            } else {
                IPV6_LEN
            }
    }
}

/// Why a frame gets no answer (the kernel would drop it too, or it is nothing to answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// Not IPv4/IPv6 UDP without options, extension headers or fragmentation.
    NotPlainUdp,
    /// A length field disagrees with the frame.
    Length,
    Checksum,
    /// Source port 0, or a source address that is not one host's (multicast, broadcast,
    /// unspecified): no reply may go there.
    Source,
    /// Not to the port served.
    Port,
    /// To a broadcast, multicast or unspecified address: an answer could not come from it.
    Destination,
}

impl Dropped {
    /// Every reason, in declaration order, so `reason as usize` indexes it.
    pub const ALL: [Dropped; 6] = [
        Dropped::NotPlainUdp,
        Dropped::Length,
        Dropped::Checksum,
        Dropped::Source,
        Dropped::Port,
        Dropped::Destination,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Dropped::NotPlainUdp => "not_plain_udp",
            Dropped::Length => "length",
            Dropped::Checksum => "checksum",
            Dropped::Source => "source",
            Dropped::Port => "port",
            Dropped::Destination => "destination",
        }
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads the query in `frame` (an Ethernet frame) to UDP port `port`: where to answer, and the
/// DNS message.
pub fn parse(frame: &[u8], port: u16) -> Result<(Reply, &[u8]), Dropped> {
    if frame.len() < ETH_LEN {
        return Err(Dropped::Length);
    }
    let mut client_mac = [0; 6];
    let mut server_mac = [0; 6];
    server_mac.copy_from_slice(&frame[0..6]);
    client_mac.copy_from_slice(&frame[6..12]);
    let ip = &frame[ETH_LEN..];
    // The addresses in the UDP checksum's pseudo-header are those of the IP header as sent.
    let (client_ip, server_ip, udp, addrs): (IpAddr, IpAddr, &[u8], &[u8]) = match be16(frame, 12) {
        ETHERTYPE_IPV4 => {
            if ip.len() < IPV4_LEN + UDP_LEN {
                return Err(Dropped::Length);
            }
            if ip[0] != 0x45 || ip[9] != PROTO_UDP || be16(ip, 6) & 0x3fff != 0 {
                return Err(Dropped::NotPlainUdp);
            }
            let total = be16(ip, 2) as usize;
            if total < IPV4_LEN + UDP_LEN || total > ip.len() {
                return Err(Dropped::Length);
            }
            if fold(sum(&ip[..IPV4_LEN], 0)) != 0xffff {
                return Err(Dropped::Checksum);
            }
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
            if src.is_unspecified() || src.is_broadcast() || src.is_multicast() {
                return Err(Dropped::Source);
            }
            if dst.is_unspecified() || dst.is_broadcast() || dst.is_multicast() {
                return Err(Dropped::Destination);
            }
            (src.into(), dst.into(), &ip[IPV4_LEN..total], &ip[12..20])
        }
        ETHERTYPE_IPV6 => {
            if ip.len() < IPV6_LEN + UDP_LEN {
                return Err(Dropped::Length);
            }
            if ip[0] >> 4 != 6 || ip[6] != PROTO_UDP {
                return Err(Dropped::NotPlainUdp);
            }
            let payload = be16(ip, 4) as usize;
            if payload < UDP_LEN || IPV6_LEN + payload > ip.len() {
                return Err(Dropped::Length);
            }
            let src = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap());
            let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[24..40]).unwrap());
            if src.is_unspecified() || src.is_multicast() {
                return Err(Dropped::Source);
            }
            if dst.is_unspecified() || dst.is_multicast() {
                return Err(Dropped::Destination);
            }
            (
                src.into(),
                dst.into(),
                &ip[IPV6_LEN..IPV6_LEN + payload],
                &ip[8..40],
            )
        }
        _ => return Err(Dropped::NotPlainUdp),
    };
    let len = be16(udp, 4) as usize;
    // Bytes past the UDP length are ignored, as the kernel trims them.
    if len < UDP_LEN || len > udp.len() {
        return Err(Dropped::Length);
    }
    let udp = &udp[..len];
    let pseudo = sum(addrs, PROTO_UDP as u64 + len as u64);
    // IPv4 may leave the checksum out (0); IPv6 may not. A packet sent on this host (over
    // loopback or a veth pair) may carry the unfinished checksum that offloading leaves, the
    // pseudo-header's sum alone: the kernel's own receive path trusts those without a check.
    let check = be16(udp, 6);
    let unfinished = check == fold(pseudo);
    if (client_ip.is_ipv6() || check != 0) && !unfinished && fold(sum(udp, pseudo)) != 0xffff {
        return Err(Dropped::Checksum);
    }
    let (sport, dport) = (be16(udp, 0), be16(udp, 2));
    if dport != port {
        return Err(Dropped::Port);
    }
    if sport == 0 {
        return Err(Dropped::Source);
    }
    let reply = Reply {
        client_mac,
        server_mac,
        client: SocketAddr::new(client_ip, sport),
        server: SocketAddr::new(server_ip, dport),
    };
    Ok((reply, &udp[UDP_LEN..]))
}

/// Writes the answer frame carrying `message` into `out`, which must hold
/// `reply.header_len() + message.len()` bytes; returns that length.
pub fn write(reply: &Reply, message: &[u8], out: &mut [u8]) -> usize {
    let total = reply.header_len() + message.len();
    let out = &mut out[..total];
    out[0..6].copy_from_slice(&reply.client_mac);
    out[6..12].copy_from_slice(&reply.server_mac);
    let udp_len = (UDP_LEN + message.len()) as u16;
    let (udp_at, pseudo) = match (reply.server.ip(), reply.client.ip()) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            out[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
            let ip = &mut out[ETH_LEN..ETH_LEN + IPV4_LEN];
            // Don't fragment, ID 0: an atomic datagram (RFC 6864), as Linux sends them.
            ip[..12].copy_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, HOPS, PROTO_UDP, 0, 0]);
            ip[2..4].copy_from_slice(&(IPV4_LEN as u16 + udp_len).to_be_bytes());
            ip[12..16].copy_from_slice(&src.octets());
            ip[16..20].copy_from_slice(&dst.octets());
            let check = !fold(sum(ip, 0));
            ip[10..12].copy_from_slice(&check.to_be_bytes());
            let pseudo = sum(&ip[12..20], PROTO_UDP as u64 + udp_len as u64);
            (ETH_LEN + IPV4_LEN, pseudo)
        }
        (src, dst) => {
            let (src, dst) = (v6(src), v6(dst));
            out[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
            let ip = &mut out[ETH_LEN..ETH_LEN + IPV6_LEN];
            ip[..8].copy_from_slice(&[0x60, 0, 0, 0, 0, 0, PROTO_UDP, HOPS]);
            ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
            ip[8..24].copy_from_slice(&src.octets());
            ip[24..40].copy_from_slice(&dst.octets());
            let pseudo = sum(&ip[8..40], PROTO_UDP as u64 + udp_len as u64);
            (ETH_LEN + IPV6_LEN, pseudo)
        }
    };
    let udp = &mut out[udp_at..];
    udp[0..2].copy_from_slice(&reply.server.port().to_be_bytes());
    udp[2..4].copy_from_slice(&reply.client.port().to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
    udp[UDP_LEN..].copy_from_slice(message);
    // A computed 0 is sent as all ones: 0 means "no checksum".
    let check = match !fold(sum(udp, pseudo)) {
        0 => 0xffff,
        c => c,
    };
    udp[6..8].copy_from_slice(&check.to_be_bytes());
    total
}

fn v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// One's-complement sum of `bytes` as big-endian 16-bit words (an odd last byte padded with
/// zero), added to `start`, not yet folded.
fn sum(bytes: &[u8], start: u64) -> u64 {
    let mut s = start;
    let mut words = bytes.chunks_exact(4);
    for w in &mut words {
        s += u32::from_be_bytes([w[0], w[1], w[2], w[3]]) as u64;
    }
    let rest = words.remainder();
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        s += u16::from_be_bytes([p[0], p[1]]) as u64;
    }
    if let [last] = pairs.remainder() {
        s += (*last as u64) << 8;
    }
    s
}

/// Folds a sum to 16 bits with end-around carry.
fn fold(mut s: u64) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    const MACS: ([u8; 6], [u8; 6]) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);

    fn reply(client: &str, server: &str) -> Reply {
        Reply {
            client_mac: MACS.0,
            server_mac: MACS.1,
            client: client.parse().unwrap(),
            server: server.parse().unwrap(),
        }
    }

    /// A query frame as a client would send it: the answer frame of the reversed reply.
    fn query_frame(client: &str, server: &str, message: &[u8]) -> Vec<u8> {
        let r = reply(client, server);
        let reversed = Reply {
            client_mac: r.server_mac,
            server_mac: r.client_mac,
            client: r.server,
            server: r.client,
        };
        let mut out = vec![0; r.header_len() + message.len()];
        write(&reversed, message, &mut out);
        out
    }

    /// A frame's UDP checksum as the kernel verifies it, computed independently: RFC 768 over
    /// the pseudo-header built field by field.
    fn udp_checksum_ok(frame: &[u8]) -> bool {
        let v4 = be16(frame, 12) == ETHERTYPE_IPV4;
        let (addrs, udp) = if v4 {
            (&frame[26..34], &frame[34..])
        } else {
            (&frame[22..54], &frame[54..])
        };
        let mut pseudo = addrs.to_vec();
        pseudo.extend_from_slice(&[0, PROTO_UDP]);
        pseudo.extend_from_slice(&(udp.len() as u16).to_be_bytes());
        let mut all = pseudo;
        all.extend_from_slice(udp);
        if all.len() % 2 == 1 {
            all.push(0);
        }
        let mut s: u32 = 0;
        for p in all.chunks(2) {
            s += u16::from_be_bytes([p[0], p[1]]) as u32;
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s == 0xffff
    }

    #[test]
    fn an_answer_frame_carries_swapped_addresses_and_valid_checksums() {
        for (client, server) in [
            ("192.0.2.7:40000", "198.51.100.1:53"),
            ("[2001:db8::7]:40000", "[2001:db8::1]:53"),
        ] {
            // Odd and even message lengths exercise the checksum's padding.
            for message in [&b"\x12\x34abc"[..], &b"\x12\x34abcd"[..], &[0xff; 300][..]] {
                let r = reply(client, server);
                let mut out = vec![0xaa; 2048];
                let n = write(&r, message, &mut out);
                let frame = &out[..n];
                assert_eq!(n, r.header_len() + message.len());
                assert_eq!(&frame[0..6], &MACS.0, "to the client's MAC");
                assert_eq!(&frame[6..12], &MACS.1, "from ours");
                assert!(udp_checksum_ok(frame), "{client}: UDP checksum");
                if r.client.is_ipv4() {
                    let mut s: u32 = 0;
                    for p in frame[14..34].chunks(2) {
                        s += u16::from_be_bytes([p[0], p[1]]) as u32;
                    }
                    assert_eq!((s & 0xffff) + (s >> 16), 0xffff, "IPv4 header checksum");
                    assert_eq!(&frame[26..30], &[198, 51, 100, 1], "from our address");
                    assert_eq!(&frame[30..34], &[192, 0, 2, 7], "to the client");
                    assert_eq!(be16(frame, 16) as usize, n - 14, "total length");
                    assert_eq!(frame[22], 64, "TTL");
                } else {
                    assert_eq!(be16(frame, 18) as usize, n - 54, "payload length");
                    assert_eq!(frame[21], 64, "hop limit");
                }
                let udp = &frame[r.header_len() - UDP_LEN..];
                assert_eq!(be16(udp, 0), 53, "from our port");
                assert_eq!(be16(udp, 2), 40000, "to the client's port");
                assert_eq!(be16(udp, 4) as usize, UDP_LEN + message.len());
                assert_eq!(&udp[UDP_LEN..], message);
            }
        }
    }

    #[test]
    fn a_query_frame_reads_back_as_the_reply_to_its_sender() {
        for (client, server) in [
            ("192.0.2.7:40000", "198.51.100.1:53"),
            ("[2001:db8::7]:40000", "[2001:db8::1]:53"),
        ] {
            let frame = query_frame(client, server, b"\x00\x01query");
            let (r, message) = parse(&frame, 53).unwrap();
            assert_eq!(r, reply(client, server));
            assert_eq!(message, b"\x00\x01query");
            // Trailing Ethernet padding is not part of the message.
            let mut padded = frame.clone();
            padded.extend_from_slice(&[0; 20]);
            assert_eq!(parse(&padded, 53).unwrap().1, b"\x00\x01query");
        }
    }

    #[test]
    fn what_the_kernel_would_drop_is_dropped() {
        let v4 = query_frame("192.0.2.7:40000", "198.51.100.1:53", b"abcdef");
        let v6 = query_frame("[2001:db8::7]:40000", "[2001:db8::1]:53", b"abcdef");
        let with = |frame: &[u8], at: usize, bytes: &[u8]| {
            let mut f = frame.to_vec();
            f[at..at + bytes.len()].copy_from_slice(bytes);
            f
        };
        // UDP without a checksum is valid over IPv4 only.
        assert!(parse(&with(&v4, 40, &[0, 0]), 53).is_ok());
        // A frame from this host with the checksum left unfinished for offload: the field holds
        // the pseudo-header's folded sum (addresses, protocol, UDP length) alone.
        for (frame, addrs) in [(&v4, 26..34), (&v6, 22..54)] {
            let udp_at = frame.len() - 6 - UDP_LEN;
            let mut pseudo = sum(&frame[addrs], PROTO_UDP as u64 + (UDP_LEN + 6) as u64);
            pseudo = fold(pseudo) as u64;
            let partial = with(frame, udp_at + 6, &(pseudo as u16).to_be_bytes());
            assert!(parse(&partial, 53).is_ok(), "unfinished checksum");
        }
        let cases: Vec<(&str, Vec<u8>, Dropped)> = vec![
            ("runt", v4[..20].to_vec(), Dropped::Length),
            ("ARP", with(&v4, 12, &[8, 6]), Dropped::NotPlainUdp),
            ("IPv4 options", with(&v4, 14, &[0x46]), Dropped::NotPlainUdp),
            ("TCP", with(&v4, 23, &[6]), Dropped::NotPlainUdp),
            ("fragment", with(&v4, 20, &[0x20, 0]), Dropped::NotPlainUdp),
            (
                "IP length past the frame",
                with(&v4, 16, &[0x10, 0]),
                Dropped::Length,
            ),
            ("header checksum", with(&v4, 24, &[0, 0]), Dropped::Checksum),
            (
                "UDP length past IP",
                with(&v4, 38, &[0x10, 0]),
                Dropped::Length,
            ),
            (
                "UDP checksum",
                with(&v4, 40, &[0x12, 0x34]),
                Dropped::Checksum,
            ),
            ("payload changed", with(&v4, 42, b"x"), Dropped::Checksum),
            ("other port", with(&v4, 36, &[0, 54]), Dropped::Checksum),
            (
                "IPv6 no checksum",
                with(&v6, 60, &[0, 0]),
                Dropped::Checksum,
            ),
            (
                "IPv6 extension header",
                with(&v6, 20, &[0]),
                Dropped::NotPlainUdp,
            ),
            ("IPv6 length", with(&v6, 18, &[0x10, 0]), Dropped::Length),
            (
                "IPv6 payload changed",
                with(&v6, 62, b"x"),
                Dropped::Checksum,
            ),
        ];
        for (what, frame, why) in cases {
            assert_eq!(parse(&frame, 53).err(), Some(why), "{what}");
        }
        assert_eq!(parse(&v4, 5353).err(), Some(Dropped::Port));
        for (k, why) in Dropped::ALL.iter().enumerate() {
            assert_eq!(*why as usize, k, "{why:?} indexes its own counter");
        }
        for (client, server) in [
            ("192.0.2.7:0", "198.51.100.1:53"),
            ("0.0.0.0:40000", "198.51.100.1:53"),
            ("255.255.255.255:40000", "198.51.100.1:53"),
            ("224.0.0.251:40000", "198.51.100.1:53"),
            ("[ff02::fb]:40000", "[2001:db8::1]:53"),
            ("[::]:40000", "[2001:db8::1]:53"),
        ] {
            let f = query_frame(client, server, b"abcdef");
            assert_eq!(parse(&f, 53).err(), Some(Dropped::Source), "{client}");
        }
        for server in [
            "255.255.255.255:53",
            "224.0.0.251:53",
            "0.0.0.0:53",
            "[ff02::fb]:53",
            "[::]:53",
        ] {
            let client = if server.starts_with('[') {
                "[2001:db8::7]:40000"
            } else {
                "192.0.2.7:40000"
            };
            let f = query_frame(client, server, b"abcdef");
            assert_eq!(parse(&f, 53).err(), Some(Dropped::Destination), "{server}");
        }
    }
}
