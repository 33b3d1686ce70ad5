//! The UDP fast path: `--udp-workers` sockets bound to the same address with SO_REUSEPORT (the
//! kernel spreads clients over them), each served by its own thread that receives and sends in
//! batches (recvmmsg/sendmmsg) and answers each batch together through [`super::Batch`] into
//! buffers it reuses, so the steady state makes no allocation and no system call per query.

use std::io;
use std::mem::{self, MaybeUninit};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use tracing::{debug, warn};

use super::{BATCH, Batch, QueryLog, Transport, account};
use crate::metrics::{Metrics, QueryCounters};
use crate::zone::{View, Zone};

/// Largest query accepted; longer ones arrive truncated and are dropped.
const MAX_QUERY: usize = 4096;
/// How often an idle worker looks at the stop flag.
const IDLE_CHECK: Duration = Duration::from_millis(100);

/// Binds `count` UDP sockets to `addr` with SO_REUSEPORT.
///
/// With port 0, a plain socket picks the port first: the kernel's port-0 search does not count
/// a port held by another SO_REUSEPORT group of the same user as taken, so a group bound
/// straight to port 0 can join another server's and receive part of its queries. That leaves
/// the instant between the probe's close and the group's bind, where only a bind to exactly
/// that port can come in between (then AddrInUse: the caller picks again).
pub fn bind(addr: SocketAddr, count: usize) -> io::Result<Vec<std::net::UdpSocket>> {
    if addr.port() != 0 {
        return bind_group(addr, count);
    }
    let at = std::net::UdpSocket::bind(addr)?.local_addr()?;
    bind_group(at, count)
}

fn bind_group(addr: SocketAddr, count: usize) -> io::Result<Vec<std::net::UdpSocket>> {
    let mut out: Vec<std::net::UdpSocket> = Vec::with_capacity(count);
    for _ in 0..count.max(1) {
        let at = out.first().map_or(Ok(addr), |s| s.local_addr())?;
        let s = Socket::new(Domain::for_address(at), Type::DGRAM, Some(Protocol::UDP))?;
        s.set_reuse_port(true)?;
        // Never fragment and never probe the path MTU: answers fit the client's advertised
        // size, and the kernel skips per-packet PMTU and IP ID work (Knot does the same).
        let omit = libc::IP_PMTUDISC_OMIT;
        let (level, opt) = if at.is_ipv6() {
            (libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER)
        } else {
            (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER)
        };
        if let Err(e) = crate::sys::set_socket_option(s.as_raw_fd(), level, opt, &omit) {
            debug!(error = %e, "cannot set IP_PMTUDISC_OMIT");
        }
        s.bind(&at.into())?;
        out.push(s.into());
    }
    Ok(out)
}

/// The UDP listener's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Sockets bound to the listen address (SO_REUSEPORT), each with its own thread.
    pub workers: usize,
}

/// Starts one worker thread per socket; they stop when `stop` is set.
pub fn spawn(
    sockets: Vec<std::net::UdpSocket>,
    zone: Arc<Zone>,
    metrics: &Metrics,
    stop: Arc<AtomicBool>,
    log: QueryLog,
) -> io::Result<Vec<JoinHandle<()>>> {
    sockets
        .into_iter()
        .enumerate()
        .map(|(i, socket)| {
            socket.set_nonblocking(false)?;
            socket.set_read_timeout(Some(IDLE_CHECK))?;
            let (zone, counters, stop) = (zone.clone(), metrics.counters(), stop.clone());
            std::thread::Builder::new()
                .name(format!("udp-{i}"))
                .spawn(move || Worker::new(log).run(&socket, &zone, &counters, &stop))
        })
        .collect()
}

/// Buffers of one worker, reused for every batch.
struct Worker {
    queries: Vec<[u8; MAX_QUERY]>,
    answers: Vec<Vec<u8>>,
    /// Answers the queries of one receive together.
    batch: Batch,
    addrs: Vec<libc::sockaddr_storage>,
    /// Which received datagram each answer goes back to.
    reply_to: Vec<usize>,
    log: QueryLog,
}

impl Worker {
    fn new(log: QueryLog) -> Self {
        // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid (empty) value.
        let empty: libc::sockaddr_storage = unsafe { MaybeUninit::zeroed().assume_init() };
        Worker {
            queries: vec![[0; MAX_QUERY]; BATCH],
            answers: (0..BATCH).map(|_| Vec::with_capacity(2048)).collect(),
            batch: Batch::default(),
            addrs: vec![empty; BATCH],
            reply_to: Vec::with_capacity(BATCH),
            log,
        }
    }

    fn run(
        mut self,
        socket: &std::net::UdpSocket,
        zone: &Zone,
        counters: &QueryCounters,
        stop: &AtomicBool,
    ) {
        let fd = socket.as_raw_fd();
        let mut view = zone.view();
        while !stop.load(Ordering::Relaxed) {
            match self.batch(fd, &mut view, counters) {
                Ok(()) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => {
                    warn!(error = %e, "UDP receive failed");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
        debug!("UDP worker stopped");
    }

    /// Receives up to BATCH datagrams (waiting for the first), answers them from the newest
    /// zone, sends the answers.
    fn batch(&mut self, fd: i32, view: &mut View<'_>, counters: &QueryCounters) -> io::Result<()> {
        // SAFETY: iovec and mmsghdr are plain C structs; all zeroes (null pointers, zero
        // lengths) is a valid value of each.
        let mut iov: [libc::iovec; BATCH] = unsafe { mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { mem::zeroed() };
        for i in 0..BATCH {
            iov[i] = libc::iovec {
                iov_base: self.queries[i].as_mut_ptr().cast(),
                iov_len: MAX_QUERY,
            };
            msgs[i].msg_hdr.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            msgs[i].msg_hdr.msg_namelen =
                mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: every pointer handed to the kernel points into buffers owned by `self` (or
        // `iov`, `msgs` here) that live, unmoved, for the duration of the call; each length
        // matches its buffer.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                msgs.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        // Also while idle (the receive times out), so an old generation is not kept alive.
        view.refresh();
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let start = Instant::now();
        self.reply_to.clear();
        let n = n as usize;
        let mut packets: [&[u8]; BATCH] = [&[]; BATCH];
        let mut clients: [Option<SocketAddr>; BATCH] = [None; BATCH];
        for (i, msg) in msgs.iter().enumerate().take(n) {
            // A source port of 0 cannot be answered (and is a classic reflection trick); a
            // truncated datagram cannot be read. Either stays an empty packet: no answer.
            clients[i] = socket_addr(&self.addrs[i]).filter(|a| a.port() != 0);
            if clients[i].is_some() && msg.msg_hdr.msg_flags & libc::MSG_TRUNC == 0 {
                packets[i] = &self.queries[i][..msg.msg_len as usize];
            }
        }
        let (outcomes, took) =
            self.batch
                .respond_datagrams(view, &packets[..n], &mut self.answers[..n], start);
        for i in 0..n {
            let (Some(outcome), Some(client)) = (outcomes[i], clients[i]) else {
                continue;
            };
            account(
                counters,
                self.log,
                Transport::Udp,
                client,
                &outcome,
                packets[i].len(),
                std::slice::from_ref(&self.answers[i]),
                took,
            );
            self.reply_to.push(i);
        }
        // SAFETY: plain C structs, valid all zeroes (as above).
        let mut out_iov: [libc::iovec; BATCH] = unsafe { mem::zeroed() };
        // SAFETY: as above.
        let mut out: [libc::mmsghdr; BATCH] = unsafe { mem::zeroed() };
        for (k, &i) in self.reply_to.iter().enumerate() {
            out_iov[k] = libc::iovec {
                iov_base: self.answers[i].as_mut_ptr().cast(),
                iov_len: self.answers[i].len(),
            };
            out[k].msg_hdr.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            out[k].msg_hdr.msg_namelen = msgs[i].msg_hdr.msg_namelen;
            out[k].msg_hdr.msg_iov = &mut out_iov[k];
            out[k].msg_hdr.msg_iovlen = 1;
        }
        let mut sent = 0;
        while sent < self.reply_to.len() {
            // SAFETY: the messages point into `self.answers` and `self.addrs`, which outlive
            // the call unmoved; `sent` stays below the number of messages filled in.
            let r = unsafe {
                libc::sendmmsg(
                    fd,
                    out[sent..].as_mut_ptr(),
                    (self.reply_to.len() - sent) as u32,
                    0,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // One client's error (unreachable, no buffer space): skip its answer, go on.
                debug!(error = %e, "UDP send failed");
                sent += 1;
            } else {
                sent += r as usize;
            }
        }
        Ok(())
    }
}

fn socket_addr(addr: &libc::sockaddr_storage) -> Option<SocketAddr> {
    // SAFETY: the kernel filled `addr` with a sockaddr of the family it names.
    unsafe {
        match addr.ss_family as i32 {
            libc::AF_INET => {
                let a = &*(addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>();
                let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
                Some(SocketAddr::from((ip, u16::from_be(a.sin_port))))
            }
            libc::AF_INET6 => {
                let a = &*(addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
                let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
                Some(SocketAddr::from((ip, u16::from_be(a.sin6_port))))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Other SO_REUSEPORT groups of this user, each on a port the kernel picked (as other
    /// servers started with port 0 in the same test run are).
    fn other_groups(n: usize) -> (Vec<std::net::UdpSocket>, std::collections::HashSet<u16>) {
        let socks: Vec<std::net::UdpSocket> = (0..n)
            .map(|_| {
                let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
                s.set_reuse_port(true).unwrap();
                s.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
                    .unwrap();
                s.into()
            })
            .collect();
        let ports = socks
            .iter()
            .map(|s| s.local_addr().unwrap().port())
            .collect();
        (socks, ports)
    }

    #[test]
    fn port_zero_never_joins_another_servers_socket_group() {
        // The kernel's port-0 search does not count a port held by a SO_REUSEPORT socket of
        // the same user as taken, so a server asking for port 0 could share one with another
        // and receive half of its queries.
        let (_others, taken) = other_groups(1000);
        for _ in 0..300 {
            let ours = bind(SocketAddr::from(([127, 0, 0, 1], 0)), 2).unwrap();
            let port = ours[0].local_addr().unwrap().port();
            assert!(!taken.contains(&port), "port {port} is another group's");
            assert_eq!(ours[1].local_addr().unwrap().port(), port);
        }
    }

    #[test]
    fn a_fixed_port_is_joined_by_every_worker_socket() {
        let first = bind(SocketAddr::from(([127, 0, 0, 1], 0)), 1).unwrap();
        let at = first[0].local_addr().unwrap();
        drop(first);
        let ours = bind(at, 3).unwrap();
        assert!(ours.iter().all(|s| s.local_addr().unwrap() == at));
    }
}
