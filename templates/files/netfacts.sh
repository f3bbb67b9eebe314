{{- /* The facts of a host's network alone (facts.GatherNet): what the pod network needs of a node outside
the run whose routes it writes (add-node, up --limit), with the hostname and kernel every facts output
has; one process (ip, a batch of two commands). */ -}}
{{template "facthead.sh" -}}
r /proc/sys/kernel/hostname hostname
r /proc/sys/kernel/osrelease kernel
{{template "netlinks.sh" -}}
printf %s "$fo"
exit 0
