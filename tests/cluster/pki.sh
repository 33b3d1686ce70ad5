#!/usr/bin/env bash
# Makes the single-node cluster's certificates in directory $1, as kubeadm would: one CA, the API
# server's serving certificate (its node address, the `kubernetes` Service address and names),
# a client certificate for each component under the name its RBAC role is bound to, and the
# service-account signing key. $2 is the node address, $3 the `kubernetes` Service address, $4
# the node's name (csdns-node when not given). mcs-controller is the user the MCS API's
# controller runs as (tests/integration/clusterset/), bound to that controller's own role.
set -euo pipefail
d=$1 node=$2 svc=$3 name=${4:-csdns-node}
cd "$d"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=clusterset-dns-test-ca 2>/dev/null
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
cert() { # name subject [subjectAltName]
  local ext=extendedKeyUsage=clientAuth
  [ -n "${3:-}" ] && ext="extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$3"
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
    -extfile <(echo "$ext") -out "$1.crt" 2>/dev/null
  rm "$1.csr"
}
cert apiserver /CN=kube-apiserver \
  "IP:$node,IP:$svc,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert admin "/O=system:masters/CN=admin"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
cert controller-manager /CN=system:kube-controller-manager
cert scheduler /CN=system:kube-scheduler
cert kubelet "/O=system:nodes/CN=system:node:$name"
cert kubelet-serving "/CN=$name" "IP:$node,DNS:$name"
cert proxy /CN=system:kube-proxy
cert mcs-controller /CN=mcs-controller
# The aggregation layer (metrics-server's metrics.k8s.io): the front proxy's own CA and the
# client certificate the API server proxies with, as kubeadm makes them.
openssl req -x509 -newkey rsa:2048 -nodes -keyout front-proxy-ca.key -out front-proxy-ca.crt -days 2 \
  -subj /CN=front-proxy-ca 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout front-proxy-client.key -out front-proxy-client.csr \
  -subj /CN=front-proxy-client 2>/dev/null
openssl x509 -req -in front-proxy-client.csr -CA front-proxy-ca.crt -CAkey front-proxy-ca.key \
  -CAcreateserial -days 2 -extfile <(echo extendedKeyUsage=clientAuth) -out front-proxy-client.crt 2>/dev/null
rm front-proxy-client.csr
for who in admin controller-manager scheduler kubelet proxy mcs-controller; do
  cat >"$who.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "https://$node:6443", certificate-authority: $d/ca.crt}
users:
- name: $who
  user: {client-certificate: $d/$who.crt, client-key: $d/$who.key}
contexts:
- name: test
  context: {cluster: test, user: $who}
current-context: test
KC
done
