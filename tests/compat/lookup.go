// Test infrastructure for tests/integration/compat.rs: Go's resolver (GODEBUG=netdns=go or =cgo picks the
// pure-Go one or the C library's). For each case it prints one line: the milliseconds it took,
// a tab, then the answer space-separated, or `error` and Go's message.
//   host:NAME          net.LookupHost(NAME)
//   srv:NAME           net.LookupSRV("", "", NAME): SRV at NAME itself, as "port target"
//   srv:PORT:PROTO:NAME net.LookupSRV(PORT, PROTO, NAME): SRV at _PORT._PROTO.NAME
package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func main() {
	for _, c := range os.Args[1:] {
		kind, rest, _ := strings.Cut(c, ":")
		start := time.Now()
		var out []string
		var err error
		switch kind {
		case "host":
			out, err = net.LookupHost(rest)
		case "srv":
			service, proto, name := "", "", rest
			if parts := strings.SplitN(rest, ":", 3); len(parts) == 3 {
				service, proto, name = parts[0], parts[1], parts[2]
			}
			var srvs []*net.SRV
			_, srvs, err = net.LookupSRV(service, proto, name)
			for _, s := range srvs {
				out = append(out, fmt.Sprintf("%d:%s", s.Port, strings.ToLower(strings.TrimSuffix(s.Target, "."))))
			}
		default:
			err = fmt.Errorf("unsupported case %s", c)
		}
		took := float64(time.Since(start).Microseconds()) / 1e3
		if err != nil {
			fmt.Printf("%.3f\terror\t%s\n", took, strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			fmt.Printf("%.3f\t%s\n", took, strings.Join(out, " "))
		}
	}
}
