#!/bin/sh
# replace.sh: points each k8s.io staging module that k8s.io/kubernetes's own
# go.mod replaces with ./staging/src/... at its published v0.X.Y version,
# which is how k8s.io/kubernetes can be required from outside its
# repository. Reads the version of k8s.io/kubernetes from go.mod; run it
# after changing that version, then `GOWORK=off go mod tidy`.
set -eu
cd "$(dirname "$0")"
export GOWORK=off GOFLAGS=-mod=mod
v=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
case $v in v1.*) ;; *) echo "replace.sh: unexpected k8s.io/kubernetes version $v" >&2; exit 1 ;; esac
staging=v0.${v#v1.}
gomod=$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
test -n "$gomod" || { echo "replace.sh: no go.mod for k8s.io/kubernetes@$v" >&2; exit 1; }
mods=$(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/src/.*#\1#p' "$gomod")
test -n "$mods" || { echo "replace.sh: no staging replacements in $gomod" >&2; exit 1; }
# Drop the replacements from a previous version first.
for old in $(go mod edit -json | sed -n 's/^[[:space:]]*"Path": "\(k8s\.io\/[^"]*\)"$/\1/p' | sort -u); do
	go mod edit -dropreplace "$old" 2>/dev/null || true
done
n=0
for m in $mods; do
	go mod edit -replace "$m=$m@$staging"
	n=$((n + 1))
done
echo "replace.sh: $n k8s.io staging modules replaced at $staging for k8s.io/kubernetes $v"
