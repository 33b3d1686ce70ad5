//! An AF_XDP socket bound to one receive queue: its frame memory (UMEM), mapped and locked, and
//! its four rings shared with the kernel.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Bytes per UMEM frame: a whole answer (at most 1,232 bytes of DNS, see
/// [`crate::dns::UDP_PAYLOAD`]) with its Ethernet, IPv6 and UDP headers fits in one.
pub(super) const FRAME: usize = 2048;
/// The longest frame a socket receives: in copy mode the kernel puts XDP's 256 bytes of
/// headroom before each received frame. Longer queries (rare: DNS queries are small) are left
/// to the ordinary sockets by the program.
pub(super) const MAX_FRAME: usize = FRAME - 256;
/// Each socket has as many frames for receiving (all in the fill ring until the kernel uses
/// them) as for sending, and each ring holds all of its frames: 1,024 each (4 MiB a queue) while
/// the sockets together stay within [`BUDGET`], fewer on interfaces with many queues (veth, as
/// container networks make it, has a queue per CPU of the node), down to 128.
pub(super) const MOST_FRAMES: u32 = 1024;
pub(super) const LEAST_FRAMES: u32 = 128;
/// The memory the sockets' frames take in all, as long as each keeps [`LEAST_FRAMES`].
pub(super) const BUDGET: usize = 16 << 20;

/// Frames per ring for each of `queues` sockets (a power of two, as the kernel wants).
pub(super) fn ring_frames(queues: u32) -> u32 {
    let fit = BUDGET / (queues.max(1) as usize * 2 * FRAME);
    let pow2 = if fit == 0 { 0 } else { 1 << fit.ilog2() };
    (pow2 as u32).clamp(LEAST_FRAMES, MOST_FRAMES)
}

/// How long a busy receive queue is waited for at start-up.
const BIND_PATIENCE: Duration = Duration::from_secs(3);

/// A memory mapping, unmapped on drop.
pub(super) struct Mapping {
    pub(super) at: NonNull<u8>,
    pub(super) len: usize,
}

impl Mapping {
    pub(super) fn new(len: usize, fd: Option<(i32, i64)>) -> io::Result<Self> {
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
pub(super) struct Ring<T> {
    pub(super) _map: Mapping,
    pub(super) producer: NonNull<AtomicU32>,
    pub(super) consumer: NonNull<AtomicU32>,
    pub(super) slots: NonNull<T>,
    pub(super) size: u32,
}

// SAFETY: a ring is used by the one worker thread that owns its socket.
unsafe impl<T> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    pub(super) fn map(
        fd: i32,
        offsets: &libc::xdp_ring_offset,
        size: u32,
        pgoff: i64,
    ) -> io::Result<Self> {
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

    pub(super) fn producer(&self) -> &AtomicU32 {
        // SAFETY: the ring index lives as long as the mapping in `self`.
        unsafe { self.producer.as_ref() }
    }

    pub(super) fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { self.consumer.as_ref() }
    }

    pub(super) fn slot(&self, index: u32) -> *mut T {
        // SAFETY: masked into the ring's `size` slots.
        unsafe { self.slots.as_ptr().add((index & (self.size - 1)) as usize) }
    }

    /// Consumer side: how many filled slots wait, from our consumer index.
    pub(super) fn ready(&self) -> u32 {
        self.producer()
            .load(Ordering::Acquire)
            .wrapping_sub(self.consumer().load(Ordering::Relaxed))
    }

    /// Consumer side: the `k`th waiting slot.
    pub(super) fn read(&self, k: u32) -> T {
        let at = self.consumer().load(Ordering::Relaxed).wrapping_add(k);
        // SAFETY: a slot the producer filled and published (see `ready`).
        unsafe { self.slot(at).read() }
    }

    /// Consumer side: gives `n` slots back.
    pub(super) fn release(&self, n: u32) {
        let c = self.consumer().load(Ordering::Relaxed);
        self.consumer().store(c.wrapping_add(n), Ordering::Release);
    }

    /// Producer side: free slots.
    pub(super) fn room(&self) -> u32 {
        self.size
            - self
                .producer()
                .load(Ordering::Relaxed)
                .wrapping_sub(self.consumer().load(Ordering::Acquire))
    }

    /// Producer side: writes `value` `k` slots past the producer index (not yet published).
    pub(super) fn write(&self, k: u32, value: T) {
        let at = self.producer().load(Ordering::Relaxed).wrapping_add(k);
        // SAFETY: a free slot (the caller checked `room`), not visible to the kernel yet.
        unsafe { self.slot(at).write(value) }
    }

    /// Producer side: publishes `n` written slots.
    pub(super) fn submit(&self, n: u32) {
        let p = self.producer().load(Ordering::Relaxed);
        self.producer().store(p.wrapping_add(n), Ordering::Release);
    }
}

/// An AF_XDP socket bound to one queue, with its frame memory (UMEM) and rings.
pub(super) struct Socket {
    pub(super) fill: Ring<u64>,
    pub(super) completion: Ring<u64>,
    pub(super) rx: Ring<libc::xdp_desc>,
    pub(super) tx: Ring<libc::xdp_desc>,
    pub(super) umem: Mapping,
    pub(super) fd: Arc<OwnedFd>,
    pub(super) queue: u32,
    pub(super) port: u16,
    /// Frames for receiving (the first), then as many for sending.
    pub(super) frames: u32,
}

/// Sets XDP socket option `opt`.
fn set<T>(fd: i32, opt: i32, value: &T) -> io::Result<()> {
    crate::sys::set_socket_option(fd, libc::SOL_XDP, opt, value)
}

pub(super) use crate::sys::socket_option as get;

impl Socket {
    pub(super) fn new(ifindex: u32, queue: u32, port: u16, frames: u32) -> io::Result<Socket> {
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
    pub(super) fn frame(&self, addr: u64, len: usize) -> &[u8] {
        assert!(addr as usize + len <= self.umem.len);
        // SAFETY: inside the UMEM, in a frame the kernel handed us (receive ring) and does not
        // touch until we return it through the fill ring.
        unsafe { std::slice::from_raw_parts(self.umem.at.as_ptr().add(addr as usize), len) }
    }

    /// Send frame `addr`, writable.
    #[allow(clippy::mut_from_ref)]
    pub(super) fn frame_mut(&self, addr: u64) -> &mut [u8] {
        assert!(addr as usize + FRAME <= self.umem.len);
        // SAFETY: a send frame from `free_tx`, owned by us alone until it is submitted; no
        // other reference to it exists (each is written once per answer).
        unsafe { std::slice::from_raw_parts_mut(self.umem.at.as_ptr().add(addr as usize), FRAME) }
    }

    /// Takes back into `free` the send frames the kernel is done with.
    pub(super) fn reap(&self, free: &mut Vec<u64>) {
        let n = self.completion.ready();
        for k in 0..n {
            free.push(self.completion.read(k) & !(FRAME as u64 - 1));
        }
        self.completion.release(n);
    }

    /// Asks the kernel to send what is in the send ring.
    pub(super) fn kick(&self) -> io::Result<()> {
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
    pub(super) fn sending(&self) -> bool {
        self.tx.room() < self.tx.size
    }

    /// The socket's pending error (SO_ERROR), taken: ENETDOWN once its interface is gone.
    pub(super) fn error(&self) -> Option<io::Error> {
        // SAFETY: the option is an int.
        let err: libc::c_int =
            unsafe { get(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ERROR) }.ok()?;
        (err != 0).then(|| io::Error::from_raw_os_error(err))
    }

    /// Whether the socket is still bound to its interface. The kernel unbinds it when the
    /// interface goes away (and says ENETDOWN through SO_ERROR then), and a send on an unbound
    /// socket fails with ENXIO before anything else is looked at; a link that is only down
    /// keeps its sockets bound.
    pub(super) fn bound(&self) -> bool {
        match self.kick() {
            Err(e) => e.raw_os_error() != Some(libc::ENXIO),
            Ok(()) => true,
        }
    }

    /// Waits for frames, or `ms` milliseconds; false if none came in that time.
    pub(super) fn wait(&self, ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd.
        unsafe { libc::poll(&mut p, 1, ms) != 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
