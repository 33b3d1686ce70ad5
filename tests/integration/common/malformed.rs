//! Every malformed shape of a query the hardening tests send, with the rcode each must get.

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

use super::query;

/// Every malformed shape of a query for `name`, with the rcode it must get (`None`: dropped, no answer at all).
pub fn malformed(name: &str) -> Vec<(&'static str, Vec<u8>, Option<ResponseCode>)> {
    let base = query(name, RecordType::A, Some(1232));
    let n = base.len();
    let head = base[..12].to_vec();
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut p = base.clone();
        f(&mut p);
        p
    };
    let question = |name: &[u8]| {
        let mut p = head.clone();
        p[11] = 0; // no OPT
        p.extend_from_slice(name);
        p.extend_from_slice(&[0, 1, 0, 1]);
        p
    };
    let mut long_name = Vec::new();
    for _ in 0..5 {
        long_name.push(63);
        long_name.extend_from_slice(&[b'a'; 63]);
    }
    long_name.push(0);
    vec![
        ("11-byte header", base[..11].to_vec(), None),
        (
            "header only, QDCOUNT 1",
            head.clone(),
            Some(ResponseCode::FormErr),
        ),
        (
            "QDCOUNT 0",
            with(&|p| p[5] = 0),
            Some(ResponseCode::FormErr),
        ),
        (
            "QDCOUNT 2",
            with(&|p| p[5] = 2),
            Some(ResponseCode::FormErr),
        ),
        (
            "ANCOUNT lies",
            with(&|p| p[7] = 5),
            Some(ResponseCode::FormErr),
        ),
        (
            "ARCOUNT lies",
            with(&|p| p[11] = 3),
            Some(ResponseCode::FormErr),
        ),
        (
            "question cut short",
            base[..n - 14].to_vec(),
            Some(ResponseCode::FormErr),
        ),
        (
            "compression pointer loop",
            question(&[0xC0, 12]),
            Some(ResponseCode::FormErr),
        ),
        (
            "forward compression pointer",
            question(&[3, b'w', b'e', b'b', 0xC0, 40]),
            Some(ResponseCode::FormErr),
        ),
        (
            "label over 63",
            question(&[&[64u8][..], &[b'a'; 64], &[0]].concat()),
            Some(ResponseCode::FormErr),
        ),
        (
            "name over 255",
            question(&long_name),
            Some(ResponseCode::FormErr),
        ),
        (
            "reserved label type 0x40",
            question(&[0x41, b'a', 0]),
            Some(ResponseCode::FormErr),
        ),
        (
            "class CH",
            with(&|p| {
                let q = p.len() - 11 - 1;
                p[q] = 3;
            }),
            Some(ResponseCode::FormErr),
        ),
        (
            "class ANY",
            with(&|p| {
                let q = p.len() - 11 - 1;
                p[q] = 255;
            }),
            Some(ResponseCode::FormErr),
        ),
        (
            "OPT in the answer section",
            with(&|p| {
                p[7] = 1;
                p[11] = 0;
            }),
            Some(ResponseCode::FormErr),
        ),
        (
            "two OPTs",
            with(&|p| {
                p.extend_from_slice(&base[n - 11..]);
                p[11] = 2;
            }),
            Some(ResponseCode::FormErr),
        ),
        (
            "OPT with a name",
            {
                let mut p = base[..n - 11].to_vec();
                p.extend_from_slice(&[1, b'x', 0, 0, 41, 4, 0xD0, 0, 0, 0, 0, 0, 0]);
                p
            },
            Some(ResponseCode::FormErr),
        ),
        (
            "OPT option overrunning its record",
            with(&|p| {
                let l = p.len();
                p[l - 1] = 4;
                p.extend_from_slice(&[0, 10, 0, 50]);
            }),
            Some(ResponseCode::FormErr),
        ),
        (
            "EDNS version 1",
            with(&|p| p[n - 5] = 1),
            Some(ResponseCode::BADVERS),
        ),
        ("a response (QR = 1)", with(&|p| p[2] |= 0x80), None),
        (
            "opcode IQUERY",
            with(&|p| p[2] = 1 << 3),
            Some(ResponseCode::NotImp),
        ),
        (
            "opcode STATUS",
            with(&|p| p[2] = 2 << 3),
            Some(ResponseCode::NotImp),
        ),
        (
            "opcode 15",
            with(&|p| p[2] = 15 << 3),
            Some(ResponseCode::NotImp),
        ),
        (
            "opcode UPDATE",
            with(&|p| p[2] = 5 << 3),
            Some(ResponseCode::NotImp),
        ),
    ]
}
