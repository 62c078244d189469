#!/bin/sh
# mpirun's launch agent (--mca plm_rsh_agent) for tools/ep_netns.sh: where
# mpirun would `ssh HOST COMMAND`, this runs COMMAND (the orted daemon) in the
# network namespace that owns HOST's address, in a UTS namespace of its own so
# that the daemon's host name differs from mpirun's (OpenMPI tells nodes apart
# by name). No ssh server is needed.
set -eu
host=$1
shift
ns=$(for n in $(ip netns list | cut -d' ' -f1); do
  if ip netns exec "$n" ip -o -4 addr show | grep -q " $host/"; then echo "$n"; fi
done | head -n 1)
if [ -z "$ns" ]; then
  echo "ep_netns_agent: no network namespace has address $host" >&2
  exit 1
fi
exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns && $*"
