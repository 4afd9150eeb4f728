#!/usr/bin/env bash
# make_test_certs.sh DIR: throw-away certificates for the TLS tests, valid 2 days.
#   ca.crt/ca.key            the test CA
#   server.crt/server.key    signed by it, subjectAltName DNS:localhost only (so a
#                            connection to 127.0.0.1 fails the hostname check)
#   rogue-ca.crt             another CA, that signed nothing of ours
set -euo pipefail
mkdir -p "$1"
cd "$1"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
key ca.key
openssl req -x509 -new -key ca.key -days 2 -subj "/CN=outbox-relay test CA" -out ca.crt
key server.key
openssl req -new -key server.key -subj "/CN=localhost" -out server.csr
printf '%s\n' "subjectAltName=DNS:localhost" "basicConstraints=CA:FALSE" \
  "keyUsage=digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" >server.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
  -extfile server.ext -out server.crt 2>/dev/null
key rogue-ca.key
openssl req -x509 -new -key rogue-ca.key -days 2 -subj "/CN=rogue CA" -out rogue-ca.crt
chmod 644 ./*.crt
chmod 600 ./*.key
