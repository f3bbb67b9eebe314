timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' probe cp1.lab.example.com 7443
