{{- /* Connect to .IP:.Port and close at once: bash opens /dev/tcp/IP/PORT, the address and port given as its
positional arguments, never inside its script. */ -}}
timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' probe {{q .IP}} {{.Port}}
