/* The floor: what the kernel alone costs per query on the benchmark's path (issue 41).
 *
 * One thread, one epoll loop, the socket options clusterset-dns uses (SO_REUSEPORT and
 * IP_PMTUDISC_OMIT on UDP, TCP_NODELAY on TCP), and no DNS work: every query gets the same
 * precomputed answer (one A record, 198.18.0.1, TTL 5), behind the query's own ID, flags and
 * question, which dnsperf needs to match it. No zone, no metrics, no logging. UDP is drained
 * with recvmmsg and answered with sendmmsg, as our UDP workers do; TCP answers every whole
 * message a read brought in with one send. Run by benches/compare-knot.sh beside Knot and us:
 * our CPU per query over the floor's is what is ours to cut.
 *
 * usage: floor PORT   (listens on 127.0.0.1, or $ADDR, UDP and TCP; stops on SIGTERM)
 * build: cc -O2 -o floor benches/floor.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

enum { BATCH = 32, MAXQ = 512, MAXFD = 4096, TCPBUF = 65536 + 2 };

/* The answer record: a pointer to the question's name, A IN, TTL 5, 198.18.0.1. */
static const unsigned char RR[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 198, 18, 0, 1};

/* Writes the answer to query q (n bytes) into out; its length, or 0 to drop the query. */
static size_t answer(const unsigned char *q, size_t n, unsigned char *out) {
    if (n < 12 || q[4] != 0 || q[5] != 1 || (q[2] & 0x80)) return 0;
    size_t i = 12;
    while (i < n && q[i] != 0) {
        if (q[i] & 0xc0) return 0;
        i += q[i] + 1;
    }
    i += 5; /* the root label, type and class */
    if (i > n || i + sizeof RR > MAXQ) return 0;
    memcpy(out, q, i);
    out[2] = 0x84 | (q[2] & 0x79); /* QR, AA; the opcode and RD as asked */
    out[3] = 0;
    out[6] = 0, out[7] = 1, out[8] = out[9] = out[10] = out[11] = 0;
    memcpy(out + i, RR, sizeof RR);
    return i + sizeof RR;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

struct conn {
    size_t len;
    unsigned char buf[TCPBUF];
};
static struct conn *conns[MAXFD];

static void udp(int fd) {
    static unsigned char in[BATCH][MAXQ], out[BATCH][MAXQ];
    static struct sockaddr_storage from[BATCH];
    static struct iovec iv[BATCH], ov[BATCH];
    static struct mmsghdr rm[BATCH], sm[BATCH];
    for (;;) {
        for (int k = 0; k < BATCH; k++) {
            iv[k] = (struct iovec){in[k], MAXQ};
            rm[k].msg_hdr = (struct msghdr){.msg_name = &from[k], .msg_namelen = sizeof from[k],
                                            .msg_iov = &iv[k], .msg_iovlen = 1};
        }
        int got = recvmmsg(fd, rm, BATCH, MSG_DONTWAIT, NULL);
        if (got <= 0) return;
        int m = 0;
        for (int k = 0; k < got; k++) {
            size_t len = answer(in[k], rm[k].msg_len, out[m]);
            if (!len) continue;
            ov[m] = (struct iovec){out[m], len};
            sm[m].msg_hdr = (struct msghdr){.msg_name = &from[k],
                                            .msg_namelen = rm[k].msg_hdr.msg_namelen,
                                            .msg_iov = &ov[m], .msg_iovlen = 1};
            m++;
        }
        if (m) sendmmsg(fd, sm, m, 0);
        if (got < BATCH) return;
    }
}

static void closeconn(int ep, int fd) {
    epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    free(conns[fd]);
    conns[fd] = NULL;
}

static void tcp(int ep, int fd) {
    struct conn *c = conns[fd];
    static unsigned char out[TCPBUF];
    ssize_t r = recv(fd, c->buf + c->len, sizeof c->buf - c->len, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN)) return closeconn(ep, fd);
    if (r < 0) return;
    c->len += r;
    size_t at = 0;
    for (int more = 1; more;) {
        size_t o = 0;
        more = 0;
        while (c->len - at >= 2) {
            size_t n = (size_t)c->buf[at] << 8 | c->buf[at + 1];
            if (c->len - at - 2 < n) break;
            if (o + 2 + MAXQ > sizeof out) {
                more = 1; /* the answers so far go out first */
                break;
            }
            size_t len = answer(c->buf + at + 2, n, out + o + 2);
            if (len) {
                out[o] = len >> 8, out[o + 1] = len & 0xff;
                o += 2 + len;
            }
            at += 2 + n;
        }
        for (size_t sent = 0; sent < o;) {
            ssize_t w = send(fd, out + sent, o - sent, MSG_NOSIGNAL);
            if (w > 0) {
                sent += w;
            } else if (w < 0 && errno == EAGAIN) {
                struct pollfd p = {fd, POLLOUT, 0};
                poll(&p, 1, 1000);
            } else {
                return closeconn(ep, fd);
            }
        }
    }
    memmove(c->buf, c->buf + at, c->len - at);
    c->len -= at;
}

int main(int argc, char **argv) {
    if (argc != 2 || atoi(argv[1]) <= 0 || atoi(argv[1]) > 65535) {
        fprintf(stderr, "usage: floor PORT\n");
        return 2;
    }
    const char *addr = getenv("ADDR") ? getenv("ADDR") : "127.0.0.1";
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        fprintf(stderr, "floor: ADDR %s is not an IPv4 address\n", addr);
        return 2;
    }
    int one = 1, omit = IP_PMTUDISC_OMIT;
    int u = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    setsockopt(u, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    setsockopt(u, IPPROTO_IP, IP_MTU_DISCOVER, &omit, sizeof omit);
    if (bind(u, (struct sockaddr *)&sa, sizeof sa)) die("floor: bind UDP");
    int t = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(t, (struct sockaddr *)&sa, sizeof sa) || listen(t, 1024)) die("floor: TCP");
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = u};
    epoll_ctl(ep, EPOLL_CTL_ADD, u, &ev);
    ev.data.fd = t;
    epoll_ctl(ep, EPOLL_CTL_ADD, t, &ev);
    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(ep, evs, 64, -1);
        if (n < 0 && errno != EINTR) die("floor: epoll_wait");
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == u) {
                udp(u);
            } else if (fd == t) {
                int c;
                while ((c = accept4(t, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (c >= MAXFD || !(conns[c] = calloc(1, sizeof *conns[c]))) {
                        close(c);
                        continue;
                    }
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    ev.data.fd = c;
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
                }
            } else if (conns[fd]) {
                tcp(ep, fd);
            }
        }
    }
}
