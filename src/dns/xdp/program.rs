//! The XDP program, written as eBPF instructions here (no compiler, no object file), and the
//! bpf(2) calls that create its socket map, load it and attach it to an interface.
//!
//! The program redirects to the AF_XDP socket of the receiving queue exactly the frames the
//! server answers on that path: untagged Ethernet, IPv4 without options or fragmentation or IPv6
//! with UDP as the next header, to the listen address (any, if it is unspecified) and port, and
//! no longer than the socket's frames hold.
//! Everything else, and anything arriving while no socket is in the map, goes on to the kernel
//! (XDP_PASS), where the ordinary UDP and TCP sockets answer it.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const XDP_PASS: i32 = 2;
const FUNC_REDIRECT_MAP: i32 = 51;

/// `union bpf_attr`, as bytes: each command fills the fields it reads.
#[repr(C, align(8))]
struct Attr([u8; 144]);

impl Attr {
    fn new() -> Self {
        Attr([0; 144])
    }
    fn u32(mut self, at: usize, v: u32) -> Self {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(mut self, at: usize, v: u64) -> Self {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn name(mut self, at: usize, name: &str) -> Self {
        let n = name.len().min(15);
        self.0[at..at + n].copy_from_slice(&name.as_bytes()[..n]);
        self
    }
}

/// bpf(2); returns the new file descriptor or 0.
fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<i32> {
    // SAFETY: `attr` is a valid, zero-filled bpf_attr of the full size we pass, and every
    // pointer stored in it refers to memory the caller keeps alive across the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut Attr,
            std::mem::size_of::<Attr>(),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as i32)
    }
}

fn owned(fd: i32) -> OwnedFd {
    // SAFETY: bpf(2) just returned this descriptor to us and nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// The map from receive queue number to AF_XDP socket.
pub fn socket_map(queues: u32) -> io::Result<OwnedFd> {
    let mut attr = Attr::new()
        .u32(0, BPF_MAP_TYPE_XSKMAP)
        .u32(4, 4)
        .u32(8, 4)
        .u32(12, queues)
        .name(28, "clusterset_xsks");
    bpf(BPF_MAP_CREATE, &mut attr).map(owned)
}

/// Puts socket `fd` in `map` for queue `queue`.
pub fn set_socket(map: &OwnedFd, queue: u32, fd: i32) -> io::Result<()> {
    let (key, value) = (queue, fd as u32);
    let mut attr = Attr::new()
        .u32(0, map.as_raw_fd() as u32)
        .u64(8, &key as *const u32 as u64)
        .u64(16, &value as *const u32 as u64);
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// Loads the program for `listen` with its socket map. A rejection carries the verifier's log.
/// Frames longer than `max_frame` bytes are left to the kernel (they would not fit the socket's
/// frames).
pub fn load(listen: SocketAddr, max_frame: usize, map: &OwnedFd) -> io::Result<OwnedFd> {
    let code = assemble(listen, max_frame, map.as_raw_fd());
    let license = c"Apache-2.0";
    let attempt = |log: &mut [u8]| {
        let mut attr = Attr::new()
            .u32(0, BPF_PROG_TYPE_XDP)
            .u32(4, (code.len() / 8) as u32)
            .u64(8, code.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .u32(24, if log.is_empty() { 0 } else { 1 })
            .u32(28, log.len() as u32)
            .u64(32, log.as_mut_ptr() as u64)
            .name(48, "clusterset_dns")
            .u32(68, BPF_XDP);
        bpf(BPF_PROG_LOAD, &mut attr).map(owned)
    };
    attempt(&mut []).or_else(|e| {
        if e.raw_os_error() != Some(libc::EINVAL) && e.raw_os_error() != Some(libc::EACCES) {
            return Err(e);
        }
        let mut log = vec![0u8; 1 << 16];
        attempt(&mut log).map_err(|e| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            io::Error::new(e.kind(), format!("{e}; verifier log: {}", text.trim()))
        })
    })
}

/// How the program runs on the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// In the driver, before any socket buffer is made.
    Driver,
    /// Generic (SKB) mode: after the socket buffer is made; any interface has it.
    Generic,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Driver => "driver",
            Mode::Generic => "generic",
        })
    }
}

/// Attaches `prog` to interface `ifindex` in driver mode if the driver takes it, else in generic
/// mode; with generic mode, also why the driver refused. The returned link detaches the program
/// when it is closed, so it never outlives the process (a crash included), and it fails with
/// EBUSY if the interface has a program already.
///
/// Drivers refuse for reasons of their own configuration (veth: fewer receive queues than its
/// peer has send queues, ENOSPC; an MTU too large for a page, EINVAL), none of which generic
/// mode minds, so any refusal falls back to it.
pub fn attach(prog: &OwnedFd, ifindex: u32) -> io::Result<(OwnedFd, Mode, Option<io::Error>)> {
    let link = |flags: u32| {
        let mut attr = Attr::new()
            .u32(0, prog.as_raw_fd() as u32)
            .u32(4, ifindex)
            .u32(8, BPF_XDP)
            .u32(12, flags);
        bpf(BPF_LINK_CREATE, &mut attr).map(owned)
    };
    match link(XDP_FLAGS_DRV_MODE) {
        Ok(fd) => Ok((fd, Mode::Driver, None)),
        Err(refused) => link(XDP_FLAGS_SKB_MODE).map(|fd| (fd, Mode::Generic, Some(refused))),
    }
}

// eBPF instruction encoding (linux/bpf_common.h, linux/bpf.h).
const LDX_MEM_W: u8 = 0x61;
const LDX_MEM_H: u8 = 0x69;
const LDX_MEM_B: u8 = 0x71;
const ALU64_ADD_K: u8 = 0x07;
const ALU64_MOV_K: u8 = 0xb7;
const ALU64_MOV_X: u8 = 0xbf;
const ALU32_AND_K: u8 = 0x54;
const JMP_JGT_X: u8 = 0x2d;
const JMP32_JEQ_K: u8 = 0x16;
const JMP32_JNE_K: u8 = 0x56;
const JMP_JA: u8 = 0x05;
const JMP_CALL: u8 = 0x85;
const JMP_EXIT: u8 = 0x95;
const LD_IMM64: u8 = 0x18;
const PSEUDO_MAP_FD: u8 = 1;

/// Where a jump goes, resolved when the program is complete.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Label {
    V4,
    V6,
    Redirect,
    Pass,
}

struct Asm {
    code: Vec<[u8; 8]>,
    jumps: Vec<(usize, Label)>,
    labels: Vec<(Label, usize)>,
}

impl Asm {
    fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        let mut i = [0u8; 8];
        i[0] = code;
        i[1] = dst | (src << 4);
        i[2..4].copy_from_slice(&off.to_le_bytes());
        i[4..8].copy_from_slice(&imm.to_le_bytes());
        self.code.push(i);
    }
    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) {
        self.jumps.push((self.code.len(), to));
        self.op(code, dst, src, 0, imm);
    }
    fn label(&mut self, l: Label) {
        self.labels.push((l, self.code.len()));
    }
    /// Loads `size` bytes (1, 2 or 4) of the packet at r2 + `at` into r5.
    fn load(&mut self, size: usize, at: i16) {
        let code = match size {
            1 => LDX_MEM_B,
            2 => LDX_MEM_H,
            _ => LDX_MEM_W,
        };
        self.op(code, 5, 2, at, 0);
    }
    /// Passes the frame on unless the `bytes` at `at` equal `expect` (compared as loaded, in
    /// the machine's byte order, as the program reads them).
    fn expect(&mut self, at: i16, expect: &[u8]) {
        for (k, chunk) in expect.chunks(4).enumerate() {
            let at = at + 4 * k as i16;
            let value = match chunk.len() {
                1 => chunk[0] as u32,
                2 => u16::from_ne_bytes([chunk[0], chunk[1]]) as u32,
                _ => u32::from_ne_bytes(chunk.try_into().unwrap()),
            };
            self.load(chunk.len(), at);
            self.jump(JMP32_JNE_K, 5, 0, value as i32, Label::Pass);
        }
    }
    /// Passes the frame on unless it is at least `len` bytes (the verifier needs this before
    /// any read below `len`).
    fn at_least(&mut self, len: i32) {
        self.op(ALU64_MOV_X, 4, 2, 0, 0);
        self.op(ALU64_ADD_K, 4, 0, 0, len);
        self.jump(JMP_JGT_X, 4, 3, 0, Label::Pass);
    }
    fn finish(mut self) -> Vec<u8> {
        for &(at, to) in &self.jumps {
            let target = self.labels.iter().find(|(l, _)| *l == to).unwrap().1;
            let off = (target as i64 - at as i64 - 1) as i16;
            self.code[at][2..4].copy_from_slice(&off.to_le_bytes());
        }
        self.code.concat()
    }
}

/// The program's instructions for `listen`, redirecting through map `map_fd`.
fn assemble(listen: SocketAddr, max_frame: usize, map_fd: i32) -> Vec<u8> {
    let mut a = Asm {
        code: Vec::new(),
        jumps: Vec::new(),
        labels: Vec::new(),
    };
    let port = listen.port().to_be_bytes();
    // r2 = data, r3 = data_end (struct xdp_md).
    a.op(LDX_MEM_W, 2, 1, 0, 0);
    a.op(LDX_MEM_W, 3, 1, 4, 0);
    a.at_least(14 + 20 + 8);
    // Longer than a socket frame holds: pass (r4 = data + max_frame; data_end beyond it).
    a.op(ALU64_MOV_X, 4, 2, 0, 0);
    a.op(ALU64_ADD_K, 4, 0, 0, max_frame as i32);
    a.jump(JMP_JGT_X, 3, 4, 0, Label::Pass);
    a.load(2, 12);
    let (v4, v6) = match listen.ip() {
        IpAddr::V4(_) => (true, false),
        // A socket on [::] takes IPv4 too.
        IpAddr::V6(ip) => (ip.is_unspecified(), true),
    };
    if v4 {
        let ethertype = u16::from_ne_bytes(0x0800u16.to_be_bytes());
        a.jump(JMP32_JEQ_K, 5, 0, ethertype as i32, Label::V4);
    }
    if v6 {
        let ethertype = u16::from_ne_bytes(0x86ddu16.to_be_bytes());
        a.jump(JMP32_JEQ_K, 5, 0, ethertype as i32, Label::V6);
    }
    a.op(ALU64_MOV_K, 0, 0, 0, XDP_PASS);
    a.op(JMP_EXIT, 0, 0, 0, 0);
    if v4 {
        a.label(Label::V4);
        // Version 4, 20-byte header, UDP, neither more fragments nor an offset.
        a.expect(14, &[0x45]);
        a.expect(23, &[17]);
        a.load(2, 20);
        let fragment = u16::from_ne_bytes(0x3fffu16.to_be_bytes());
        a.op(ALU32_AND_K, 5, 0, 0, fragment as i32);
        a.jump(JMP32_JNE_K, 5, 0, 0, Label::Pass);
        if let IpAddr::V4(ip) = listen.ip()
            && !ip.is_unspecified()
        {
            a.expect(30, &ip.octets());
        }
        a.expect(36, &port);
        a.jump(JMP_JA, 0, 0, 0, Label::Redirect);
    }
    if v6 {
        a.label(Label::V6);
        a.at_least(14 + 40 + 8);
        a.expect(20, &[17]);
        if let IpAddr::V6(ip) = listen.ip()
            && !ip.is_unspecified()
        {
            a.expect(38, &ip.octets());
        }
        a.expect(56, &port);
    }
    a.label(Label::Redirect);
    // bpf_redirect_map(map, ctx->rx_queue_index, XDP_PASS): no socket for the queue, pass.
    a.op(LDX_MEM_W, 2, 1, 16, 0);
    a.op(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd);
    a.op(0, 0, 0, 0, 0);
    a.op(ALU64_MOV_K, 3, 0, 0, XDP_PASS);
    a.op(JMP_CALL, 0, 0, 0, FUNC_REDIRECT_MAP);
    a.op(JMP_EXIT, 0, 0, 0, 0);
    a.label(Label::Pass);
    a.op(ALU64_MOV_K, 0, 0, 0, XDP_PASS);
    a.op(JMP_EXIT, 0, 0, 0, 0);
    a.finish()
}
