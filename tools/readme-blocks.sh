#!/bin/sh
# Runs the README's shell blocks as a reader pastes them, from the
# repository's root, each in a new bash that stops at the first failing
# command, and checks what they print: the example server's 200, 403 and
# 401 and its metrics; the agent's four certificates issued, then kept,
# then the 403 that ends the third agent with exit 1, logged by one
# server of the three. Afterwards no demo
# port may still be listening and the tree must be as it was. The block
# with `go run ./cmd/bench` and `make test` (about 15 min together) runs
# only with ALL=1. It needs curl, openssl and ss, and 127.0.0.1:9345-9347
# free. About a minute with a warm build cache.
#
#	tools/readme-blocks.sh            # the demos
#	ALL=1 tools/readme-blocks.sh      # every block
set -eu
cd "$(dirname "$0")/.."
ports='127.0.0.1:934[5-7] '
busy() { ss -ltnH | grep -E "$ports" || true; }
if [ -n "$(busy)" ]; then
	echo "readme-blocks: a port the demos use is taken:"; busy; exit 1
fi
tree=$(git status --porcelain)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Each ```sh block of the README into its own file, numbered.
awk -v dir="$dir" '/^```sh$/ { n++; f = sprintf("%s/block-%d.sh", dir, n); next }
	/^```$/ && f { close(f); f = ""; next }
	f { print > f }' README.md
fail=0
for b in "$dir"/block-*.sh; do
	name=$(basename "$b" .sh)
	if grep -q '^make test' "$b" && [ "${ALL:-}" != 1 ]; then
		echo "== $name: skipped (go run ./cmd/bench and make test; ALL=1 runs them)"
		continue
	fi
	echo "== $name"
	out="$dir/$name.out"
	if ! bash -e -o pipefail "$b" >"$out" 2>&1; then
		echo "readme-blocks: $name failed:"; cat "$out"; fail=1; continue
	fi
	cat "$out"
	# What the block's comments promise, where it can be checked.
	if grep -q serving-kubelet.crt "$b"; then
		for want in '^200$' '^403$' '^401$' '403.*worker-1|worker-1.*403' '^nodepass_'; do
			grep -Eq -- "$want" "$out" || { echo "readme-blocks: $name printed no line matching $want"; fail=1; }
		done
	fi
	if grep -q 'AGENT=' "$b"; then
		for want in '^issued .*serving-kubelet.crt' '^kept .*serving-kubelet.crt' '403' '^exit 1$' \
			'^server-9345.log:1$' '^server-9346.log:0$' '^server-9347.log:0$'; do
			grep -Eq -- "$want" "$out" || { echo "readme-blocks: $name printed no line matching $want"; fail=1; }
		done
		[ "$(grep -c '^issued ' "$out")" = 4 ] && [ "$(grep -c '^kept ' "$out")" = 4 ] ||
			{ echo "readme-blocks: $name: want four certificates issued, then four kept"; fail=1; }
	fi
	for i in 1 2 3 4 5 6 7 8 9 10; do [ -z "$(busy)" ] && break; sleep 0.5; done # the servers' exit
	if [ -n "$(busy)" ]; then
		echo "readme-blocks: $name left a server listening:"; busy; fail=1
	fi
done
if [ "$(git status --porcelain)" != "$tree" ]; then
	echo "readme-blocks: the blocks changed the tree:"; git status --short; fail=1
fi
[ $fail = 0 ] && echo "readme-blocks: every block ran as the README says"
exit $fail
