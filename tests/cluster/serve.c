/* Test infrastructure for tests/integration/clusterset.rs: the backends' server. Listens on TCP
 * port $1 (80 if not given), IPv4 and IPv6, and writes its host name, a space and $2 (its
 * cluster's name, when given) and a newline to each connection, then closes it, so that a
 * client across clusters sees which pod of which cluster it reached. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int port = argc > 1 ? atoi(argv[1]) : 80;
  if (port <= 0 || port > 65535) {
    fprintf(stderr, "serve: %s is not a port\n", argv[1]);
    return 2;
  }
  char name[256];
  if (gethostname(name, sizeof name - 1) != 0) {
    perror("serve: gethostname");
    return 1;
  }
  name[sizeof name - 1] = 0;
  char line[512];
  int n = snprintf(line, sizeof line, "%s%s%s\n", name, argc > 2 ? " " : "", argc > 2 ? argv[2] : "");
  if (n < 0 || (size_t)n >= sizeof line) {
    fprintf(stderr, "serve: the label is too long\n");
    return 2;
  }
  size_t len = (size_t)n;
  int s = socket(AF_INET6, SOCK_STREAM, 0);
  int off = 0, on = 1;
  setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = in6addr_any};
  if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 128) != 0) {
    perror("serve: listen");
    return 1;
  }
  fprintf(stderr, "serve: %.*s on port %d\n", (int)len - 1, line, port);
  for (;;) {
    int c = accept(s, NULL, NULL);
    if (c < 0) {
      if (errno == EINTR) continue;
      perror("serve: accept");
      return 1;
    }
    ssize_t w = write(c, line, len);
    (void)w;
    close(c);
  }
}
