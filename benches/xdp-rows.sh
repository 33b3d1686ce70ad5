# Sourced by the comparison scripts.
#
# lo_netns sets the caller's `netns` to a command prefix that runs the rest in a network
# namespace of its own, with lo up and the two lo settings AF_XDP answers to 127.0.0.1 need
# (see README), so a round neither sees nor changes the machine's lo.
lo_netns() {
  netns=(unshare --net sh -c 'ip link set lo up && sysctl -qw net.ipv4.conf.lo.accept_local=1 net.ipv4.conf.lo.route_localnet=1 && exec "$0" "$@"')
}

# xdp_rows ADDR IFACE DIR (compare-knot.sh and compare-veth.sh) appends to the
# caller's `rows` (needs `srv`, the command line of our server without --listen) the XDP rows
# both compare: ours on IFACE with its default adaptive coalescing, never waiting and always
# waiting 100us, then Knot's own XDP mode (last in a round: it may leave its program on IFACE
# when it stops), with its configuration written under DIR.
xdp_rows() {
  local addr=$1 iface=$2 dir=$3
  rows+=("clusterset-dns-xdp|5311|$srv --listen $addr:5311 --xdp $iface")
  rows+=("csdns-xdp-co0|5313|$srv --listen $addr:5313 --xdp $iface --xdp-coalesce 0")
  rows+=("csdns-xdp-co100us|5312|$srv --listen $addr:5312 --xdp $iface --xdp-coalesce 100us")
  mkdir -p "$dir/run" "$dir/db"
  cat > "$dir/knot.conf" <<K
server:
    listen: $addr@5303
    rundir: $dir/run
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
xdp:
    listen: $iface@5303
    udp: on
log:
  - target: stderr
    any: error
database:
    storage: $dir/db
zone:
  - domain: clusterset.local
    file: $BENCH_DIR/clusterset.local.zone
    journal-content: none
K
  rows+=("knot-xdp|5303|knotd -c $dir/knot.conf")
}
