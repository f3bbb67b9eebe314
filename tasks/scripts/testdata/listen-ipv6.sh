ip=fd00:10::11 port=2380
if command -v socat >/dev/null 2>&1; then
  l="TCP-LISTEN:$port,bind=$ip"; case $ip in *:*) l="TCP6-LISTEN:$port,bind=[$ip]";; esac
  exec timeout 60 socat -T2 "$l,reuseaddr,fork" SYSTEM:true
elif command -v python3 >/dev/null 2>&1; then exec timeout 60 python3 -c '
import socket,sys
s=socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)
s.bind((sys.argv[1],int(sys.argv[2]))); s.listen(64)
while True: s.accept()[0].close()' "$ip" "$port"
elif command -v perl >/dev/null 2>&1; then exec timeout 60 perl -MIO::Socket::IP -e '
$s=IO::Socket::IP->new(LocalHost=>$ARGV[0],LocalPort=>$ARGV[1],Listen=>64,ReuseAddr=>1) or die "listen: $@\n";
while($c=$s->accept){close $c}' "$ip" "$port"
else echo "no socat, python3 or perl to listen with" >&2; exit 127; fi
