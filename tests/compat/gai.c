// Test infrastructure for tests/integration/compat.rs: the C library's getaddrinfo (AF_UNSPEC, as ordinary
// programs call it), built once against glibc and once, static, against musl. For each case
// `host:NAME` it prints one line: the milliseconds it took, a tab, then the addresses
// space-separated, or `error` and the library's message.
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static double ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *name = argv[i];
    if (strncmp(name, "host:", 5) != 0) {
      printf("0\terror\tunsupported case %s\n", name);
      continue;
    }
    name += 5;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    double t0 = ms();
    int rc = getaddrinfo(name, NULL, &hints, &res);
    double took = ms() - t0;
    if (rc != 0) {
      printf("%.3f\terror\t%s\n", took, gai_strerror(rc));
      continue;
    }
    printf("%.3f\t", took);
    for (struct addrinfo *a = res; a; a = a->ai_next) {
      char text[INET6_ADDRSTRLEN] = "";
      if (a->ai_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)a->ai_addr)->sin_addr, text, sizeof text);
      else
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, text, sizeof text);
      printf("%s%s", a == res ? "" : " ", text);
    }
    printf("\n");
    freeaddrinfo(res);
  }
  return 0;
}
