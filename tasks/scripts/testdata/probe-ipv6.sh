timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' probe fd00:10::11 6443
