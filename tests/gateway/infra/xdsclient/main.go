// Command xdsclient is test infrastructure for tests/integration/gateway.rs, not part of the
// product. There is no Envoy binary on the machines the tests run on, so this stands where an
// Envoy of one Gateway would: it connects to Envoy Gateway's xDS server as that Envoy does (gRPC
// with mutual TLS, the client certificate `envoy-gateway certgen` makes for Envoy, the node's
// cluster `<gateway namespace>/<gateway name>`), asks for every cluster (CDS) and every
// ClusterLoadAssignment (EDS) with go-control-plane's ADS client, acknowledges each response, and
// prints one JSON line each time what it holds changes:
//
//	{"time": "...", "clusters": {"httproute/shop/web/rule/0": ["198.18.5.1:80", ...], ...}}
//
// Each cluster's addresses are its ClusterLoadAssignment's (EDS) or its own load assignment
// (static clusters), sorted; a cluster with none has an empty list.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/client/sotw/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

type state struct {
	mu       sync.Mutex
	clusters map[string]*clusterv3.Cluster
	loads    map[string]*endpointv3.ClusterLoadAssignment
	last     string
}

func addresses(cla *endpointv3.ClusterLoadAssignment) []string {
	out := []string{}
	if cla == nil {
		return out
	}
	for _, l := range cla.GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			if a := e.GetEndpoint().GetAddress().GetSocketAddress(); a != nil {
				out = append(out, fmt.Sprintf("%s:%d", a.GetAddress(), a.GetPortValue()))
			}
		}
	}
	sort.Strings(out)
	return out
}

// print writes the state when it differs from what was last written.
func (s *state) print() {
	view := map[string][]string{}
	for name, c := range s.clusters {
		if c.GetType() == clusterv3.Cluster_EDS {
			view[name] = addresses(s.loads[name])
		} else {
			view[name] = addresses(c.GetLoadAssignment())
		}
	}
	body, _ := json.Marshal(view)
	if string(body) == s.last {
		return
	}
	s.last = string(body)
	line, _ := json.Marshal(map[string]any{"time": time.Now().UTC().Format(time.RFC3339Nano), "clusters": view})
	fmt.Println(string(line))
}

func watch(ctx context.Context, conn *grpc.ClientConn, node *corev3.Node, typeURL string, s *state) error {
	c := sotw.NewADSClient(ctx, node, typeURL)
	if err := c.InitConnect(conn); err != nil {
		return fmt.Errorf("%s: %w", typeURL, err)
	}
	for {
		resp, err := c.Fetch()
		if err != nil {
			return fmt.Errorf("%s: %w", typeURL, err)
		}
		s.mu.Lock()
		switch typeURL {
		case resourcev3.ClusterType:
			s.clusters = map[string]*clusterv3.Cluster{}
			for _, r := range resp.Resources {
				var cl clusterv3.Cluster
				if err := r.UnmarshalTo(&cl); err != nil {
					s.mu.Unlock()
					return fmt.Errorf("a cluster: %w", err)
				}
				s.clusters[cl.GetName()] = &cl
			}
		case resourcev3.EndpointType:
			s.loads = map[string]*endpointv3.ClusterLoadAssignment{}
			for _, r := range resp.Resources {
				var cla endpointv3.ClusterLoadAssignment
				if err := r.UnmarshalTo(&cla); err != nil {
					s.mu.Unlock()
					return fmt.Errorf("a load assignment: %w", err)
				}
				s.loads[cla.GetClusterName()] = &cla
			}
		}
		s.print()
		s.mu.Unlock()
		if err := c.Ack(); err != nil {
			return fmt.Errorf("%s: ack: %w", typeURL, err)
		}
	}
}

func main() {
	server := flag.String("server", "127.0.0.1:18000", "Envoy Gateway's xDS address")
	certs := flag.String("certs", "", "directory with Envoy's tls.crt, tls.key and ca.crt (envoy-gateway certgen --local: certs/envoy)")
	gateway := flag.String("gateway", "", "NAMESPACE/NAME of the Gateway to be the Envoy of")
	flag.Parse()
	if *certs == "" || *gateway == "" {
		fmt.Fprintln(os.Stderr, "xdsclient: --certs and --gateway are needed")
		os.Exit(2)
	}
	pair, err := tls.LoadX509KeyPair(*certs+"/tls.crt", *certs+"/tls.key")
	if err != nil {
		fmt.Fprintln(os.Stderr, "xdsclient:", err)
		os.Exit(1)
	}
	ca, err := os.ReadFile(*certs + "/ca.crt")
	if err != nil {
		fmt.Fprintln(os.Stderr, "xdsclient:", err)
		os.Exit(1)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	creds := credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{pair},
		RootCAs:      pool,
		ServerName:   "envoy-gateway",
		MinVersion:   tls.VersionTLS13,
	})
	conn, err := grpc.NewClient(*server, grpc.WithTransportCredentials(creds))
	if err != nil {
		fmt.Fprintln(os.Stderr, "xdsclient:", err)
		os.Exit(1)
	}
	defer conn.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	node := &corev3.Node{Id: "xdsclient-" + *gateway, Cluster: *gateway}
	s := &state{clusters: map[string]*clusterv3.Cluster{}, loads: map[string]*endpointv3.ClusterLoadAssignment{}}
	errs := make(chan error, 2)
	for _, t := range []string{resourcev3.ClusterType, resourcev3.EndpointType} {
		go func(t string) { errs <- watch(ctx, conn, node, t, s) }(t)
	}
	select {
	case <-ctx.Done():
	case err := <-errs:
		fmt.Fprintln(os.Stderr, "xdsclient:", err)
		os.Exit(1)
	}
}
