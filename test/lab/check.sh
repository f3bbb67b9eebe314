#!/usr/bin/env bash
# check.sh — print why this machine cannot run the lab, or nothing when it can (the Go helper decides the
# same way: test/lab/lab.go Unavailable).
if [ "${CLUSTERCTL_LAB:-}" = off ]; then echo "disabled by CLUSTERCTL_LAB=off"; exit 0; fi
if [ "$(id -u)" != 0 ]; then echo "needs root (systemd-nspawn, bridges and cgroups)"; exit 0; fi
if ! unshare --mount --propagation private true 2>/dev/null; then echo "mount namespaces are not available"; exit 0; fi
exit 0
