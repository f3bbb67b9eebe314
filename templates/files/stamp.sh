{{- /* A host's stamp (apply.Stamp): written at the end of a run that left the host as its plan has it. The
first line is the version, the plan's digest, the state of the files it lists one per line after it, and
the pod routes file whose routes the kernel must have ("-": none);
the facts script prints the first line and that state as it is now: the same digest and state say nothing
changed on the host since. Written atomically (a temporary file synced, renamed over). */ -}}
export LC_ALL=C
umask 077
{{template "stamphash.sh"}}
paths={{q .Paths}}
stamp_hash "$paths"
st={{q .Path}}
mkdir -p "${st%/*}"
printf 'v1 %s %s %s\n%s\n' {{q .Digest}} "$h" {{q .Routes}} "$paths" > "$st.tmp" && sync "$st.tmp" && mv -f "$st.tmp" "$st"
