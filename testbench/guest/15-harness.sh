# hcasim-test: nodes=1 timeout=300
# The guest attacks its harness through the shared run directory: symlinks
# to a host canary file (outside the run directory, path from
# /hcasim/host-paths.txt) where the host reads or writes — the fabric relay's
# requests, replies and temporary files, wall-seconds, host-check.log — plus
# fifos and device nodes, a swapped fabric-requests directory and an
# oversized request.  The relay must keep answering without touching the
# canary; 15-harness.host then checks on the host that the canary is
# unchanged, its secret appears nowhere in the run directory and no link,
# fifo or device exists there (9p security_model=mapped-xattr keeps them
# guest-side).
req=/hcasim/fabric-requests
canary=$(sed -n 's/^canary=//p' /hcasim/host-paths.txt)
host_run=$(sed -n 's/^run_dir=//p' /hcasim/host-paths.txt)
echo "# host canary $canary, host run directory $host_run"
check "the harness told us where the canary is" test -n "$canary" -a -n "$host_run"

# Links where the host will read or write.
mkdir -p /hcasim/planted
ln -s "$canary" /hcasim/planted/abs-canary
ln -s "../../$(basename "$(dirname "$canary")")/canary" /hcasim/planted/rel-canary
ln -s /etc/passwd /hcasim/planted/etc-passwd
ln -sfn "$canary" /hcasim/wall-seconds
ln -sfn "$canary" /hcasim/host-check.log
ln -s "$canary" "$req/evil.req"
ln -s "../../$(basename "$(dirname "$canary")")/canary" "$req/evil-rel.req"
ln -s "$canary" "$req/probe.rep"
ln -s "$canary" "$req/probe.rep.relay-tmp"
echo help > "$req/probe.tmp" && mv "$req/probe.tmp" "$req/probe.req"
check "planted symlinks look like symlinks in the guest" test -L /hcasim/planted/abs-canary -a -L /hcasim/planted/rel-canary
# Fifos and device nodes: a request the relay would block on, /dev/zero
# (an endless read), the host's first disk.
mkfifo "$req/fifo.req" /hcasim/planted/fifo
mknod "$req/zero.req" c 1 5
mknod /hcasim/planted/disk b 253 0
mknod /hcasim/planted/mem c 1 1
check "planted fifo and device nodes look like that in the guest" \
    test -p /hcasim/planted/fifo -a -b /hcasim/planted/disk -a -c /hcasim/planted/mem
head -c 100000 /dev/zero | tr '\0' 'x' > "$req/huge.tmp" && mv "$req/huge.tmp" "$req/huge.req"
# Through our own links we see our namespace, never the host's.
check "reading through the planted link does not show the canary" \
    sh -c "! grep -q 'hcasim canary' /hcasim/planted/abs-canary 2> /dev/null"

has_ok() { printf '%s\n' "$1" | grep -q '^ok$'; }

# The relay still answers a good request next to all that, and writes its
# reply as a new file in place of our link.
reply=$(fabric_ctl help 2>&1)
check "the relay answers 'help' next to the planted requests" has_ok "$reply"
for _ in $(seq 50); do
    ls "$req"/*.req > /dev/null 2>&1 || break
    sleep 0.2
done
ls -la "$req" | sed 's/^/# /'
for r in evil evil-rel fifo zero huge probe; do
    check "the relay answered $r.req" test -f "$req/$r.rep"
    check "... without the canary's contents" sh -c "! grep -q 'hcasim canary' '$req/$r.rep'"
done
check_grep "huge.req: refused" 'error refused' "$req/huge.rep"
check "probe.rep (planted as a link to the canary) is the relay's reply now" test ! -L "$req/probe.rep"
check_grep "... with the answer to 'help'" '^ok$' "$req/probe.rep"

# Swap the request directory for a link elsewhere: the relay keeps using
# the directory it created (now renamed); nothing is served from the link.
mv "$req" /hcasim/fabric-requests.orig
mkdir -p /hcasim/elsewhere
ln -s /hcasim/elsewhere "$req"
echo ports > /hcasim/elsewhere/swapped.req
sleep 2
check "a request behind a swapped directory link is not served" test ! -e /hcasim/elsewhere/swapped.rep
rm "$req"
mv /hcasim/fabric-requests.orig "$req"
reply=$(fabric_ctl help 2>&1)
check "the relay still answers after the swap" has_ok "$reply"
finish
