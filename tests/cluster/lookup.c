// Test infrastructure: the client in the cluster test's pod. It resolves names through glibc's
// getaddrinfo (AF_UNSPEC, as ordinary programs do: A and AAAA in parallel, the search list and
// ndots of the resolv.conf the kubelet wrote), at a bounded rate for a bounded time, and prints
// one JSON line: lookups sent, failed, stalled over a second, and latency percentiles.
//
//   lookup RATE SECONDS THREADS NAME=EXPECT...
//
// EXPECT is an IPv4 or IPv6 address that must be among the answers, ANY (some address, whichever:
// for answers that change while it runs), or NXDOMAIN (getaddrinfo must say the name does not
// exist). A %u in NAME becomes a counter, so that each lookup asks a
// name no cache holds. Names are taken in turn. With STOP_FILE set, it also stops once that
// file exists (so a test can end it when what it measures is over).
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

struct want {
  char *name;
  char *expect;
};

static struct want *wants;
static int nwants;
static double rate, seconds;
static int threads;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long sent, failed, stalled, counter;
static double *lat;
static unsigned long nlat, caplat;
static char errors[8][1024];
static int nerrors;
static const char *stop_file;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static void note(const char *fmt, const char *a, const char *b) {
  if (nerrors < 8) snprintf(errors[nerrors++], sizeof errors[0], fmt, a, b);
}

// Returns NULL when the answer is as expected, else what was wrong.
static const char *check(const char *name, const char *expect, char *buf, size_t len) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM}, *res = NULL;
  int rc = getaddrinfo(name, NULL, &hints, &res);
  if (strcmp(expect, "NXDOMAIN") == 0) {
    if (rc == EAI_NONAME) return NULL;
    if (rc == 0) {
      freeaddrinfo(res);
      return "an address, where NXDOMAIN was expected";
    }
    snprintf(buf, len, "%s, where NXDOMAIN was expected", gai_strerror(rc));
    return buf;
  }
  if (rc != 0) {
    snprintf(buf, len, "%s", rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    return buf;
  }
  const char *wrong = "not among the answers";
  if (strcmp(expect, "ANY") == 0 && res) wrong = NULL;
  for (struct addrinfo *a = res; a; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = "";
    if (a->ai_family == AF_INET)
      inet_ntop(AF_INET, &((struct sockaddr_in *)a->ai_addr)->sin_addr, text, sizeof text);
    else if (a->ai_family == AF_INET6)
      inet_ntop(AF_INET6, &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, text, sizeof text);
    if (strcmp(text, expect) == 0) wrong = NULL;
  }
  freeaddrinfo(res);
  return wrong;
}

static void *run(void *arg) {
  (void)arg;
  double interval = threads / rate, start = now(), next = start;
  char name[512], buf[256];
  for (;;) {
    double t = now();
    if (t - start >= seconds) break;
    struct stat st;
    if (stop_file && stat(stop_file, &st) == 0) break;
    if (t < next) {
      double wait = next - t;
      struct timespec s = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
      nanosleep(&s, NULL);
      continue;
    }
    next += interval;
    if (next < t) next = t; // behind after a stall: no burst to catch up
    pthread_mutex_lock(&lock);
    unsigned long n = counter++;
    pthread_mutex_unlock(&lock);
    struct want *w = &wants[n % nwants];
    snprintf(name, sizeof name, w->name, (unsigned)n);
    double t0 = now();
    const char *wrong = check(name, w->expect, buf, sizeof buf);
    double took = now() - t0;
    pthread_mutex_lock(&lock);
    sent++;
    if (wrong) {
      failed++;
      note("%s: %s", name, wrong);
    }
    if (took > 1.0) stalled++;
    if (nlat < caplat) lat[nlat++] = took * 1e3;
    pthread_mutex_unlock(&lock);
  }
  return NULL;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') putchar('\\');
    if ((unsigned char)*s >= 0x20) putchar(*s);
  }
  putchar('"');
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: lookup RATE SECONDS THREADS NAME=EXPECT...\n");
    return 2;
  }
  rate = atof(argv[1]);
  seconds = atof(argv[2]);
  threads = atoi(argv[3]);
  if (rate <= 0 || rate > 10000 || seconds <= 0 || seconds > 3600 || threads < 1 || threads > 64) {
    fprintf(stderr, "lookup: RATE must be in (0, 10000], SECONDS in (0, 3600], THREADS in [1, 64]\n");
    return 2;
  }
  stop_file = getenv("STOP_FILE");
  nwants = argc - 4;
  wants = calloc(nwants, sizeof *wants);
  for (int i = 0; i < nwants; i++) {
    char *eq = strrchr(argv[i + 4], '=');
    if (!eq) {
      fprintf(stderr, "lookup: %s is not NAME=EXPECT\n", argv[i + 4]);
      return 2;
    }
    *eq = 0;
    wants[i] = (struct want){argv[i + 4], eq + 1};
  }
  caplat = (unsigned long)(rate * seconds) + 1024;
  lat = calloc(caplat, sizeof *lat);
  pthread_t tid[64];
  for (int i = 0; i < threads; i++) pthread_create(&tid[i], NULL, run, NULL);
  for (int i = 0; i < threads; i++) pthread_join(tid[i], NULL);
  qsort(lat, nlat, sizeof *lat, cmp);
  double p50 = nlat ? lat[nlat / 2] : 0, p99 = nlat ? lat[nlat * 99 / 100] : 0,
         max = nlat ? lat[nlat - 1] : 0;
  printf("{\"sent\":%lu,\"failed\":%lu,\"stalled\":%lu,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,\"errors\":[",
         sent, failed, stalled, p50, p99, max);
  for (int i = 0; i < nerrors; i++) {
    if (i) putchar(',');
    json_string(errors[i]);
  }
  printf("]}\n");
  return 0;
}
