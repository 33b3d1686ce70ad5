#!/usr/bin/env bash
# Makes the single-node cluster's certificates in directory $1, as kubeadm would: one CA, the API
# server's serving certificate (its node address, the `kubernetes` Service address and names),
# a client certificate for each component under the name its RBAC role is bound to, and the
# service-account signing key. $2 is the node address, $3 the `kubernetes` Service address.
set -euo pipefail
d=$1 node=$2 svc=$3
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
cert kubelet "/O=system:nodes/CN=system:node:csdns-node"
cert kubelet-serving /CN=csdns-node "IP:$node,DNS:csdns-node"
cert proxy /CN=system:kube-proxy
for who in admin controller-manager scheduler kubelet proxy; do
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
