//! The calls into the C library and the CPU that the rest of the crate needs outside the packet
//! paths (`dns::udp` and `dns::xdp` keep their own): allocator tuning, timer slack, a prefetch
//! hint and socket options. With those two, this is the only module where `unsafe` is allowed.

use std::io;

/// One malloc arena for the whole process. glibc otherwise gives each thread that allocates its
/// own arena, and memory freed in one (the source's parse buffers) cannot serve another (the
/// zone's entries): with 10,000 services and 100,000 endpoints that left about 27 MB of free but
/// resident heap, against 10 MB with one arena. The query paths do not allocate, so the arena's
/// lock is not contended where it would matter. Call it before any thread is started.
pub fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; the caller calls it before any thread is
    // started.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Hands memory freed by a full load (the source's parse trees, the old renderings) back to the
/// system: glibc keeps it otherwise, and a reload would leave the process at its peak size.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap pages; it has no other effect.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Sleeps of this thread last the time asked, not up to the default 50 µs of timer slack more:
/// for the threads whose coalescing waits are themselves tens of microseconds.
pub fn precise_sleeps() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl on this thread with an integer argument; it changes only the timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000u64);
    }
}

/// A hint to the CPU to bring the cache line at `p` in; it never faults, whatever `p` is.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints; it reads nothing the program sees and cannot fault. (The
    // intrinsic is safe from Rust 1.87; the block keeps 1.85 building.)
    #[allow(unused_unsafe)]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Lets a listening socket's queue of connections not yet accepted grow to `backlog` (the
/// kernel caps it at `net.core.somaxconn`). The standard library listens with 128: a burst of
/// clients reconnecting at once (every node's cache after a restart) would overflow it, and each
/// connection beyond it waits a second for its SYN to be sent again.
pub fn listen_backlog(fd: i32, backlog: i32) -> io::Result<()> {
    // SAFETY: listen on a descriptor the caller owns; on a socket that listens already, Linux
    // only changes the backlog.
    if unsafe { libc::listen(fd, backlog) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets socket option `opt` at `level` of `fd` to `value`, the option's C struct or integer.
pub fn set_socket_option<T>(fd: i32, level: i32, opt: i32, value: &T) -> io::Result<()> {
    // SAFETY: `value` points at a live `T` of the size passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
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

/// Reads socket option `opt` at `level` of `fd` into a `T`.
///
/// # Safety
/// `T` must be the option's C struct or integer: plain old data for which all zeroes, and
/// whatever the kernel writes, are valid values.
pub unsafe fn socket_option<T>(fd: i32, level: i32, opt: i32) -> io::Result<T> {
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
