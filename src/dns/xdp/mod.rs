//! The AF_XDP path (`--xdp IFACE`): an XDP program on the interface hands the server's UDP
//! queries to an AF_XDP socket per receive queue, before the kernel's IP and UDP layers, and the
//! answers go back out through the same socket. It skips the per-packet socket work that is most
//! of the CPU a socket-based server spends (routing, building the socket buffer, the UDP socket
//! lookup and queueing). Frames the program does not take (IP options, fragments, VLAN tags,
//! other addresses) and all of TCP reach the ordinary sockets, which stay bound and answer alike.
//!
//! Sockets run in copy mode, which every driver and generic XDP support. The program is attached
//! through a BPF link, so it goes away with the process, however the process ends.

pub mod frame;
pub mod program;

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing::{debug, warn};

use super::account;
use super::{BATCH, Batch, QueryLog, Transport};
use crate::metrics::{Metrics, QueryCounters};
use crate::zone::{View, Zone, prefetch};
pub use program::Mode;

/// Bytes per UMEM frame: a whole answer (at most 1,232 bytes of DNS, see
/// [`super::UDP_PAYLOAD`]) with its Ethernet, IPv6 and UDP headers fits in one.
const FRAME: usize = 2048;
/// The longest frame a socket receives: in copy mode the kernel puts XDP's 256 bytes of
/// headroom before each received frame. Longer queries (rare: DNS queries are small) are left
/// to the ordinary sockets by the program.
const MAX_FRAME: usize = FRAME - 256;
/// Each socket has as many frames for receiving (all in the fill ring until the kernel uses
/// them) as for sending, and each ring holds all of its frames: 1,024 each (4 MiB a queue) while
/// the sockets together stay within [`BUDGET`], fewer on interfaces with many queues (veth, as
/// container networks make it, has a queue per CPU of the node), down to 128.
const MOST_FRAMES: u32 = 1024;
const LEAST_FRAMES: u32 = 128;
/// The memory the sockets' frames take in all, as long as each keeps [`LEAST_FRAMES`].
const BUDGET: usize = 16 << 20;

/// Why the kernel may have said EPERM, from the process's `/proc/self/status` and
/// `/proc/self/uid_map`: the capabilities XDP needs that the process lacks; or, when it holds
/// them all, a user namespace (its capabilities do not reach bpf(2) or XDP), the seccomp filter
/// it runs under (container runtimes whose default profile allows bpf(2) only with
/// CAP_SYS_ADMIN), or else a security module.
fn permission_hint(status: &str, uid_map: &str) -> String {
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
const CAP_NET_ADMIN: u32 = 12;
const CAP_NET_RAW: u32 = 13;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_BPF: u32 = 39;

/// Frames per ring for each of `queues` sockets (a power of two, as the kernel wants).
fn ring_frames(queues: u32) -> u32 {
    let fit = BUDGET / (queues.max(1) as usize * 2 * FRAME);
    let pow2 = if fit == 0 { 0 } else { 1 << fit.ilog2() };
    (pow2 as u32).clamp(LEAST_FRAMES, MOST_FRAMES)
}
/// How long a busy receive queue is waited for at start-up.
const BIND_PATIENCE: Duration = Duration::from_secs(3);
/// How often an idle worker looks at the stop flag, in milliseconds.
const IDLE_CHECK_MS: i32 = 100;

/// Why `--xdp` could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("cannot serve UDP through XDP on {iface}: {message}")]
pub struct XdpError {
    iface: String,
    message: String,
}

/// The program attached to an interface and one AF_XDP socket per receive queue.
pub struct Xdp {
    /// Detaches the program when closed; closed before the sockets (field order).
    _link: OwnedFd,
    sockets: Vec<Socket>,
    pub mode: Mode,
    pub iface: String,
    pub coalesce: Coalescing,
}

impl Xdp {
    /// Attaches to the configured interface for the DNS server on `listen` (its UDP sockets
    /// must be bound already: they answer what the program passes on).
    pub fn attach(config: &Config, listen: SocketAddr) -> Result<Xdp, XdpError> {
        let (iface, coalesce) = (config.interface.as_str(), config.coalesce);
        // `busy`: what EBUSY means at this step.
        let fail = |what: &str, busy: &str, error: io::Error| {
            let hint = match error.raw_os_error() {
                Some(libc::EPERM) => {
                    let read = |f| std::fs::read_to_string(f).unwrap_or_default();
                    permission_hint(&read("/proc/self/status"), &read("/proc/self/uid_map"))
                }
                Some(libc::EBUSY | libc::EEXIST) => busy.to_string(),
                Some(libc::ENOBUFS) => " (the sockets' frames are locked in memory, up to 4 MiB \
                                        a receive queue: raise RLIMIT_MEMLOCK or grant \
                                        CAP_IPC_LOCK)"
                    .to_string(),
                _ => String::new(),
            };
            XdpError {
                iface: iface.to_string(),
                message: format!("{what}: {error}{hint}"),
            }
        };
        let name = std::ffi::CString::new(iface)
            .map_err(|_| fail("bad interface name", "", io::ErrorKind::InvalidInput.into()))?;
        // SAFETY: a NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(fail("no such interface", "", io::Error::last_os_error()));
        }
        if ifindex == LOOPBACK_IFINDEX {
            loopback_ready(iface, listen).map_err(|message| XdpError {
                iface: iface.to_string(),
                message: message.to_string(),
            })?;
        }
        let bound = queue_bound(iface, ifindex);
        let map = program::socket_map(bound).map_err(|e| fail("creating the socket map", "", e))?;
        // The program first: it fails at once if the interface has one, and until a queue's
        // socket is in the map it passes that queue's frames on to the ordinary sockets.
        let prog = program::load(listen, MAX_FRAME, &map)
            .map_err(|e| fail("loading the program", "", e))?;
        let (link, mode, refused) = program::attach(&prog, ifindex).map_err(|e| {
            fail(
                "attaching the program",
                " (the interface has an XDP program already)",
                e,
            )
        })?;
        match refused {
            // The driver has no XDP: generic mode is all there is.
            Some(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
            Some(e) => {
                let hint = match e.raw_os_error() {
                    Some(libc::ENOSPC) => {
                        " (veth takes XDP only with at least as many receive queues as its \
                         peer has send queues)"
                    }
                    _ => "",
                };
                warn!(interface = iface, error = %e, "the driver refused XDP{hint}; using generic mode, which costs more per frame");
            }
            None => {}
        }
        let frames = ring_frames(bound);
        let mut sockets = Vec::with_capacity(bound as usize);
        for queue in 0..bound {
            let s = match Socket::new(ifindex, queue, listen.port(), frames) {
                Ok(s) => s,
                // Past the last queue the interface has (the bound can be too high).
                Err(e) if queue > 0 && e.raw_os_error() == Some(libc::EINVAL) => break,
                Err(e) => {
                    return Err(fail(
                        "opening an AF_XDP socket",
                        " (another AF_XDP socket holds a receive queue of the interface)",
                        e,
                    ));
                }
            };
            program::set_socket(&map, queue, s.fd.as_raw_fd())
                .map_err(|e| fail("filling the socket map", "", e))?;
            sockets.push(s);
        }
        Ok(Xdp {
            _link: link,
            sockets,
            mode,
            iface: iface.to_string(),
            coalesce,
        })
    }

    pub fn queues(&self) -> usize {
        self.sockets.len()
    }

    /// Memory the sockets' frames lock, in bytes.
    pub fn locked(&self) -> usize {
        self.sockets.iter().map(|s| s.umem.len).sum()
    }

    /// Starts one worker thread per socket; they stop when `stop` is set. The program stays
    /// attached until the returned guard is dropped.
    pub fn spawn(
        self,
        zone: Arc<Zone>,
        metrics: &Metrics,
        stop: Arc<AtomicBool>,
        query_log: bool,
    ) -> io::Result<(Attached, Vec<JoinHandle<()>>)> {
        let Xdp {
            _link,
            sockets,
            iface,
            coalesce,
            ..
        } = self;
        let stats: Vec<Arc<Stats>> = sockets.iter().map(|s| Arc::new(Stats::new(s))).collect();
        let workers = sockets
            .into_iter()
            .zip(&stats)
            .map(|(socket, stats)| {
                let (zone, counters, stop) = (zone.clone(), metrics.counters(), stop.clone());
                let (stats, iface) = (stats.clone(), iface.clone());
                std::thread::Builder::new()
                    .name(format!("xdp-{}", socket.queue))
                    .spawn(move || {
                        Worker::new(socket, stats, query_log)
                            .run(&iface, &zone, &counters, &stop, coalesce)
                    })
            })
            .collect::<io::Result<_>>()?;
        metrics.add_renderer(Box::new(move |out| render(out, &iface, &stats)));
        Ok((Attached(_link), workers))
    }
}

/// Where [`Stats::dropped`] counts answers dropped for want of a free send frame.
const NO_SEND_FRAME: usize = frame::Dropped::ALL.len();

/// One socket's counters: written by its worker, read at scrape time.
struct Stats {
    queue: u32,
    /// The socket, for the kernel's own drop counts.
    fd: Arc<OwnedFd>,
    received: AtomicU64,
    /// By [`frame::Dropped`] (its discriminant), then answers without a free send frame.
    dropped: [AtomicU64; NO_SEND_FRAME + 1],
    /// False once the interface went away (its worker has stopped).
    up: AtomicBool,
}

impl Stats {
    fn new(socket: &Socket) -> Self {
        Stats {
            queue: socket.queue,
            fd: socket.fd.clone(),
            received: AtomicU64::new(0),
            dropped: Default::default(),
            up: AtomicBool::new(true),
        }
    }

    /// The kernel's XDP_STATISTICS for the socket, labelled.
    fn kernel(&self) -> Option<[(&'static str, u64); 5]> {
        // SAFETY: the option's C struct, plain old data; the descriptor is open while `self` is.
        let st: libc::xdp_statistics =
            unsafe { get(self.fd.as_raw_fd(), libc::SOL_XDP, libc::XDP_STATISTICS) }.ok()?;
        Some([
            ("dropped", st.rx_dropped),
            ("rx_ring_full", st.rx_ring_full),
            ("fill_ring_empty", st.rx_fill_ring_empty_descs),
            ("rx_invalid", st.rx_invalid_descs),
            ("tx_invalid", st.tx_invalid_descs),
        ])
    }
}

/// The XDP metrics, in the text exposition format.
fn render(out: &mut String, iface: &str, stats: &[Arc<Stats>]) {
    use std::fmt::Write;
    let labels = |s: &Stats| format!("interface=\"{iface}\",queue=\"{}\"", s.queue);
    out.push_str(
        "# HELP clusterset_dns_xdp_up 1 while the AF_XDP socket of a receive queue is bound to its interface, 0 once the interface went away (the ordinary sockets answer then; restart to attach again).\n\
         # TYPE clusterset_dns_xdp_up gauge\n",
    );
    for s in stats {
        let up = s.up.load(Ordering::Relaxed) as u8;
        let _ = writeln!(out, "clusterset_dns_xdp_up{{{}}} {up}", labels(s));
    }
    out.push_str(
        "# HELP clusterset_dns_xdp_received_total Frames the XDP program handed to the server, by receive queue.\n\
         # TYPE clusterset_dns_xdp_received_total counter\n",
    );
    for s in stats {
        let n = s.received.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "clusterset_dns_xdp_received_total{{{}}} {n}",
            labels(s)
        );
    }
    out.push_str(
        "# HELP clusterset_dns_xdp_dropped_total Frames the server dropped unanswered, as the kernel's UDP stack would (reason: not_plain_udp, length, checksum, source, port, destination), and answers dropped for want of a free send frame (no_send_frame).\n\
         # TYPE clusterset_dns_xdp_dropped_total counter\n",
    );
    for s in stats {
        let reasons = frame::Dropped::ALL.iter().map(|d| d.label());
        for (reason, n) in reasons.chain(["no_send_frame"]).zip(&s.dropped) {
            let n = n.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "clusterset_dns_xdp_dropped_total{{{},reason=\"{reason}\"}} {n}",
                labels(s)
            );
        }
    }
    out.push_str(
        "# HELP clusterset_dns_xdp_kernel_dropped_total Frames the kernel dropped at the AF_XDP socket (XDP_STATISTICS), by queue and reason.\n\
         # TYPE clusterset_dns_xdp_kernel_dropped_total counter\n",
    );
    for s in stats {
        for (reason, n) in s.kernel().into_iter().flatten() {
            let _ = writeln!(
                out,
                "clusterset_dns_xdp_kernel_dropped_total{{{},reason=\"{reason}\"}} {n}",
                labels(s)
            );
        }
    }
}

/// Keeps the program attached while it lives.
pub struct Attached(#[allow(dead_code)] OwnedFd);

/// The kernel numbers the loopback interface 1 in every network namespace.
const LOOPBACK_IFINDEX: u32 = 1;

/// Whether IPv4 answers sent through AF_XDP on the loopback interface reach their clients. Such
/// frames carry no route, unlike what loopback sockets send, so the kernel routes them as if they
/// came from outside: it drops any whose source is a local address unless `accept_local` is on,
/// and any to or from 127.0.0.0/8 unless `route_localnet` is on. IPv6 needs neither.
fn loopback_ready(iface: &str, listen: SocketAddr) -> Result<(), &'static str> {
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

/// At least as many as the receive queues of `iface` (index `ifindex`): exactly as many when
/// sysfs shows the process's network namespace (as it does in a container), else the driver's
/// channel count (ethtool), else 1. sysfs shows the namespace it was mounted in, which need not
/// be the process's; and the channel count can be too high: veth counts its queues twice, as
/// receive and as combined channels. Binding sockets stops at the first queue the kernel says
/// the interface does not have, so too high a bound costs unused entries in the socket map and
/// smaller rings (see [`ring_frames`]).
fn queue_bound(iface: &str, ifindex: u32) -> u32 {
    sysfs_queues(iface, ifindex)
        .or_else(|| channels(iface))
        .unwrap_or(1)
        .clamp(1, MAX_QUEUES)
}

/// The receive queues sysfs lists for `iface`, if the device sysfs shows under that name is the
/// one the process sees: the same index and the same hardware address.
fn sysfs_queues(iface: &str, ifindex: u32) -> Option<u32> {
    let dir = format!("/sys/class/net/{iface}");
    let read = |file: &str| std::fs::read_to_string(format!("{dir}/{file}")).ok();
    let index: u32 = read("ifindex")?.trim().parse().ok()?;
    let address: Vec<u8> = read("address")?
        .trim()
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).ok())
        .collect::<Option<_>>()?;
    if index != ifindex || hardware_address(iface)?.get(..address.len())? != address {
        return None;
    }
    let queues = std::fs::read_dir(format!("{dir}/queues"))
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count();
    u32::try_from(queues).ok().filter(|&q| q > 0)
}

/// A socket for interface ioctls and an `ifreq` naming `iface`; `None` if the name does not
/// fit or no socket can be had.
fn interface_request(iface: &str) -> Option<(OwnedFd, libc::ifreq)> {
    if iface.len() >= libc::IFNAMSIZ {
        return None;
    }
    // SAFETY: plain socket(2); the descriptor is owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: just created, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: plain old data; the name stays NUL-terminated (shorter than IFNAMSIZ, the rest
    // zero).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (to, from) in req.ifr_name.iter_mut().zip(iface.bytes()) {
        *to = from as libc::c_char;
    }
    Some((fd, req))
}

/// The hardware address of `iface` in the process's network namespace (the 14 bytes the
/// kernel gives; Ethernet uses the first 6).
fn hardware_address(iface: &str) -> Option<Vec<u8>> {
    let (fd, mut req) = interface_request(iface)?;
    // SAFETY: SIOCGIFHWADDR with an ifreq naming the interface.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) };
    // SAFETY: on success the kernel filled in the hardware address member.
    (r == 0).then(|| unsafe { req.ifr_ifru.ifru_hwaddr.sa_data.map(|b| b as u8).to_vec() })
}

/// At most this many queues are served (the kernel's own limit for a device is 4,096).
const MAX_QUEUES: u32 = 4096;

/// `struct ethtool_channels` (linux/ethtool.h).
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// Receive-only plus combined channels of `iface`, as the driver reports them in the process's
/// own network namespace; `None` if it does not say.
fn channels(iface: &str) -> Option<u32> {
    let (fd, mut req) = interface_request(iface)?;
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    req.ifr_ifru.ifru_data = (&mut ch as *mut EthtoolChannels).cast();
    // SAFETY: SIOCETHTOOL with an ifreq naming the interface whose data points at an
    // ethtool_channels that outlives the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL, &mut req) };
    (r == 0)
        .then(|| ch.rx_count.saturating_add(ch.combined_count))
        .filter(|&q| q > 0)
}

/// A memory mapping, unmapped on drop.
struct Mapping {
    at: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn new(len: usize, fd: Option<(i32, i64)>) -> io::Result<Self> {
        let (flags, fd, offset) = match fd {
            Some((fd, offset)) => (libc::MAP_SHARED | libc::MAP_POPULATE, fd, offset),
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0),
        };
        // SAFETY: a fresh mapping the kernel places; nothing else refers to its range.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            at: NonNull::new(at.cast()).expect("mmap returned a non-null address"),
            len,
        })
    }
}

// SAFETY: a mapping is owned by one socket, used by one thread at a time.
unsafe impl Send for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.at.as_ptr().cast(), self.len) };
    }
}

/// One of a socket's four rings, shared with the kernel: the producer fills slots and advances
/// `producer`; the consumer reads them and advances `consumer`. Slots hold `T`: a frame address
/// (fill and completion rings) or a descriptor (receive and send rings).
struct Ring<T> {
    _map: Mapping,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    slots: NonNull<T>,
    size: u32,
}

// SAFETY: a ring is used by the one worker thread that owns its socket.
unsafe impl<T> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    fn map(fd: i32, offsets: &libc::xdp_ring_offset, size: u32, pgoff: i64) -> io::Result<Self> {
        let len = offsets.desc as usize + size as usize * std::mem::size_of::<T>();
        let map = Mapping::new(len, Some((fd, pgoff)))?;
        // SAFETY: the kernel's offsets lie inside the mapping it sized for them.
        let at = |off: u64| unsafe { NonNull::new_unchecked(map.at.as_ptr().add(off as usize)) };
        Ok(Ring {
            producer: at(offsets.producer).cast(),
            consumer: at(offsets.consumer).cast(),
            slots: at(offsets.desc).cast(),
            size,
            _map: map,
        })
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: the ring index lives as long as the mapping in `self`.
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { self.consumer.as_ref() }
    }

    fn slot(&self, index: u32) -> *mut T {
        // SAFETY: masked into the ring's `size` slots.
        unsafe { self.slots.as_ptr().add((index & (self.size - 1)) as usize) }
    }

    /// Consumer side: how many filled slots wait, from our consumer index.
    fn ready(&self) -> u32 {
        self.producer()
            .load(Ordering::Acquire)
            .wrapping_sub(self.consumer().load(Ordering::Relaxed))
    }

    /// Consumer side: the `k`th waiting slot.
    fn read(&self, k: u32) -> T {
        let at = self.consumer().load(Ordering::Relaxed).wrapping_add(k);
        // SAFETY: a slot the producer filled and published (see `ready`).
        unsafe { self.slot(at).read() }
    }

    /// Consumer side: gives `n` slots back.
    fn release(&self, n: u32) {
        let c = self.consumer().load(Ordering::Relaxed);
        self.consumer().store(c.wrapping_add(n), Ordering::Release);
    }

    /// Producer side: free slots.
    fn room(&self) -> u32 {
        self.size
            - self
                .producer()
                .load(Ordering::Relaxed)
                .wrapping_sub(self.consumer().load(Ordering::Acquire))
    }

    /// Producer side: writes `value` `k` slots past the producer index (not yet published).
    fn write(&self, k: u32, value: T) {
        let at = self.producer().load(Ordering::Relaxed).wrapping_add(k);
        // SAFETY: a free slot (the caller checked `room`), not visible to the kernel yet.
        unsafe { self.slot(at).write(value) }
    }

    /// Producer side: publishes `n` written slots.
    fn submit(&self, n: u32) {
        let p = self.producer().load(Ordering::Relaxed);
        self.producer().store(p.wrapping_add(n), Ordering::Release);
    }
}

/// An AF_XDP socket bound to one queue, with its frame memory (UMEM) and rings.
struct Socket {
    fill: Ring<u64>,
    completion: Ring<u64>,
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    umem: Mapping,
    fd: Arc<OwnedFd>,
    queue: u32,
    port: u16,
    /// Frames for receiving (the first), then as many for sending.
    frames: u32,
}

fn set<T>(fd: i32, opt: i32, value: &T) -> io::Result<()> {
    // SAFETY: `value` is the option's C struct or integer, of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            opt,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads socket option `opt` at `level` into a `T`.
///
/// # Safety
/// `T` must be the option's C struct or integer: plain old data for which all zeroes, and
/// whatever the kernel writes, are valid values.
unsafe fn get<T>(fd: i32, level: i32, opt: i32) -> io::Result<T> {
    // SAFETY: all zeroes is a valid `T` (the caller's promise).
    let mut value: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` has the size passed in `len`.
    let r = unsafe { libc::getsockopt(fd, level, opt, (&mut value as *mut T).cast(), &mut len) };
    if r == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Socket {
    fn new(ifindex: u32, queue: u32, port: u16, frames: u32) -> io::Result<Socket> {
        // SAFETY: plain socket(2).
        let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: just created, owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = fd.as_raw_fd();
        let umem = Mapping::new(FRAME * 2 * frames as usize, None)?;
        let reg = libc::xdp_umem_reg {
            addr: umem.at.as_ptr() as u64,
            len: umem.len as u64,
            chunk_size: FRAME as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        set(raw, libc::XDP_UMEM_REG, &reg)?;
        set(raw, libc::XDP_UMEM_FILL_RING, &frames)?;
        set(raw, libc::XDP_UMEM_COMPLETION_RING, &frames)?;
        set(raw, libc::XDP_RX_RING, &frames)?;
        set(raw, libc::XDP_TX_RING, &frames)?;
        // SAFETY: the option's C struct, plain old data.
        let off: libc::xdp_mmap_offsets =
            unsafe { get(raw, libc::SOL_XDP, libc::XDP_MMAP_OFFSETS)? };
        let fill = Ring::map(raw, &off.fr, frames, libc::XDP_UMEM_PGOFF_FILL_RING as i64)?;
        let completion = Ring::map(
            raw,
            &off.cr,
            frames,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING as i64,
        )?;
        let rx = Ring::map(raw, &off.rx, frames, libc::XDP_PGOFF_RX_RING)?;
        let tx = Ring::map(raw, &off.tx, frames, libc::XDP_PGOFF_TX_RING)?;
        for k in 0..frames {
            fill.write(k, k as u64 * FRAME as u64);
        }
        fill.submit(frames);
        // SAFETY: plain old data.
        let mut addr: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
        addr.sxdp_family = libc::AF_XDP as u16;
        addr.sxdp_flags = libc::XDP_COPY;
        addr.sxdp_ifindex = ifindex;
        addr.sxdp_queue_id = queue;
        // A socket of a server that just stopped may hold the queue for a moment longer (the
        // kernel releases it in the background): retry a busy queue for a while.
        let deadline = Instant::now() + BIND_PATIENCE;
        loop {
            // SAFETY: `addr` is a sockaddr_xdp of the size passed.
            let r = unsafe {
                libc::bind(
                    raw,
                    (&addr as *const libc::sockaddr_xdp).cast(),
                    std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            };
            if r == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EBUSY) || Instant::now() > deadline {
                return Err(e);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Socket {
            fill,
            completion,
            rx,
            tx,
            umem,
            fd: Arc::new(fd),
            queue,
            port,
            frames,
        })
    }

    /// The frame at UMEM offset `addr`, `len` bytes.
    fn frame(&self, addr: u64, len: usize) -> &[u8] {
        assert!(addr as usize + len <= self.umem.len);
        // SAFETY: inside the UMEM, in a frame the kernel handed us (receive ring) and does not
        // touch until we return it through the fill ring.
        unsafe { std::slice::from_raw_parts(self.umem.at.as_ptr().add(addr as usize), len) }
    }

    /// Send frame `addr`, writable.
    #[allow(clippy::mut_from_ref)]
    fn frame_mut(&self, addr: u64) -> &mut [u8] {
        assert!(addr as usize + FRAME <= self.umem.len);
        // SAFETY: a send frame from `free_tx`, owned by us alone until it is submitted; no
        // other reference to it exists (each is written once per answer).
        unsafe { std::slice::from_raw_parts_mut(self.umem.at.as_ptr().add(addr as usize), FRAME) }
    }

    /// Takes back into `free` the send frames the kernel is done with.
    fn reap(&self, free: &mut Vec<u64>) {
        let n = self.completion.ready();
        for k in 0..n {
            free.push(self.completion.read(k) & !(FRAME as u64 - 1));
        }
        self.completion.release(n);
    }

    /// Asks the kernel to send what is in the send ring.
    fn kick(&self) -> io::Result<()> {
        // SAFETY: a zero-length send on our own socket.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // Busy, or out of buffers: the frames stay in the ring for the next kick.
                Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS) => Ok(()),
                _ => Err(e),
            }
        } else {
            Ok(())
        }
    }

    /// Whether answers wait in the send ring.
    fn sending(&self) -> bool {
        self.tx.room() < self.tx.size
    }

    /// The socket's pending error (SO_ERROR), taken: ENETDOWN once its interface is gone.
    fn error(&self) -> Option<io::Error> {
        // SAFETY: the option is an int.
        let err: libc::c_int =
            unsafe { get(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ERROR) }.ok()?;
        (err != 0).then(|| io::Error::from_raw_os_error(err))
    }

    /// Waits for frames, or `ms` milliseconds; false if none came in that time.
    fn wait(&self, ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd.
        unsafe { libc::poll(&mut p, 1, ms) != 0 }
    }
}

/// The XDP listener's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The interface whose receive queues get the program and the AF_XDP sockets.
    pub interface: String,
    /// How workers wait after a receive that did not fill a batch (see `Worker::run`).
    pub coalesce: Coalescing,
}

/// Whether XDP workers wait after a batch that did not fill, so that queries arriving meanwhile
/// are answered together (`--xdp-coalesce`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coalescing {
    /// Never: each wake-up answers what has come.
    Off,
    /// After every batch that did not fill.
    Always(Duration),
    /// Only while the queue is busy (more than half the time), and until the waits stop
    /// gathering several queries each: as a network card's adaptive interrupt moderation.
    Adaptive(Duration),
}

impl std::fmt::Display for Coalescing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Coalescing::Off => f.write_str("off"),
            Coalescing::Always(d) => write!(f, "{}us", d.as_micros()),
            Coalescing::Adaptive(d) => write!(f, "adaptive, {}us", d.as_micros()),
        }
    }
}

/// One worker's [`Coalescing`], with what the adaptive kind goes by.
struct Coalesce {
    how: Coalescing,
    /// Adaptive: whether the worker waits now.
    on: bool,
    /// Adaptive: the current window: when it began, the time spent waiting in it (polls and
    /// sleeps), and the frames the batches right after a sleep brought.
    since: Instant,
    idle: Duration,
    sleeps: u64,
    after_sleeps: u64,
}

/// How often an adaptive worker reconsiders.
const WINDOW: Duration = Duration::from_millis(10);

impl Coalesce {
    fn new(how: Coalescing, now: Instant) -> Self {
        Coalesce {
            how,
            on: false,
            since: now,
            idle: Duration::ZERO,
            sleeps: 0,
            after_sleeps: 0,
        }
    }

    /// The time now, when the worker's choice depends on it (adaptive); else no clock is read.
    fn clock(&self) -> Option<Instant> {
        matches!(self.how, Coalescing::Adaptive(_)).then(Instant::now)
    }

    /// Time spent waiting since `from` (from [`Coalesce::clock`]).
    fn waited_since(&mut self, from: Option<Instant>) {
        if let Some(t) = from {
            self.idle(t.elapsed());
        }
    }

    /// Time spent waiting.
    fn idle(&mut self, d: Duration) {
        self.idle += d;
    }

    /// After a batch of `n` frames (`slept`: right after a sleep of ours; `now`: from
    /// [`Coalesce::clock`]): how long to sleep.
    fn after_batch(&mut self, n: u32, slept: bool, now: Option<Instant>) -> Option<Duration> {
        let wait = match self.how {
            Coalescing::Off => return None,
            Coalescing::Always(d) => d,
            Coalescing::Adaptive(d) => {
                if let Some(now) = now {
                    self.reconsider(n, slept, now);
                }
                if !self.on {
                    return None;
                }
                d
            }
        };
        (n < BATCH as u32).then_some(wait)
    }

    /// Adaptive: counts the batch, and at the end of a window decides whether to wait.
    fn reconsider(&mut self, n: u32, slept: bool, now: Instant) {
        if slept {
            self.sleeps += 1;
            self.after_sleeps += n as u64;
        }
        let elapsed = now - self.since;
        if elapsed < WINDOW {
            return;
        }
        let busy = 1.0 - self.idle.as_secs_f64() / elapsed.as_secs_f64();
        if !self.on {
            // Busy more than half the time: queries queue behind each other already, so
            // waiting for more costs little latency and saves the per-wake-up work.
            self.on = busy > 0.5;
        } else if busy < 0.2 || self.after_sleeps < 4 * self.sleeps {
            // The waits no longer gather several queries each.
            self.on = false;
        }
        self.since = now;
        self.idle = Duration::ZERO;
        self.sleeps = 0;
        self.after_sleeps = 0;
    }
}

/// Buffers of one worker, reused for every batch.
struct Worker {
    socket: Socket,
    stats: Arc<Stats>,
    /// Send frames not in the kernel's hands.
    free_tx: Vec<u64>,
    batch: Batch,
    answers: Vec<Vec<u8>>,
    log: QueryLog,
}

impl Worker {
    fn new(socket: Socket, stats: Arc<Stats>, query_log: bool) -> Self {
        Worker {
            free_tx: (socket.frames..2 * socket.frames)
                .map(|k| k as u64 * FRAME as u64)
                .collect(),
            socket,
            stats,
            batch: Batch::default(),
            answers: (0..BATCH).map(|_| Vec::with_capacity(2048)).collect(),
            log: QueryLog::new(query_log),
        }
    }

    /// Answers until `stop`. After a receive that did not fill a batch, it may wait (as
    /// `coalesce` says) before looking again: the queries that arrive meanwhile are then
    /// answered together, and each send and each wake-up serves several answers instead of one
    /// or two (at the load of `benches/compare-knot.sh`, 1.4 answers a send without the wait).
    fn run(
        mut self,
        iface: &str,
        zone: &Zone,
        counters: &QueryCounters,
        stop: &AtomicBool,
        coalesce: Coalescing,
    ) {
        let mut view = zone.view();
        let mut failed = false;
        if coalesce != Coalescing::Off {
            // Sleep for the time asked, not up to the default 50 µs of timer slack more.
            // SAFETY: prctl on this thread with an integer argument.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000u64) };
        }
        let mut co = Coalesce::new(coalesce, Instant::now());
        // Whether the last thing this worker did was a coalescing sleep.
        let mut slept = false;
        while !stop.load(Ordering::Relaxed) {
            let n = self.socket.rx.ready().min(BATCH as u32);
            if n == 0 {
                // Answers still in the send ring (the last kick found the device busy) get
                // another kick soon; otherwise sleep until frames come.
                let ms = if self.socket.sending() {
                    self.kick(&mut failed);
                    1
                } else {
                    IDLE_CHECK_MS
                };
                // A socket whose interface went away gets no more frames, so its error is
                // looked at only after a wait that timed out (not once per wake-up).
                let t = co.clock();
                let woken = self.socket.wait(ms);
                co.waited_since(t);
                slept = false;
                if !woken && let Some(e) = self.socket.error() {
                    if e.raw_os_error() == Some(libc::ENETDOWN) {
                        warn!(
                            interface = iface,
                            queue = self.socket.queue,
                            "the interface went away: UDP on it is answered by the ordinary sockets from now on (restart to attach XDP again)"
                        );
                        self.stats.up.store(false, Ordering::Relaxed);
                        return;
                    }
                    warn!(interface = iface, error = %e, queue = self.socket.queue, "AF_XDP socket error");
                }
                self.socket.reap(&mut self.free_tx);
                // Also while idle, so an old generation is not kept alive.
                view.refresh();
                continue;
            }
            view.refresh();
            self.batch(n, &view, counters);
            self.kick(&mut failed);
            let now = co.clock();
            let sleep = co.after_batch(n, slept, now);
            slept = false;
            if let Some(d) = sleep {
                std::thread::sleep(d);
                co.waited_since(now);
                slept = true;
            }
        }
        debug!(queue = self.socket.queue, "XDP worker stopped");
    }

    fn kick(&self, failed: &mut bool) {
        match self.socket.kick() {
            Ok(()) => *failed = false,
            Err(e) => {
                if !*failed {
                    warn!(error = %e, queue = self.socket.queue, "XDP send failed");
                }
                *failed = true;
            }
        }
    }

    /// Answers the `n` received frames waiting, puts the answers in the send ring, and gives
    /// the frames back to the fill ring.
    fn batch(&mut self, n: u32, view: &View<'_>, counters: &QueryCounters) {
        let start = Instant::now();
        let socket = &self.socket;
        socket.reap(&mut self.free_tx);
        let mut packets: [&[u8]; BATCH] = [&[]; BATCH];
        let mut replies: [Option<frame::Reply>; BATCH] = [None; BATCH];
        let mut addrs = [0u64; BATCH];
        let mut frames: [&[u8]; BATCH] = [&[]; BATCH];
        // The frames were written on the CPU that received them: start loading them all (the
        // headers and a typical query fill two cache lines) before reading any.
        for k in 0..n as usize {
            let d = socket.rx.read(k as u32);
            addrs[k] = d.addr;
            frames[k] = socket.frame(d.addr, d.len as usize);
            prefetch(frames[k].as_ptr());
            prefetch(frames[k].as_ptr().wrapping_add(64));
        }
        for k in 0..n as usize {
            match frame::parse(frames[k], socket.port) {
                Ok((reply, message)) => {
                    packets[k] = message;
                    replies[k] = Some(reply);
                }
                Err(why) => add(&self.stats.dropped[why as usize], 1),
            }
        }
        add(&self.stats.received, n as u64);
        let mut outcomes = [None; BATCH];
        let n = n as usize;
        self.batch.respond(
            view,
            &packets[..n],
            Transport::Udp,
            &mut self.answers[..n],
            &mut outcomes[..n],
        );
        let took = start.elapsed();
        let mut queued = 0;
        for k in 0..n {
            let (Some(outcome), Some(reply)) = (outcomes[k], replies[k]) else {
                continue;
            };
            let answer = &self.answers[k];
            let Some(tx) = self.free_tx.pop() else {
                add(&self.stats.dropped[NO_SEND_FRAME], 1);
                continue;
            };
            account(
                counters,
                self.log,
                Transport::Udp,
                reply.client,
                &outcome,
                packets[k].len(),
                std::slice::from_ref(answer),
                took,
            );
            let len = frame::write(&reply, answer, socket.frame_mut(tx));
            socket.tx.write(
                queued,
                libc::xdp_desc {
                    addr: tx,
                    len: len as u32,
                    options: 0,
                },
            );
            queued += 1;
        }
        socket.tx.submit(queued);
        socket.rx.release(n as u32);
        // The fill ring holds every receive frame, so there is always room for these.
        debug_assert!(socket.fill.room() >= n as u32);
        for (k, &addr) in addrs[..n].iter().enumerate() {
            socket.fill.write(k as u32, addr & !(FRAME as u64 - 1));
        }
        socket.fill.submit(n as u32);
    }
}

/// Adds to a counter only this thread writes (no locked instruction).
fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
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

    /// Feeds `co` one window of batches of `n` frames, `busy` of the time working (the rest
    /// idle), each batch after a sleep of its own if `slept`; returns the last decision.
    fn window(
        co: &mut Coalesce,
        start: Instant,
        n: u32,
        busy: f64,
        slept: bool,
    ) -> Option<Duration> {
        let batches = 10;
        let step = WINDOW / batches;
        let mut last = None;
        for k in 1..=batches {
            co.idle(step.mul_f64(1.0 - busy));
            last = co.after_batch(n, slept, Some(start + step * k));
        }
        last
    }

    #[test]
    fn coalescing_waits_as_asked() {
        let t = Instant::now();
        let us = Duration::from_micros(100);
        let mut off = Coalesce::new(Coalescing::Off, t);
        assert_eq!(window(&mut off, t, 1, 1.0, false), None);
        let mut always = Coalesce::new(Coalescing::Always(us), t);
        assert_eq!(always.after_batch(1, false, Some(t)), Some(us));
        assert_eq!(
            always.after_batch(BATCH as u32 - 1, true, Some(t)),
            Some(us)
        );
        // A full batch: more are waiting already.
        assert_eq!(always.after_batch(BATCH as u32, true, Some(t)), None);
        // Idle or quiet windows change nothing for it.
        assert_eq!(window(&mut always, t, 1, 0.01, true), Some(us));
    }

    #[test]
    fn adaptive_coalescing_follows_the_load() {
        let t = Instant::now();
        let us = Duration::from_micros(100);
        let mut co = Coalesce::new(Coalescing::Adaptive(us), t);
        // Starts without waiting, and stays so while the queue is busy half the time or less.
        assert_eq!(co.after_batch(1, false, Some(t)), None);
        assert_eq!(window(&mut co, t, 2, 0.5, false), None);
        assert_eq!(window(&mut co, t + WINDOW, 2, 0.3, false), None);
        // Busier: waits from the next window on.
        assert_eq!(window(&mut co, t + WINDOW * 2, 2, 0.8, false), Some(us));
        // While each wait gathers four or more, it goes on waiting, however busy the worker
        // looks now that it waits.
        assert_eq!(window(&mut co, t + WINDOW * 3, 6, 0.4, true), Some(us));
        assert_eq!(window(&mut co, t + WINDOW * 4, 4, 0.3, true), Some(us));
        // Waits that gather fewer: it stops.
        assert_eq!(window(&mut co, t + WINDOW * 5, 3, 0.4, true), None);
        // Busy again, then nearly idle: it stops even when the few waits gather enough.
        assert_eq!(window(&mut co, t + WINDOW * 6, 2, 0.9, false), Some(us));
        assert_eq!(window(&mut co, t + WINDOW * 7, 8, 0.1, true), None);
        // A full batch never waits.
        assert_eq!(window(&mut co, t + WINDOW * 8, 2, 0.9, false), Some(us));
        assert_eq!(
            co.after_batch(BATCH as u32, true, Some(t + WINDOW * 9)),
            None
        );
    }

    #[test]
    fn rings_shrink_with_many_queues_within_the_budget() {
        assert_eq!(ring_frames(1), MOST_FRAMES);
        assert_eq!(ring_frames(4), MOST_FRAMES);
        assert_eq!(ring_frames(5), 512);
        assert_eq!(ring_frames(32), LEAST_FRAMES);
        assert_eq!(ring_frames(4096), LEAST_FRAMES);
        for q in 1..=200 {
            let f = ring_frames(q);
            assert!(f.is_power_of_two(), "{q}: {f}");
            let total = q as usize * 2 * f as usize * FRAME;
            assert!(
                total <= BUDGET || f == LEAST_FRAMES,
                "{q} queues: {total} bytes"
            );
        }
    }
}
