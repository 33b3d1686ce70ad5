//! How many receive queues an interface has, as far as the process's network namespace shows:
//! sysfs when it shows this namespace, else the driver's channel count (ethtool).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// At least as many as the receive queues of `iface` (index `ifindex`): exactly as many when
/// sysfs shows the process's network namespace (as it does in a container), else the driver's
/// channel count (ethtool), else 1. sysfs shows the namespace it was mounted in, which need not
/// be the process's; and the channel count can be too high: veth counts its queues twice, as
/// receive and as combined channels. Binding sockets stops at the first queue the kernel says
/// the interface does not have, so too high a bound costs unused entries in the socket map and
/// smaller rings (see [`super::socket::ring_frames`]).
pub(super) fn queue_bound(iface: &str, ifindex: u32) -> u32 {
    sysfs_queues(iface, ifindex)
        .or_else(|| channels(iface))
        .unwrap_or(1)
        .clamp(1, MAX_QUEUES)
}

/// The receive queues sysfs lists for `iface`, if the device sysfs shows under that name is the
/// one the process sees: the same index and the same hardware address.
pub(super) fn sysfs_queues(iface: &str, ifindex: u32) -> Option<u32> {
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
pub(super) fn interface_request(iface: &str) -> Option<(OwnedFd, libc::ifreq)> {
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
pub(super) fn hardware_address(iface: &str) -> Option<Vec<u8>> {
    let (fd, mut req) = interface_request(iface)?;
    // SAFETY: SIOCGIFHWADDR with an ifreq naming the interface.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) };
    // SAFETY: on success the kernel filled in the hardware address member.
    (r == 0).then(|| unsafe { req.ifr_ifru.ifru_hwaddr.sa_data.map(|b| b as u8).to_vec() })
}

/// At most this many queues are served (the kernel's own limit for a device is 4,096).
pub(super) const MAX_QUEUES: u32 = 4096;

/// `struct ethtool_channels` (linux/ethtool.h).
#[repr(C)]
#[derive(Default)]
pub(super) struct EthtoolChannels {
    pub(super) cmd: u32,
    pub(super) max_rx: u32,
    pub(super) max_tx: u32,
    pub(super) max_other: u32,
    pub(super) max_combined: u32,
    pub(super) rx_count: u32,
    pub(super) tx_count: u32,
    pub(super) other_count: u32,
    pub(super) combined_count: u32,
}

pub(super) const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// Receive-only plus combined channels of `iface`, as the driver reports them in the process's
/// own network namespace; `None` if it does not say.
pub(super) fn channels(iface: &str) -> Option<u32> {
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
