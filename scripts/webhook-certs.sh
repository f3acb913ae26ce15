#!/usr/bin/env bash
# The serving certificate of `gpusched webhook` for clusters without cert-manager (deploy/base/webhook/webhook.yaml,
# docs/webhook.md): makes a CA and a certificate for gpusched-webhook.<namespace>.svc with openssl, stores them as
# the Secret <namespace>/gpusched-webhook-tls, and patches the CA into caBundle of every webhook of the
# MutatingWebhookConfiguration and ValidatingWebhookConfiguration gpusched-webhook.
#
# Not needed with the default install: there the webhook makes its own certificate (--self-signed-ca-secret) and
# would put its own CA back into caBundle. Use this only with the Deployment switched to --tls-cert/--tls-key
# (the component deploy/components/webhook-cert-manager, less its Issuer and Certificate; docs/install.md).
#
# Run it after `kubectl apply -f deploy/base/webhook/webhook.yaml`, and again before the certificate expires. With --dir the CA is
# kept there and reused on the next run, so a renewal changes only the serving certificate (the running webhook
# picks it up within 30 s) and caBundle stays valid throughout; without --dir every run makes a new CA, and for the
# few seconds between the caBundle patch and the webhook reloading its certificate GPU pods may be refused.
#
# Usage: scripts/webhook-certs.sh [--namespace NS] [--days N] [--dir DIR] [--dry-run]
#   --namespace  where deploy/base/webhook/webhook.yaml runs the webhook (default kube-system)
#   --days       certificate lifetime (default 825)
#   --dir        keep ca.{crt,key} and tls.{crt,key} there (mode 0700); default: a temporary directory
#   --dry-run    make the files and print the kubectl commands instead of running them
set -euo pipefail

NAMESPACE=kube-system
DAYS=825
DIR=""
DRY_RUN=0
while (($#)); do
  case "$1" in
    --namespace) NAMESPACE="$2"; shift 2 ;;
    --days) DAYS="$2"; shift 2 ;;
    --dir) DIR="$2"; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "webhook-certs: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$DAYS" =~ ^[0-9]+$ ]] || { echo "webhook-certs: --days must be a number" >&2; exit 2; }
command -v openssl >/dev/null || { echo "webhook-certs: openssl not found" >&2; exit 1; }
if ((!DRY_RUN)); then
  command -v kubectl >/dev/null || { echo "webhook-certs: kubectl not found (or use --dry-run)" >&2; exit 1; }
fi

if [[ -z "$DIR" ]]; then
  DIR="$(mktemp -d)"
  trap 'rm -rf "$DIR"' EXIT
else
  mkdir -p "$DIR"
fi
chmod 700 "$DIR"
umask 077
SERVICE="gpusched-webhook.${NAMESPACE}.svc"

if [[ ! -s "$DIR/ca.crt" || ! -s "$DIR/ca.key" ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$DAYS" \
    -subj "/CN=gpusched-webhook-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" -keyout "$DIR/ca.key" -out "$DIR/ca.crt" 2>/dev/null
  echo "webhook-certs: new CA in $DIR/ca.crt"
fi
cat >"$DIR/tls.ext" <<EOF
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:${SERVICE},DNS:${SERVICE}.cluster.local
EOF
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=${SERVICE}" \
  -keyout "$DIR/tls.key" -out "$DIR/tls.csr" 2>/dev/null
openssl x509 -req -in "$DIR/tls.csr" -CA "$DIR/ca.crt" -CAkey "$DIR/ca.key" -CAcreateserial -days "$DAYS" -sha256 \
  -extfile "$DIR/tls.ext" -out "$DIR/tls.crt" 2>/dev/null
openssl verify -CAfile "$DIR/ca.crt" "$DIR/tls.crt" >/dev/null
echo "webhook-certs: certificate for ${SERVICE} valid for ${DAYS} days"

CA_BUNDLE="$(base64 -w0 <"$DIR/ca.crt")"
run() {
  if ((DRY_RUN)); then
    printf '+'; printf ' %q' "$@"; printf '\n'
  else
    "$@"
  fi
}
# The Secret: created or replaced in place (the mounted files change, the webhook reloads them).
if ((DRY_RUN)); then
  run kubectl -n "$NAMESPACE" create secret tls gpusched-webhook-tls --cert "$DIR/tls.crt" --key "$DIR/tls.key" \
    --dry-run=client -o yaml
else
  kubectl -n "$NAMESPACE" create secret tls gpusched-webhook-tls --cert "$DIR/tls.crt" --key "$DIR/tls.key" \
    --dry-run=client -o yaml | kubectl apply -f -
fi
for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
  count=1  # deploy/base/webhook/webhook.yaml: one mutating webhook, two validating ones
  [[ "$kind" == mutating* ]] || count=2
  if ((!DRY_RUN)); then
    count="$(kubectl get "$kind" gpusched-webhook -o jsonpath='{range .webhooks[*]}x{end}' | wc -c)"
  fi
  patch=""
  for ((i = 0; i < count; i++)); do
    [[ -z "$patch" ]] || patch+=","
    patch+="{\"op\":\"add\",\"path\":\"/webhooks/$i/clientConfig/caBundle\",\"value\":\"${CA_BUNDLE}\"}"
  done
  patch="[${patch}]"
  run kubectl patch "$kind" gpusched-webhook --type json -p "$patch"
done
echo "webhook-certs: done; keep $DIR/ca.key safe if you passed --dir (it signs the webhook's certificates)"
