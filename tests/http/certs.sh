#!/bin/bash
# Test certificates for the HTTP/TLS tests, made with the openssl CLI.
# Nothing here is ever committed: every run of the tests makes its own.
#
#   tests/http/certs.sh OUTDIR
#
# Idempotent: a complete OUTDIR whose CA is valid for another day is left as
# it is. Otherwise OUTDIR is rebuilt from scratch (about 1-2 s: the RSA keys
# are generated in parallel).
#
# Files in OUTDIR (PEM unless said otherwise; NAME.key is PKCS#8 PEM):
#   ca.crt ca.key         test CA, RSA 2048            (CN agentsandbox test CA)
#   ca.der                ca.crt in DER
#   ca2.crt ca2.key       a second, unrelated CA, RSA 2048
#   bundle.crt            ca.crt followed by ca2.crt
#   cadir/                ca.crt plus its `openssl rehash` link (HASH.0);
#                         only the first CA, so otherca fails against it
#   server.{crt,key}           RSA, SAN DNS:localhost IP:127.0.0.1 IP:::1
#   server-ec.{crt,key}        EC P-256, same SANs
#   server-iponly.{crt,key}    SAN IP:127.0.0.1 only
#   server-dnsonly.{crt,key}   SAN DNS:localhost only
#   server-wrongname.{crt,key} SAN DNS:other.example only
#   server-expired.{crt,key}   standard SANs, valid 2020-01-01 .. 2021-01-01
#   server-future.{crt,key}    standard SANs, valid from 2099-01-01
#   server-otherca.{crt,key}   standard SANs, signed by ca2
#   client-rsa.{crt,key}       client cert (EKU clientAuth), RSA 2048, CN client-rsa
#   client-ec.{crt,key}        client cert, EC P-256, CN client-ec
#   client-otherca.{crt,key}   client cert signed by ca2 (mTLS must reject it)
#   client-rsa.pkcs1.key       client-rsa's key as "BEGIN RSA PRIVATE KEY"
#   client-ec.sec1.key         client-ec's key as "BEGIN EC PRIVATE KEY"
#   client-rsa.pem             client-rsa.crt + client-rsa.key in one file
# Subjects' CNs are not host names on purpose: SANs alone decide matching.
set -euo pipefail

out=${1:?usage: certs.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if [ -f "$out/.complete" ] && openssl x509 -in "$out/ca.crt" -noout -checkend 86400 >/dev/null 2>&1; then
  exit 0
fi

work="$out/.work"
rm -rf "$work" "$out/cadir"
rm -f "$out/.complete" "$out"/*.crt "$out"/*.key "$out"/*.der "$out"/*.pem
mkdir -p "$work"

# --- keys, in parallel ------------------------------------------------------
rsa=(ca ca2 server server-iponly server-dnsonly server-wrongname server-expired
     server-future server-otherca client-rsa client-otherca)
ec=(server-ec client-ec)
pids=()
for n in "${rsa[@]}"; do
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$out/$n.key" 2>/dev/null &
  pids+=($!)
done
for n in "${ec[@]}"; do
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$out/$n.key" 2>/dev/null &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done

# --- extension profiles -------------------------------------------------------
cat > "$work/ext.cnf" <<'EOF'
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash

[server_std]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1

[server_iponly]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = IP:127.0.0.1

[server_dnsonly]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:localhost

[server_wrongname]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:other.example

[server_ec]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1

[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid

[client_ec]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid

# `openssl ca` is used only for dates outside "now .. now+days".
[ca_backdate]
dir = WORKDIR
database = $dir/index.txt
new_certs_dir = $dir
serial = $dir/serial
default_md = sha256
policy = policy_any
unique_subject = no
copy_extensions = none
[policy_any]
commonName = supplied
EOF
sed -i "s|WORKDIR|$work|" "$work/ext.cnf"
: > "$work/index.txt"
echo 1000 > "$work/serial"

days=825
# `openssl req` wants a config with a [req] section; ours adds the profiles.
{ printf '[req]\ndistinguished_name = dn\n[dn]\n'; cat "$work/ext.cnf"; } > "$work/req.cnf"
ca_cert() { # name, CN
  openssl req -new -x509 -key "$out/$1.key" -subj "/O=agentsandbox tests/CN=$2" \
    -days 3650 -sha256 -config "$work/req.cnf" -extensions ca \
    -set_serial "0x$(openssl rand -hex 8)" -out "$out/$1.crt"
}
ca_cert ca  "agentsandbox test CA"
ca_cert ca2 "agentsandbox unrelated test CA"

sign() { # name, issuer, profile
  openssl req -new -key "$out/$1.key" -subj "/O=agentsandbox tests/CN=$1" \
    -config "$work/req.cnf" -out "$work/$1.csr"
  openssl x509 -req -in "$work/$1.csr" -CA "$out/$2.crt" -CAkey "$out/$2.key" \
    -set_serial "0x$(openssl rand -hex 8)" -days "$days" -sha256 \
    -extfile "$work/ext.cnf" -extensions "$3" -out "$out/$1.crt" 2>/dev/null
}
sign_dated() { # name, profile, startdate, enddate (issuer: ca)
  openssl req -new -key "$out/$1.key" -subj "/O=agentsandbox tests/CN=$1" \
    -config "$work/req.cnf" -out "$work/$1.csr"
  openssl ca -batch -notext -config "$work/ext.cnf" -name ca_backdate \
    -cert "$out/ca.crt" -keyfile "$out/ca.key" -in "$work/$1.csr" \
    -extfile "$work/ext.cnf" -extensions "$2" \
    -startdate "$3" -enddate "$4" -out "$out/$1.crt" 2>/dev/null
}

sign server           ca  server_std
sign server-ec        ca  server_ec
sign server-iponly    ca  server_iponly
sign server-dnsonly   ca  server_dnsonly
sign server-wrongname ca  server_wrongname
sign server-otherca   ca2 server_std
sign client-rsa       ca  client
sign client-ec        ca  client_ec
sign client-otherca   ca2 client
sign_dated server-expired server_std 20200101000000Z 20210101000000Z
sign_dated server-future  server_std 20990101000000Z 20991231000000Z

# --- other forms ----------------------------------------------------------
openssl x509 -in "$out/ca.crt" -outform DER -out "$out/ca.der"
cat "$out/ca.crt" "$out/ca2.crt" > "$out/bundle.crt"
openssl rsa -in "$out/client-rsa.key" -traditional -out "$out/client-rsa.pkcs1.key" 2>/dev/null
openssl ec -in "$out/client-ec.key" -out "$out/client-ec.sec1.key" 2>/dev/null
cat "$out/client-rsa.crt" "$out/client-rsa.key" > "$out/client-rsa.pem"
mkdir -p "$out/cadir"
cp "$out/ca.crt" "$out/cadir/ca.crt"
openssl rehash "$out/cadir" 2>/dev/null || c_rehash "$out/cadir" >/dev/null
chmod 600 "$out"/*.key

# --- check what we promise ----------------------------------------------------
for n in server server-ec server-iponly server-dnsonly server-wrongname client-rsa client-ec; do
  openssl verify -CAfile "$out/ca.crt" "$out/$n.crt" >/dev/null
done
for n in server-otherca client-otherca; do
  openssl verify -CAfile "$out/ca2.crt" "$out/$n.crt" >/dev/null
done
openssl verify -CApath "$out/cadir" "$out/server.crt" >/dev/null
if openssl verify -CAfile "$out/ca.crt" "$out/server-expired.crt" >/dev/null 2>&1; then
  echo "certs.sh: server-expired verifies; expected it expired" >&2; exit 1
fi
grep -q 'BEGIN RSA PRIVATE KEY' "$out/client-rsa.pkcs1.key"
grep -q 'BEGIN EC PRIVATE KEY' "$out/client-ec.sec1.key"

rm -rf "$work"
touch "$out/.complete"
