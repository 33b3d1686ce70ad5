//! Why XDP cannot be set up, in words an operator can act on: the capabilities or the sandbox
//! behind an EPERM, and the loopback settings AF_XDP answers need.

use std::net::SocketAddr;

/// Why the kernel may have said EPERM, from the process's `/proc/self/status` and
/// `/proc/self/uid_map`: the capabilities XDP needs that the process lacks; or, when it holds
/// them all, a user namespace (its capabilities do not reach bpf(2) or XDP), the seccomp filter
/// it runs under (container runtimes whose default profile allows bpf(2) only with
/// CAP_SYS_ADMIN), or else a security module.
pub(super) fn permission_hint(status: &str, uid_map: &str) -> String {
    const NEEDS: &str = "needs CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW, or root";
    const HOLDS: &str = "the process holds CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW";
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let Some(held) = field("CapEff:").and_then(|v| u64::from_str_radix(v, 16).ok()) else {
        return format!(" ({NEEDS})");
    };
    let has = |bit: u32| held & (1 << bit) != 0;
    // CAP_SYS_ADMIN still does what CAP_BPF does.
    let lacking: Vec<&str> = [
        ("CAP_NET_ADMIN", has(CAP_NET_ADMIN)),
        ("CAP_BPF", has(CAP_BPF) || has(CAP_SYS_ADMIN)),
        ("CAP_NET_RAW", has(CAP_NET_RAW)),
    ]
    .into_iter()
    .filter(|(_, held)| !held)
    .map(|(name, _)| name)
    .collect();
    // The first user namespace maps every user id onto itself.
    let own_namespace = uid_map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"];
    if !lacking.is_empty() {
        format!(" (lacks {}: {NEEDS})", lacking.join(", "))
    } else if !uid_map.is_empty() && !own_namespace {
        format!(
            " ({HOLDS}, but in a user namespace, where capabilities do not reach bpf(2) or \
             XDP: run it in the host's user namespace (a pod with hostUsers: true))"
        )
    } else if field("Seccomp:") == Some("2") {
        format!(
            " ({HOLDS}, so its seccomp filter is the likely refuser: some container runtimes' \
             default profiles, CRI-O's and Podman's among them, allow bpf(2) only with \
             CAP_SYS_ADMIN; give the container a seccomp profile that allows bpf, Localhost or \
             Unconfined)"
        )
    } else {
        format!(
            " ({HOLDS} and runs under no seccomp filter: a security module such as SELinux or \
             AppArmor may refuse it)"
        )
    }
}

/// Capability numbers (linux/capability.h).
pub(super) const CAP_NET_ADMIN: u32 = 12;
pub(super) const CAP_NET_RAW: u32 = 13;
pub(super) const CAP_SYS_ADMIN: u32 = 21;
pub(super) const CAP_BPF: u32 = 39;

/// The kernel numbers the loopback interface 1 in every network namespace.
pub(super) const LOOPBACK_IFINDEX: u32 = 1;

/// Whether IPv4 answers sent through AF_XDP on the loopback interface reach their clients. Such
/// frames carry no route, unlike what loopback sockets send, so the kernel routes them as if they
/// came from outside: it drops any whose source is a local address unless `accept_local` is on,
/// and any to or from 127.0.0.0/8 unless `route_localnet` is on. IPv6 needs neither.
pub(super) fn loopback_ready(iface: &str, listen: SocketAddr) -> Result<(), &'static str> {
    let serves_v4 = match listen.ip() {
        std::net::IpAddr::V4(_) => true,
        std::net::IpAddr::V6(ip) => ip.is_unspecified(),
    };
    if !serves_v4 {
        return Ok(());
    }
    // The kernel ORs each setting of "all" and of the interface.
    let on = |name: &str| {
        ["all", iface].iter().any(|conf| {
            std::fs::read_to_string(format!("/proc/sys/net/ipv4/conf/{conf}/{name}"))
                .is_ok_and(|v| v.trim() != "0")
        })
    };
    let localnet = match listen.ip() {
        std::net::IpAddr::V4(ip) => ip.is_loopback() || ip.is_unspecified(),
        std::net::IpAddr::V6(_) => true,
    };
    if !on("accept_local") || (localnet && !on("route_localnet")) {
        return Err(if localnet {
            "the kernel would drop the IPv4 answers: set net.ipv4.conf.lo.accept_local=1 and \
             net.ipv4.conf.lo.route_localnet=1 (frames sent through AF_XDP carry no route, so \
             loopback routes them as if they came from outside)"
        } else {
            "the kernel would drop the IPv4 answers: set net.ipv4.conf.lo.accept_local=1 \
             (frames sent through AF_XDP carry no route, so loopback routes them as if they \
             came from outside)"
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A /proc/self/status with capabilities `held` (bit numbers) and seccomp mode `seccomp`.
    fn status(held: &[u32], seccomp: u8) -> String {
        let eff: u64 = held.iter().map(|b| 1u64 << b).sum();
        format!(
            "Name:\tclusterset-dns\nCapInh:\t0000000000000000\nCapEff:\t{eff:016x}\nSeccomp:\t{seccomp}\n"
        )
    }

    #[test]
    fn a_refusal_names_the_missing_capability_or_else_what_refused() {
        let all = [CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW];
        let host = "         0          0 4294967295\n";
        let hint = permission_hint(&status(&[CAP_NET_ADMIN, CAP_NET_RAW], 2), host);
        assert!(
            hint.starts_with(" (lacks CAP_BPF: needs CAP_NET_ADMIN"),
            "{hint}"
        );
        let hint = permission_hint(&status(&[], 0), host);
        assert!(
            hint.starts_with(" (lacks CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW:"),
            "{hint}"
        );
        // CAP_SYS_ADMIN does what CAP_BPF does.
        let hint = permission_hint(&status(&[CAP_NET_ADMIN, CAP_SYS_ADMIN], 0), host);
        assert!(hint.starts_with(" (lacks CAP_NET_RAW:"), "{hint}");
        let hint = permission_hint(&status(&all, 2), "0 100000 65536\n");
        assert!(hint.contains("but in a user namespace"), "{hint}");
        assert!(hint.contains("hostUsers: true"), "{hint}");
        let hint = permission_hint(&status(&all, 2), host);
        assert!(
            hint.contains("so its seccomp filter is the likely refuser"),
            "{hint}"
        );
        assert!(hint.contains("CRI-O"), "{hint}");
        let hint = permission_hint(&status(&all, 0), host);
        assert!(hint.contains("runs under no seccomp filter"), "{hint}");
        // Unreadable: the general rule.
        assert_eq!(
            permission_hint("", ""),
            " (needs CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW, or root)"
        );
    }
}
