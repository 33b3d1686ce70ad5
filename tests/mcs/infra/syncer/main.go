// Command syncer is test infrastructure for tests/integration/clusterset/, not part of the
// product: the export side of a cluster set, which no implementation that can be built here
// provides (the Go module proxy refuses Submariner's Lighthouse, and Cilium needs mcs-api
// modules it does not serve). It does what sigs.k8s.io/mcs-api's e2e does by hand, for every
// cluster it is given, continuously:
//
//   - for each ServiceExport (of an existing Service) in any cluster, a ServiceImport of the same
//     name in every cluster: Headless when the Service is headless, else ClusterSetIP without
//     spec.ips (each cluster's MCS controller writes them, and they are kept on every update);
//     ports, internalTrafficPolicy and trafficDistribution from the oldest export's Service;
//     status.clusters and status.endpointSliceObjects: Present;
//   - the exporting cluster's EndpointSlices of that Service copied into every cluster, its own
//     included, labelled multicluster.kubernetes.io/service-name, .../source-cluster and
//     endpointslice.kubernetes.io/managed-by (this syncer's name);
//   - objects it made that nothing wants any more (an export withdrawn, a cluster no longer
//     given) are deleted.
//
// Level-triggered: any event in any cluster schedules one reconcile of the whole set from the
// informers' caches (50 ms later, coalescing bursts). One JSON line per write on stdout.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	managedBy     = "mcs-syncer.clusterset-dns.test"
	labelService  = "multicluster.kubernetes.io/service-name"
	labelCluster  = "multicluster.kubernetes.io/source-cluster"
	labelSyncedBy = "clusterset-dns.test/synced-by"
)

var (
	exportsGVR = schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: "v1beta1", Resource: "serviceexports"}
	importsGVR = schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: "v1beta1", Resource: "serviceimports"}
)

type cluster struct {
	name     string
	kube     kubernetes.Interface
	dyn      dynamic.Interface
	exports  cache.GenericLister
	imports  cache.GenericLister
	services cache.Indexer
	slices   cache.Indexer
	ns       cache.Indexer
}

type clustersFlag []string

func (c *clustersFlag) String() string     { return strings.Join(*c, ",") }
func (c *clustersFlag) Set(v string) error { *c = append(*c, v); return nil }

func logWrite(cluster, op, kind, ns, name string, err error) {
	line := map[string]string{"time": time.Now().UTC().Format(time.RFC3339Nano), "cluster": cluster, "op": op, "kind": kind, "namespace": ns, "name": name}
	if err != nil {
		line["error"] = err.Error()
	}
	b, _ := json.Marshal(line)
	fmt.Println(string(b))
}

func main() {
	var given clustersFlag
	flag.Var(&given, "cluster", "NAME=KUBECONFIG, once per cluster of the set")
	flag.Parse()
	if len(given) == 0 {
		fmt.Fprintln(os.Stderr, "syncer: give at least one --cluster NAME=KUBECONFIG")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	kick := make(chan struct{}, 1)
	notify := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	var clusters []*cluster
	for _, g := range given {
		name, path, ok := strings.Cut(g, "=")
		if !ok || name == "" || path == "" {
			fmt.Fprintf(os.Stderr, "syncer: --cluster %q is not NAME=KUBECONFIG\n", g)
			os.Exit(2)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "syncer: cluster %s: %v\n", name, err)
			os.Exit(1)
		}
		cfg.QPS, cfg.Burst = 200, 400
		c := &cluster{name: name, kube: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg)}
		typed := informers.NewSharedInformerFactory(c.kube, 0)
		dyn := dynamicinformer.NewDynamicSharedInformerFactory(c.dyn, 0)
		for _, inf := range []cache.SharedIndexInformer{
			typed.Core().V1().Services().Informer(),
			typed.Discovery().V1().EndpointSlices().Informer(),
			typed.Core().V1().Namespaces().Informer(),
			dyn.ForResource(exportsGVR).Informer(),
			dyn.ForResource(importsGVR).Informer(),
		} {
			if _, err := inf.AddEventHandler(handler); err != nil {
				panic(err)
			}
		}
		c.services = typed.Core().V1().Services().Informer().GetIndexer()
		c.slices = typed.Discovery().V1().EndpointSlices().Informer().GetIndexer()
		c.ns = typed.Core().V1().Namespaces().Informer().GetIndexer()
		c.exports = dyn.ForResource(exportsGVR).Lister()
		c.imports = dyn.ForResource(importsGVR).Lister()
		typed.Start(ctx.Done())
		dyn.Start(ctx.Done())
		for t, ok := range typed.WaitForCacheSync(ctx.Done()) {
			if !ok {
				fmt.Fprintf(os.Stderr, "syncer: cluster %s: %v did not sync\n", name, t)
				os.Exit(1)
			}
		}
		for r, ok := range dyn.WaitForCacheSync(ctx.Done()) {
			if !ok {
				fmt.Fprintf(os.Stderr, "syncer: cluster %s: %v did not sync (are the MCS CRDs installed?)\n", name, r)
				os.Exit(1)
			}
		}
		clusters = append(clusters, c)
	}
	fmt.Fprintf(os.Stderr, "syncer: %d clusters synced\n", len(clusters))
	notify()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-time.After(10 * time.Second):
		}
		time.Sleep(50 * time.Millisecond)
		reconcile(ctx, clusters)
	}
}

// member is one cluster's export of a service.
type member struct {
	cluster  *cluster
	service  *corev1.Service
	exported time.Time
}

func key(ns, name string) string { return ns + "/" + name }

func reconcile(ctx context.Context, clusters []*cluster) {
	// Which services are exported, by whom.
	members := map[string][]member{}
	for _, c := range clusters {
		list, err := c.exports.List(everything())
		if err != nil {
			continue
		}
		for _, o := range list {
			u := o.(*unstructured.Unstructured)
			obj, ok, _ := c.services.GetByKey(key(u.GetNamespace(), u.GetName()))
			if !ok || u.GetDeletionTimestamp() != nil {
				continue
			}
			k := key(u.GetNamespace(), u.GetName())
			members[k] = append(members[k], member{c, obj.(*corev1.Service), u.GetCreationTimestamp().Time})
		}
	}
	for k := range members {
		m := members[k]
		sort.Slice(m, func(i, j int) bool {
			if !m[i].exported.Equal(m[j].exported) {
				return m[i].exported.Before(m[j].exported)
			}
			return m[i].cluster.name < m[j].cluster.name
		})
	}
	for _, target := range clusters {
		wantSlices := map[string]*discoveryv1.EndpointSlice{}
		for k, m := range members {
			ns, name, _ := strings.Cut(k, "/")
			if _, ok, _ := target.ns.GetByKey(ns); !ok {
				continue
			}
			syncImport(ctx, target, ns, name, m)
			for _, mem := range m {
				for _, s := range sourceSlices(mem.cluster, ns, name) {
					copy := sliceCopy(s, mem.cluster.name, name)
					wantSlices[key(ns, copy.Name)] = copy
				}
			}
		}
		// Slices: create, update, delete.
		for k, want := range wantSlices {
			obj, ok, _ := target.slices.GetByKey(k)
			if !ok {
				_, err := target.kube.DiscoveryV1().EndpointSlices(want.Namespace).Create(ctx, want, metav1.CreateOptions{})
				logWrite(target.name, "create", "EndpointSlice", want.Namespace, want.Name, err)
				continue
			}
			have := obj.(*discoveryv1.EndpointSlice)
			merged := have.DeepCopy()
			for l, v := range want.Labels {
				merged.Labels[l] = v
			}
			merged.AddressType, merged.Endpoints, merged.Ports = want.AddressType, want.Endpoints, want.Ports
			if !reflect.DeepEqual(merged, have) {
				_, err := target.kube.DiscoveryV1().EndpointSlices(want.Namespace).Update(ctx, merged, metav1.UpdateOptions{})
				logWrite(target.name, "update", "EndpointSlice", want.Namespace, want.Name, err)
			}
		}
		for _, obj := range target.slices.List() {
			s := obj.(*discoveryv1.EndpointSlice)
			if s.Labels[discoveryv1.LabelManagedBy] != managedBy {
				continue
			}
			if _, ok := wantSlices[key(s.Namespace, s.Name)]; !ok {
				err := target.kube.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
				logWrite(target.name, "delete", "EndpointSlice", s.Namespace, s.Name, ignoreGone(err))
			}
		}
		// Imports this syncer made that nothing exports any more.
		list, _ := target.imports.List(everything())
		for _, o := range list {
			u := o.(*unstructured.Unstructured)
			if u.GetLabels()[labelSyncedBy] != managedBy {
				continue
			}
			if _, ok := members[key(u.GetNamespace(), u.GetName())]; !ok {
				err := target.dyn.Resource(importsGVR).Namespace(u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
				logWrite(target.name, "delete", "ServiceImport", u.GetNamespace(), u.GetName(), ignoreGone(err))
			}
		}
	}
}

func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// sourceSlices are the Service's own slices in its cluster (never a copy made here).
func sourceSlices(c *cluster, ns, service string) []*discoveryv1.EndpointSlice {
	objs, _ := c.slices.ByIndex(cache.NamespaceIndex, ns)
	var out []*discoveryv1.EndpointSlice
	for _, o := range objs {
		s := o.(*discoveryv1.EndpointSlice)
		if s.Labels[discoveryv1.LabelServiceName] == service && s.Labels[discoveryv1.LabelManagedBy] != managedBy && s.DeletionTimestamp == nil {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// sliceCopy is slice s of cluster `from` as imported: named after both, labelled for the MCS
// API, its endpoints without the references to objects of the other cluster.
func sliceCopy(s *discoveryv1.EndpointSlice, from, service string) *discoveryv1.EndpointSlice {
	name := "imported-" + from + "-" + s.Name
	if len(name) > 253 {
		name = name[:253]
	}
	eps := make([]discoveryv1.Endpoint, len(s.Endpoints))
	for i, e := range s.Endpoints {
		eps[i] = discoveryv1.Endpoint{Addresses: e.Addresses, Conditions: e.Conditions, Hostname: e.Hostname, Zone: e.Zone}
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: s.Namespace,
			Labels: map[string]string{
				labelService:               service,
				labelCluster:               from,
				discoveryv1.LabelManagedBy: managedBy,
			},
		},
		AddressType: s.AddressType,
		Endpoints:   eps,
		Ports:       s.Ports,
	}
}

// syncImport makes the ServiceImport ns/name in c what the members export, keeping spec.ips
// (the cluster's controller owns them).
func syncImport(ctx context.Context, c *cluster, ns, name string, m []member) {
	first := m[0].service
	typ := "ClusterSetIP"
	if first.Spec.ClusterIP == corev1.ClusterIPNone {
		typ = "Headless"
	}
	seen := map[string]bool{}
	var ports []any
	for _, mem := range m {
		for _, p := range mem.service.Spec.Ports {
			id := fmt.Sprintf("%s/%s/%d", p.Name, p.Protocol, p.Port)
			if seen[id] {
				continue
			}
			seen[id] = true
			port := map[string]any{"port": int64(p.Port), "protocol": string(p.Protocol)}
			if p.Name != "" {
				port["name"] = p.Name
			}
			if p.AppProtocol != nil {
				port["appProtocol"] = *p.AppProtocol
			}
			ports = append(ports, port)
		}
	}
	spec := map[string]any{"type": typ, "ports": ports}
	if p := first.Spec.InternalTrafficPolicy; p != nil {
		spec["internalTrafficPolicy"] = string(*p)
	}
	if d := first.Spec.TrafficDistribution; d != nil {
		spec["trafficDistribution"] = *d
	}
	var names []any
	for _, mem := range m {
		names = append(names, map[string]any{"cluster": mem.cluster.name})
	}
	status := map[string]any{"clusters": names, "endpointSliceObjects": "Present"}

	api := c.dyn.Resource(importsGVR).Namespace(ns)
	obj, err := c.imports.Get(key(ns, name))
	if apierrors.IsNotFound(err) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
			"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{labelSyncedBy: managedBy}},
			"spec":     spec,
		}}
		made, err := api.Create(ctx, u, metav1.CreateOptions{})
		logWrite(c.name, "create", "ServiceImport", ns, name, err)
		if err == nil {
			made.Object["status"] = status
			_, err = api.UpdateStatus(ctx, made, metav1.UpdateOptions{})
			logWrite(c.name, "update-status", "ServiceImport", ns, name, err)
		}
		return
	}
	if err != nil {
		return
	}
	have := obj.(*unstructured.Unstructured)
	if ips, ok := have.Object["spec"].(map[string]any)["ips"]; ok && typ == "ClusterSetIP" {
		spec["ips"] = ips
	}
	want := have.DeepCopy()
	want.Object["spec"] = spec
	if !reflect.DeepEqual(normal(want.Object["spec"]), normal(have.Object["spec"])) {
		updated, err := api.Update(ctx, want, metav1.UpdateOptions{})
		logWrite(c.name, "update", "ServiceImport", ns, name, err)
		if err != nil {
			return
		}
		have = updated
	}
	if !reflect.DeepEqual(normal(status), normal(have.Object["status"])) {
		next := have.DeepCopy()
		next.Object["status"] = status
		_, err := api.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		logWrite(c.name, "update-status", "ServiceImport", ns, name, err)
	}
}

// normal is v as JSON would give it back (int64 and float64 alike), for comparing.
func normal(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func everything() labels.Selector { return labels.Everything() }
