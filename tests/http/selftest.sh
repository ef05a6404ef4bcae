#!/bin/bash
# Checks, with curl and openssl s_client, that the peers peers.py started
# behave as promised, so a failing client test points at the client.
#
#   tests/http/selftest.sh STATEDIR      (peers already up: make http-peers-up)
#
# Prints one line per check and closes with "N passed, N failed".
set -uo pipefail

state=${1:?usage: selftest.sh STATEDIR}
# shellcheck disable=SC1091
set -a; . "$state/peers.env" || exit 1; set +a
H=127.0.0.1
CA=$ASB_PEER_CERTS_CA
CERTS=$ASB_PEER_CERTS_DIR
N=http://$H:$ASB_PEER_NGINX_HTTP
NS=https://localhost:$ASB_PEER_NGINX_HTTPS
F=http://$H:$ASB_PEER_FAULT_PORT
pass=0 failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok()   { pass=$((pass + 1)); echo "ok   $1"; }
bad()  { failed=$((failed + 1)); echo "FAIL $1${2:+: $2}"; }
# check NAME COMMAND...: passes when COMMAND exits 0.
check() { local n=$1; shift; if "$@" >"$tmp/out" 2>&1; then ok "$n"; else bad "$n" "$(head -c 300 "$tmp/out")"; fi; }
# rc NAME WANT COMMAND...: passes when COMMAND exits WANT (e.g. 56 or 55|56).
rc() { local n=$1 want=$2; shift 2; "$@" >"$tmp/out" 2>&1; local got=$?
       if [[ "$got" =~ ^($want)$ ]]; then ok "$n"; else bad "$n" "exit $got, want $want"; fi; }
has() { grep -q -- "$1" "$tmp/out"; }
sha() { sha256sum | cut -d' ' -f1; }
export -f sha
want_sha() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["nginx"]; print(d[sys.argv[2]][sys.argv[3]]["sha256"])' "$state/peers.json" "$@"; }

# --- nginx ------------------------------------------------------------------
check "nginx http serves small.txt" bash -c "[ \"\$(curl -sf $N/small.txt | sha)\" = $(want_sha files small.txt) ]"
check "nginx https verifies against ca.crt (localhost)" curl -sf --cacert "$CA" "$NS/small.txt"
check "nginx https verifies against cadir/" curl -sf --capath "$ASB_PEER_CERTS_CADIR" "$NS/small.txt"
check "nginx https verifies against bundle.crt" curl -sf --cacert "$ASB_PEER_CERTS_BUNDLE" "$NS/small.txt"
check "nginx https on 127.0.0.1 (IP SAN)" curl -sf --cacert "$CA" "https://$H:$ASB_PEER_NGINX_HTTPS/small.txt"
if [ "$ASB_PEER_IPV6" = 1 ]; then
  check "nginx https on [::1] (IP SAN)" curl -sf --cacert "$CA" "https://[::1]:$ASB_PEER_NGINX_HTTPS/small.txt"
  check "nginx http on [::1]" curl -sf "http://[::1]:$ASB_PEER_NGINX_HTTP/small.txt"
fi
check "nginx https_ec serves with an EC key" bash -c "openssl s_client -connect $H:$ASB_PEER_NGINX_HTTPS_EC -servername localhost -CAfile $CA -verify_return_error </dev/null 2>&1 | grep -q 'Server public key is 256 bit' && curl -sf --cacert $CA https://localhost:$ASB_PEER_NGINX_HTTPS_EC/small.txt"
curl -sv --raw "$N/chunked/small.html" >"$tmp/raw" 2>&1
check "nginx /chunked/small.html is Transfer-Encoding: chunked" grep -qi '^< transfer-encoding: chunked' "$tmp/raw"
check "nginx /chunked/small.html has no Content-Length" bash -c "! grep -qi '^< content-length' $tmp/raw"
check "nginx /chunked/small.html decodes to its body" bash -c "[ \"\$(curl -sf $N/chunked/small.html | sha)\" = $(want_sha chunked small) ]"
check "nginx /chunked/64k.html over https decodes to 16 x 4k.bin" bash -c "[ \"\$(curl -sf --cacert $CA $NS/chunked/64k.html | sha)\" = $(want_sha chunked 64k) ]"
check "nginx /chunked/big.html is 256 MiB chunked" bash -c "[ \"\$(curl -sf -D $tmp/bigh -o /dev/null -w '%{size_download}' $N/chunked/big.html)\" = 268435456 ] && grep -qi 'transfer-encoding: chunked' $tmp/bigh"
check "nginx /big.bin is 256 MiB with Content-Length" bash -c "[ \"\$(curl -sf -D $tmp/bigh2 -o /dev/null -w '%{size_download}' $N/big.bin)\" = 268435456 ] && grep -qi 'content-length: 268435456' $tmp/bigh2"
curl -sv "$N/small.txt" "$N/4k.bin" "$N/small.txt" -o /dev/null -o /dev/null -o /dev/null >"$tmp/ka" 2>&1
check "nginx keeps the connection alive" grep -qiE 're-?using existing connection' "$tmp/ka"
curl -sv --cacert "$CA" "$NS/small.txt" "$NS/small.txt" -o /dev/null -o /dev/null >"$tmp/ka2" 2>&1
check "nginx https keeps the connection alive" grep -qiE 're-?using existing connection' "$tmp/ka2"
curl -s -D "$tmp/h" -o /dev/null "$N/redirect"
check "nginx /redirect is 302 with Location" bash -c "grep -q '^HTTP/1.1 302' $tmp/h && grep -qi '^location: .*/small.txt' $tmp/h"
check "nginx /nocontent is 204" bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' $N/nocontent)\" = 204 ]"
check "nginx /status/503 is 503" bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' $N/status/503)\" = 503 ]"
check "nginx HEAD /small.txt: length 17, no body" bash -c "curl -sfI $N/small.txt | grep -qi 'content-length: 17' && [ \"\$(curl -sf -I -o /dev/null -w '%{size_download}' $N/small.txt)\" = 0 ]"
check "nginx /discard takes a POST body" bash -c "head -c 1000000 /dev/zero | curl -sf --data-binary @- $N/discard | grep -q ok"

# --- Python ssl servers ---------------------------------------------------------
tls() { local name=${1//-/_}; shift; local v="ASB_PEER_TLS_${name^^}"; curl -s --max-time 5 --cacert "$CA" "$@" "https://localhost:${!v}/"; }
tlsip() { local name=${1//-/_}; shift; local v="ASB_PEER_TLS_${name^^}"; curl -s --max-time 5 --cacert "$CA" "$@" "https://$H:${!v}/"; }
check "tls ok answers JSON with the SNI" bash -c "[ \"\$(curl -s --cacert $CA https://localhost:$ASB_PEER_TLS_OK/p | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d[\"sni\"], d[\"path\"], d[\"alpn\"])')\" = 'localhost /p http/1.1' ]"
# Under TLS 1.3 the rejection is an alert after the client's handshake
# finished: curl reports it as a send (55) or a receive (56) error.
rc "tls mtls rejects a client without a certificate" '55|56' tls mtls
check "tls mtls accepts client-rsa and reports its subject" bash -c "curl -sf --cacert $CA --cert $CERTS/client-rsa.crt --key $CERTS/client-rsa.key https://localhost:$ASB_PEER_TLS_MTLS/ | grep -q '\"client_cert_subject\": \"O=agentsandbox tests,CN=client-rsa\"'"
check "tls mtls accepts client-ec" bash -c "curl -sf --cacert $CA --cert $CERTS/client-ec.crt --key $CERTS/client-ec.key https://localhost:$ASB_PEER_TLS_MTLS/ | grep -q 'CN=client-ec'"
check "tls mtls accepts client-rsa.pkcs1.key and client-ec.sec1.key" bash -c "curl -sf --cacert $CA --cert $CERTS/client-rsa.crt --key $CERTS/client-rsa.pkcs1.key https://localhost:$ASB_PEER_TLS_MTLS/ >/dev/null && curl -sf --cacert $CA --cert $CERTS/client-ec.crt --key $CERTS/client-ec.sec1.key https://localhost:$ASB_PEER_TLS_MTLS/ >/dev/null"
check "tls mtls-optional takes a client without a certificate" bash -c "curl -sf --cacert $CA https://localhost:$ASB_PEER_TLS_MTLS_OPTIONAL/ | grep -q '\"client_cert_subject\": null'"
check "tls mtls-optional reports client-rsa" bash -c "curl -sf --cacert $CA --cert $CERTS/client-rsa.crt --key $CERTS/client-rsa.key https://localhost:$ASB_PEER_TLS_MTLS_OPTIONAL/ | grep -q 'CN=client-rsa'"
rc "tls mtls rejects client-otherca" '55|56' tls mtls --cert "$CERTS/client-otherca.crt" --key "$CERTS/client-otherca.key"
rc "tls wrongname fails verification" 60 tls wrongname
check "tls wrongname passes as other.example (server-name override)" bash -c "curl -sf --cacert $CA --resolve other.example:$ASB_PEER_TLS_WRONGNAME:$H https://other.example:$ASB_PEER_TLS_WRONGNAME/ | grep -q '\"sni\": \"other.example\"'"
rc "tls expired fails verification" 60 tls expired
check "tls expired: s_client says expired" bash -c "openssl s_client -connect $H:$ASB_PEER_TLS_EXPIRED -CAfile $CA </dev/null 2>&1 | grep -q 'certificate has expired'"
rc "tls future fails verification" 60 tls future
check "tls future: s_client says not yet valid" bash -c "openssl s_client -connect $H:$ASB_PEER_TLS_FUTURE -CAfile $CA </dev/null 2>&1 | grep -q 'certificate is not yet valid'"
rc "tls otherca fails against ca.crt" 60 tls otherca
rc "tls otherca fails against cadir/" 60 tls otherca --capath "$ASB_PEER_CERTS_CADIR"
rc "tls otherca passes against bundle.crt" 0 tls otherca --cacert "$ASB_PEER_CERTS_BUNDLE"
rc "tls iponly passes on 127.0.0.1" 0 tlsip iponly
rc "tls iponly fails on localhost" 60 tls iponly
rc "tls dnsonly passes on localhost" 0 tls dnsonly
rc "tls dnsonly fails on 127.0.0.1" 60 tlsip dnsonly
check "tls tls12 negotiates TLS 1.2" bash -c "curl -sf --cacert $CA https://localhost:$ASB_PEER_TLS_TLS12/ | grep -q '\"tls_version\": \"TLSv1.2\"'"
rc "tls tls12 refuses TLS 1.3 only clients" 35 tls tls12 --tlsv1.3
check "tls tls12-ec negotiates TLS 1.2 with ECDSA" bash -c "curl -sf --cacert $CA https://localhost:$ASB_PEER_TLS_TLS12_EC/ | grep -q '\"cipher\": \"ECDHE-ECDSA-'"
check "tls tls12-clientorder negotiates TLS 1.2" bash -c "curl -sf --cacert $CA https://localhost:$ASB_PEER_TLS_TLS12_CLIENTORDER/ | grep -q '\"tls_version\": \"TLSv1.2\"'"
check "tls tls13 negotiates TLS 1.3" bash -c "curl -sf --cacert $CA https://localhost:$ASB_PEER_TLS_TLS13/ | grep -q '\"tls_version\": \"TLSv1.3\"'"
rc "tls tls13 refuses TLS 1.2 clients" 35 tls tls13 --tls-max 1.2
check "ca.der is the CA in DER" bash -c "openssl x509 -inform DER -in $ASB_PEER_CERTS_CA_DER -noout -subject | grep -q 'agentsandbox test CA'"

# --- fault server -------------------------------------------------------------
curl -s "$F/reset" >/dev/null
check "fault /chunked-bytewise decodes with extensions and trailers" bash -c "[ \"\$(curl -sf $F/chunked-bytewise)\" = 'hello, bytewise world' ] && curl -s --raw $F/chunked-bytewise | grep -q 'X-Trailer-Two: two'"
for p in chunked-bad-size chunked-huge-size chunked-overflow-64 chunked-negative-size chunked-missing-crlf; do
  rc "fault /$p is rejected by curl" 56 curl -s -o /dev/null --max-time 5 "$F/$p"
done
check "fault /chunked-multi/100000 equals /bytes/100000" bash -c "[ \"\$(curl -sf $F/chunked-multi/100000 | sha)\" = \"\$(curl -sf $F/bytes/100000 | sha)\" ] && [ \"\$(curl -sf $F/bytes/100000 | wc -c)\" = 100000 ]"
check "fault /headers-over-limit sends a ~1 MiB header block" bash -c "python3 - $H $ASB_PEER_FAULT_PORT <<'EOF'
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
s.sendall(b'GET /headers-over-limit HTTP/1.1\r\nHost: x\r\n\r\n')
data = b''
while b'\r\n\r\n' not in data:
    data += s.recv(65536)
head = data.split(b'\r\n\r\n')[0]
assert len(head) > 1000000, len(head)
EOF"
check "fault /many-headers sends 10000 header lines" bash -c "[ \"\$(curl -s -D - -o /dev/null $F/many-headers | grep -c '^X-H-')\" = 10000 ]"
rc "fault /short-body ends early (curl: partial file)" 18 curl -s -o /dev/null --max-time 5 "$F/short-body"
rc "fault /close-mid-body ends early" 18 curl -s -o /dev/null --max-time 5 "$F/close-mid-body"
rc "fault /close-before-response: empty reply" 52 curl -s -o /dev/null --max-time 5 "$F/close-before-response"
rc "fault /stall sends headers then stalls (timeout)" 28 curl -s -o /dev/null --max-time 1 "$F/stall?s=5"
rc "fault /stall-headers stalls (timeout)" 28 curl -s -o /dev/null --max-time 1 "$F/stall-headers?s=5"
rc "fault /trickle outlasts an overall deadline" 28 curl -s -o /dev/null --max-time 1 --speed-time 60 "$F/trickle?ms=100&n=50"
check "fault /flaky-503/k/4: 503 x4, then 200" bash -c "for i in 1 2 3 4; do [ \"\$(curl -s -o /dev/null -w '%{http_code}' $F/flaky-503/st4/4)\" = 503 ] || exit 1; done; curl -sf $F/flaky-503/st4/4 | grep -q '\"attempt\": 5' && curl -s $F/count/st4 | grep -q '\"count\": 5'"
check "fault /flaky-close/k/1 closes once, then 200" bash -c "! curl -sf $F/flaky-close/stc/1 >/dev/null && curl -sf $F/flaky-close/stc/1 | grep -q '\"attempt\": 2'"
curl -s "$F/reset" >/dev/null
check "fault /redirect is 302 to the target, not yet contacted" bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' $F/redirect)\" = '302 http://$H:$ASB_PEER_FAULT_REDIRECT_TARGET/target' ] && curl -s $F/contacted | grep -q '\"contacted\": false'"
check "fault /contacted records a followed redirect" bash -c "curl -sfL $F/redirect/307 | grep -q target && curl -s $F/contacted | grep -q '\"contacted\": true'"
curl -s "$F/reset" >/dev/null
curl -sv "$F/keepalive-then-close/stk" "$F/keepalive-then-close/stk" >"$tmp/kc" 2>&1
# The server closes after the first answer, so the second request needs a
# second connection: whether curl notices the close before reusing (timing:
# the FIN may land after curl's check under load) or only after, it
# connects twice and the server counts two requests.
check "fault /keepalive-then-close: the second request needs a new connection" bash -c "[ \"\$(grep -c 'Connected to' $tmp/kc)\" = 2 ] && curl -s $F/count/stk | grep -q '\"count\": 2'"
curl -sv "$F/keepalive-then-drop/std" "$F/echo" >"$tmp/kd" 2>&1
check "fault /keepalive-then-drop drops the next request on the connection" bash -c "curl -s $F/count/std-dropped | grep -q '\"count\": 1'"
check "fault /connection-close sends Connection: close" bash -c "curl -s -D - -o /dev/null $F/connection-close | grep -qi '^connection: close'"
check "fault /echo returns the exact request head and body" bash -c "curl -sf -H 'X-Test: a b' --data-binary 'hello' $F/echo | python3 -c 'import json,sys,base64; d=json.load(sys.stdin); assert d[\"method\"]==\"POST\" and [\"X-Test\",\"a b\"] in d[\"headers\"] and base64.b64decode(d[\"body_b64\"])==b\"hello\" and \"Content-Length: 5\r\n\" in d[\"raw_head\"], d'"
check "fault /echo decodes a chunked upload" bash -c "printf abc | curl -sf -H 'Transfer-Encoding: chunked' --data-binary @- $F/echo | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[\"chunked\"] and d[\"body_len\"]==3 and d[\"chunk_sizes\"][-1]==0, d'"
check "fault /echo answers Expect: 100-continue" bash -c "curl -sv -H 'Expect: 100-continue' --data-binary x $F/echo 2>&1 | grep -q '100 Continue'"
rc "fault /garbage is not HTTP" 1 curl -s -o /dev/null --max-time 5 "$F/garbage"
check "fault /http10 body until close" bash -c "[ \"\$(curl -sf $F/http10 | wc -c)\" = 2600 ] && curl -s -D - -o /dev/null $F/http10 | grep -q '^HTTP/1.0 200'"
check "fault /no-length body until close" bash -c "[ \"\$(curl -sf $F/no-length | wc -c)\" = 2600 ]"
curl -sv "$F/no-body-304" "$F/no-body-204" "$F/small" -o /dev/null -o /dev/null -o /dev/null >"$tmp/nb" 2>&1
check "fault /no-body-304 and /no-body-204 keep the connection usable" bash -c "grep -q '304 Not Modified' $tmp/nb && grep -q '204 No Content' $tmp/nb && grep -qiE 're-?using existing' $tmp/nb"
check "fault /head: HEAD has the length, no body; GET has 1000 bytes" bash -c "curl -sI $F/head | grep -qi 'content-length: 1000' && [ \"\$(curl -sf $F/head | wc -c)\" = 1000 ]"
check "fault /status/504 is 504" bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' $F/status/504)\" = 504 ]"
check "fault /slow-upload-sink counts a 4 MiB upload" bash -c "head -c 4194304 /dev/zero | curl -sf --data-binary @- '$F/slow-upload-sink?rate=8000000' | grep -q '\"bytes\": 4194304'"

# --- proxy, closed and hanging ports ----------------------------------------------
P=http://$H:$ASB_PEER_PROXY_PORT
curl -s "$P/reset" >/dev/null
check "proxy tunnels CONNECT to nginx https" curl -sf --cacert "$CA" -x "$P" -U user:pw "$NS/small.txt"
rc "proxy refuses a non-loopback target" 56 curl -s -p -x "$P" --max-time 5 "http://other.example:443/"
check "proxy /log records both CONNECTs" bash -c "curl -sf $P/log | python3 -c 'import json,sys; d=json.load(sys.stdin); assert [e[\"target\"] for e in d]==[\"localhost:$ASB_PEER_NGINX_HTTPS\",\"other.example:443\"] and d[0][\"allowed\"] and not d[1][\"allowed\"] and d[0][\"proxy_authorization\"]==\"Basic dXNlcjpwdw==\", d' && [ \$(wc -l < $ASB_PEER_PROXY_LOG) = 2 ]"
rc "closed_port refuses connections" 7 curl -s --max-time 5 "http://$H:$ASB_PEER_CLOSED_PORT/"
rc "hang_port connects hang until the connect timeout" 28 curl -s --connect-timeout 1 "http://$H:$ASB_PEER_HANG_PORT/"

echo "http-peers-selftest: $pass passed, $failed failed"
[ "$failed" = 0 ]
