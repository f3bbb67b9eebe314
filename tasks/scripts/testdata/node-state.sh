printf 'kubelet %s; pods:' "$(systemctl is-active kubelet)"
for d in /var/log/pods/*/; do [ -d "$d" ] || continue; n=${d%/}; n=${n##*/}; n=${n#*_}; printf ' %s' "${n%_*}"; done
echo
